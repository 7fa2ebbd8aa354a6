package job

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/lineage-dev/lineage/lineage"
)

func TestReportFileIsPinnedAndReplacedAtomically(t *testing.T) {
	dir := t.TempDir()
	sub := filepath.Join(dir, "sub")
	other := filepath.Join(dir, "other")
	for _, d := range []string{sub, other} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	env := map[string]string{"SUDO_UID": "65534", "SUDO_GID": "65534"}
	f, err := OpenReportFile(filepath.Join(sub, "r.json"), func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	// After the pin: the directory is swapped for a symlink, and a symlink
	// is planted where the file goes.
	victim := filepath.Join(other, "victim")
	if err := os.WriteFile(victim, []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(sub, sub+".old"); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(other, sub); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victim, filepath.Join(sub+".old", "r.json")); err != nil {
		t.Fatal(err)
	}
	if err := f.Write(&Report{Command: []string{"true"}}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(victim); string(b) != "keep" {
		t.Errorf("the planted symlink was followed: victim holds %q", b)
	}
	fi, err := os.Lstat(filepath.Join(sub+".old", "r.json"))
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	if !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o644 || st.Uid != 65534 || st.Gid != 65534 {
		t.Errorf("report %v %d:%d, want a regular 0644 file of 65534:65534", fi.Mode(), st.Uid, st.Gid)
	}
	left, _ := os.ReadDir(sub + ".old")
	if len(left) != 1 {
		t.Errorf("temporary files left: %v", left)
	}
}

func TestOpenReportFileRefuses(t *testing.T) {
	dir := t.TempDir()
	link := filepath.Join(dir, "link")
	if err := os.Symlink("/dev/null", link); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"", dir + "/..", link, "/dev/null"} {
		if _, err := OpenReportFile(p, os.Getenv); !errors.Is(err, lineage.ErrInvalid) {
			t.Errorf("OpenReportFile(%q) = %v, want an invalid-input error", p, err)
		}
	}
	if _, err := OpenReportFile(filepath.Join(dir, "missing", "r.json"), os.Getenv); err == nil {
		t.Error("a missing directory was not refused")
	}
}
