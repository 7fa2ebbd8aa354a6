package server

import (
	"encoding/json"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/lineage-dev/lineage/api"
	"golang.org/x/sys/unix"
)

// limitedListener accounts for each connection as it is accepted: the
// kernel's SO_PEERCRED says whose it is, and a uid other than root that is
// at its Connections quota, or a connection that would take one of the
// descriptors kept in reserve, is answered 429 and closed before any
// request on it is read. Descriptors are handed out lowest first, so a
// connection whose descriptor is at or above the threshold means that
// every descriptor below it is in use: refusing those keeps the top
// FDReserve descriptors for root's connections and the daemon's own work,
// however many connections one uid opens.
type limitedListener struct {
	net.Listener
	s *Server
	// threshold is the first descriptor kept in reserve.
	threshold int
	// refusing bounds the refusals being written at once; past it a
	// connection is closed unanswered.
	refusing chan struct{}
}

// maxRefusing bounds the goroutines that answer refused connections.
const maxRefusing = 64

// limit wraps ln so that its connections are accounted for; ln must be a
// Unix socket's listener for anything to be refused.
func (s *Server) limit(ln net.Listener) net.Listener {
	reserve := s.opts.Quotas.FDReserve
	if reserve == 0 {
		reserve = DefaultQuotas().FDReserve
	}
	threshold := 0 // no reserve: the limit can't be read
	var lim unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_NOFILE, &lim) == nil && lim.Cur < 1<<31 {
		// Never below a few descriptors for connections at all.
		threshold = max(int(lim.Cur)-reserve, min(int(lim.Cur)/2, 64))
	}
	return &limitedListener{Listener: ln, s: s, threshold: threshold, refusing: make(chan struct{}, maxRefusing)}
}

func (l *limitedListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		uc, ok := c.(*net.UnixConn)
		if !ok {
			return c, nil
		}
		p, fd, ok := peerCred(uc)
		if !ok {
			return c, nil // every request on it is refused: no peer
		}
		if p.Root() {
			return &peerConn{UnixConn: uc, peer: p}, nil
		}
		if l.threshold > 0 && fd >= l.threshold {
			l.s.metrics.refused(limitFiles)
			l.refuse(uc, errorf(http.StatusTooManyRequests, api.CodeTooMany, "the daemon is near its file limit: descriptors above %d are kept for root and its own work (lineage serve --fd-reserve)", l.threshold))
			continue
		}
		if err := l.s.usage.take(p.UID, limitConnections, 1); err != nil {
			l.refuse(uc, err)
			continue
		}
		return &peerConn{UnixConn: uc, peer: p, release: func() { l.s.usage.give(p.UID, limitConnections, 1) }}, nil
	}
}

// refuse answers c with err (429) and closes it. The request is read
// first, for a short while, from a goroutine of its own, so that an HTTP
// client that writes its request before it reads sees the answer rather
// than a broken pipe; past maxRefusing such goroutines, the answer is
// written at once. Either way a client that reads gets the 429: a Unix
// socket's unread answer outlives the close.
func (l *limitedListener) refuse(c *net.UnixConn, err error) {
	status, code := classify(err)
	body, _ := json.Marshal(api.Error{Error: err.Error(), Code: code})
	answer := []byte("HTTP/1.1 " + strconv.Itoa(status) + " " + http.StatusText(status) +
		"\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: " + strconv.Itoa(len(body)+1) + "\r\n\r\n" +
		string(body) + "\n")
	send := func() {
		_ = c.SetWriteDeadline(time.Now().Add(10 * time.Millisecond))
		_, _ = c.Write(answer)
		_ = c.CloseWrite()
		c.Close()
	}
	select {
	case l.refusing <- struct{}{}:
	default:
		send()
		return
	}
	go func() {
		defer func() { <-l.refusing }()
		_ = c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		buf := make([]byte, 4096)
		_, _ = c.Read(buf)
		send()
	}()
}

// peerConn is an accepted connection with the peer the kernel gave for it.
type peerConn struct {
	*net.UnixConn
	peer    Peer
	release func() // counts the connection as closed, once
	once    sync.Once
}

func (c *peerConn) Close() error {
	if c.release != nil {
		c.once.Do(c.release)
	}
	return c.UnixConn.Close()
}

// peerCred reads the credentials of c's peer and c's descriptor number.
func peerCred(c *net.UnixConn) (Peer, int, bool) {
	raw, err := c.SyscallConn()
	if err != nil {
		return Peer{}, 0, false
	}
	var cred *unix.Ucred
	var credErr error
	fd := 0
	if err := raw.Control(func(f uintptr) {
		fd = int(f)
		cred, credErr = unix.GetsockoptUcred(fd, unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil || credErr != nil {
		return Peer{}, 0, false
	}
	return Peer{UID: cred.Uid, PID: int(cred.Pid)}, fd, true
}
