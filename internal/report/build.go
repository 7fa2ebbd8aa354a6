package report

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/lineage-dev/lineage/internal/record"
	"github.com/lineage-dev/lineage/lineage"
)

// Report is a record reconstructed: its processes as a forest by lineage
// parent, a summary, and what the record could not tell.
type Report struct {
	Header    record.Header `json:"header"`
	HasHeader bool          `json:"has_header"`
	Summary   Summary       `json:"summary"`
	// Problems are the record's bad lines and other limits; Dropped counts
	// problems beyond record.MaxProblems. The report's lists are [] when
	// empty, never absent: a reader reads every one the same way.
	Problems []record.Problem `json:"problems"`
	Dropped  int              `json:"problems_dropped,omitempty"`
	// First and Last are the earliest and latest times the record shows.
	First time.Duration `json:"first_ns"`
	Last  time.Duration `json:"last_ns"`
	// Unknowns say what the record could not tell, in words.
	Unknowns []string `json:"unknowns"`
	// Highlights are what the report leads with.
	Highlights Highlights `json:"highlights"`
	// Gaps are the record's losses, in the record's order; Missing the
	// processes whose events fell in them, in tree order.
	Gaps    []Gap     `json:"gaps"`
	Missing []Missing `json:"missing_events"`

	// tops are the processes whose lineage parent is not in the record, in
	// start order; each process's children are in start order too.
	tops  []*Process
	count int
}

// Summary counts what the report shows.
type Summary struct {
	Events    int `json:"events"`
	Processes int `json:"processes"`
	Roots     int `json:"roots"`
	Leaks     int `json:"leaks"`
	Reaped    int `json:"reaped"`
	// Killed counts the reaped processes that were killed (the rest were
	// terminated).
	Killed int `json:"killed"`
	Kept   int `json:"kept"`
	// OutlivedRoot counts the processes alive when their root's exit was
	// recorded.
	OutlivedRoot int `json:"outlived_root"`
	// Unended counts processes whose end the record doesn't show.
	Unended int `json:"unended"`
	// Lost is how many events the kernel could not deliver, in Losses
	// loss events; Missing counts the processes marked for them.
	Lost     uint64 `json:"lost"`
	Losses   int    `json:"losses"`
	Missing  int    `json:"missing_events"`
	BadLines int    `json:"bad_lines"`
}

// Build reads the whole record from r and reconstructs it. It fails only
// when r can't be read at all or holds nothing readable (errors then wrap
// lineage.ErrInvalid); damage is reported in Problems.
func Build(r *record.Reader) (*Report, error) {
	rep := &Report{Header: r.Header(), HasHeader: r.HasHeader()}
	procs := make(map[lineage.Identity]*Process)
	for {
		ev, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		rep.add(procs, ev)
	}
	rep.Problems, rep.Dropped = r.Problems(), r.Dropped()
	rep.Summary.Events = r.Events()
	rep.Summary.BadLines = rep.Dropped
	for _, p := range rep.Problems {
		if p.Line > 0 && !p.Header {
			rep.Summary.BadLines++
		}
	}
	if !rep.HasHeader && rep.Summary.Events == 0 {
		return nil, fmt.Errorf("%w record: nothing readable: %s", lineage.ErrInvalid, firstProblem(rep.Problems))
	}
	rep.nameMembers(procs)
	rep.link(procs)
	rep.markMissing()
	rep.highlight(procs)
	rep.explain()
	rep.Problems, rep.Unknowns = listed(rep.Problems), listed(rep.Unknowns)
	rep.Gaps, rep.Missing = listed(rep.Gaps), listed(rep.Missing)
	h := &rep.Highlights
	h.Leaks, h.Kept, h.Reaped = listed(h.Leaks), listed(h.Kept), listed(h.Reaped)
	return rep, nil
}

// listed is s, or an empty list for nil: [] in JSON, not null.
func listed[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// firstProblem says why nothing could be read: the first line that could
// not be, rather than the header it lacked.
func firstProblem(ps []record.Problem) string {
	for _, p := range ps {
		if !p.Header {
			return p.String()
		}
	}
	if len(ps) == 0 {
		return "no events"
	}
	return ps[0].String()
}

// add folds one event into the process it names.
func (rep *Report) add(procs map[lineage.Identity]*Process, ev record.Event) {
	if ev.Boot > 0 && (rep.First == 0 || ev.Boot < rep.First) {
		rep.First = ev.Boot
	}
	rep.Last = max(rep.Last, ev.Boot)
	switch ev.Kind {
	case record.KindLoss:
		g := gapOf(ev)
		if !g.Escapes { // a count of processes, not of events
			rep.Summary.Lost += ev.Count
		}
		rep.Summary.Losses++
		if g.Placed {
			if rep.First == 0 || g.From < rep.First {
				rep.First = g.From
			}
			rep.Last = max(rep.Last, g.To)
		}
		rep.Gaps = append(rep.Gaps, g)
		return
	case record.KindEnd:
		return // a stream's end names no process
	}
	p, ok := procs[ev.Process]
	if !ok {
		rep.count++
		p = &Process{ID: ev.Process, Track: rep.count, Start: lineage.TicksToDuration(ev.Process.StartTicks)}
		procs[ev.Process] = p
	}
	p.apply(ev)
}

// link settles every process and builds the forest.
func (rep *Report) link(procs map[lineage.Identity]*Process) {
	s := &rep.Summary
	for _, p := range procs {
		if p.Start > 0 && p.Start < rep.First {
			rep.First = p.Start
		}
		if !p.Ended {
			p.End = max(rep.Last, p.Start)
			s.Unended++
		}
		p.settle()
		parent, ok := procs[p.Parent]
		if root, known := procs[p.Root]; (!ok || parent == p) && !p.IsRoot && known && root != p {
			// A member whose parent the record lacks is still its
			// root's: drawn under it, not as a root of its own.
			parent, ok, p.UnderRoot = root, true, true
		}
		if ok && parent != p {
			p.up = parent
			parent.children = append(parent.children, p)
		} else {
			rep.tops = append(rep.tops, p)
		}
		s.Processes++
		s.Roots += b2i(p.IsRoot)
		s.Leaks += b2i(p.Leaked)
		s.Reaped += b2i(p.Outcome == lineage.Killed || p.Outcome == lineage.Terminated)
		s.Kept += b2i(p.Outcome == lineage.Kept)
	}
	byStart := func(a, b *Process) int {
		return cmp.Or(cmp.Compare(a.Start, b.Start), lineage.Compare(a.ID, b.ID))
	}
	slices.SortFunc(rep.tops, byStart)
	for _, p := range procs {
		slices.SortFunc(p.children, byStart)
	}
	rep.cutCycles(procs)
}

// cutCycles makes the forest a forest even when a damaged record makes a
// process its own ancestor: each cycle is cut at its earliest process, which
// becomes a top.
func (rep *Report) cutCycles(procs map[lineage.Identity]*Process) {
	seen := make(map[*Process]bool, len(procs))
	rep.Walk(func(p *Process) bool { seen[p] = true; return true })
	if len(seen) == len(procs) {
		return
	}
	var lost []*Process
	for _, p := range procs {
		if !seen[p] {
			lost = append(lost, p)
		}
	}
	slices.SortFunc(lost, func(a, b *Process) int { return lineage.Compare(a.ID, b.ID) })
	for _, p := range lost {
		if seen[p] {
			continue
		}
		parent := p.up
		parent.children = slices.DeleteFunc(parent.children, func(c *Process) bool { return c == p })
		p.up = nil
		sub := &Report{tops: []*Process{p}}
		sub.Walk(func(q *Process) bool { seen[q] = true; return true })
		rep.tops = append(rep.tops, p)
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Walk calls fn for every process in tree order (depth first, children in
// start order), with Depth set, until fn returns false. A process that is
// its own ancestor (a damaged record) is visited once.
func (rep *Report) Walk(fn func(*Process) bool) {
	type frame struct {
		p     *Process
		depth int
	}
	stack := make([]frame, 0, len(rep.tops))
	for i := len(rep.tops) - 1; i >= 0; i-- {
		stack = append(stack, frame{rep.tops[i], 0})
	}
	for len(stack) > 0 {
		f := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		f.p.Depth = f.depth
		if !fn(f.p) {
			return
		}
		for i := len(f.p.children) - 1; i >= 0; i-- {
			stack = append(stack, frame{f.p.children[i], f.depth + 1})
		}
	}
}

// Children returns p's children in start order.
func (p *Process) Children() []*Process { return p.children }

// explain fills Unknowns.
func (rep *Report) explain() {
	s := rep.Summary
	add := func(format string, args ...any) { rep.Unknowns = append(rep.Unknowns, fmt.Sprintf(format, args...)) }
	for _, limit := range rep.Header.Limits {
		add("%s", lineage.Printable(limit))
	}
	if s.Lost > 0 {
		add("events the kernel could not deliver: %d (in %d %s, %s): %s", s.Lost, s.Losses, lineage.Plural(s.Losses, "loss", "losses"), rep.placement(), rep.lossImpact())
	}
	if s.BadLines > 0 {
		add("lines that could not be read: %d: the events on them are missing", s.BadLines)
	}
	noFork := 0
	rep.Walk(func(p *Process) bool { noFork += b2i(!p.ForkSeen); return true })
	if noFork > 0 {
		add("processes seen without their fork: %d: their start is known to the clock tick (10 ms)", noFork)
	}
	if s.Unended > 0 {
		add("processes without a recorded end: %d: alive when the record stopped, or their exit was lost", s.Unended)
	}
}

// placement says whether the record places its losses in time.
func (rep *Report) placement() string {
	placed := 0
	for _, g := range rep.Gaps {
		placed += b2i(g.Placed)
	}
	switch placed {
	case 0:
		return "not placed in time"
	case len(rep.Gaps):
		return "each placed in time"
	}
	return fmt.Sprintf("%d placed in time", placed)
}

// lossImpact says what the losses cost the report.
func (rep *Report) lossImpact() string {
	if rep.Summary.Missing == 0 {
		return "no process lacks its fork or exit for them; an exec lost shows only as the previous program's argv"
	}
	n := map[record.Kind]int{}
	for _, m := range rep.Missing {
		for _, k := range m.Events {
			n[k]++
		}
	}
	return fmt.Sprintf("%d %s marked (fork not recorded %d, exec not recorded %d, exit not recorded %d); an exec lost from any other shows only as the previous program's argv",
		rep.Summary.Missing, lineage.Plural(rep.Summary.Missing, "process", "processes"), n[record.KindFork], n[record.KindExec], n[record.KindExit])
}
