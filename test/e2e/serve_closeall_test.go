package e2e

import (
	"fmt"
	"testing"

	"github.com/lineage-dev/lineage/api"
	"github.com/lineage-dev/lineage/internal/testutil"
	"github.com/lineage-dev/lineage/lineage"
)

// A session's roots are reaped together at its close, and each member is
// still judged by its own root: a keep on one member of one root spares
// that member alone, a keep on a whole root spares that root's lineage
// alone, and every outcome is listed under the root it descends from.
func TestServeCloseOfManyRootsJudgesEachByItsRoot(t *testing.T) {
	d := startDaemon(t, "")
	mark := testutil.Marker(t)
	testutil.CheckNoLeaks(t, mark)
	d.do("POST", "/v1/sessions", api.OpenSession{ID: "many", Kind: "interactive"}, nil)
	s := testutil.Sleep(mark)
	// Group g's sleepers carry mark+g: two each for roots 1 and 2, one for
	// root 3.
	d.execRoot("many", "", fmt.Sprintf("setsid sleep %[1]s1 & setsid sleep %[1]s1 & sleep 0.2", s))
	d.execRoot("many", "", fmt.Sprintf("setsid sleep %[1]s2 & setsid sleep %[1]s2 & sleep 0.2", s))
	d.execRoot("many", "", fmt.Sprintf("setsid sleep %[1]s3 & sleep 0.2", s))
	groups := map[string][]testutil.Proc{}
	for _, g := range []string{"1", "2", "3"} {
		groups[g] = atLeastSleepers(t, mark+g, map[string]int{"1": 2, "2": 2, "3": 1}[g])
	}
	kept := groups["2"][0]
	if _, code := d.run("keep", fmt.Sprintf("%d@%d", kept.PID, kept.StartTicks)); code != 0 {
		t.Fatal("keep failed")
	}
	var roots []api.Root
	d.do("GET", "/v1/roots?session=many", nil, &roots)
	keptRoot := rootOf(t, d, roots, groups["3"][0])
	d.do("POST", "/v1/keeps", api.AddKeep{Process: keptRoot.Root.String(), Root: true}, nil)

	var end api.Ended
	d.do("POST", "/v1/sessions/many/close", nil, &end)
	byGroup := outcomesByGroup(t, end, groups)
	ended := func(r lineage.Result) bool { return r == lineage.Terminated || r == lineage.Killed }
	for _, o := range byGroup["1"] {
		if !ended(o.Result) {
			t.Errorf("root 1: %d %s, want terminated or killed", o.Process.PID, o.Result)
		}
	}
	for _, o := range byGroup["2"] {
		want := ended(o.Result)
		if o.Process.PID == uint32(kept.PID) {
			want = o.Result == lineage.Kept
		}
		if !want {
			t.Errorf("root 2: %d %s (kept: %d)", o.Process.PID, o.Result, kept.PID)
		}
	}
	if c := byGroup["3"]; len(c) != 1 || c[0].Result != lineage.Kept || c[0].Reason != "its root is kept" {
		t.Errorf("root 3, kept whole: %+v, want its sleeper kept, for its root", c)
	}
	allGone(t, append(groups["1"], groups["2"][1]))
	spared := []testutil.Proc{kept, groups["3"][0]}
	allAlive(t, spared)
	for _, p := range spared { // untracked now: the test ends them
		testutil.KillIdentity(p.PID, p.StartTicks)
	}
	allGone(t, spared)
}

// rootOf returns the root, among roots, whose lineage p is in.
func rootOf(t *testing.T, d *daemon, roots []api.Root, p testutil.Proc) api.Root {
	t.Helper()
	for _, r := range roots {
		var full api.Root
		d.do("GET", "/v1/roots/"+r.Root.String(), nil, &full)
		for _, m := range full.Members {
			if m.Process.PID == uint32(p.PID) && m.Process.StartTicks == p.StartTicks {
				return r
			}
		}
	}
	t.Fatalf("no root has %d as a member", p.PID)
	return api.Root{}
}

// outcomesByGroup returns the outcomes of each group's sleepers, and
// checks that each root's outcomes are of one group, that each sleeper
// has one outcome, and that the close answered for every root.
func outcomesByGroup(t *testing.T, end api.Ended, groups map[string][]testutil.Proc) map[string][]api.Outcome {
	t.Helper()
	if len(end.Roots) != len(groups) {
		t.Fatalf("the close answered for %d roots, want %d", len(end.Roots), len(groups))
	}
	group := map[uint32]string{}
	for g, ps := range groups {
		for _, p := range ps {
			group[uint32(p.PID)] = g
		}
	}
	out := map[string][]api.Outcome{}
	for _, r := range end.Roots {
		seen := ""
		for _, o := range r.Outcomes {
			g, ok := group[o.Process.PID]
			if !ok {
				continue
			}
			if seen != "" && g != seen {
				t.Errorf("root %s lists sleepers of groups %s and %s", r.Root, seen, g)
			}
			seen = g
			out[g] = append(out[g], o)
		}
	}
	for g, ps := range groups {
		if len(out[g]) != len(ps) {
			t.Errorf("group %s: %d outcomes for %d sleepers: %+v", g, len(out[g]), len(ps), out[g])
		}
	}
	return out
}
