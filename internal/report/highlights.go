package report

import (
	"slices"
	"time"

	"github.com/lineage-dev/lineage/lineage"
)

// HighlightLimit is how many processes each list of a report's
// [Highlights] holds at most.
const HighlightLimit = 10

// CPUNotRecorded is what the highlights say of CPU time: a record carries
// none, so there is no ranking by it.
const CPUNotRecorded = "not recorded: the record carries no CPU time"

// Highlights are what a report leads with: the processes a reader of a
// record of thousands looks for first. Each list holds at most
// HighlightLimit processes; the summary counts them all.
type Highlights struct {
	// Leaks, Kept and Reaped (killed or terminated by the reaper) are in
	// tree order.
	Leaks  []Entry `json:"leaks"`
	Kept   []Entry `json:"kept"`
	Reaped []Entry `json:"reaped"`
	// LongestLived are the processes that lived longest, as far as the
	// record knows (a process whose end it lacks lived at least until the
	// record's last moment), longest first.
	LongestLived []Entry `json:"longest_lived"`
	// OutlivedRoot are the processes that were still alive when their
	// root's exit was recorded (those whose end the record lacks too),
	// longest after the root first.
	OutlivedRoot []Entry `json:"outlived_root"`
	// TopByChildren are the processes that forked the most children;
	// TopBySubtree those with the most descendants. Most first, only
	// processes with at least one child.
	TopByChildren []Entry `json:"top_by_children"`
	TopBySubtree  []Entry `json:"top_by_subtree"`
	// CPUTime says why there is no ranking by CPU time.
	CPUTime string `json:"cpu_time"`
}

// Entry is one process in a list of the highlights.
type Entry struct {
	Process  lineage.Identity `json:"process"`
	Command  string           `json:"command"`
	Outcome  lineage.Result   `json:"outcome"`
	Leaked   bool             `json:"leaked,omitempty"`
	Lifetime time.Duration    `json:"lifetime_ns"`
	Ended    bool             `json:"ended"`
	// Count is the list's measure: children or descendants for the
	// spawners, how long after its root's exit for OutlivedRoot (ns).
	Count int64 `json:"count,omitempty"`

	p *Process
}

func entryOf(p *Process, count int64) Entry {
	return Entry{Process: p.ID, Command: CommandLine(p), Outcome: p.Outcome, Leaked: p.Leaked,
		Lifetime: p.Lifetime(), Ended: p.Ended, Count: count, p: p}
}

// highlight fills the highlights and the counts they need, once the forest
// is built: every process's descendants and the leaks below it, and the
// summary's Killed and OutlivedRoot.
func (rep *Report) highlight(procs map[lineage.Identity]*Process) {
	order := make([]*Process, 0, len(procs))
	rep.Walk(func(p *Process) bool { order = append(order, p); return true })
	for i := len(order) - 1; i >= 0; i-- {
		p := order[i]
		p.descendants, p.leaksBelow = 0, b2i(p.Leaked)
		for _, c := range p.children {
			p.descendants += 1 + c.descendants
			p.leaksBelow += c.leaksBelow
		}
	}
	h := &rep.Highlights
	h.CPUTime = CPUNotRecorded
	var lived, outlived, byChildren, bySubtree ranking
	for _, p := range order {
		if p.Leaked {
			h.Leaks = appendUpTo(h.Leaks, p)
		}
		switch p.Outcome {
		case lineage.Kept:
			h.Kept = appendUpTo(h.Kept, p)
		case lineage.Killed, lineage.Terminated:
			h.Reaped = appendUpTo(h.Reaped, p)
		}
		rep.Summary.Killed += b2i(p.Outcome == lineage.Killed)
		lived.offer(p, int64(p.Lifetime()))
		if after, ok := outlivedRoot(p, procs); ok {
			p.outlived = true
			rep.Summary.OutlivedRoot++
			outlived.offer(p, int64(after))
		}
		if n := len(p.children); n > 0 {
			byChildren.offer(p, int64(n))
			bySubtree.offer(p, int64(p.descendants))
		}
	}
	h.LongestLived = lived.entries(false)
	h.OutlivedRoot = outlived.entries(true)
	h.TopByChildren = byChildren.entries(true)
	h.TopBySubtree = bySubtree.entries(true)
}

// outlivedRoot reports whether p was alive when its root's exit was
// recorded, and for how long after it (up to the record's end, when p's
// own end is missing).
func outlivedRoot(p *Process, procs map[lineage.Identity]*Process) (time.Duration, bool) {
	root, ok := procs[p.Root]
	if !ok || root == p || !root.Ended || p.End <= root.End {
		return 0, false
	}
	return p.End - root.End, true
}

func appendUpTo(list []Entry, p *Process) []Entry {
	if len(list) >= HighlightLimit {
		return list
	}
	return append(list, entryOf(p, 0))
}

// ranking keeps the HighlightLimit processes with the largest measure,
// largest first; of equal ones, the first offered (tree order).
type ranking []ranked

type ranked struct {
	p       *Process
	measure int64
}

func (r *ranking) offer(p *Process, measure int64) {
	if len(*r) == HighlightLimit && (*r)[HighlightLimit-1].measure >= measure {
		return
	}
	i, _ := slices.BinarySearchFunc(*r, measure, func(e ranked, m int64) int {
		if e.measure >= m {
			return -1
		}
		return 1
	})
	*r = slices.Insert(*r, i, ranked{p, measure})
	if len(*r) > HighlightLimit {
		*r = (*r)[:HighlightLimit]
	}
}

// entries are the ranked processes as entries; with count, each carries
// its measure.
func (r ranking) entries(count bool) []Entry {
	out := make([]Entry, 0, len(r))
	for _, e := range r {
		c := int64(0)
		if count {
			c = e.measure
		}
		out = append(out, entryOf(e.p, c))
	}
	return out
}
