package tracker

import "context"

// syncer is a backend that can wait for the events already in the kernel.
type syncer interface {
	Sync(ctx context.Context) error
}

// Sync returns once the tracker has delivered every event its backend had
// been given when Sync was called (bpf: the ring buffer read to empty),
// or with ctx's error. The proc backend derives its events by polling and
// has nothing pending to wait for: Sync returns at once.
func (t *Tracker) Sync(ctx context.Context) error {
	if s, ok := t.backend.(syncer); ok {
		return s.Sync(ctx)
	}
	return nil
}
