package server

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/lineage-dev/lineage/internal/loader"
	"github.com/lineage-dev/lineage/internal/record"
	"github.com/lineage-dev/lineage/internal/tracker"
	"github.com/lineage-dev/lineage/lineage"
)

// The tracker's gaps reach every stream, filtered by session or not, as
// loss events named as the session records name them; no growth, no event.
func TestLossesReachEveryStream(t *testing.T) {
	h := newHub()
	streams := []*subscriber{h.subscribe("a"), h.subscribe("")}
	h.kept("b", lineage.Member{Identity: lineage.Identity{PID: 7, StartTicks: 1}}, "keep") // session b's: not stream a's
	h.losses(tracker.Losses{})
	h.losses(tracker.Losses{Stats: loader.Stats{EventsLost: 3, MembersFull: 2}})
	for i, sub := range streams {
		var buf bytes.Buffer
		w, err := record.NewWriter(&buf, record.Header{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		for len(sub.ch) > 0 {
			if err := (<-sub.ch).write(w); err != nil {
				t.Fatal(err)
			}
		}
		lines := strings.Split(strings.TrimSpace(buf.String()), "\n")[1:]
		var losses []record.Event
		for _, l := range lines {
			var ev record.Event
			if err := json.Unmarshal([]byte(l), &ev); err != nil {
				t.Fatalf("stream %d: %q: %v", i, l, err)
			}
			if ev.Kind == record.KindLoss {
				losses = append(losses, ev)
			}
		}
		want := map[string]uint64{"events lost": 3, "untracked: the membership map was full": 2}
		if len(losses) != len(want) {
			t.Errorf("stream %d: %d loss events, want %d:\n%s", i, len(losses), len(want), buf.String())
		}
		for _, ev := range losses {
			if want[ev.Reason] != ev.Count {
				t.Errorf("stream %d: loss %q of %d, want %d", i, ev.Reason, ev.Count, want[ev.Reason])
			}
		}
		if wantLines := len(want) + i; len(lines) != wantLines {
			t.Errorf("stream %d: %d lines, want %d (the unfiltered stream has the keep too):\n%s", i, len(lines), wantLines, buf.String())
		}
	}
}

// A counter that went down (counters started again) grew by nothing.
func TestLossesSince(t *testing.T) {
	got := lossesSince(loader.Stats{EventsLost: 5, Undecodable: 1, MembersFull: 9, Unattributed: 4},
		loader.Stats{EventsLost: 2, Undecodable: 3, MembersFull: 9})
	if want := (loader.Stats{EventsLost: 3, Unattributed: 4}); got != want {
		t.Errorf("lossesSince: %+v, want %+v", got, want)
	}
}
