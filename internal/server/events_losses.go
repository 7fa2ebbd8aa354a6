package server

import (
	"time"

	"github.com/lineage-dev/lineage/internal/loader"
	"github.com/lineage-dev/lineage/internal/record"
	"github.com/lineage-dev/lineage/internal/tracker"
)

// lossEvery is how often the tracker's loss counters are read for the
// event streams.
const lossEvery = time.Second

// watchLosses tells every event stream of the tracker's gaps as they
// happen: each time it looks (every period, until stop is closed), a loss
// counter that grew since the last look (events the ring buffer dropped,
// records that did not decode, processes the full membership map could
// not hold, orphans with no known parent) becomes a loss event, with the
// reason the session records use; the ring buffer's drops come placed in
// time where the tracker places them, naming no process (the streams are
// of any session). No session can be told apart in such a gap, so every
// stream gets it, filtered by session or not. Counting starts from last
// (based: it was read), which Open reads before the server answers: what
// a pinned tracker lost before this daemon started is in its counters
// (`/metrics`, the start's note), not in the streams.
func (s *Server) watchLosses(stop <-chan struct{}, period time.Duration, last loader.Stats, based bool) {
	tick := time.NewTicker(period)
	defer tick.Stop()
	mark, placed := s.tracker.GapMark()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		st, err := s.tracker.Stats()
		if err != nil {
			continue
		}
		l := tracker.Losses{Stats: lossesSince(st, last)}
		if placed {
			if l.Gaps, l.Placed = s.tracker.GapsSince(mark); l.Placed {
				for _, g := range l.Gaps {
					mark += loader.GapMark(g.Count)
				}
			}
		}
		if based {
			s.hub.losses(l)
		}
		last, based = st, true
	}
}

// lossesSince is what each loss counter grew by from base to now; a
// counter that went down (a tracker whose counters started again) grew by
// nothing.
func lossesSince(now, base loader.Stats) loader.Stats {
	grew := func(n, b uint64) uint64 {
		if n < b {
			return 0
		}
		return n - b
	}
	return loader.Stats{
		EventsLost:   grew(now.EventsLost, base.EventsLost),
		Undecodable:  grew(now.Undecodable, base.Undecodable),
		MembersFull:  grew(now.MembersFull, base.MembersFull),
		Unattributed: grew(now.Unattributed, base.Unattributed),
	}
}

// losses publishes l to every stream, as loss events; nothing when
// nothing grew.
func (h *hub) losses(l tracker.Losses) {
	d := l.Stats
	if l.Placed {
		d.EventsLost = 0
		for _, g := range l.Gaps {
			d.EventsLost += g.Count
		}
	}
	if d.EventsLost == 0 && d.Undecodable == 0 && d.MembersFull == 0 && d.Unattributed == 0 {
		return
	}
	h.publish(item{everyStream: true, write: func(w *record.Writer) error {
		tracker.WriteLosses(w, l)
		return nil
	}})
}
