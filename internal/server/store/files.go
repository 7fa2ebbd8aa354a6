package store

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// The daemon trusts its state and record directories, and the files in
// them, only when they are its own, as PostgreSQL trusts a data directory:
// a directory must be owned by the daemon's effective uid and writable by
// no one else; a state file must be a regular file owned by that uid and
// writable by no one else. Anything else is refused with the path and the
// reason, and the daemon does not start: a file another user could write
// could make the daemon register, keep or reap on that user's say.

// PrivateDir makes dir (mode 0700) if it is missing, and checks that it is
// the daemon's alone; what names the flag it comes from, for the message.
// The server's record directory is held to the same rule.
func PrivateDir(dir, what string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("%s %s: %w", what, dir, err)
	}
	info, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("%s %s: %w", what, dir, err)
	}
	if !info.IsDir() {
		return fmt.Errorf("%s %s: not a directory", what, dir)
	}
	return ownedAlone(dir, what, info)
}

// ownedAlone refuses a file that isn't the daemon's: owned by another uid,
// or writable by group or others.
func ownedAlone(path, what string, info os.FileInfo) error {
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok {
		return fmt.Errorf("%s %s: no owner to check", what, path)
	}
	if euid := uint32(os.Geteuid()); st.Uid != euid {
		return fmt.Errorf("%s %s is owned by uid %d, not by this daemon's uid %d: refusing to use it (it must be the daemon's alone: chown it, or choose another)",
			what, path, st.Uid, euid)
	}
	if perm := info.Mode().Perm(); perm&0o022 != 0 {
		return fmt.Errorf("%s %s has mode %#o, which lets group or others write it: refusing to use it (chmod go-w it, or choose another)",
			what, path, perm)
	}
	return nil
}

// readOwnFile reads the state file at path, never through a symbolic link,
// when it is a regular file that is the daemon's alone (see ownedAlone).
// A missing file wraps os.ErrNotExist.
func readOwnFile(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if errors.Is(err, unix.ELOOP) {
		return nil, fmt.Errorf("state file %s is a symbolic link: refusing to read it", path)
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !info.Mode().IsRegular() {
		return nil, fmt.Errorf("state file %s is not a regular file (%s): refusing to read it", path, info.Mode().Type())
	}
	if err := ownedAlone(path, "state file", info); err != nil {
		return nil, err
	}
	return io.ReadAll(f)
}

// lockName is the lock file in the state directory: one daemon per state
// directory holds an exclusive flock(2) on it, and its pid is written in it.
const lockName = "lock"

// DirLock is a state directory's lock, held by this process.
type DirLock struct{ f *os.File }

// LockDir checks the state directory (PrivateDir) and takes its lock for
// this process, or says which daemon holds it. The lock goes with the
// process, however it ends, or with [DirLock.Release].
func LockDir(dir string) (*DirLock, error) {
	if err := PrivateDir(dir, "state dir"); err != nil {
		return nil, err
	}
	path := filepath.Join(dir, lockName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("state dir lock: %w", err)
	}
	info, err := f.Stat()
	if err == nil && !info.Mode().IsRegular() {
		err = fmt.Errorf("%s is not a regular file", path)
	}
	if err == nil {
		err = ownedAlone(path, "state dir lock", info)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		holder := "unknown pid"
		if data, rerr := io.ReadAll(io.LimitReader(f, 32)); rerr == nil {
			if pid, perr := strconv.Atoi(strings.TrimSpace(string(data))); perr == nil {
				holder = "pid " + strconv.Itoa(pid)
			}
		}
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("state dir %s is in use by another lineage serve (%s): one daemon per state directory", dir, holder)
		}
		return nil, fmt.Errorf("state dir lock %s: %w", path, err)
	}
	// The pid is for the message of a daemon refused: the lock itself is
	// the flock, so a write that fails changes nothing.
	_ = f.Truncate(0)
	_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	return &DirLock{f: f}, nil
}

// Release lets the directory go, for another daemon to take. A nil lock
// (a server that keeps no state) releases nothing.
func (l *DirLock) Release() {
	if l != nil {
		l.f.Close()
	}
}
