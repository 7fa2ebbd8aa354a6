package client

import (
	"errors"
	"fmt"
	"net"

	"golang.org/x/sys/unix"
)

// ErrUntrusted is wrapped when [TrustServer] refuses the server.
var ErrUntrusted = errors.New("daemon not trusted")

// checkServer reads the credentials of the process that listens at the
// other end of c and asks trust about its uid.
func checkServer(c net.Conn, trust func(uid uint32) error) error {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return fmt.Errorf("%w: not a unix socket", ErrUntrusted)
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return fmt.Errorf("%w: %w", ErrUntrusted, err)
	}
	var cred *unix.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil || credErr != nil {
		return fmt.Errorf("%w: server credentials: %w", ErrUntrusted, errors.Join(err, credErr))
	}
	if err := trust(cred.Uid); err != nil {
		return fmt.Errorf("%w: %w", ErrUntrusted, err)
	}
	return nil
}

// RootServer refuses a server that doesn't run as root, when the caller
// does: a root `lineage run` hands its job only to a root daemon.
func RootServer(callerUID int) func(uid uint32) error {
	return func(uid uint32) error {
		if callerUID == 0 && uid != 0 {
			return fmt.Errorf("the server runs as uid %d, not root", uid)
		}
		return nil
	}
}
