package tracker

import (
	"bytes"
	"errors"
	"io"
	"slices"
	"testing"
	"time"

	"github.com/lineage-dev/lineage/internal/loader"
	"github.com/lineage-dev/lineage/internal/record"
	"github.com/lineage-dev/lineage/lineage"
)

func writtenLosses(t *testing.T, l Losses) []record.Event {
	t.Helper()
	var buf bytes.Buffer
	w, err := record.NewWriter(&buf, record.Header{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	WriteLosses(w, l)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := record.NewReader(&buf)
	if err != nil {
		t.Fatal(err)
	}
	var out []record.Event
	for {
		ev, err := r.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, ev)
	}
}

// Placed gaps are written one loss each, with their bounds and the
// processes of the record's lineage whose events they lost, each with its
// lost kinds in the order events happen; the other counters follow.
func TestWriteLossesPlacesEachGap(t *testing.T) {
	mine := lineage.Identity{PID: 10, StartTicks: 1}
	other := lineage.Identity{PID: 20, StartTicks: 1}
	a, b := lineage.Identity{PID: 11, StartTicks: 2}, lineage.Identity{PID: 12, StartTicks: 3}
	gaps := []loader.Gap{
		{Count: 4}, // forgotten by the tracker: counted, not placed
		{From: time.Second, To: 2 * time.Second, Count: 5, Lost: []loader.LostEvent{
			{Kind: lineage.EventExit, Process: a, Root: mine},
			{Kind: lineage.EventFork, Process: b, Root: mine},
			{Kind: lineage.EventFork, Process: a, Root: mine},
			{Kind: lineage.EventExec, Process: other, Root: other},
			{Kind: lineage.EventExit, Process: a, Root: mine},
		}},
	}
	got := writtenLosses(t, Losses{
		Stats: loader.Stats{EventsLost: 99, MembersFull: 2}, Gaps: gaps, Placed: true,
		Mine: func(ev loader.LostEvent) bool { return ev.Root == mine },
	})
	if len(got) != 3 {
		t.Fatalf("%d losses written, want 3: %+v", len(got), got)
	}
	if g := got[0]; g.Reason != "events lost" || g.Count != 4 || g.Placed() || len(g.Members) != 0 {
		t.Errorf("the forgotten gap: %+v", g)
	}
	g := got[1]
	if g.Reason != "events lost" || g.Count != 5 || !g.Placed() || g.From != time.Second || g.To != 2*time.Second {
		t.Errorf("the placed gap: %+v", g)
	}
	want := []record.LostMember{
		{Process: a, Kinds: []record.Kind{record.KindFork, record.KindExit}},
		{Process: b, Kinds: []record.Kind{record.KindFork}},
	}
	if !slices.EqualFunc(g.Members, want, func(x, y record.LostMember) bool {
		return x.Process == y.Process && slices.Equal(x.Kinds, y.Kinds)
	}) {
		t.Errorf("members %+v, want %+v", g.Members, want)
	}
	if got[2].Reason != "untracked: the membership map was full" || got[2].Count != 2 {
		t.Errorf("the other counter: %+v", got[2])
	}
}

// A backend that places nothing has its lost events written as one count,
// unplaced, as before.
func TestWriteLossesUnplaced(t *testing.T) {
	got := writtenLosses(t, Losses{Stats: loader.Stats{EventsLost: 7}})
	if len(got) != 1 || got[0].Reason != "events lost" || got[0].Count != 7 || got[0].Placed() {
		t.Errorf("losses %+v, want one unplaced count of 7", got)
	}
	if got := writtenLosses(t, Losses{Stats: loader.Stats{EventsLost: 7}, Placed: true}); len(got) != 0 {
		t.Errorf("placed with no gaps: %+v, want nothing (the gaps are the account)", got)
	}
}
