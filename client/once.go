package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	"github.com/lineage-dev/lineage/api"
)

// Once sends one request to the daemon at socket, as [Client.Do] does, on a
// connection of its own that it closes: the calling goroutine writes and
// reads, and nothing else runs (no transport, no connection goroutines). It
// suits a process that makes a single call and is gone, as
// `lineage exec` is before it execs its command. It can't be cancelled: it
// returns when the daemon answers or closes the connection.
func Once(socket, method, path string, body, out any) error {
	req, err := newRequest(context.Background(), method, path, body)
	if err != nil {
		return err
	}
	req.Close = true
	// The connection's reads park the goroutine in the poller: with every
	// P idle, the runtime's monitor thread sleeps rather than polling a
	// thread blocked in read(2) every 20 µs, on a CPU the daemon needs.
	conn, err := dial(context.Background(), socket)
	if err != nil {
		return sendError(socket, method, path, err)
	}
	defer conn.Close()
	if err := req.Write(conn); err != nil {
		return sendError(socket, method, path, err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	if resp, err = answer(resp); err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("%s %s: decode answer: %w", method, path, err)
	}
	return nil
}

// newRequest is method path with body (nil: none) as JSON.
func newRequest(ctx context.Context, method, path string, body any) (*http.Request, error) {
	var rd io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://lineage"+path, rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	return req, nil
}

// AddRootOnce is [Client.AddRoot] through [Once]: `lineage exec`'s one
// call before it becomes its command.
func AddRootOnce(socket string, req api.AddRoot) (api.Root, error) {
	var out api.Root
	err := Once(socket, http.MethodPost, "/v1/roots", req, &out)
	return out, err
}
