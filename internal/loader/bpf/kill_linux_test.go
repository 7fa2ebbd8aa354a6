package bpf

import (
	"bufio"
	"fmt"
	"os/exec"
	"testing"
	"time"

	"github.com/lineage-dev/lineage/internal/loader"
	"github.com/lineage-dev/lineage/internal/testutil"
	"github.com/lineage-dev/lineage/lineage"
)

// The variants differ in whom the kernel may kill; these tests check that
// each does what its Containment and HardCancel say, and nothing more.

func TestContainStopsAForkingLineage(t *testing.T) { eachVariant(t, testContain) }

func testContain(t *testing.T, v loader.Variant) {
	b := openBPF(t, &Options{Variant: v})
	want := map[loader.Variant]lineage.Containment{loader.VariantFull: lineage.ContainKernel, loader.VariantCompat: lineage.ContainKernelForker}[v]
	if b.Containment() != want {
		t.Fatalf("containment %q, want %q", b.Containment(), want)
	}
	rec := record(t, b)
	mark := testutil.Marker(t)
	testutil.CheckNoLeaks(t, mark)

	// A job that keeps forking.
	id, j := spawn(t, b, fmt.Sprintf("while :; do sleep %s & sleep 0.01; done", testutil.Sleep(mark)), loader.RootOptions{})
	t.Cleanup(func() { killMembers(t, b, id) })
	waitFor(t, "a few sleepers", 5*time.Second, func() bool { return len(testutil.Sleepers(mark)) >= 3 })

	how, err := b.Contain(id)
	if err != nil {
		t.Fatal(err)
	}
	if how != want {
		t.Fatalf("contain says %q, want %q", how, want)
	}
	waitFor(t, "contained forks", 5*time.Second, func() bool {
		st, _ := b.Stats()
		return st.Contained >= 1
	})
	if how == lineage.ContainKernelForker {
		// The forking member, the job's loop, dies at its first fork.
		done := make(chan error, 1)
		go func() { done <- j.wait() }()
		select {
		case err := <-done:
			if err == nil {
				t.Fatal("the forking job exited 0; it should have been killed")
			}
		case <-time.After(5 * time.Second):
			t.Fatal("the forking member was not killed")
		}
	} else {
		checkBornAfterDie(t, b, id, mark)
	}
	waitFor(t, "contained fork events", 5*time.Second, func() bool {
		for _, ev := range rec.snapshot() {
			if ev.Contained {
				return true
			}
		}
		return false
	})
}

// checkBornAfterDie checks that no process of the lineage born after it was
// contained lives on.
func checkBornAfterDie(t *testing.T, b *Tracker, id lineage.Identity, mark string) {
	t.Helper()
	waitFor(t, "contained forks", 5*time.Second, func() bool {
		st, _ := b.Stats()
		return st.Contained >= 3
	})
	// Every member the map holds now without the contained mark was born
	// before Contain; whatever else lives later was born after and escaped.
	before := map[uint32]bool{}
	for mid, m := range memberSet(t, b, id) {
		if !m.Contained {
			before[mid.PID] = true
		}
	}
	time.Sleep(100 * time.Millisecond)
	for _, p := range testutil.Find(mark) {
		// One born an instant ago has its SIGKILL pending: give it the
		// moment it needs to be scheduled and die.
		if !before[uint32(p.PID)] && !testutil.WaitGone(p.PID, p.StartTicks, 30*time.Second) {
			t.Errorf("process %d %q was born after containment and lives", p.PID, p.Argv)
		}
	}
}

func TestHardCancel(t *testing.T) { eachVariant(t, testHardCancel) }

// testHardCancel SIGKILLs a supervisor whose job asked to die with it. Where
// the loader says HardCancelKernel, every member dies and a bystander lives;
// where it says HardCancelNone, the members live (and the test kills them).
func testHardCancel(t *testing.T, v loader.Variant) {
	mode := openBPF(t, &Options{Variant: v}).HardCancel()
	mark := testutil.Marker(t)
	testutil.CheckNoLeaks(t, mark)
	bystander := exec.Command("sleep", testutil.Sleep(mark))
	if err := bystander.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = bystander.Process.Kill(); _ = bystander.Wait() })
	byStart, _, _ := testutil.StartTicks(bystander.Process.Pid)

	members := startSupervisor(t, v, mark)
	t.Cleanup(func() {
		for _, m := range members {
			testutil.KillIdentity(int(m.PID), m.StartTicks)
		}
	})
	if mode == loader.HardCancelKernel {
		for _, m := range members {
			if !testutil.WaitGone(int(m.PID), m.StartTicks, 30*time.Second) {
				t.Errorf("member %v survived its supervisor's death", m)
			}
		}
	} else {
		time.Sleep(200 * time.Millisecond)
		for _, m := range members {
			if !testutil.Alive(int(m.PID), m.StartTicks) {
				t.Errorf("member %v died with its supervisor, but hard cancel is %q", m, mode)
			}
		}
	}
	if !testutil.Alive(bystander.Process.Pid, byStart) {
		t.Error("the bystander was killed")
	}
}

// startSupervisor runs the supervisor helper with variant v, waits until its
// job's sleepers are members, SIGKILLs it (a CI runner's hard cancel) and
// returns the members it reported.
func startSupervisor(t *testing.T, v loader.Variant, mark string) []lineage.Identity {
	t.Helper()
	sup := helperCmd("supervisor", testutil.Sleep(mark))
	sup.Env = append(sup.Env, helperVariantEnv+"="+string(v))
	out, err := sup.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := sup.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sup.Process.Kill(); _ = sup.Wait() })
	var members []lineage.Identity
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		line := sc.Text()
		var pid uint32
		var start uint64
		if n, _ := fmt.Sscanf(line, "member %d %d", &pid, &start); n == 2 {
			members = append(members, lineage.Identity{PID: pid, StartTicks: start})
			continue
		}
		if line == "ready" {
			break
		}
		t.Fatalf("supervisor said %q", line)
	}
	if len(members) != supervisedSleepers {
		t.Fatalf("%d members, want the %d sleepers", len(members), supervisedSleepers)
	}
	if err := sup.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = sup.Wait()
	return members
}
