package server

import (
	"bufio"
	"github.com/lineage-dev/lineage/api"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// serveBodies serves handler behind readBodies on a Unix socket, with
// the peer credentials the daemon has, and returns the socket's path.
func serveBodies(t *testing.T, timeout time.Duration, h handler) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "s.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{opts: Options{BodyTimeout: timeout}}
	hs := &http.Server{Handler: s.readBodies(methods{"POST": h}), ConnContext: peerContext}
	go func() { _ = hs.Serve(ln) }()
	t.Cleanup(func() { _ = hs.Close() })
	return sock
}

// A client that sends its headers and then trickles its body, a byte at a
// time and never all of it, is answered 408 and cut off; the handler never
// runs. A whole body on the same server is served.
func TestTricklingBodyIsCutOff(t *testing.T) {
	var calls atomic.Int32
	sock := serveBodies(t, 300*time.Millisecond, func(r *http.Request, p Peer) (int, any, error) {
		calls.Add(1)
		var req api.OpenSession
		if err := decodeBody(r.Body, &req); err != nil {
			return 0, nil, err
		}
		return http.StatusOK, req, nil
	})
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// Bound the whole exchange generously: without the body bound the
	// answer never comes.
	_ = c.SetDeadline(time.Now().Add(60 * time.Second))
	if _, err := c.Write([]byte("POST /v1/sessions HTTP/1.1\r\nHost: x\r\nContent-Length: 60000\r\n\r\n{")); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				if _, err := c.Write([]byte(" ")); err != nil {
					return
				}
			}
		}
	}()
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("no answer to a trickled body: %v", err)
	}
	body := new(strings.Builder)
	_, _ = bufio.NewReader(resp.Body).WriteTo(body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestTimeout || !strings.Contains(body.String(), `"code": "timeout"`) {
		t.Errorf("answer %d %s, want 408 timeout", resp.StatusCode, body)
	}
	if !resp.Close {
		t.Error("the connection of a trickling client stays open")
	}
	if n := calls.Load(); n != 0 {
		t.Errorf("the handler ran %d times for a body that never came", n)
	}

	hc := &http.Client{Transport: &http.Transport{Dial: func(_, _ string) (net.Conn, error) { return net.Dial("unix", sock) }}}
	defer hc.CloseIdleConnections()
	ok, err := hc.Post("http://x/v1/sessions", "application/json", strings.NewReader(`{"id": "whole"}`))
	if err != nil {
		t.Fatal(err)
	}
	ok.Body.Close()
	if ok.StatusCode != http.StatusOK || calls.Load() != 1 {
		t.Errorf("a whole body: %d, %d handler calls", ok.StatusCode, calls.Load())
	}
}

// A body over MaxBody is refused with 413 before the handler runs.
func TestHugeBodyIsRefusedBeforeTheHandler(t *testing.T) {
	var calls atomic.Int32
	sock := serveBodies(t, 10*time.Second, func(r *http.Request, p Peer) (int, any, error) {
		calls.Add(1)
		return http.StatusOK, struct{}{}, nil
	})
	hc := &http.Client{Transport: &http.Transport{Dial: func(_, _ string) (net.Conn, error) { return net.Dial("unix", sock) }}}
	defer hc.CloseIdleConnections()
	resp, err := hc.Post("http://x/v1/sessions", "application/json", strings.NewReader(`{"label": "`+strings.Repeat("x", MaxBody)+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge || calls.Load() != 0 {
		t.Errorf("huge body: %d, %d handler calls", resp.StatusCode, calls.Load())
	}
}
