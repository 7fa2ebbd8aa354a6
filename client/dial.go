package client

import (
	"context"
	"errors"
	"net"
	"syscall"
	"time"
)

// busyWait bounds how long a dial waits for room in the daemon's backlog.
const busyWait = 5 * time.Second

// dial connects to the daemon's socket. A Unix socket whose backlog of
// connections not yet accepted is full refuses a connect at once (EAGAIN)
// where a TCP one would wait: a flood of another user's connections fills
// it for an instant. So a full backlog is retried, for up to busyWait, as a
// blocking connect would wait for room.
func dial(ctx context.Context, socket string) (net.Conn, error) {
	var d net.Dialer
	wait := time.Millisecond
	deadline := time.Now().Add(busyWait)
	for {
		c, err := d.DialContext(ctx, "unix", socket)
		if err == nil || !errors.Is(err, syscall.EAGAIN) || time.Now().After(deadline) {
			return c, err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, err
		case <-t.C:
		}
		wait = min(2*wait, 50*time.Millisecond)
	}
}
