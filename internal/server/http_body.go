package server

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/lineage-dev/lineage/api"
	"github.com/lineage-dev/lineage/lineage"
)

// DefaultBodyTimeout is how long a client has, once its headers are in, to
// send the whole request body.
const DefaultBodyTimeout = 10 * time.Second

// readBodies reads each request's body whole, within the body timeout,
// before next sees the request. A client that sends its headers and then
// trickles or withholds its body is answered 408 and its connection is
// closed: it never holds a handler, a session's lock or a tracker call.
// A body over MaxBody is answered 413 the same way, unread past MaxBody.
func (s *Server) readBodies(next http.Handler) http.Handler {
	timeout := s.opts.BodyTimeout
	if timeout <= 0 {
		timeout = DefaultBodyTimeout
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody {
			next.ServeHTTP(w, r)
			return
		}
		rc := http.NewResponseController(w)
		_ = rc.SetReadDeadline(time.Now().Add(timeout))
		data, err := io.ReadAll(io.LimitReader(r.Body, MaxBody+1))
		switch {
		case errors.Is(err, os.ErrDeadlineExceeded):
			w.Header().Set("Connection", "close")
			writeError(w, errorf(http.StatusRequestTimeout, api.CodeTimeout, "request body not received within %v", timeout))
			return
		case err != nil:
			w.Header().Set("Connection", "close")
			writeError(w, fmt.Errorf("%w body: %w", lineage.ErrInvalid, err))
			return
		case len(data) > MaxBody:
			// The rest is never read: the connection ends with the answer.
			w.Header().Set("Connection", "close")
			writeError(w, errorf(http.StatusRequestEntityTooLarge, api.CodeTooLarge, "body over %d bytes", MaxBody))
			return
		}
		// Handlers may run long (a reap): no deadline may cancel them.
		_ = rc.SetReadDeadline(time.Time{})
		r.Body = io.NopCloser(bytes.NewReader(data))
		next.ServeHTTP(w, r)
	})
}
