package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/lineage-dev/lineage/api"
	"github.com/lineage-dev/lineage/internal/record"
	"github.com/lineage-dev/lineage/internal/testutil"
	"github.com/lineage-dev/lineage/lineage"
)

// freshLeftovers is how many leftovers the causal-order test forks just
// before the turn end that reaps them.
const freshLeftovers = 60

// The event stream is in causal order per process: a reap of many
// leftovers forked just before it (their forks and execs still on their
// way through the tracker's ring buffer when the reap has signalled them)
// streams each one's fork and exec before any signal or exit of it.
func TestServeEventsAreInCausalOrderPerProcess(t *testing.T) {
	d := startDaemon(t, "")
	mark := testutil.Marker(t)
	testutil.CheckNoLeaks(t, mark)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	d.do("POST", "/v1/sessions", api.OpenSession{ID: "causal", Kind: "autonomous"}, nil)
	lines := d.eventLines(t, ctx, "causal")
	<-lines // the header
	// Each leftover is a shell that forks its sleeper, so the reap finds
	// forks that have not exec'd yet too.
	d.execRoot("causal", "", fmt.Sprintf("i=0; while [ $i -lt %d ]; do sh -c 'sleep %s; exit 0' & i=$((i+1)); done; exit 0", freshLeftovers, testutil.Sleep(mark)))
	var end api.Ended
	d.do("POST", "/v1/sessions/causal/turn-end", nil, &end)
	signalled := 0
	for _, re := range end.Roots {
		for _, o := range re.Outcomes {
			if len(o.Signals) > 0 {
				signalled++
			}
		}
	}
	if signalled < freshLeftovers {
		t.Fatalf("the turn end signalled %d processes, want at least the %d leftovers", signalled, freshLeftovers)
	}

	// Every event of the session, until each signalled process's exit.
	type seen struct{ fork, exec, signal, exit int } // positions, 0: not yet
	procs := map[lineage.Identity]*seen{}
	at := func(id lineage.Identity) *seen {
		if procs[id] == nil {
			procs[id] = &seen{}
		}
		return procs[id]
	}
	ended := func() int {
		n := 0
		for _, p := range procs {
			if p.signal > 0 && p.exit > 0 {
				n++
			}
		}
		return n
	}
	timeout := time.After(60 * time.Second)
	for pos := 1; ended() < signalled; pos++ {
		var line string
		select {
		case line = <-lines:
		case <-timeout:
			t.Fatalf("%d of %d signalled processes' exits streamed within 60 s", ended(), signalled)
		}
		var ev record.Event
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("event %q: %v", line, err)
		}
		if ev.Process.IsZero() {
			continue
		}
		p := at(ev.Process)
		first := func(f *int) {
			if *f == 0 {
				*f = pos
			}
		}
		switch ev.Kind {
		case record.KindFork:
			first(&p.fork)
		case record.KindExec:
			first(&p.exec)
		case record.KindSignal:
			first(&p.signal)
		case record.KindExit:
			first(&p.exit)
		}
	}
	bad := 0
	for id, p := range procs {
		if p.signal == 0 {
			continue // the root, and exits of what was not signalled
		}
		after := min(p.signal, p.exit)
		if p.exit == 0 {
			after = p.signal
		}
		switch {
		case p.fork == 0 || p.fork > after:
			t.Errorf("process %s: its fork (event %d) after its first signal or exit (event %d)", id, p.fork, after)
			bad++
		case p.exec > after:
			t.Errorf("process %s: its exec (event %d) after its first signal or exit (event %d)", id, p.exec, after)
			bad++
		}
		if bad > 10 {
			t.Fatal("and more")
		}
	}
}
