package report

import (
	"math"
	"slices"
	"strings"
	"time"

	"github.com/lineage-dev/lineage/internal/record"
	"github.com/lineage-dev/lineage/lineage"
)

// Gap is one loss event of the record: Count events of the kind Reason
// names that the record lacks.
type Gap struct {
	Count  uint64 `json:"count"`
	Reason string `json:"reason,omitempty"`
	// At is when the loss was written, which says little of when its
	// events happened; Placed is set when the loss says that: From and To
	// (boot clock) bound every event it counts.
	At     time.Duration `json:"at_ns"`
	Placed bool          `json:"placed"`
	From   time.Duration `json:"from_ns,omitempty"`
	To     time.Duration `json:"to_ns,omitempty"`
	// Named is how many processes the loss named as its events' (Omitted
	// of them without saying which).
	Named   int `json:"named,omitempty"`
	Omitted int `json:"named_omitted,omitempty"`
	// Escapes is set for a count of processes the full membership could not
	// hold (escaped, or killed at birth with --on-full=kill) rather than of
	// events lost: it marks nothing, and is not in the summary's Lost.
	Escapes bool `json:"escapes,omitempty"`
	// Touched counts the processes the report marks for this gap: named
	// by it, or whose missing event's time lies in it.
	Touched int `json:"touched"`

	members []record.LostMember
}

// Missing is a process the report marks: events of it that the record
// should hold but lost.
type Missing struct {
	Process lineage.Identity `json:"process"`
	Command string           `json:"command"`
	// Events are the kinds not recorded (fork, exec, exit).
	Events []record.Kind `json:"events"`
	// Gaps are the indices (in the report's gaps) of the losses that named
	// the process or whose time holds its missing events; empty when it is
	// marked by absence alone, because the record does not place its
	// losses.
	Gaps []int `json:"gaps,omitempty"`
}

// what says what the gap lost: its reason, or "events lost" for a loss
// with none (the Writer's Loss: the ring buffer was full).
func (g Gap) what() string {
	if g.Reason == "" {
		return "events lost"
	}
	return g.Reason
}

// gapOf is the report's view of a loss event.
func gapOf(ev record.Event) Gap {
	g := Gap{Count: ev.Count, Reason: ev.Reason, At: ev.Boot, members: ev.Members,
		Named: len(ev.Members) + ev.MembersOmitted, Omitted: ev.MembersOmitted,
		Escapes: strings.HasPrefix(ev.Reason, "untracked")}
	if ev.Placed() {
		g.Placed, g.From, g.To = true, ev.From, ev.To
	}
	return g
}

// nameMembers makes sure every process a loss named is in procs, even one
// the record has no other event of: all its events were lost.
func (rep *Report) nameMembers(procs map[lineage.Identity]*Process) {
	for _, g := range rep.Gaps {
		for _, m := range g.members {
			if _, ok := procs[m.Process]; ok || m.Process.IsZero() {
				continue
			}
			rep.count++
			procs[m.Process] = &Process{ID: m.Process, Track: rep.count, Start: lineage.TicksToDuration(m.Process.StartTicks)}
		}
	}
}

// markMissing marks the processes whose events fell in the record's gaps,
// once every process has settled:
//
//   - a process a loss named: the kinds it said, or, when it said none,
//     the fork or exit the record lacks (an exec when it has both);
//   - a process seen without its fork ("fork not recorded"), unless it
//     began before the record did or is a root registered while it ran
//     (its own root, never forked in the record);
//   - a process seen without its exit ("exit not recorded"), unless it was
//     kept or only reported as a leak: those were alive when the record
//     last heard of them, and their end may lie beyond it. Its lifetime is
//     then known only up to its last event.
//
// When every loss is placed in time, the last two need a gap that holds
// the missing event: the start tick of a fork, or any time after the last
// event of the process for an exit. Otherwise the gaps may be anywhere,
// and absence alone marks.
func (rep *Report) markMissing() {
	var events []int // the gaps of lost events
	for i, g := range rep.Gaps {
		if !g.Escapes {
			events = append(events, i)
		}
	}
	if len(events) == 0 {
		return
	}
	placed := true
	for _, i := range events {
		placed = placed && rep.Gaps[i].Placed
	}
	named := make(map[lineage.Identity][]int) // process → gaps naming it
	for _, i := range events {
		for _, m := range rep.Gaps[i].members {
			named[m.Process] = append(named[m.Process], i)
		}
	}
	rep.Walk(func(p *Process) bool {
		var kinds []record.Kind
		var in []int
		for _, i := range named[p.ID] {
			kinds = append(kinds, rep.namedKinds(p, i)...)
			in = append(in, i)
		}
		if !p.ForkSeen && !p.registered() && !rep.predates(p) {
			at := rep.gapsHolding(events, p.Start, p.Start+lineage.TickDuration)
			if !placed || len(at) > 0 {
				kinds, in = append(kinds, record.KindFork), append(in, at...)
			}
		}
		if !p.Ended && p.Outcome != lineage.Kept && p.Outcome != lineage.Leaked {
			at := rep.gapsHolding(events, p.lastSeen, math.MaxInt64)
			if !placed || len(at) > 0 {
				kinds, in = append(kinds, record.KindExit), append(in, at...)
			}
		}
		if len(kinds) == 0 {
			return true
		}
		p.Missing = sortedKinds(kinds)
		if !p.Ended && slices.Contains(p.Missing, record.KindExit) {
			// It lived at least until the record last heard of it, not
			// until the record's end.
			p.End = max(p.lastSeen, p.Start)
		}
		slices.Sort(in)
		in = slices.Compact(in)
		for _, i := range in {
			rep.Gaps[i].Touched++
		}
		rep.Missing = append(rep.Missing, Missing{Process: p.ID, Command: CommandLine(p), Events: p.Missing, Gaps: in})
		return true
	})
	rep.Summary.Missing = len(rep.Missing)
}

// namedKinds are the events of p that gap i said it lost, or, when it said
// none, those p lacks.
func (rep *Report) namedKinds(p *Process, i int) []record.Kind {
	for _, m := range rep.Gaps[i].members {
		if m.Process != p.ID {
			continue
		}
		if len(m.Kinds) > 0 {
			return m.Kinds
		}
		var kinds []record.Kind
		if !p.ForkSeen {
			kinds = append(kinds, record.KindFork)
		}
		if !p.Ended {
			kinds = append(kinds, record.KindExit)
		}
		if len(kinds) == 0 {
			kinds = append(kinds, record.KindExec)
		}
		return kinds
	}
	return nil
}

// gapsHolding returns the placed gaps among events that overlap [from,
// to).
func (rep *Report) gapsHolding(events []int, from, to time.Duration) []int {
	var at []int
	for _, i := range events {
		if g := rep.Gaps[i]; g.Placed && g.From < to && g.To >= from {
			at = append(at, i)
		}
	}
	return at
}

// predates reports whether p began before the record did, so that its
// fork could not be in it.
func (rep *Report) predates(p *Process) bool {
	return rep.HasHeader && rep.Header.Boot > 0 && p.Start+lineage.TickDuration <= rep.Header.Boot
}

// registered reports whether p is a root that the record shows without its
// fork: registered while it ran, as the sidecar's roots are.
func (p *Process) registered() bool { return !p.ForkSeen && p.ID == p.Root }

// kindOrder is the order in which a process's events happen.
var kindOrder = map[record.Kind]int{record.KindFork: 0, record.KindExec: 1, record.KindExit: 2}

// sortedKinds returns kinds without repeats, in the order events happen.
func sortedKinds(kinds []record.Kind) []record.Kind {
	out := slices.Clone(kinds)
	slices.SortFunc(out, func(a, b record.Kind) int {
		oa, aok := kindOrder[a]
		ob, bok := kindOrder[b]
		if !aok || !bok {
			return strings.Compare(string(a), string(b))
		}
		return oa - ob
	})
	return slices.Compact(out)
}

// notRecorded says which of p's events the record lost, in words
// ("fork not recorded, exit not recorded"); "" when none.
func notRecorded(p *Process) string { return eventsNotRecorded(p.Missing) }

func eventsNotRecorded(kinds []record.Kind) string {
	parts := make([]string, len(kinds))
	for i, k := range kinds {
		parts[i] = lineage.Printable(string(k)) + " not recorded"
	}
	return strings.Join(parts, ", ")
}
