package server

import (
	"context"
	"time"
)

// A settle's own events (leak, signal, keep) are about processes whose
// fork and exec the tracker reads from the kernel's ring buffer, later
// than the reap saw them in the membership map: a process forked just
// before a turn end may be signalled, and dead, before its fork reaches
// user space. So that every stream has each process's fork and exec before
// any signal of it, a settle publishes its events only once the tracker
// has delivered what the kernel held when the reap ended (syncStreams);
// the hub keeps each stream's order from then on.

// syncBeforeSettled bounds that wait: a tracker too far behind lets the
// settle's events through, and says so.
const syncBeforeSettled = 2 * time.Second

// syncStreams waits, when a stream or a record listens, for the tracker
// to deliver the events the kernel holds now.
func (s *Server) syncStreams(ctx context.Context) {
	if !s.hub.listened() {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), syncBeforeSettled)
	defer cancel()
	if err := s.tracker.Sync(ctx); err != nil {
		s.note("lineage: a reap's events published before the tracker's last events: %v\n", err)
	}
}

// listened reports whether any stream (a record's included) listens.
func (h *hub) listened() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.subs) > 0
}
