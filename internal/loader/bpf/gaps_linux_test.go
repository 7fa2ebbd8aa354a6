package bpf

import (
	"os"
	"slices"
	"testing"
	"time"

	"github.com/lineage-dev/lineage/internal/loader"
	"github.com/lineage-dev/lineage/internal/proc"
	"github.com/lineage-dev/lineage/lineage"
)

// TestLostEventsArePlacedAndNamed fills a one-page ring buffer with no
// reader running: the kernel drops most of a job's events, and the gaps
// say when they were and whose, each lost event named (the job loses
// fewer than the drop log holds), so that what was delivered and what
// was lost make up every process's fork, exec and exit exactly. A later
// job's drops are a gap of their own, after the mark the first left.
func TestLostEventsArePlacedAndNamed(t *testing.T) {
	eachVariant(t, testLostEventsArePlacedAndNamed)
}

func testLostEventsArePlacedAndNamed(t *testing.T, v loader.Variant) {
	b := openBPF(t, &Options{RingBytes: uint32(os.Getpagesize()), Variant: v})
	const children = 40
	script := "i=0; while [ $i -lt 40 ]; do /bin/true lost-events-test; i=$((i + 1)); done"
	before := proc.BootTime()
	id, j := spawn(t, b, script, loader.RootOptions{})
	if err := j.wait(); err != nil {
		t.Fatal(err)
	}
	// The root's exit comes after Wait returns: wait for the kernel's count.
	waitFor(t, "the root's exit", 5*time.Second, func() bool {
		st, err := b.Stats()
		return err == nil && st.Exits >= children+1
	})
	after := proc.BootTime()
	gaps, mark, err := b.Gaps(0)
	if err != nil {
		t.Fatal(err)
	}
	st, err := b.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if st.EventsLost == 0 || uint64(mark) != st.EventsLost {
		t.Fatalf("mark %d, stats %+v: the gaps must count every lost event", mark, st)
	}
	lost := map[lineage.Identity][]lineage.EventKind{}
	var counted uint64
	for _, g := range gaps {
		counted += g.Count
		if !g.Placed() || g.From < before || g.To > after {
			t.Errorf("gap %v–%v of %d: not placed within the job's run, %v–%v", g.From, g.To, g.Count, before, after)
		}
		for _, ev := range g.Lost {
			if ev.Time < g.From || ev.Time > g.To {
				t.Errorf("lost %v at %v: outside its gap %v–%v", ev.Kind, ev.Time, g.From, g.To)
			}
			if ev.Root == id {
				lost[ev.Process] = append(lost[ev.Process], ev.Kind)
			}
		}
	}
	if counted != st.EventsLost {
		t.Errorf("gaps count %d lost events, the kernel %d", counted, st.EventsLost)
	}

	rec := record(t, b)
	if err := b.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	rec.stop()
	got := map[lineage.Identity][]lineage.EventKind{}
	for _, ev := range rec.snapshot() {
		if ev.Root == id {
			got[ev.Process] = append(got[ev.Process], ev.Kind)
		}
	}
	// Every process of the job: its three events, each either delivered
	// or named lost, never both.
	all := map[lineage.Identity]bool{}
	for p := range got {
		all[p] = true
	}
	for p := range lost {
		all[p] = true
	}
	if len(all) != children+1 {
		t.Errorf("%d processes delivered or named lost, want %d", len(all), children+1)
	}
	want := []lineage.EventKind{lineage.EventFork, lineage.EventExec, lineage.EventExit}
	for p := range all {
		kinds := append(slices.Clone(got[p]), lost[p]...)
		slices.Sort(kinds)
		if !slices.Equal(kinds, want) {
			t.Errorf("%v: delivered %v, lost %v; want fork, exec and exit once each", p, got[p], lost[p])
		}
	}

	// The reader has stopped: what a second job's events overflow is a
	// gap after mark.
	before = proc.BootTime()
	_, j = spawn(t, b, script, loader.RootOptions{})
	if err := j.wait(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the second job's exit", 5*time.Second, func() bool {
		st, err := b.Stats()
		return err == nil && st.Exits >= 2*(children+1)
	})
	gaps, next, err := b.Gaps(mark)
	if err != nil {
		t.Fatal(err)
	}
	if len(gaps) != 1 || gaps[0].Count != uint64(next-mark) || gaps[0].From < before || len(gaps[0].Lost) == 0 {
		t.Errorf("the second job's gaps after mark %d: %+v (next mark %d), want one from %v on", mark, gaps, next, before)
	}
}
