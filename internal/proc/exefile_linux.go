package proc

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/lineage-dev/lineage/lineage"
)

// ExeFile resolves path as an exe keep rule names a program: it follows
// its symlinks to the file itself, which must be a regular file with an
// execute permission bit on a mount that allows exec, and returns that
// file's path and its identity as the kernel knows it at an exec: the
// superblock's device from the mount the file is on (mountinfo), whatever
// stat(2) says its device is, and the inode number the kernel holds for
// the open file (fdinfo).
func (p FS) ExeFile(path string) (string, lineage.FileID, error) {
	fd, err := unix.Open(path, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			return "", lineage.FileID{}, fmt.Errorf("%s: no such file", path)
		}
		return "", lineage.FileID{}, fmt.Errorf("%s: %w", path, err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return "", lineage.FileID{}, fmt.Errorf("%s: stat: %w", path, err)
	}
	switch {
	case st.Mode&unix.S_IFMT == unix.S_IFDIR:
		return "", lineage.FileID{}, fmt.Errorf("%s is a directory, not a program", path)
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		return "", lineage.FileID{}, fmt.Errorf("%s is not a regular file, so not a program", path)
	case st.Mode&0o111 == 0:
		return "", lineage.FileID{}, fmt.Errorf("%s is not executable (mode %04o)", path, st.Mode&0o7777)
	}
	self := filepath.Join(p.root, "self")
	resolved, err := os.Readlink(filepath.Join(self, "fd", strconv.Itoa(fd)))
	if err != nil {
		return "", lineage.FileID{}, fmt.Errorf("%s: resolve: %w", path, err)
	}
	id := lineage.FileID{Dev: lineage.KernelDev(unix.Major(st.Dev), unix.Minor(st.Dev)), Ino: st.Ino}
	info, err := readFDInfo(filepath.Join(self, "fdinfo", strconv.Itoa(fd)))
	if err != nil {
		return "", lineage.FileID{}, fmt.Errorf("%s: %w", path, err)
	}
	if info.ino != 0 {
		id.Ino = info.ino
	}
	if info.hasMount {
		m, err := findMount(filepath.Join(self, "mountinfo"), info.mountID)
		if err != nil {
			return "", lineage.FileID{}, fmt.Errorf("%s: %w", path, err)
		}
		if m.noexec {
			return "", lineage.FileID{}, fmt.Errorf("%s is not executable: its filesystem is mounted noexec", path)
		}
		id.Dev = m.dev
	}
	return resolved, id, nil
}

// fdInfo is what /proc/self/fdinfo/FD says of an open file: its mount's
// id (since Linux 3.15) and its inode number (since 5.14; zero before).
type fdInfo struct {
	mountID  int
	hasMount bool
	ino      uint64
}

func readFDInfo(path string) (fdInfo, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return fdInfo{}, fmt.Errorf("read fdinfo: %w", err)
	}
	var info fdInfo
	for _, line := range bytes.Split(raw, []byte("\n")) {
		key, value, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			continue
		}
		value = bytes.TrimSpace(value)
		switch string(key) {
		case "mnt_id":
			n, err := strconv.Atoi(string(value))
			if err != nil {
				return fdInfo{}, fmt.Errorf("fdinfo mnt_id %q: %w", value, err)
			}
			info.mountID, info.hasMount = n, true
		case "ino":
			n, err := strconv.ParseUint(string(value), 10, 64)
			if err != nil {
				return fdInfo{}, fmt.Errorf("fdinfo ino %q: %w", value, err)
			}
			info.ino = n
		}
	}
	return info, nil
}

// mount is what lineage reads of one line of mountinfo.
type mount struct {
	dev    uint32 // the superblock's s_dev, the kernel's encoding
	noexec bool
}

// findMount returns the mount with id from the mountinfo file at path:
// "ID PARENT MAJOR:MINOR ROOT POINT OPTIONS ..." (proc(5)).
func findMount(path string, id int) (mount, error) {
	f, err := os.Open(path)
	if err != nil {
		return mount{}, fmt.Errorf("read mountinfo: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	want := strconv.Itoa(id)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 6 || fields[0] != want {
			continue
		}
		majorText, minorText, ok := strings.Cut(fields[2], ":")
		major, err1 := strconv.ParseUint(majorText, 10, 32)
		minor, err2 := strconv.ParseUint(minorText, 10, 32)
		if !ok || err1 != nil || err2 != nil {
			return mount{}, fmt.Errorf("mountinfo: mount %d: device %q", id, fields[2])
		}
		m := mount{dev: lineage.KernelDev(uint32(major), uint32(minor))}
		for _, o := range strings.Split(fields[5], ",") {
			m.noexec = m.noexec || o == "noexec"
		}
		return m, nil
	}
	if err := sc.Err(); err != nil {
		return mount{}, fmt.Errorf("read mountinfo: %w", err)
	}
	return mount{}, fmt.Errorf("mountinfo: no mount %d", id)
}
