package server

import (
	"context"
	"fmt"
	"time"

	"github.com/lineage-dev/lineage/internal/record"
)

// syncBeforeEnd bounds the wait, at a session's close, for the tracker's
// pending events (the exits the close's reap caused) to reach the
// session's streams before they end.
const syncBeforeEnd = time.Second

// follow makes sub, a stream filtered to se, end when se closes; if se
// closed before, sub ends at once. The order (sub marked, then se's close
// read, where a close marks se closed before it ends its streams) leaves
// no window in which a close goes unseen.
func (s *Server) follow(sub *subscriber, se *session) {
	s.hub.mu.Lock()
	sub.follows = se
	s.hub.mu.Unlock()
	s.reg.mu.Lock()
	closed := se.closed
	s.reg.mu.Unlock()
	if closed {
		s.hub.end(sub)
	}
}

// endStreams ends the streams that follow se, which has closed, once the
// tracker's pending events are in them.
func (s *Server) endStreams(ctx context.Context, se *session) {
	if !s.hub.followed(se) {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, syncBeforeEnd)
	defer cancel()
	if err := s.tracker.Sync(ctx); err != nil {
		s.note("lineage: session %s: end its streams without the tracker's last events: %v\n", se.id, err)
	}
	s.hub.endSession(se)
}

// followed reports whether a stream follows se.
func (h *hub) followed(se *session) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for sub := range h.subs {
		if sub.follows == se {
			return true
		}
	}
	return false
}

// endSession ends the streams that follow se.
func (h *hub) endSession(se *session) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for sub := range h.subs {
		if sub.follows == se {
			h.endLocked(sub)
		}
	}
}

// end ends sub.
func (h *hub) end(sub *subscriber) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.endLocked(sub)
}

func (h *hub) endLocked(sub *subscriber) {
	select {
	case <-sub.ended:
	default:
		close(sub.ended)
	}
}

// endStream writes what sub still holds, then the end event, the
// stream's last.
func (s *Server) endStream(rw *record.Writer, sub *subscriber) {
drain:
	for {
		select {
		case it, ok := <-sub.ch:
			if !ok || !s.writeItem(rw, sub, it) {
				return
			}
		default:
			break drain
		}
	}
	if n := s.hub.takeLost(sub); n > 0 {
		_ = rw.Loss(n)
	}
	_ = rw.End(fmt.Sprintf("session %s closed", sub.follows.id))
}
