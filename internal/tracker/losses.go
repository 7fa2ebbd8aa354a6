package tracker

import (
	"github.com/lineage-dev/lineage/internal/loader"
	"github.com/lineage-dev/lineage/internal/record"
	"github.com/lineage-dev/lineage/lineage"
)

// Losses are what a record lacks over the time it covers: the backend's
// loss counters' growth (Stats) and, from a backend that places the events
// its ring buffer dropped (Placed), the gaps that count those in place of
// Stats.EventsLost.
type Losses struct {
	Stats  loader.Stats
	Gaps   []loader.Gap
	Placed bool
	// Mine says whether a lost event is of the record's lineages: only
	// those are named. Nil names none.
	Mine func(loader.LostEvent) bool
}

// WriteLosses records the gaps in a record that l shows: one loss per gap
// of lost events, placed in time and naming the record's processes whose
// events fell in it (record.Writer.LossIn), then one per other counter
// that grew.
func WriteLosses(w *record.Writer, l Losses) {
	st := l.Stats
	if l.Placed {
		for _, g := range l.Gaps {
			_ = w.LossIn(g.Count, "events lost", record.Placement{From: g.From, To: g.To, Members: lostMembers(g.Lost, l.Mine)})
		}
	} else {
		_ = w.LossOf(st.EventsLost, "events lost")
	}
	_ = w.LossOf(st.Undecodable, "undecodable")
	_ = w.LossOf(st.MembersFull, "untracked: the membership map was full")
	_ = w.LossOf(st.Unattributed, "unattributed orphans")
	_ = w.LossOf(st.AdoptedAfterMiss, "forks no hook saw: adopted from /proc")
	_ = w.LossOf(st.HookMisses-min(st.HookMisses, st.ForkMisses+st.CatcherMisses), "exec and exit hook runs the kernel skipped")
}

// lostMembers are the processes of the events in lost that mine accepts,
// in the order they first come, each with the kinds of its lost events.
func lostMembers(lost []loader.LostEvent, mine func(loader.LostEvent) bool) []record.LostMember {
	if mine == nil {
		return nil
	}
	var out []record.LostMember
	at := map[lineage.Identity]int{}
	for _, ev := range lost {
		if !mine(ev) {
			continue
		}
		i, ok := at[ev.Process]
		if !ok {
			i = len(out)
			at[ev.Process] = i
			out = append(out, record.LostMember{Process: ev.Process})
		}
		out[i].Kinds = addKind(out[i].Kinds, recordKind(ev.Kind))
	}
	return out
}

// addKind adds k to kinds, in the order events happen, once.
func addKind(kinds []record.Kind, k record.Kind) []record.Kind {
	order := map[record.Kind]int{record.KindFork: 0, record.KindExec: 1, record.KindExit: 2}
	for i, have := range kinds {
		if have == k {
			return kinds
		}
		if order[k] < order[have] {
			return append(kinds[:i], append([]record.Kind{k}, kinds[i:]...)...)
		}
	}
	return append(kinds, k)
}

func recordKind(k lineage.EventKind) record.Kind {
	switch k {
	case lineage.EventFork:
		return record.KindFork
	case lineage.EventExec:
		return record.KindExec
	}
	return record.KindExit
}

// GapMark is where the backend's lost events stand now, and whether the
// backend places them (the bpf backend does; proc loses none).
func (t *Tracker) GapMark() (loader.GapMark, bool) {
	g, ok := t.backend.(loader.GapLog)
	if !ok {
		return 0, false
	}
	m, err := g.GapMark()
	return m, err == nil
}

// GapsSince returns the backend's gaps of lost events after mark, and
// whether it could read them: when it can't, the caller counts the losses
// unplaced.
func (t *Tracker) GapsSince(mark loader.GapMark) ([]loader.Gap, bool) {
	g, ok := t.backend.(loader.GapLog)
	if !ok {
		return nil, false
	}
	gaps, _, err := g.Gaps(mark)
	return gaps, err == nil
}
