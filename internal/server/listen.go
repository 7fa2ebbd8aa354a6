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

	"github.com/lineage-dev/lineage/api"
)

// DefaultSocket is where the daemon listens unless told otherwise.
const DefaultSocket = api.DefaultSocket

// ListenOptions say how the socket is made.
type ListenOptions struct {
	// Mode is the socket file's permission bits; zero means 0660.
	Mode os.FileMode
	// Group, if set, is the socket's group, by name or number.
	Group string
}

// Listen listens on a Unix socket at path. A socket file left by a daemon
// that died is replaced; one a live daemon answers on is not (the error
// says so).
func Listen(path string, opts ListenOptions) (net.Listener, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
		c.Close()
		return nil, fmt.Errorf("listen %s: a daemon already answers there", path)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("listen: %w", err)
	}
	// The socket is created private and opened up only once its owner and
	// mode are set.
	old := syscall.Umask(0o177)
	ln, err := net.Listen("unix", path)
	syscall.Umask(old)
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	if err := setSocketAccess(path, opts); err != nil {
		ln.Close()
		return nil, err
	}
	return ln, nil
}

func setSocketAccess(path string, opts ListenOptions) error {
	if opts.Group != "" {
		gid, err := lookupGroup(opts.Group)
		if err != nil {
			return err
		}
		if err := os.Chown(path, -1, gid); err != nil {
			return fmt.Errorf("socket group: %w", err)
		}
	}
	mode := opts.Mode
	if mode == 0 {
		mode = 0o660
	}
	if err := os.Chmod(path, mode&os.ModePerm); err != nil {
		return fmt.Errorf("socket mode: %w", err)
	}
	return nil
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
