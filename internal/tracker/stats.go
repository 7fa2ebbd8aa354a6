package tracker

import (
	"errors"

	"github.com/lineage-dev/lineage/internal/loader"
)

// ErrNoFill is returned by [Tracker.Fill] for a backend without a
// membership map of fixed size (proc).
var ErrNoFill = errors.New("the backend has no membership map")

// Stats returns the backend's counters since the tracker opened. It is
// safe for concurrent use.
func (t *Tracker) Stats() (loader.Stats, error) { return t.backend.Stats() }

// Fill returns how many processes the bpf backend's membership map holds
// and its capacity, or ErrNoFill for a backend without one. It is safe for
// concurrent use; its cost grows with the number of members.
func (t *Tracker) Fill() (members, capacity int, err error) {
	f, ok := t.backend.(interface{ Fill() (int, int, error) })
	if !ok {
		return 0, 0, ErrNoFill
	}
	return f.Fill()
}
