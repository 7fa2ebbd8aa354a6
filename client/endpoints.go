package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/lineage-dev/lineage/api"
	"github.com/lineage-dev/lineage/lineage"
)

// The typed calls, one for each endpoint of docs/api.md. Each sends one
// request; an answer the daemon refuses is an [*APIError], a daemon that
// can't be reached wraps [ErrNoDaemon]. An id in the path is one segment,
// escaped, so no id reaches another endpoint; an empty one is an error,
// and nothing is sent.

// Status is GET /v1/status: the daemon's backend, reaping switch and
// sessions, and the caller's uid as it saw it.
func (c *Client) Status(ctx context.Context) (api.Status, error) {
	var out api.Status
	err := c.Do(ctx, http.MethodGet, "/v1/status", nil, &out)
	return out, err
}

// OpenSession is POST /v1/sessions.
func (c *Client) OpenSession(ctx context.Context, req api.OpenSession) (api.Session, error) {
	var out api.Session
	err := c.Do(ctx, http.MethodPost, "/v1/sessions", req, &out)
	return out, err
}

// Sessions is GET /v1/sessions: the open sessions the caller may see.
func (c *Client) Sessions(ctx context.Context) ([]api.Session, error) {
	var out []api.Session
	err := c.Do(ctx, http.MethodGet, "/v1/sessions", nil, &out)
	return out, err
}

// Session is GET /v1/sessions/{id}.
func (c *Client) Session(ctx context.Context, id string) (api.Session, error) {
	var out api.Session
	err := c.doSession(ctx, http.MethodGet, id, "", &out)
	return out, err
}

// TurnEnd is POST /v1/sessions/{id}/turn-end: the policy reaps or reports
// what the session's roots left, as its kind says.
func (c *Client) TurnEnd(ctx context.Context, id string) (api.Ended, error) {
	var out api.Ended
	err := c.doSession(ctx, http.MethodPost, id, "/turn-end", &out)
	return out, err
}

// CloseSession is POST /v1/sessions/{id}/close: its child sessions first,
// then its roots are reaped and untracked.
func (c *Client) CloseSession(ctx context.Context, id string) (api.Ended, error) {
	var out api.Ended
	err := c.doSession(ctx, http.MethodPost, id, "/close", &out)
	return out, err
}

// ReportSession is GET /v1/sessions/{id}/report: what the session's roots
// have alive now, signalling nothing.
func (c *Client) ReportSession(ctx context.Context, id string) (api.Ended, error) {
	var out api.Ended
	err := c.doSession(ctx, http.MethodGet, id, "/report", &out)
	return out, err
}

// AddRoot is POST /v1/roots: register a running process as a root.
func (c *Client) AddRoot(ctx context.Context, req api.AddRoot) (api.Root, error) {
	var out api.Root
	err := c.Do(ctx, http.MethodPost, "/v1/roots", req, &out)
	return out, err
}

// Roots is GET /v1/roots: the roots the caller may see, of session only
// when it is not "".
func (c *Client) Roots(ctx context.Context, session string) ([]api.Root, error) {
	var out []api.Root
	err := c.Do(ctx, http.MethodGet, Query("/v1/roots", "session", session), nil, &out)
	return out, err
}

// Root is GET /v1/roots/{id}: a root with its live members.
func (c *Client) Root(ctx context.Context, id lineage.Identity) (api.Root, error) {
	var out api.Root
	err := c.Do(ctx, http.MethodGet, rootPath(id, ""), nil, &out)
	return out, err
}

// RemoveRoot is DELETE /v1/roots/{id}: untrack a root, signalling
// nothing.
func (c *Client) RemoveRoot(ctx context.Context, id lineage.Identity) (api.Root, error) {
	var out api.Root
	err := c.Do(ctx, http.MethodDelete, rootPath(id, ""), nil, &out)
	return out, err
}

// EndRoot is POST /v1/roots/{id}/end: a `lineage run` client's job has
// ended; the answer, a run report, is decoded into out.
func (c *Client) EndRoot(ctx context.Context, id lineage.Identity, req api.EndRoot, out any) error {
	return c.Do(ctx, http.MethodPost, rootPath(id, "/end"), req, out)
}

// AddKeep is POST /v1/keeps: spare a process, or a root's lineage, from
// its session's reaps.
func (c *Client) AddKeep(ctx context.Context, req api.AddKeep) (api.Keep, error) {
	var out api.Keep
	err := c.Do(ctx, http.MethodPost, "/v1/keeps", req, &out)
	return out, err
}

// RemoveKeep is DELETE /v1/keeps/{rule}: the keep ends.
func (c *Client) RemoveKeep(ctx context.Context, rule string) (api.Keep, error) {
	var out api.Keep
	path, err := segmentPath("keep rule", "/v1/keeps/", rule, "")
	if err == nil {
		err = c.Do(ctx, http.MethodDelete, path, nil, &out)
	}
	return out, err
}

// Why is GET /v1/why/{process}: the process's chain of lineage parents up
// to its root. process is "PID@START", or a bare pid.
func (c *Client) Why(ctx context.Context, process string) (api.Why, error) {
	var out api.Why
	path, err := segmentPath("process", "/v1/why/", process, "")
	if err == nil {
		err = c.Do(ctx, http.MethodGet, path, nil, &out)
	}
	return out, err
}

// Events is GET /v1/events: the event stream, in the record's schema, one
// JSON object a line; of one session only when session is not "", and then
// it ends when the session closes. Close the stream to stop.
func (c *Client) Events(ctx context.Context, session string) (io.ReadCloser, error) {
	return c.Stream(ctx, Query("/v1/events", "session", session))
}

// Arm is POST /v1/arms: what the calling process forks from now on is a
// root of req's session, from its first instruction.
func (c *Client) Arm(ctx context.Context, req api.Arm) (api.Armed, error) {
	var out api.Armed
	err := c.Do(ctx, http.MethodPost, "/v1/arms", req, &out)
	return out, err
}

// Disarm is DELETE /v1/arms: the calling process is armed no more.
func (c *Client) Disarm(ctx context.Context) (api.Armed, error) {
	var out api.Armed
	err := c.Do(ctx, http.MethodDelete, "/v1/arms", nil, &out)
	return out, err
}

// doSession is [Client.Do], with no body, on session id's endpoint rest.
func (c *Client) doSession(ctx context.Context, method, id, rest string, out any) error {
	path, err := segmentPath("session", "/v1/sessions/", id, rest)
	if err != nil {
		return err
	}
	return c.Do(ctx, method, path, nil, out)
}

// errEmptyID is an id of "" where a path needs one: refused before
// anything is sent, since "/v1/sessions//close" is another path (the
// daemon's mux cleans it to /v1/sessions/close) and no id is empty.
var errEmptyID = errors.New("no id given")

// segmentPath is prefix, id (a what) as one escaped path segment, then
// rest. An id of dots alone has them escaped too: the daemon's mux would
// clean "." and ".." away, to another endpoint. So no id reaches another
// endpoint; an empty one is [errEmptyID].
func segmentPath(what, prefix, id, rest string) (string, error) {
	if id == "" {
		return "", fmt.Errorf("client: %s: %w", what, errEmptyID)
	}
	seg := url.PathEscape(id)
	if strings.Trim(seg, ".") == "" {
		seg = strings.ReplaceAll(seg, ".", "%2E")
	}
	return prefix + seg + rest, nil
}

func rootPath(id lineage.Identity, rest string) string { return "/v1/roots/" + id.String() + rest }
