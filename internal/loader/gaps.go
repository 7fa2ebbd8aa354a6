package loader

import (
	"time"

	"github.com/lineage-dev/lineage/lineage"
)

// Gap is a run of events a backend could not deliver because its ring
// buffer was full, placed as far as the backend knows: every event it
// counts found the ring full at or after From and at or before To
// (CLOCK_BOOTTIME; both zero when the backend does not know). Lost are
// those of its events the backend can name; the rest are only counted.
type Gap struct {
	From, To time.Duration
	Count    uint64
	Lost     []LostEvent
}

// Placed reports whether g says when its events happened.
func (g Gap) Placed() bool { return g.From > 0 && g.To >= g.From }

// LostEvent is one event a gap counts, as the kernel knew it when it had
// no room for it: its kind, when, and whose.
type LostEvent struct {
	Kind    lineage.EventKind
	Time    time.Duration
	Process lineage.Identity
	Root    lineage.Identity
}

// GapMark is a position in a backend's lost events: how many it had lost
// since it opened.
type GapMark uint64

// GapLog is a backend that places the events it loses: the bpf backend.
type GapLog interface {
	// Gaps returns the events lost after mark, in gaps, oldest first,
	// and the mark that ends them; GapMark(0) is the backend's start. A
	// gap that began before mark counts only what came after it. Every
	// lost event is in exactly one gap, placed or not: the counts add up
	// to the returned mark minus mark. Safe for concurrent use.
	Gaps(mark GapMark) ([]Gap, GapMark, error)
	// GapMark is the mark now: where a record that begins now starts.
	GapMark() (GapMark, error)
}
