package server

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lineage-dev/lineage/lineage"
)

// ListenOptions say how the socket is made.
type ListenOptions struct {
	// Mode is the socket file's permission bits; zero means 0660.
	Mode os.FileMode
	// Group, if set, is the socket's group, by name or number.
	Group string
}

// beforeRename, when set (by a test), runs once the socket is made and
// before it is renamed into place.
var beforeRename func()

// Listen listens on a Unix socket at path, made with no window in which
// its path could be swapped for another file: the socket is bound in a new
// directory only this process can write, its group and mode are set there,
// and only then is it renamed to path, which the rename refuses to replace.
// What is at path already is removed only when it is a socket no daemon
// answers on (a daemon that died); a live daemon's socket, or anything that
// isn't a socket, or one it can't tell is dead (its backlog full), is
// refused and left as it is. A path longer than a Unix socket's address
// holds is refused: no client could connect to it. The listener removes
// the socket when it closes, if path is still that socket.
func Listen(path string, opts ListenOptions) (net.Listener, error) {
	gid := -1
	if opts.Group != "" {
		var err error
		if gid, err = lookupGroup(opts.Group); err != nil {
			return nil, err
		}
	}
	mode := opts.Mode
	if mode == 0 {
		mode = 0o660
	}
	if abs, err := filepath.Abs(path); err == nil && len(abs) > maxSocketPath {
		return nil, fmt.Errorf("listen %s: %w: %d bytes, and a Unix socket's address holds at most %d: no client could connect (choose a shorter path)", path, lineage.ErrInvalid, len(abs), maxSocketPath)
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	if err := clearSocketPath(path); err != nil {
		return nil, err
	}
	private, err := os.MkdirTemp(dir, ".lineage-sock-")
	if err != nil {
		return nil, fmt.Errorf("listen %s: %w", path, err)
	}
	defer os.Remove(private)
	d, err := os.Open(private)
	if err != nil {
		return nil, fmt.Errorf("listen %s: %w", path, err)
	}
	defer d.Close()
	const name = "sock"
	// Bound through the directory's descriptor, which only this process
	// can write.
	old := syscall.Umask(0o177)
	ln, err := net.Listen("unix", fmt.Sprintf("/proc/self/fd/%d/%s", d.Fd(), name))
	syscall.Umask(old)
	if err != nil {
		return nil, fmt.Errorf("listen %s: %w", path, err)
	}
	ul := ln.(*net.UnixListener)
	ul.SetUnlinkOnClose(false)
	fail := func(err error) (net.Listener, error) {
		ul.Close()
		_ = unix.Unlinkat(int(d.Fd()), name, 0)
		return nil, err
	}
	dfd := int(d.Fd())
	if gid >= 0 {
		if err := unix.Fchownat(dfd, name, -1, gid, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return fail(fmt.Errorf("socket group: %w", err))
		}
	}
	if err := unix.Fchmodat(dfd, name, uint32(mode&os.ModePerm), 0); err != nil {
		return fail(fmt.Errorf("socket mode: %w", err))
	}
	var st unix.Stat_t
	if err := unix.Fstatat(dfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return fail(fmt.Errorf("listen %s: %w", path, err))
	}
	if beforeRename != nil {
		beforeRename()
	}
	if err := unix.Renameat2(dfd, name, unix.AT_FDCWD, path, unix.RENAME_NOREPLACE); err != nil {
		if errors.Is(err, unix.EEXIST) {
			return fail(fmt.Errorf("listen %s: something was made at that path while the socket was: refusing to replace it", path))
		}
		return fail(fmt.Errorf("listen %s: %w", path, err))
	}
	return &socketListener{UnixListener: ul, path: path, dev: st.Dev, ino: st.Ino}, nil
}

// maxSocketPath is the longest path a client can connect to: a Unix
// socket address's sun_path, less its NUL.
const maxSocketPath = len(unix.RawSockaddrUnix{}.Path) - 1

// clearSocketPath removes what is at path when it is a dead daemon's
// socket, and refuses anything else that is there.
func clearSocketPath(path string) error {
	info, err := os.Lstat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("listen %s: %w", path, err)
	}
	if info.Mode().Type() != os.ModeSocket {
		return fmt.Errorf("listen %s: it is %s, not a socket: refusing to remove it (remove it yourself, or choose another --socket)", path, fileKind(info))
	}
	c, err := net.DialTimeout("unix", path, time.Second)
	switch {
	case err == nil:
		c.Close()
		return fmt.Errorf("listen %s: a daemon already answers there", path)
	case errors.Is(err, syscall.ENOENT):
		return nil // removed meanwhile
	case !errors.Is(err, syscall.ECONNREFUSED):
		// A full backlog (EAGAIN) or a timeout is a daemon that lives.
		return fmt.Errorf("listen %s: a socket is there that may be a live daemon's (%w): refusing to remove it", path, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("listen: %w", err)
	}
	return nil
}

// fileKind names what info is, for a message.
func fileKind(info os.FileInfo) string {
	switch t := info.Mode().Type(); {
	case t == 0:
		return "a regular file"
	case t&os.ModeDir != 0:
		return "a directory"
	case t&os.ModeSymlink != 0:
		return "a symbolic link"
	case t&os.ModeNamedPipe != 0:
		return "a named pipe"
	case t&os.ModeDevice != 0:
		return "a device"
	}
	return "not a socket"
}

// socketListener is the daemon's listener; it removes its socket file
// when it closes, only if the path still names that socket.
type socketListener struct {
	*net.UnixListener
	path     string
	dev, ino uint64
}

func (l *socketListener) Close() error {
	var st unix.Stat_t
	if unix.Lstat(l.path, &st) == nil && st.Dev == l.dev && st.Ino == l.ino {
		_ = os.Remove(l.path)
	}
	return l.UnixListener.Close()
}

func lookupGroup(name string) (int, error) {
	if gid, err := strconv.Atoi(name); err == nil {
		return gid, nil
	}
	g, err := user.LookupGroup(name)
	if err != nil {
		return 0, fmt.Errorf("socket group: %w", err)
	}
	return strconv.Atoi(g.Gid)
}
