package proc

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lineage-dev/lineage/internal/testutil"
	"github.com/lineage-dev/lineage/lineage"
)

// writeStat puts a process in a fake /proc tree: its stat file, with the
// fields lineage reads (3 state, 4 ppid, 20 threads, 22 start).
func writeStat(t *testing.T, root string, pid, ppid int, start uint64) {
	t.Helper()
	writeStatState(t, root, pid, ppid, start, "S", 1)
}

func writeStatState(t *testing.T, root string, pid, ppid int, start uint64, state string, threads int) {
	t.Helper()
	fields := make([]string, 53)
	for i := range fields {
		fields[i] = "0"
	}
	fields[1], fields[2], fields[3] = fmt.Sprint(pid), "(sh)", state
	fields[4], fields[5], fields[6] = fmt.Sprint(ppid), fmt.Sprint(pid), fmt.Sprint(pid)
	fields[20], fields[22] = fmt.Sprint(threads), fmt.Sprint(start)
	dir := filepath.Join(root, fmt.Sprint(pid))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "stat"), []byte(strings.Join(fields[1:], " ")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestAdoptFindsDescendantsPassAfterPass(t *testing.T) {
	dir := t.TempDir()
	writeStat(t, dir, 1, 0, 1)
	writeStat(t, dir, 100, 1, 10) // the root
	writeStat(t, dir, 101, 100, 11)
	writeStat(t, dir, 102, 101, 12)
	writeStat(t, dir, 103, 1, 13)   // a stranger beside the root
	writeStat(t, dir, 104, 1, 14)   // a member already, reparented to init
	writeStat(t, dir, 105, 104, 15) // its child, not yet known
	// A child that exited and that its parent has not yet waited for:
	// its exit has run, and it is nobody's to adopt.
	writeStatState(t, dir, 107, 100, 17, "Z", 1)
	p, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	root := lineage.Identity{PID: 100, StartTicks: 10}
	members := map[lineage.Identity]lineage.Identity{root: {}, {PID: 104, StartTicks: 14}: root}
	first := true
	n, err := p.Adopt(root, func(id lineage.Identity) bool { _, ok := members[id]; return ok },
		func(child lineage.Stat, parent lineage.Identity) error {
			if _, ok := members[parent]; !ok {
				t.Errorf("%v adopted before its parent %v", child.Identity, parent)
			}
			members[child.Identity] = parent
			if first {
				// A descendant forks while the pass runs: the next pass
				// finds its child.
				first = false
				writeStat(t, dir, 106, 102, 16)
			}
			return nil
		})
	if err != nil {
		t.Fatal(err)
	}
	want := map[lineage.Identity]lineage.Identity{
		{PID: 101, StartTicks: 11}: root,
		{PID: 102, StartTicks: 12}: {PID: 101, StartTicks: 11},
		{PID: 105, StartTicks: 15}: {PID: 104, StartTicks: 14},
		{PID: 106, StartTicks: 16}: {PID: 102, StartTicks: 12},
	}
	if n != len(want) {
		t.Errorf("adopted %d, want %d: %v", n, len(want), members)
	}
	for child, parent := range want {
		if got, ok := members[child]; !ok || got != parent {
			t.Errorf("%v: adopted with parent %v (%v), want %v", child, got, ok, parent)
		}
	}
	if _, ok := members[lineage.Identity{PID: 103, StartTicks: 13}]; ok {
		t.Error("a stranger beside the root was adopted")
	}
	if _, ok := members[lineage.Identity{PID: 107, StartTicks: 17}]; ok {
		t.Error("a zombie child of the root was adopted")
	}
}

// A child subreaper's orphans are adopted with no parent, then walked down
// from; a process add skips is neither counted nor walked into.
func TestAdoptWithOrphansAndSkips(t *testing.T) {
	dir := t.TempDir()
	writeStat(t, dir, 1, 0, 1)
	writeStat(t, dir, 50, 1, 5)    // the subreaper
	writeStat(t, dir, 100, 50, 10) // the root
	writeStat(t, dir, 101, 50, 11) // an orphan of the root's lineage
	writeStat(t, dir, 102, 101, 12)
	writeStat(t, dir, 103, 50, 13)              // the subreaper's helper
	writeStatState(t, dir, 104, 50, 14, "Z", 1) // a dead orphan
	writeStat(t, dir, 110, 100, 20)             // another lineage's member
	writeStat(t, dir, 111, 110, 21)             // and its child
	p, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	root := lineage.Identity{PID: 100, StartTicks: 10}
	other := lineage.Identity{PID: 110, StartTicks: 20}
	members := map[lineage.Identity]lineage.Identity{root: {}}
	asked := map[uint32]bool{}
	n, err := p.AdoptWithOrphans(root, func(id lineage.Identity) bool { _, ok := members[id]; return ok },
		func(st lineage.Stat) bool {
			asked[st.PID] = true
			return st.PPID == 50 && st.PID != 100 && st.PID != 103
		},
		func(child lineage.Stat, parent lineage.Identity) error {
			if child.Identity == other {
				return SkipProcess
			}
			members[child.Identity] = parent
			return nil
		})
	if err != nil {
		t.Fatal(err)
	}
	want := map[lineage.Identity]lineage.Identity{
		{PID: 101, StartTicks: 11}: {},
		{PID: 102, StartTicks: 12}: {PID: 101, StartTicks: 11},
	}
	if n != len(want) {
		t.Errorf("adopted %d, want %d: %v", n, len(want), members)
	}
	for child, parent := range want {
		if got, ok := members[child]; !ok || got != parent {
			t.Errorf("%v: adopted with parent %v (%v), want %v", child, got, ok, parent)
		}
	}
	for _, pid := range []uint32{103, 104, 110, 111} {
		for id := range members {
			if id.PID == pid {
				t.Errorf("%d adopted", pid)
			}
		}
	}
	if asked[104] {
		t.Error("a zombie was offered as an orphan")
	}
}

func TestCheckRefusesAReusedPidAndAZombie(t *testing.T) {
	dir := t.TempDir()
	writeStat(t, dir, 200, 1, 20)
	p, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Check(lineage.Identity{PID: 200, StartTicks: 20}); err != nil {
		t.Fatalf("live identity: %v", err)
	}
	if err := p.Check(lineage.Identity{PID: 200, StartTicks: 19}); !errors.Is(err, lineage.ErrIdentityMismatch) || !strings.Contains(err.Error(), "started at 20, not 19") {
		t.Errorf("a reused pid passed the check: %v", err)
	}
	if err := p.Check(lineage.Identity{PID: 201, StartTicks: 20}); !errors.Is(err, lineage.ErrNoProcess) {
		t.Errorf("a missing pid: %v, want lineage.ErrNoProcess", err)
	}
	// A zombie has exited; a zombie leader whose other threads run has not.
	writeStatState(t, dir, 202, 1, 22, "Z", 1)
	if err := p.Check(lineage.Identity{PID: 202, StartTicks: 22}); !errors.Is(err, lineage.ErrNoProcess) {
		t.Errorf("a zombie: %v, want lineage.ErrNoProcess", err)
	}
	writeStatState(t, dir, 203, 1, 23, "Z", 4)
	if err := p.Check(lineage.Identity{PID: 203, StartTicks: 23}); err != nil {
		t.Errorf("a process whose leader thread exited while 3 threads run: %v", err)
	}
}

// childless speaks for real processes only: one with a child is not
// childless, one without is, and one whose identity changed is not.
func TestChildlessOnRealProcesses(t *testing.T) {
	mark := testutil.Marker(t)
	testutil.CheckNoLeaks(t, mark)
	p, err := Open("/proc")
	if err != nil {
		t.Fatal(err)
	}
	lone := exec.Command("sleep", testutil.Sleep(mark))
	parent := exec.Command("sh", "-c", "sleep "+testutil.Sleep(mark)+" & wait")
	for _, c := range []*exec.Cmd{lone, parent} {
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Process.Kill(); _ = c.Wait() })
	}
	t.Cleanup(func() {
		for _, s := range testutil.Sleepers(mark) {
			testutil.KillIdentity(s.PID, s.StartTicks)
		}
	})
	loneID, err := p.Identity(lone.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	parentID, err := p.Identity(parent.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	if !p.childless(loneID) {
		t.Error("a sleep with no child is not childless")
	}
	stale := loneID
	stale.StartTicks++
	if p.childless(stale) {
		t.Error("a process that is no longer the root counts as childless")
	}
	testutil.Eventually(t, 10*time.Second, "the shell's sleeper", func() bool { return len(testutil.Sleepers(mark)) >= 2 })
	if p.childless(parentID) {
		t.Error("a shell with a child counts as childless")
	}
	members := map[lineage.Identity]bool{parentID: true}
	n, err := p.Adopt(parentID, func(id lineage.Identity) bool { return members[id] },
		func(child lineage.Stat, _ lineage.Identity) error { members[child.Identity] = true; return nil })
	if err != nil || n != 1 {
		t.Errorf("adopt from a shell with one child: %d, %v; want 1", n, err)
	}
}
