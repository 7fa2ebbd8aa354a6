// Package userfile creates the files lineage writes for the person who ran
// it (records, private: 0600; reports, 0644): owned by the invoking user
// rather than by root when lineage runs under sudo, and never through a
// symbolic link or onto something that is not a regular file.
//
// Shared by `lineage run --record` and `lineage report --output`
// ([Create]), and `lineage run --report` ([Pin]). All take the invoking
// user from [Invoker]; [Same] says when two paths name one file.
package userfile

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/lineage-dev/lineage/lineage"
)

// Owner is who a created file belongs to.
type Owner struct {
	UID, GID int
}

// Invoker returns the user who invoked lineage: SUDO_UID and SUDO_GID from
// getenv when set and lineage runs as root (through sudo), else lineage's
// own uid and gid. A malformed SUDO_UID or SUDO_GID wraps
// lineage.ErrInvalid.
func Invoker(getenv func(string) string) (Owner, error) {
	return invoker(getenv, os.Geteuid() == 0)
}

func invoker(getenv func(string) string, root bool) (Owner, error) {
	o := Owner{UID: os.Getuid(), GID: os.Getgid()}
	su, sg := getenv("SUDO_UID"), getenv("SUDO_GID")
	if su == "" || !root {
		return o, nil
	}
	uid, err := strconv.ParseUint(su, 10, 32)
	if err != nil {
		return Owner{}, fmt.Errorf("%w SUDO_UID %q: not a uid", lineage.ErrInvalid, su)
	}
	o.UID = int(uid)
	if sg != "" {
		gid, err := strconv.ParseUint(sg, 10, 32)
		if err != nil {
			return Owner{}, fmt.Errorf("%w SUDO_GID %q: not a gid", lineage.ErrInvalid, sg)
		}
		o.GID = int(gid)
	}
	return o, nil
}

// Create creates or truncates the regular file at path for owner, mode
// 0600, and returns it open for writing. Its directory is opened first and
// the file is created relative to it with O_NOFOLLOW: a symbolic link at
// path is refused, never followed. A FIFO, device or directory at path is
// refused too (opened non-blocking, so a FIFO can't hang lineage), and so
// is an existing file with other hard links or another user's.
func Create(path string, owner Owner) (*os.File, error) {
	dir, base := filepath.Split(path)
	if base == "" || base == "." || base == ".." {
		return nil, fmt.Errorf("%w file %q: names no file", lineage.ErrInvalid, path)
	}
	if dir == "" {
		dir = "."
	}
	dfd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open directory %s: %w", dir, err)
	}
	defer unix.Close(dfd)
	fd, err := unix.Openat(dfd, base, unix.O_WRONLY|unix.O_CREAT|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0o600)
	if err != nil {
		if err == unix.ELOOP {
			return nil, fmt.Errorf("create %s: a symbolic link: refused: %w", path, err)
		}
		return nil, fmt.Errorf("create %s: %w", path, err)
	}
	if err := prepare(fd, owner); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("create %s: %w", path, err)
	}
	return os.NewFile(uintptr(fd), path), nil
}

// prepare checks that fd is a regular file, then makes it empty, blocking,
// private and the owner's.
func prepare(fd int, owner Owner) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return fmt.Errorf("%w: not a regular file", lineage.ErrInvalid)
	}
	// An existing file is taken over only if it is the owner's or
	// lineage's own, and has no other name: a hard link planted in a
	// shared directory must not hand another file to the owner.
	if st.Nlink > 1 {
		return fmt.Errorf("%w: has %d hard links", lineage.ErrInvalid, st.Nlink)
	}
	if int(st.Uid) != owner.UID && int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("%w: exists and belongs to uid %d", lineage.ErrInvalid, st.Uid)
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETFL, unix.O_WRONLY); err != nil {
		return err
	}
	// An existing file keeps its mode and owner through a truncate: a
	// record may hold secrets, so make it private whatever it was, before
	// anything is written.
	if err := unix.Fchmod(fd, 0o600); err != nil {
		return err
	}
	if int(st.Uid) != owner.UID || int(st.Gid) != owner.GID {
		if err := unix.Fchown(fd, owner.UID, owner.GID); err != nil {
			return fmt.Errorf("give it to uid %d: %w", owner.UID, err)
		}
	}
	return unix.Ftruncate(fd, 0)
}
