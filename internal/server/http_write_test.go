package server

import (
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// A client that asks for a large answer and never reads it holds its
// handler only until writeTimeout passes: the connection is cut.
func TestAnswerNotReadIsCutOff(t *testing.T) {
	was := writeTimeout
	writeTimeout = 300 * time.Millisecond
	t.Cleanup(func() { writeTimeout = was })
	big := strings.Repeat("x", 16<<20)
	closed := make(chan struct{})
	sock := filepath.Join(t.TempDir(), "s.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{opts: Options{BodyTimeout: time.Second}}
	hs := &http.Server{
		Handler:     s.readBodies(methods{"POST": func(*http.Request, Peer) (int, any, error) { return http.StatusOK, big, nil }}),
		ConnContext: peerContext,
		ConnState: func(_ net.Conn, st http.ConnState) {
			if st == http.StateClosed {
				close(closed)
			}
		},
	}
	go func() { _ = hs.Serve(ln) }()
	t.Cleanup(func() { _ = hs.Close() })

	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	raw, err := c.(*net.UnixConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	_ = raw.Control(func(fd uintptr) { _ = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF, 4096) })
	if _, err := c.Write([]byte("POST /v1/x HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	select {
	case <-closed:
	case <-time.After(20 * time.Second):
		t.Fatal("the connection of a client that reads nothing still stands 20 s on")
	}
}
