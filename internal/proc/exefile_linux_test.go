package proc

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/lineage-dev/lineage/lineage"
)

func TestExeFileNamesTheProgramAsTheKernelKnowsIt(t *testing.T) {
	p, err := Open("/proc")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	prog := filepath.Join(dir, "prog")
	if err := os.WriteFile(prog, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink("prog", link); err != nil {
		t.Fatal(err)
	}
	var st unix.Stat_t
	if err := unix.Stat(prog, &st); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{prog, link} {
		resolved, id, err := p.ExeFile(path)
		if err != nil {
			t.Fatalf("ExeFile(%s): %v", path, err)
		}
		if resolved != prog {
			t.Errorf("ExeFile(%s) resolved to %s, want %s", path, resolved, prog)
		}
		// On the filesystems tests run on (ext4, tmpfs), the superblock's
		// device is stat's, in the kernel's encoding.
		want := lineage.FileID{Dev: lineage.KernelDev(unix.Major(st.Dev), unix.Minor(st.Dev)), Ino: st.Ino}
		if id != want {
			t.Errorf("ExeFile(%s) = %v, want %v (stat's device and inode)", path, id, want)
		}
	}
}

func TestExeFileRefusesWhatIsNoProgram(t *testing.T) {
	p, err := Open("/proc")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	plain := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(plain, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	dangling := filepath.Join(dir, "dangling")
	if err := os.Symlink("gone", dangling); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ path, want string }{
		{filepath.Join(dir, "missing"), "missing: no such file"},
		{dangling, "dangling: no such file"},
		{dir, "is a directory, not a program"},
		{plain, "notes.txt is not executable (mode 0644)"},
		{"/dev/null", "is not a regular file"},
	} {
		_, _, err := p.ExeFile(c.path)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ExeFile(%s) = %v, want an error saying %q", c.path, err, c.want)
		}
	}
}

func TestFindMountReadsTheSuperblocksDevice(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mountinfo")
	lines := "22 1 259:2 / / rw,relatime shared:1 - ext4 /dev/nvme0n1p2 rw\n" +
		"45 22 0:61 /@home /home rw,noexec,nosuid shared:30 - btrfs /dev/sda3 rw,subvol=/@home\n"
	if err := os.WriteFile(path, []byte(lines), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		id   int
		want mount
	}{
		{22, mount{dev: lineage.KernelDev(259, 2)}},
		{45, mount{dev: lineage.KernelDev(0, 61), noexec: true}},
	} {
		got, err := findMount(path, c.id)
		if err != nil || got != c.want {
			t.Errorf("findMount(%d) = %+v, %v; want %+v", c.id, got, err, c.want)
		}
	}
	if _, err := findMount(path, 7); err == nil {
		t.Error("findMount of a mount that is not there: no error")
	}
}
