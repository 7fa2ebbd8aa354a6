package bpf

import (
	"fmt"
	"sync"
	"time"

	"github.com/lineage-dev/lineage/internal/loader"
	"github.com/lineage-dev/lineage/internal/proc"
	"github.com/lineage-dev/lineage/lineage"
)

// lostLog is LINEAGE_LOST_LOG: how many of its latest drops each CPU logs.
const lostLog = len(lineageDropLog{}.Log)

// What the tracker holds of its lost events: at most maxGaps gaps (older
// ones are forgotten, and count as lost events it can't place), and at
// most maxLostHeld named events in them (older gaps keep their counts and
// bounds, not their names). It looks at the kernel's drop log at most
// every gapLookEvery while it reads events, and at every Gaps; looks that
// found drops less than gapJoin apart are one gap.
const (
	maxGaps      = 1024
	maxLostHeld  = 1 << 16
	gapLookEvery = 10 * time.Millisecond
	gapJoin      = 100 * time.Millisecond
)

// gapLog is what the tracker learnt of the events the kernel dropped,
// gap by gap. A gap is the drops of successive looks that each found new
// ones, less than gapJoin apart; a look that finds none ends it.
type gapLog struct {
	mu sync.Mutex
	// seen is, per CPU, how many drops the kernel had counted at the
	// last look; looked is the boot time just before it, lastLook its
	// monotonic time.
	seen     []uint64
	looked   time.Duration
	lastLook time.Time
	// total is the events lost since the tracker opened: the mark after
	// the last one. forgot is the mark below which gaps are not held.
	total, forgot uint64
	gaps          []heldGap
	growing       bool          // the last look found drops: the last gap grows
	found         time.Duration // the boot time of that look
	held          int           // named events in gaps
}

type heldGap struct {
	begin    uint64 // the mark of its first event
	count    uint64
	from, to time.Duration
	lost     []heldLost
}

type heldLost struct {
	mark uint64
	ev   loader.LostEvent
}

var _ loader.GapLog = (*Tracker)(nil)

// startGaps takes the kernel's drop counts as they are now: what a
// pinned set dropped before this tracker opened is not its to place.
func (b *Tracker) startGaps() error {
	var logs []lineageDropLog
	if err := b.objs.Drops.Lookup(uint32(0), &logs); err != nil {
		return fmt.Errorf("read drop log: %w", err)
	}
	g := &b.gaps
	g.mu.Lock()
	defer g.mu.Unlock()
	g.seen = make([]uint64, len(logs))
	for cpu, d := range logs {
		g.seen[cpu] = d.Count
	}
	g.looked, g.lastLook = proc.BootTime(), time.Now()
	return nil
}

// Gaps implements loader.GapLog: it looks at the kernel's drop log first.
func (b *Tracker) Gaps(mark loader.GapMark) ([]loader.Gap, loader.GapMark, error) {
	if b.objs.Drops == nil {
		return nil, mark, nil // a handoff reads no events
	}
	err := b.lookForGaps(true)
	gaps, next := b.gaps.since(mark)
	return gaps, next, err
}

// since returns the gaps after mark, and the mark that ends them.
func (g *gapLog) since(mark loader.GapMark) ([]loader.Gap, loader.GapMark) {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []loader.Gap
	m := uint64(mark)
	if m < g.forgot {
		out = append(out, loader.Gap{Count: g.forgot - m})
		m = g.forgot
	}
	for _, h := range g.gaps {
		end := h.begin + h.count
		if end <= m {
			continue
		}
		gap := loader.Gap{From: h.from, To: h.to, Count: end - max(h.begin, m)}
		for _, l := range h.lost {
			if l.mark >= m {
				gap.Lost = append(gap.Lost, l.ev)
			}
		}
		out = append(out, gap)
	}
	return out, loader.GapMark(g.total)
}

// GapMark implements loader.GapLog.
func (b *Tracker) GapMark() (loader.GapMark, error) {
	if b.objs.Drops == nil {
		return 0, nil
	}
	err := b.lookForGaps(true)
	b.gaps.mu.Lock()
	defer b.gaps.mu.Unlock()
	return loader.GapMark(b.gaps.total), err
}

// lookForGaps reads what the kernel dropped since the last look into the
// gaps, unless (when not forced) it looked less than gapLookEvery ago. It
// reads the drop counter first, and the drop log only when the counter
// shows drops it has not seen.
func (b *Tracker) lookForGaps(force bool) error {
	g := &b.gaps
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.seen == nil || (!force && time.Since(g.lastLook) < gapLookEvery) {
		return nil
	}
	g.lastLook = time.Now()
	before := proc.BootTime()
	var counted []uint64
	if err := b.objs.Stats.Lookup(lineageStatSTAT_EVENTS_LOST, &counted); err != nil {
		return fmt.Errorf("read stats: %w", err)
	}
	var sum, seen uint64
	for _, n := range counted {
		sum += n
	}
	for _, n := range g.seen {
		seen += n
	}
	if sum <= seen {
		// The counter is bumped before the log: nothing new either.
		g.growing, g.looked = false, before
		return nil
	}
	var logs []lineageDropLog
	if err := b.objs.Drops.Lookup(uint32(0), &logs); err != nil {
		return fmt.Errorf("read drop log: %w", err)
	}
	after := proc.BootTime()
	g.add(logs, before, after)
	return nil
}

// add takes the drops the logs show beyond what was seen, read between
// the boot times before and after.
func (g *gapLog) add(logs []lineageDropLog, before, after time.Duration) {
	var fresh, unnamed uint64
	var named []heldLost
	for cpu, d := range logs {
		if cpu >= len(g.seen) || d.Count <= g.seen[cpu] {
			continue
		}
		prev := g.seen[cpu]
		first := prev
		if d.Count-prev > uint64(lostLog) {
			first = d.Count - uint64(lostLog)
		}
		n0 := len(named)
		for n := first; n < d.Count; n++ {
			l := d.Log[n%uint64(lostLog)]
			if l.Seq != uint32(n+1) {
				continue // overwritten, or being written: counted, not named
			}
			named = append(named, heldLost{mark: g.total + fresh + (n - prev), ev: lostEventOf(l)})
		}
		unnamed += d.Count - prev - uint64(len(named)-n0)
		fresh += d.Count - prev
		g.seen[cpu] = d.Count
	}
	if fresh == 0 {
		g.growing, g.looked = false, before
		return
	}
	var from, to time.Duration
	for _, l := range named {
		if from == 0 || l.ev.Time < from {
			from = l.ev.Time
		}
		to = max(to, l.ev.Time)
	}
	if unnamed > 0 {
		// Counted after the last look read the counts, and before this
		// one did.
		if from == 0 || g.looked < from {
			from = g.looked
		}
		to = max(to, after)
	}
	if !g.growing || len(g.gaps) == 0 || before-g.found >= gapJoin {
		g.gaps = append(g.gaps, heldGap{begin: g.total, from: from, to: to})
	}
	h := &g.gaps[len(g.gaps)-1]
	h.count += fresh
	h.from, h.to = min(h.from, from), max(h.to, to)
	h.lost = append(h.lost, named...)
	g.held += len(named)
	g.total += fresh
	g.growing, g.looked, g.found = true, before, before
	g.trim()
}

// trim forgets the names in the oldest gaps past maxLostHeld, and the
// oldest gaps past maxGaps; the latest gap is kept whole.
func (g *gapLog) trim() {
	for i := 0; g.held > maxLostHeld && i < len(g.gaps)-1; i++ {
		g.held -= len(g.gaps[i].lost)
		g.gaps[i].lost = nil
	}
	for len(g.gaps) > maxGaps {
		g.held -= len(g.gaps[0].lost)
		g.forgot = g.gaps[0].begin + g.gaps[0].count
		g.gaps = g.gaps[1:]
	}
}

func lostEventOf(l lineageLost) loader.LostEvent {
	ev := loader.LostEvent{
		Time:    time.Duration(l.TimeNs),
		Process: lineage.Identity{PID: l.Pid, StartTicks: l.Start},
		Root:    lineage.Identity{PID: l.RootPid, StartTicks: l.RootStart},
	}
	switch l.Kind {
	case lineageEventKindEVENT_FORK:
		ev.Kind = lineage.EventFork
	case lineageEventKindEVENT_EXEC:
		ev.Kind = lineage.EventExec
	case lineageEventKindEVENT_EXIT:
		ev.Kind = lineage.EventExit
	}
	return ev
}
