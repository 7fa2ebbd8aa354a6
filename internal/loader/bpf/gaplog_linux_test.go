package bpf

import (
	"testing"
	"time"

	"github.com/lineage-dev/lineage/internal/loader"
	"github.com/lineage-dev/lineage/lineage"
)

// dropLogs builds the per-CPU drop logs the kernel would hold after the
// drops given, per CPU, as the boot times they happened at; a drop of
// time 0 is one whose entry is being written (its seq not set yet).
func dropLogs(perCPU ...[]time.Duration) []lineageDropLog {
	logs := make([]lineageDropLog, len(perCPU))
	for cpu, times := range perCPU {
		for n, at := range times {
			l := &logs[cpu].Log[n%lostLog]
			*l = lineageLost{TimeNs: uint64(at), Pid: uint32(1000*cpu + n), Start: 7, RootPid: 1, RootStart: 1, Kind: lineageEventKindEVENT_EXEC}
			if at != 0 {
				l.Seq = uint32(n + 1)
			}
			logs[cpu].Count = uint64(n + 1)
			logs[cpu].LastNs = max(logs[cpu].LastNs, uint64(at))
		}
	}
	return logs
}

func times(from time.Duration, n int) []time.Duration {
	out := make([]time.Duration, n)
	for i := range out {
		out[i] = from + time.Duration(i)*time.Millisecond
	}
	return out
}

// The drop log's entries become named lost events in one gap per run of
// looks that each found drops, bounded by their times; entries overwritten
// or still being written are counted, bounded by the looks' times.
func TestGapLogPlacesAndNames(t *testing.T) {
	g := &gapLog{seen: make([]uint64, 2), looked: 100 * time.Second}
	// CPU 0 dropped 3, CPU 1 one whose entry is being written.
	g.add(dropLogs(times(101*time.Second, 3), []time.Duration{0}), 100*time.Second, 102*time.Second)
	gaps, mark := gapsOf(t, g, 0)
	if mark != 4 || len(gaps) != 1 {
		t.Fatalf("gaps %+v, mark %d; want one gap of 4", gaps, mark)
	}
	if g0 := gaps[0]; g0.Count != 4 || len(g0.Lost) != 3 || g0.From != 100*time.Second || g0.To != 102*time.Second {
		t.Errorf("gap %+v: want 4 lost, 3 named, placed from the last look to this one", g0)
	}
	if ev := gaps[0].Lost[0]; ev.Kind != lineage.EventExec || ev.Process != (lineage.Identity{PID: 0, StartTicks: 7}) || ev.Root != (lineage.Identity{PID: 1, StartTicks: 1}) || ev.Time != 101*time.Second {
		t.Errorf("lost event %+v", ev)
	}

	// The next look, soon after, finds more on CPU 0 (the log wrapped:
	// the oldest overwritten): the same gap grows.
	more := times(101*time.Second, 3+lostLog+10)
	g.add(dropLogs(more, []time.Duration{0}), 100*time.Second+gapJoin/2, 104*time.Second)
	gaps, mark = gapsOf(t, g, 0)
	if len(gaps) != 1 || gaps[0].Count != uint64(4+lostLog+10) || mark != loader.GapMark(4+lostLog+10) {
		t.Fatalf("after a second look: %+v, mark %d", gaps, mark)
	}
	if named := len(gaps[0].Lost); named != 3+lostLog {
		t.Errorf("%d named, want the first look's 3 and the log's %d", named, lostLog)
	}
	// Drops found by a look long after the last that found some are a
	// gap of their own, even with no look between that found none.
	late := append(more, 110*time.Second)
	g.add(dropLogs(late, []time.Duration{0}), 110*time.Second, 110*time.Second)
	if gaps, _ = gapsOf(t, g, mark); len(gaps) != 1 || gaps[0].From != 110*time.Second {
		t.Errorf("a late look's drops: %+v, want a gap of their own from 110s", gaps)
	}
	mark++
	more = late
	// A look that finds nothing ends the gap; the next drops are another.
	g.add(dropLogs(more, []time.Duration{0}), 111*time.Second, 111*time.Second)
	g.add(dropLogs(append(more, 111*time.Second+gapJoin/4), []time.Duration{0}), 111*time.Second+gapJoin/4, 112*time.Second)
	gaps, next := gapsOf(t, g, mark)
	if at := 111*time.Second + gapJoin/4; len(gaps) != 1 || gaps[0].Count != 1 || gaps[0].From != at || gaps[0].To != at || next != mark+1 {
		t.Errorf("gaps after mark %d: %+v, next %d; want the one new drop, placed by its own time", mark, gaps, next)
	}
	// A mark inside a gap counts and names only what came after it.
	gaps, _ = gapsOf(t, g, 2)
	gaps = gaps[:1]
	if gaps[0].Count != uint64(4+lostLog+10-2) || len(gaps[0].Lost) != 1+lostLog {
		t.Errorf("from mark 2: %d lost, %d named", gaps[0].Count, len(gaps[0].Lost))
	}
}

// Past maxLostHeld named events the oldest gaps lose their names; past
// maxGaps the oldest gaps are forgotten, and come back as one unplaced gap
// of their count.
func TestGapLogForgetsTheOldest(t *testing.T) {
	g := &gapLog{seen: make([]uint64, 1), looked: time.Second}
	var drops []time.Duration
	at := 2 * time.Second
	for i := 0; i < maxGaps+5; i++ {
		drops = append(drops, at)
		g.add(dropLogs(drops), at, at) // one new drop
		g.add(dropLogs(drops), at, at) // none: the gap ends
		at += time.Second
	}
	gaps, mark := gapsOf(t, g, 0)
	if mark != loader.GapMark(maxGaps+5) || len(gaps) != maxGaps+1 || gaps[0].Placed() || gaps[0].Count != 5 {
		t.Errorf("mark %d, %d gaps, the first %+v; want 5 forgotten, unplaced, then %d", mark, len(gaps), gaps[0], maxGaps)
	}
	var total uint64
	for _, gp := range gaps {
		total += gp.Count
	}
	if total != uint64(mark) {
		t.Errorf("the gaps count %d, the mark says %d", total, mark)
	}

	h := &gapLog{seen: make([]uint64, 1), looked: time.Second}
	var n int
	for range 2 * maxLostHeld / lostLog {
		n += lostLog
		logs := dropLogs(times(2*time.Second, n))
		h.add(logs, time.Second, 3*time.Second)
		h.add(logs, time.Second, 3*time.Second)
	}
	if h.held > maxLostHeld || h.gaps[0].lost != nil || h.gaps[len(h.gaps)-1].lost == nil {
		t.Errorf("%d names held; the oldest gap's %d, the latest's %d", h.held, len(h.gaps[0].lost), len(h.gaps[len(h.gaps)-1].lost))
	}
}

func gapsOf(t *testing.T, g *gapLog, mark loader.GapMark) ([]loader.Gap, loader.GapMark) {
	t.Helper()
	return g.since(mark)
}
