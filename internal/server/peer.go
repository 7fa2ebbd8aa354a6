package server

import (
	"context"
	"net"
	"net/http"

	"golang.org/x/sys/unix"
)

// Peer is the caller as the kernel saw it connect: its effective uid and
// pid (SO_PEERCRED). Only UID authorises; PID only serves to find out
// whether the caller is itself a tracked process.
type Peer struct {
	UID uint32
	PID int
}

// Root reports whether the caller is uid 0.
func (p Peer) Root() bool { return p.UID == 0 }

type peerKey struct{}

// peerContext stores the peer of a new connection in its context; a
// connection whose peer can't be read gets none and every request on it is
// refused.
func peerContext(ctx context.Context, c net.Conn) context.Context {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return ctx
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return ctx
	}
	var cred *unix.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil || credErr != nil {
		return ctx
	}
	return context.WithValue(ctx, peerKey{}, Peer{UID: cred.Uid, PID: int(cred.Pid)})
}

// peerOf returns the request's peer.
func peerOf(r *http.Request) (Peer, error) {
	p, ok := r.Context().Value(peerKey{}).(Peer)
	if !ok {
		return Peer{}, forbidden("caller's credentials unknown")
	}
	return p, nil
}
