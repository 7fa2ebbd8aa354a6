package server

import (
	"context"
	"net"
	"net/http"
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

// peerContext stores the peer of a new connection in its context, as the
// kernel gave it when the connection was accepted (limitedListener); a
// connection whose peer can't be read gets none and every request on it
// is refused.
func peerContext(ctx context.Context, c net.Conn) context.Context {
	switch c := c.(type) {
	case *peerConn:
		return context.WithValue(ctx, peerKey{}, c.peer)
	case *net.UnixConn:
		if p, _, ok := peerCred(c); ok {
			return context.WithValue(ctx, peerKey{}, p)
		}
	}
	return ctx
}

// peerOf returns the request's peer.
func peerOf(r *http.Request) (Peer, error) {
	p, ok := r.Context().Value(peerKey{}).(Peer)
	if !ok {
		return Peer{}, forbidden("caller's credentials unknown")
	}
	return p, nil
}
