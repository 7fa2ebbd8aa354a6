package bpf

import (
	"fmt"
	"testing"
	"time"

	"github.com/lineage-dev/lineage/internal/loader"
	"github.com/lineage-dev/lineage/internal/testutil"
	"github.com/lineage-dev/lineage/lineage"
	"github.com/lineage-dev/lineage/policy"
)

// Capabilities are not a licence: with Options.KillUser set (a setcap
// install run by uid 65534, played here by root), the kernel kills only
// what that user could signal with kill(2), and counts what it skips.

func TestKillUserBoundsHardCancel(t *testing.T) {
	testutil.LookTool(t, "setpriv")
	if openBPF(t, &Options{Variant: loader.VariantFull}).HardCancel() != loader.HardCancelKernel {
		t.Skip("the kernel does not kill with the supervisor here")
	}
	mark := testutil.Marker(t)
	testutil.CheckNoLeaks(t, mark)
	spared, members := startSupervisorOf(t, "uid-supervisor", loader.VariantFull, mark)
	t.Cleanup(func() {
		for _, m := range append(spared, members...) {
			testutil.KillIdentity(int(m.PID), m.StartTicks)
		}
	})
	// The shell and root's sleeper; uid 65534's sleeper.
	if len(spared) != 2 || len(members) != 1 {
		t.Fatalf("spared %v, members %v: want the shell and a sleeper spared, a sleeper not", spared, members)
	}
	if !testutil.WaitGone(int(members[0].PID), members[0].StartTicks, 30*time.Second) {
		t.Errorf("uid 65534's member %v survived its supervisor's death", members[0])
	}
	for _, s := range spared {
		if !testutil.Alive(int(s.PID), s.StartTicks) {
			t.Errorf("root's member %v was killed, though uid 65534 could not signal it", s)
		}
	}
}

func TestKillUserBoundsContainment(t *testing.T) { eachVariant(t, testKillUserBoundsContainment) }

// testKillUserBoundsContainment contains a lineage with two forking loops,
// one uid 65534's, one root's: the first is contained as ever (its children
// killed at birth, or it, on compat); root's loop lives, its children are
// born alive and said to be, and each skipped kill is counted.
func testKillUserBoundsContainment(t *testing.T, v loader.Variant) {
	testutil.LookTool(t, "setpriv")
	b := openBPF(t, &Options{Variant: v, KillUser: &policy.KillUser{Real: nobodyUID, Effective: nobodyUID}})
	rec := record(t, b)
	mark := testutil.Marker(t)
	testutil.CheckNoLeaks(t, mark)
	loop := `sh -c 'i=0; while [ $i -lt 3000 ]; do sleep 0.02; i=$((i+1)); done; : %s%s' &`
	id, _ := spawn(t, b, fmt.Sprintf(asNobody+" "+loop+loop+" wait", "nobody", mark, "root", mark), loader.RootOptions{})
	t.Cleanup(func() { killMembers(t, b, id) })
	var nobody, root lineage.Identity
	waitFor(t, "both loops", 5*time.Second, func() bool {
		var okN, okR bool
		nobody, okN = loopShell("nobody" + mark)
		root, okR = loopShell("root" + mark)
		return okN && okR
	})
	if _, err := b.Contain(id); err != nil {
		t.Fatal(err)
	}
	contained := bootTime(t)
	waitFor(t, "uid 65534's loop contained, root's spared", 5*time.Second, func() bool {
		st, _ := b.Stats()
		return st.Contained >= 1 && st.UIDSpared >= 3
	})
	waitFor(t, "children of root's loop", 5*time.Second, func() bool {
		return len(forksOf(rec.snapshot(), root, contained)) >= 3
	})
	for _, ev := range forksOf(rec.snapshot(), root, contained) {
		if ev.Contained {
			t.Errorf("child %v of root's loop is said to be killed at birth", ev.Process)
		}
	}
	if !testutil.Alive(int(root.PID), root.StartTicks) {
		t.Errorf("root's loop %v was killed", root)
	}
	if v == loader.VariantCompat && !testutil.WaitGone(int(nobody.PID), nobody.StartTicks, 30*time.Second) {
		t.Errorf("uid 65534's loop %v forked on, uncontained", nobody)
	}
	if v == loader.VariantFull {
		for _, ev := range forksOf(rec.snapshot(), nobody, contained) {
			if !ev.Contained {
				t.Errorf("child %v of uid 65534's loop was born after containment and not killed", ev.Process)
			}
		}
	}
}
