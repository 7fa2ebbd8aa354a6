package bpf

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lineage-dev/lineage/internal/loader"
	"github.com/lineage-dev/lineage/internal/testutil"
	"github.com/lineage-dev/lineage/lineage"
)

// What user space spares, the kernel spares: its supervisor-death kill and
// its containment skip a member marked with Spare.

func TestSparedMemberSurvivesHardCancel(t *testing.T) { eachVariant(t, testSparedSurvivesHardCancel) }

func testSparedSurvivesHardCancel(t *testing.T, v loader.Variant) {
	mode := openBPF(t, &Options{Variant: v}).HardCancel()
	mark := testutil.Marker(t)
	testutil.CheckNoLeaks(t, mark)
	spared, members := startSupervisorOf(t, "spare-supervisor", v, mark)
	if len(spared) != 1 || len(members) != 2 {
		t.Fatalf("spared %v, members %v: want one spared sleeper, a sleeper and the shell", spared, members)
	}
	t.Cleanup(func() {
		for _, m := range append(spared, members...) {
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
	}
	if !testutil.Alive(int(spared[0].PID), spared[0].StartTicks) {
		t.Errorf("spared member %v was killed when its supervisor died (hard cancel %q)", spared[0], mode)
	}
}

// TestLeaderExitedMemberDiesWithSupervisor: a member whose leader thread
// has exited, while another runs on, is killed through that other thread.
func TestLeaderExitedMemberDiesWithSupervisor(t *testing.T) {
	if openBPF(t, &Options{Variant: loader.VariantFull}).HardCancel() != loader.HardCancelKernel {
		t.Skip("the kernel does not kill with the supervisor here")
	}
	mark := testutil.Marker(t)
	_, members := startSupervisorOf(t, "leader-supervisor", loader.VariantFull, mark)
	if len(members) != 1 {
		t.Fatalf("members %v, want the leader-exited process", members)
	}
	m := members[0]
	t.Cleanup(func() { testutil.KillIdentity(int(m.PID), m.StartTicks) })
	testutil.Eventually(t, 5*time.Second, fmt.Sprintf("the leader-exited member %v to die", m), func() bool { return liveThreads(m) == 0 })
}

// liveThreads counts the threads of id that are not zombies.
func liveThreads(id lineage.Identity) int {
	if got, _, err := testutil.StartTicks(int(id.PID)); err != nil || got != id.StartTicks {
		return 0
	}
	dir := fmt.Sprintf("/proc/%d/task", id.PID)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0
	}
	n := 0
	for _, e := range entries {
		raw, err := os.ReadFile(dir + "/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(raw)
		if i := strings.LastIndexByte(s, ')'); i > 0 && len(s) > i+2 && s[i+2] != 'Z' && s[i+2] != 'X' {
			n++
		}
	}
	return n
}

// startSupervisorOf runs the supervisor helper mode with variant v, waits
// until it is ready, SIGKILLs it and returns the spared and other members
// it reported.
func startSupervisorOf(t *testing.T, mode string, v loader.Variant, mark string) (spared, members []lineage.Identity) {
	t.Helper()
	sup := helperCmd(mode, testutil.Sleep(mark))
	sup.Env = append(sup.Env, helperVariantEnv+"="+string(v))
	out, err := sup.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := sup.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sup.Process.Kill(); _ = sup.Wait() })
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		line := sc.Text()
		var kind string
		var id lineage.Identity
		if n, _ := fmt.Sscanf(line, "%s %d %d", &kind, &id.PID, &id.StartTicks); n == 3 && kind == "spared" {
			spared = append(spared, id)
			continue
		} else if n == 3 && kind == "member" {
			members = append(members, id)
			continue
		}
		if line == "ready" {
			break
		}
		t.Fatalf("supervisor said %q", line)
	}
	if err := sup.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = sup.Wait()
	return spared, members
}

func TestSparedForkerIsNotContained(t *testing.T) { eachVariant(t, testSparedForkerIsNotContained) }

// testSparedForkerIsNotContained contains a lineage with two forking loops,
// one spared: the spared loop lives and its children are born alive (a kept
// redis forks its background save), while the other is contained as ever.
func testSparedForkerIsNotContained(t *testing.T, v loader.Variant) {
	b := openBPF(t, &Options{Variant: v})
	rec := record(t, b)
	mark := testutil.Marker(t)
	testutil.CheckNoLeaks(t, mark)
	loop := `sh -c 'i=0; while [ $i -lt 3000 ]; do sleep 0.02; i=$((i+1)); done; : %s%s' &`
	id, _ := spawn(t, b, fmt.Sprintf(loop+loop+" wait", "keep", mark, "reap", mark), loader.RootOptions{})
	t.Cleanup(func() { killMembers(t, b, id) })
	var kept, reaped lineage.Identity
	waitFor(t, "both loops", 5*time.Second, func() bool {
		var okK, okR bool
		kept, okK = loopShell("keep" + mark)
		reaped, okR = loopShell("reap" + mark)
		return okK && okR
	})
	if err := b.Spare(kept); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Contain(id); err != nil {
		t.Fatal(err)
	}
	contained := bootTime(t)
	waitFor(t, "the other loop contained", 5*time.Second, func() bool {
		st, _ := b.Stats()
		return st.Contained >= 1
	})
	waitFor(t, "children of the spared loop", 5*time.Second, func() bool {
		return len(forksOf(rec.snapshot(), kept, contained)) >= 3
	})
	for _, ev := range forksOf(rec.snapshot(), kept, contained) {
		if ev.Contained {
			t.Errorf("child %v of the spared loop was killed at birth", ev.Process)
		}
	}
	if !testutil.Alive(int(kept.PID), kept.StartTicks) {
		t.Errorf("the spared loop %v was killed", kept)
	}
	if v == loader.VariantCompat && !testutil.WaitGone(int(reaped.PID), reaped.StartTicks, 30*time.Second) {
		t.Errorf("the other loop %v forked on, uncontained", reaped)
	}
}

// loopShell finds the one loop shell carrying token (the root's script
// carries it too, and waits).
func loopShell(token string) (lineage.Identity, bool) {
	var out []lineage.Identity
	for _, p := range testutil.Find(token) {
		if len(p.Argv) == 3 && !strings.Contains(p.Argv[2], "wait") {
			out = append(out, lineage.Identity{PID: uint32(p.PID), StartTicks: p.StartTicks})
		}
	}
	if len(out) != 1 {
		return lineage.Identity{}, false
	}
	return out[0], true
}

// forksOf returns the fork events of parent's children born after since
// (CLOCK_BOOTTIME).
func forksOf(evs []lineage.Event, parent lineage.Identity, since time.Duration) []lineage.Event {
	var out []lineage.Event
	for _, ev := range evs {
		if ev.Kind == lineage.EventFork && ev.Parent == parent && ev.Time > since {
			out = append(out, ev)
		}
	}
	return out
}

func bootTime(t *testing.T) time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ts.Nano())
}

func TestFullMapFailsClosed(t *testing.T) {
	eachVariant(t, func(t *testing.T, v loader.Variant) {
		for _, on := range []loader.OnFull{loader.OnFullKill, loader.OnFullEscape} {
			t.Run(string(on), func(t *testing.T) { testFullMap(t, v, on) })
		}
	})
}

// testFullMap fills a 100-entry map with a shell and 99 sleepers; the
// setsid daemon it starts next can't be tracked: killed (at birth, or at its
// exec on compat) and counted, or, asked to escape, let go and counted.
func testFullMap(t *testing.T, v loader.Variant, on loader.OnFull) {
	b := openBPF(t, &Options{Variant: v, MaxMembers: 100, OnFull: on})
	rec := record(t, b)
	mark := testutil.Marker(t)
	testutil.CheckNoLeaks(t, mark)
	daemon := "96." + mark
	id, _ := spawn(t, b, fmt.Sprintf(`i=0; while [ $i -lt 99 ]; do sleep %s & i=$((i+1)); done; setsid sleep %s & wait`,
		testutil.Sleep(mark), daemon), loader.RootOptions{})
	t.Cleanup(func() {
		killMembers(t, b, id)
		for _, p := range testutil.Find(daemon) {
			testutil.KillIdentity(p.PID, p.StartTicks)
		}
	})
	var untracked lineage.Event
	waitFor(t, "the untracked fork", 5*time.Second, func() bool {
		for _, ev := range rec.snapshot() {
			if ev.Kind == lineage.EventFork && ev.Untracked {
				untracked = ev
				return true
			}
		}
		return false
	})
	if on == loader.OnFullEscape {
		waitFor(t, "the daemon", 5*time.Second, func() bool { return len(testutil.Sleepers(daemon)) == 1 })
		if untracked.Contained {
			t.Error("an escaping untracked fork is marked killed")
		}
		if st, _ := b.Stats(); st.MembersFull < 1 || st.UntrackedKilled != 0 {
			t.Errorf("stats %+v, want members full and nothing killed", st)
		}
		return
	}
	if !untracked.Contained {
		t.Error("the untracked fork is not marked killed")
	}
	waitFor(t, "the untracked kill counted", 5*time.Second, func() bool {
		st, _ := b.Stats()
		return st.UntrackedKilled >= 1 && st.MembersFull >= 1
	})
	time.Sleep(100 * time.Millisecond)
	for _, p := range testutil.Sleepers(daemon) {
		if !testutil.WaitGone(p.PID, p.StartTicks, 30*time.Second) {
			t.Errorf("untracked daemon %d %q lives", p.PID, p.Argv)
		}
	}
}

func TestSpawnIntoAFullMapFails(t *testing.T) { eachVariant(t, testSpawnIntoAFullMapFails) }

// testSpawnIntoAFullMapFails: a root the full map can't hold is an error,
// and its command is not left running; not a root that already exited.
func testSpawnIntoAFullMapFails(t *testing.T, v loader.Variant) {
	b := openBPF(t, &Options{Variant: v, MaxMembers: 2})
	mark := testutil.Marker(t)
	testutil.CheckNoLeaks(t, mark)
	id, _ := spawn(t, b, fmt.Sprintf("sleep %s & wait", testutil.Sleep(mark)), loader.RootOptions{})
	t.Cleanup(func() { killMembers(t, b, id) })
	waitFor(t, "the sleeper", 5*time.Second, func() bool { return len(testutil.Sleepers(mark)) == 1 })
	cmd := exec.Command("sleep", testutil.Sleep(mark))
	_, err := b.Spawn(cmd, loader.RootOptions{})
	if err == nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatal("spawn into a full map succeeded")
	}
	if !strings.Contains(err.Error(), "membership map is full") {
		t.Errorf("spawn: %v, want it to say the map is full", err)
	}
}
