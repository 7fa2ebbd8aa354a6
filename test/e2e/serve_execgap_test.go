package e2e

import (
	"slices"
	"testing"

	"github.com/lineage-dev/lineage/api"
	"github.com/lineage-dev/lineage/internal/testutil"
	"github.com/lineage-dev/lineage/lineage"
)

// lineage exec registers its command before the command runs a single
// instruction. `setsid -f sleep` forks at once, its child leaves for a
// session of its own and the command exits: nothing left in /proc ties the
// sleeper to the root (its parent is gone, its ppid is init's), so only
// the kernel's fork hook, armed before the exec, can have made it a member.
// The session's close reaps it, and its lineage parent is the root. The
// kernel matrix runs this on every kernel (scripts/kmatrix/scenarios,
// exec-no-gap), with the front's C fast path where it was built with cgo.
func TestServeExecSetsidDaemonReapedAtClose(t *testing.T) {
	d := startDaemon(t, "")
	mark := testutil.Marker(t)
	testutil.CheckNoLeaks(t, mark)
	d.execArgv("gapless", "interactive", "setsid", "-f", "sleep", testutil.Sleep(mark))
	left := atLeastSleepers(t, mark, 1)
	if len(left) != 1 {
		t.Fatalf("sleepers %+v, want the one daemon", left)
	}
	daemon := lineage.Identity{PID: uint32(left[0].PID), StartTicks: left[0].StartTicks}
	// An interactive session's turn end only reports its leftovers.
	var end api.Ended
	d.do("POST", "/v1/sessions/gapless/turn-end", nil, &end)
	if n := results(end); n[lineage.Reported] != 1 || len(n) != 1 {
		t.Errorf("turn end outcomes %v, want the daemon reported", n)
	}
	allAlive(t, left)
	d.do("POST", "/v1/sessions/gapless/close", nil, &end)
	allGone(t, left)
	if len(end.Roots) != 1 {
		t.Fatalf("close: roots %+v, want the one command", end.Roots)
	}
	root := end.Roots[0]
	var got []api.Outcome
	for _, o := range root.Outcomes {
		if o.Process == daemon {
			got = append(got, o)
		}
	}
	if len(got) != 1 {
		t.Fatalf("close: outcomes %+v, want one for the daemon %s", root.Outcomes, daemon)
	}
	o := got[0]
	if o.Result != lineage.Terminated && o.Result != lineage.Killed {
		t.Errorf("the daemon's outcome %+v: want it ended by the reaper", o)
	}
	if o.Parent != root.Root {
		t.Errorf("the daemon's lineage parent %s, want the root %s (setsid, which forked it)", o.Parent, root.Root)
	}
	if !slices.Contains(o.Argv, "sleep") || o.Session != "gapless" {
		t.Errorf("the daemon's outcome %+v: want its argv and session", o)
	}
}
