// Package client is the Go client of `lineage serve`: it talks to the
// daemon over its Unix socket, with the wire types of package api. A
// process is named as package lineage names it (lineage.Identity, from
// lineage.ParseIdentity("PID@START")), a keep rule as package policy does
// (policy.ParseKeep). A Client is safe for concurrent use by multiple
// goroutines.
package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/lineage-dev/lineage/api"
)

// EnvSocket names the socket when no flag does.
const EnvSocket = "LINEAGE_SOCKET"

// ErrNoDaemon is wrapped when no daemon answers on the socket.
var ErrNoDaemon = errors.New("no lineage daemon reachable")

// APIError is an error the daemon answered with.
type APIError struct {
	Status int
	Body   api.Error
}

func (e *APIError) Error() string {
	return fmt.Sprintf("%s (%d %s)", e.Body.Error, e.Status, e.Body.Code)
}

// Socket picks the socket: flag, else $LINEAGE_SOCKET, else the default.
func Socket(flag string) string {
	if flag != "" {
		return flag
	}
	if env := os.Getenv(EnvSocket); env != "" {
		return env
	}
	return api.DefaultSocket
}

// Client sends requests to the daemon at one socket.
type Client struct {
	socket string
	http   *http.Client
}

// Option tunes a [Client].
type Option func(*options)

type options struct {
	trust func(uid uint32) error
}

// TrustServer has every connection checked before a request is sent on
// it: trust is given the server's effective uid as the kernel saw it
// listen (SO_PEERCRED), whatever the socket's path, and refuses with an
// error.
func TrustServer(trust func(uid uint32) error) Option {
	return func(o *options) { o.trust = trust }
}

// New returns a client for the daemon listening at socket. A relative
// socket path is made absolute here, once, against the working directory
// of this moment: the client's calls and the commands it starts (through
// `lineage exec --socket`, in their own Dir) then reach the same daemon,
// wherever the process or the commands move. A name in Linux's abstract
// namespace (a leading @) is no path and is kept as it is, and so is a
// relative path when the working directory can't be read.
func New(socket string, opts ...Option) *Client {
	socket = absSocket(socket)
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			c, err := dial(ctx, socket)
			if err != nil || o.trust == nil {
				return c, err
			}
			if err := checkServer(c, o.trust); err != nil {
				c.Close()
				return nil, err
			}
			return c, nil
		},
	}
	return &Client{socket: socket, http: &http.Client{Transport: tr}}
}

// absSocket is socket made absolute against the working directory.
func absSocket(socket string) string {
	if socket == "" || strings.HasPrefix(socket, "@") || filepath.IsAbs(socket) {
		return socket
	}
	abs, err := filepath.Abs(socket)
	if err != nil {
		return socket
	}
	return abs
}

// Close releases idle connections.
func (c *Client) Close() { c.http.CloseIdleConnections() }

// Do sends body (nil: none) as JSON to path and decodes the answer into
// out (nil: discarded). An error answer is an [*APIError].
func (c *Client) Do(ctx context.Context, method, path string, body, out any) error {
	resp, err := c.send(ctx, method, path, body)
	if err != nil {
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

// Stream sends a GET to path and returns the open answer body, for the
// event stream. Close it when done.
func (c *Client) Stream(ctx context.Context, path string) (io.ReadCloser, error) {
	resp, err := c.send(ctx, http.MethodGet, path, nil)
	if err != nil {
		return nil, err
	}
	return resp.Body, nil
}

func (c *Client) send(ctx context.Context, method, path string, body any) (*http.Response, error) {
	req, err := newRequest(ctx, method, path, body)
	if err != nil {
		return nil, err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, sendError(c.socket, method, path, err)
	}
	return answer(resp)
}

// sendError says why a request could not be sent: no daemon at socket, a
// socket this uid may not use, or another failure.
func sendError(socket, method, path string, err error) error {
	switch {
	case errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("%w at %s (start one with `lineage serve`): %w", ErrNoDaemon, socket, err)
	case errors.Is(err, syscall.EACCES):
		return fmt.Errorf("%s %s: uid %d may not use the socket %s (its mode and group decide who may: lineage serve --socket-mode, --socket-group): %w", method, path, os.Getuid(), socket, err)
	}
	return fmt.Errorf("%s %s: %w", method, path, err)
}

// answer returns resp, or the [*APIError] it carries (its body read and
// closed).
func answer(resp *http.Response) (*http.Response, error) {
	if resp.StatusCode >= 400 {
		defer resp.Body.Close()
		ae := &APIError{Status: resp.StatusCode}
		if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&ae.Body); err != nil {
			ae.Body = api.Error{Error: resp.Status, Code: "unknown"}
		}
		return nil, ae
	}
	return resp, nil
}

// Query builds a path with a query string, leaving out empty values.
func Query(path string, kv ...string) string {
	q := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] != "" {
			q.Set(kv[i], kv[i+1])
		}
	}
	if len(q) == 0 {
		return path
	}
	return path + "?" + q.Encode()
}
