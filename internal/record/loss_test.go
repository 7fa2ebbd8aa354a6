package record

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lineage-dev/lineage/lineage"
)

// A loss placed in time and naming its members reads back as written, its
// members cut at MaxLostMembers and the rest counted; a zero count writes
// nothing.
func TestLossInRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	w, err := NewWriter(&buf, Header{Host: "h"}, fixedClocks())
	if err != nil {
		t.Fatal(err)
	}
	named := []LostMember{{Process: childID, Kinds: []Kind{KindFork, KindExit}}, {Process: rootID}}
	many := make([]LostMember, MaxLostMembers+3)
	for i := range many {
		many[i] = LostMember{Process: lineage.Identity{PID: uint32(1000 + i), StartTicks: 7}}
	}
	for i, err := range []error{
		w.LossIn(5, "events lost", Placement{From: 91 * time.Second, To: 92 * time.Second, Members: named}),
		w.LossIn(0, "events lost", Placement{From: 1, To: 2, Members: named}),
		w.LossIn(9, "events lost", Placement{Members: many}),
		w.LossOf(2, "undecodable"),
	} {
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")[1:]
	_, evs := readAll(t, buf.Bytes())
	if len(evs) != 3 || len(lines) != 3 {
		t.Fatalf("%d events, want 3 (the zero count is not written):\n%s", len(evs), buf.String())
	}
	placed := evs[0]
	if !placed.Placed() || placed.From != 91*time.Second || placed.To != 92*time.Second || placed.Count != 5 ||
		len(placed.Members) != 2 || placed.Members[0].Process != childID || !slices.Equal(placed.Members[0].Kinds, []Kind{KindFork, KindExit}) ||
		placed.Members[1].Kinds != nil {
		t.Errorf("placed loss %+v", placed)
	}
	if !strings.Contains(lines[0], `"from_ns":91000000000,"to_ns":92000000000,"members":[{"process":{"pid":101,"start":5001},"kinds":["fork","exit"]}`) {
		t.Errorf("placed loss written as %s", lines[0])
	}
	if cut := evs[1]; cut.Placed() || len(cut.Members) != MaxLostMembers || cut.MembersOmitted != 3 {
		t.Errorf("many members: placed %v, %d named, %d omitted", cut.Placed(), len(cut.Members), cut.MembersOmitted)
	}
	if len(lines[1]) > MaxLine/2 {
		t.Errorf("a loss naming %d members is %d bytes, near MaxLine", MaxLostMembers, len(lines[1]))
	}
	if plain := evs[2]; plain.Placed() || plain.Members != nil || !strings.HasSuffix(lines[2], `"reason":"undecodable","count":2}`) {
		t.Errorf("unplaced loss %+v: %s", plain, lines[2])
	}
	// Each line is exactly what encoding/json writes for its event.
	for i, l := range lines {
		want, err := json.Marshal(evs[i])
		if err != nil || string(want) != l {
			t.Errorf("line %d:\ngot  %s\nwant %s", i, l, want)
		}
	}
}

func TestLossPlaced(t *testing.T) {
	for _, tc := range []struct {
		from, to time.Duration
		want     bool
	}{{0, 0, false}, {5, 0, false}, {0, 5, false}, {5, 4, false}, {5, 5, true}, {5, 9, true}} {
		ev := Event{Kind: KindLoss, From: tc.from, To: tc.to}
		if got := ev.Placed(); got != tc.want {
			t.Errorf("from %d to %d: placed %v, want %v", tc.from, tc.to, got, tc.want)
		}
	}
}
