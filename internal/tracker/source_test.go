package tracker

import (
	"slices"
	"testing"

	"github.com/lineage-dev/lineage/internal/loader"
	"github.com/lineage-dev/lineage/internal/reap"
	"github.com/lineage-dev/lineage/lineage"
)

// countingMembers is a backend whose Members lists a fixed lineage and
// counts its passes; the reaper's source uses nothing else of it.
type countingMembers struct {
	loader.Backend
	ms     []lineage.Member
	passes int
}

func (c *countingMembers) Members(lineage.Identity) ([]lineage.Member, error) {
	c.passes++
	return slices.Clone(c.ms), nil
}

// lookOnce has src list once, and fails t unless it lists want and b has
// made passes passes in all.
func lookOnce(t *testing.T, b *countingMembers, src reap.Source, want []lineage.Member, passes int) {
	t.Helper()
	got, err := src.Members()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.EqualFunc(got, want, func(a, b lineage.Member) bool { return a.Identity == b.Identity }) {
		t.Errorf("listed %v, want %v", got, want)
	}
	if b.passes != passes {
		t.Errorf("%d passes over the backend, want %d", b.passes, passes)
	}
}

// The reaper's first look takes the listing the kernel's marks were made
// from, with no pass of its own; every look after it lists afresh. Without
// such a listing the first look lists too.
func TestReapSourceTakesTheMarksListingFirst(t *testing.T) {
	root := lineage.Identity{PID: 100, StartTicks: 5}
	now := []lineage.Member{{Identity: lineage.Identity{PID: 101, StartTicks: 6}, Root: root}}
	marked := []lineage.Member{{Identity: lineage.Identity{PID: 102, StartTicks: 7}, Root: root}}
	b := &countingMembers{ms: now}
	j := &Job{t: &Tracker{backend: b, tree: lineage.NewTree()}, root: root}

	look := func(src reap.Source, want []lineage.Member, passes int) {
		t.Helper()
		lookOnce(t, b, src, want, passes)
	}
	src := j.source(marked, true)
	look(src, marked, 0)
	look(src, now, 1)
	look(src, now, 2)

	look(j.source(nil, false), now, 3)

	// A lineage the marks found empty is empty for the first look too.
	src = j.source(nil, true)
	look(src, nil, 3)
	look(src, now, 4)
}

// A settle's reaper (the daemon's) does the same with the listing of all
// the roots being settled.
func TestSettleSourceTakesTheMarksListingFirst(t *testing.T) {
	root := lineage.Identity{PID: 100, StartTicks: 5}
	now := []lineage.Member{{Identity: lineage.Identity{PID: 101, StartTicks: 6}, Root: root}}
	marked := map[lineage.Identity][]lineage.Member{root: {{Identity: lineage.Identity{PID: 102, StartTicks: 7}, Root: root}}}
	b := &countingMembers{ms: now}
	tr := &Tracker{backend: b, tree: lineage.NewTree()}
	roots := []lineage.Identity{root}

	look := func(src reap.Source, want []lineage.Member, passes int) {
		t.Helper()
		lookOnce(t, b, src, want, passes)
	}
	src := tr.sourceOf(roots, marked, true)
	look(src, marked[root], 0)
	look(src, now, 1)
	look(src, now, 2)

	look(tr.sourceOf(roots, nil, false), now, 3)

	// Roots the marks found empty are empty for the first look too.
	src = tr.sourceOf(roots, map[lineage.Identity][]lineage.Member{}, true)
	look(src, nil, 3)
	look(src, now, 4)
}
