package proc

import (
	"os/exec"
	"testing"
	"time"

	"github.com/lineage-dev/lineage/internal/testutil"
	"github.com/lineage-dev/lineage/lineage"
)

// A process with no children is adopted from without a pass over /proc; one
// with a child still gets its passes, and the child is found.
func TestAdoptChildlessRootAndParent(t *testing.T) {
	mark := testutil.Marker(t)
	testutil.CheckNoLeaks(t, mark)
	p, err := Open("/proc")
	if err != nil {
		t.Fatal(err)
	}
	lone := exec.Command("sleep", testutil.Sleep(mark))
	parent := exec.Command("sh", "-c", "sleep "+testutil.Sleep(mark)+"; true")
	for _, c := range []*exec.Cmd{lone, parent} {
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Process.Kill(); _ = c.Wait() })
	}
	var child []testutil.Proc
	testutil.Eventually(t, 20*time.Second, "the shell's sleeper", func() bool {
		for _, s := range testutil.Sleepers(mark) {
			if s.PID != lone.Process.Pid {
				child = append(child, s)
			}
		}
		return len(child) > 0
	})
	if !p.childless(mustIdentity(t, p, lone.Process.Pid)) {
		t.Error("a sleep with no children is not childless")
	}
	if p.childless(mustIdentity(t, p, parent.Process.Pid)) {
		t.Error("a shell waiting for its child is childless")
	}
	for _, c := range []*exec.Cmd{lone, parent} {
		root, err := p.Identity(c.Process.Pid)
		if err != nil {
			t.Fatal(err)
		}
		var got []lineage.Identity
		members := map[lineage.Identity]bool{root: true}
		n, err := p.Adopt(root, func(id lineage.Identity) bool { return members[id] },
			func(st lineage.Stat, _ lineage.Identity) error {
				members[st.Identity] = true
				got = append(got, st.Identity)
				return nil
			})
		if err != nil {
			t.Fatal(err)
		}
		want := 0
		if c == parent {
			want = 1
		}
		if n != want || len(got) != want || (want == 1 && got[0] != lineage.Identity{PID: uint32(child[0].PID), StartTicks: child[0].StartTicks}) {
			t.Errorf("%v: adopted %d %v, want %d", c.Args, n, got, want)
		}
	}
	testutil.KillIdentity(child[0].PID, child[0].StartTicks)
}

func mustIdentity(t *testing.T, p FS, pid int) lineage.Identity {
	t.Helper()
	id, err := p.Identity(pid)
	if err != nil {
		t.Fatal(err)
	}
	return id
}
