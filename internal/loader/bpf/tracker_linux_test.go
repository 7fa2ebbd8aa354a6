package bpf

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lineage-dev/lineage/internal/loader"
	"github.com/lineage-dev/lineage/internal/testutil"
	"github.com/lineage-dev/lineage/lineage"
)

func TestSpawnedRootStartTicksMatchProc(t *testing.T) {
	eachVariant(t, testSpawnedRootStartTicksMatchProc)
}

func testSpawnedRootStartTicksMatchProc(t *testing.T, v loader.Variant) {
	b := openBPF(t, &Options{Variant: v})
	mark := testutil.Marker(t)
	testutil.CheckNoLeaks(t, mark)
	rec := record(t, b)

	id, j := spawn(t, b, "sleep "+testutil.Sleep(mark)+" & exec sleep "+testutil.Sleep(mark), loader.RootOptions{})
	t.Cleanup(func() { killMembers(t, b, id) })
	if id.PID != uint32(j.cmd.Process.Pid) {
		t.Fatalf("root pid %d, command pid %d", id.PID, j.cmd.Process.Pid)
	}
	waitFor(t, "two members", 5*time.Second, func() bool { return len(memberSet(t, b, id)) == 2 })

	for mid := range memberSet(t, b, id) {
		start, _, err := testutil.StartTicks(int(mid.PID))
		if err != nil {
			t.Fatal(err)
		}
		if start != mid.StartTicks {
			t.Errorf("member %d: bpf start ticks %d, /proc/%d/stat field 22 says %d", mid.PID, mid.StartTicks, mid.PID, start)
		}
	}
	// The events carry the same identities.
	waitFor(t, "fork events", 5*time.Second, func() bool { return len(rec.tree.Lineage(id)) == 2 })
	for _, m := range rec.tree.Lineage(id) {
		start, _, err := testutil.StartTicks(int(m.PID))
		if err != nil {
			t.Fatal(err)
		}
		if start != m.StartTicks {
			t.Errorf("event for %d: start %d, /proc says %d", m.PID, m.StartTicks, start)
		}
	}
}

func TestForkExecExitEvents(t *testing.T) { eachVariant(t, testForkExecExitEvents) }

func testForkExecExitEvents(t *testing.T, v loader.Variant) {
	b := openBPF(t, &Options{Variant: v})
	rec := record(t, b)

	id, j := spawn(t, b, `/bin/echo one two >/dev/null; sh -c 'exit 7'; kill -TERM $$`, loader.RootOptions{})
	if err := j.wait(); err == nil {
		t.Fatal("the job should have died of SIGTERM")
	}
	waitFor(t, "empty lineage", 5*time.Second, func() bool { return len(memberSet(t, b, id)) == 0 })
	waitFor(t, "root exit event", 5*time.Second, func() bool {
		m, ok := rec.tree.Get(id)
		return ok && m.Exited
	})

	all := rec.tree.Lineage(id)
	if len(all) != 3 {
		t.Fatalf("lineage has %d processes, want 3 (sh, echo, sh): %+v", len(all), all)
	}
	root := all[0]
	if root.Identity != id || !root.Exited {
		t.Errorf("root %+v", root)
	}
	if sig, ok := root.Status.Signaled(); !ok || sig != syscall.SIGTERM {
		t.Errorf("root status %v, want signal TERM", root.Status)
	}
	byFile := map[string]lineage.Member{}
	for _, m := range all[1:] {
		if m.Parent != id || m.Root != id {
			t.Errorf("member %+v: want parent and root %v", m, id)
		}
		byFile[m.Filename] = m
	}
	echo, ok := byFile["/bin/echo"]
	if !ok {
		t.Fatalf("no exec of /bin/echo in %+v", all)
	}
	if want := []string{"/bin/echo", "one", "two"}; !slices.Equal(echo.Argv, want) {
		t.Errorf("echo argv %q, want %q", echo.Argv, want)
	}
	if code, ok := echo.Status.Exited(); !ok || code != 0 {
		t.Errorf("echo status %v", echo.Status)
	}
	var sh7 *lineage.Member
	for _, m := range all[1:] {
		if code, ok := m.Status.Exited(); ok && code == 7 {
			sh7 = &m
		}
	}
	if sh7 == nil {
		t.Errorf("no member exited with status 7: %+v", all)
	}
}

func TestLongArgvIsCutAndSaysSo(t *testing.T) { eachVariant(t, testLongArgvIsCutAndSaysSo) }

// testLongArgvIsCutAndSaysSo: an argv of 1 KiB is captured whole, one
// beyond is cut at 1 KiB and marked so; exec events carry uid and euid.
func testLongArgvIsCutAndSaysSo(t *testing.T, v loader.Variant) {
	b := openBPF(t, &Options{Variant: v})
	rec := record(t, b)
	fits := strings.Repeat("f", argsLen-len("/bin/true")-2)
	long := strings.Repeat("x", 1500)
	id, j := spawn(t, b, "/bin/true "+fits+"; /bin/true "+long, loader.RootOptions{})
	_ = j.wait()
	var execs []lineage.Event
	waitFor(t, "exec events", 5*time.Second, func() bool {
		execs = execs[:0]
		for _, ev := range rec.snapshot() {
			if ev.Kind == lineage.EventExec && ev.Process.PID != id.PID && ev.Filename == "/bin/true" {
				execs = append(execs, ev)
			}
		}
		return len(execs) == 2
	})
	for i, want := range []string{fits, long} {
		ev := execs[i]
		if len(ev.Argv) != 2 || ev.Argv[0] != "/bin/true" || !strings.HasPrefix(want, ev.Argv[1]) {
			t.Fatalf("argv %q", ev.Argv)
		}
		if got := len(ev.Argv[1]); (i == 0 && got != len(fits)) || (i == 1 && got != argsLen-len("/bin/true")-1) {
			t.Errorf("argv of %d bytes: %d captured", len(want)+len("/bin/true")+2, got)
		}
		if ev.ArgvTruncated != (i == 1) {
			t.Errorf("argv of %d bytes: truncated %v", len(want)+len("/bin/true")+2, ev.ArgvTruncated)
		}
		if !ev.CredsKnown || ev.UID != uint32(os.Getuid()) || ev.EUID != uint32(os.Geteuid()) {
			t.Errorf("creds known %v, uid %d, euid %d: want %d, %d", ev.CredsKnown, ev.UID, ev.EUID, os.Getuid(), os.Geteuid())
		}
	}
}

func TestThreadsAreNotMembersButTheirForksAre(t *testing.T) {
	eachVariant(t, testThreadsAreNotMembersButTheirForksAre)
}

func testThreadsAreNotMembersButTheirForksAre(t *testing.T, v loader.Variant) {
	b := openBPF(t, &Options{Variant: v})
	mark := testutil.Marker(t)
	testutil.CheckNoLeaks(t, mark)

	helper := helperCmd("thread-fork", testutil.Sleep(mark))
	out, err := helper.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	id, err := b.Spawn(helper, loader.RootOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { killMembers(t, b, id); _ = helper.Process.Kill(); _ = helper.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	var child, tid int
	if _, err := fmt.Sscanf(line, "child %d tid %d", &child, &tid); err != nil {
		t.Fatalf("helper said %q: %v", line, err)
	}
	if tid == int(id.PID) {
		t.Fatalf("the helper forked from its leader thread; the test needs another thread")
	}
	ms := memberSet(t, b, id)
	if len(ms) != 2 {
		t.Fatalf("members %v: want the helper and its child only (its threads are not processes)", ms)
	}
	for mid, m := range ms {
		if mid.PID == uint32(child) && m.Parent != id {
			t.Errorf("child's lineage parent %v, want the helper %v", m.Parent, id)
		}
	}
}

func TestLeaderExitsWhileAnotherThreadRuns(t *testing.T) {
	eachVariant(t, testLeaderExitsWhileAnotherThreadRuns)
}

func testLeaderExitsWhileAnotherThreadRuns(t *testing.T, v loader.Variant) {
	b := openBPF(t, &Options{Variant: v})
	rec := record(t, b)
	mark := testutil.Marker(t)
	testutil.CheckNoLeaks(t, mark)

	helper := helperCmd("leader-exit", testutil.Sleep(mark))
	out, err := helper.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	id, err := b.Spawn(helper, loader.RootOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { killMembers(t, b, id) })
	exited := make(chan error, 1)
	go func() { exited <- helper.Wait() }()

	// The leader thread is gone, yet the process is a member.
	waitFor(t, "the leader thread to exit", 5*time.Second, func() bool {
		_, state, err := testutil.StartTicks(int(id.PID))
		return err == nil && state == "Z+"
	})
	if _, ok := memberSet(t, b, id)[id]; !ok {
		t.Fatal("the process left the lineage when its leader thread exited; its other thread still runs")
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	var child int
	if _, err := fmt.Sscanf(line, "child %d", &child); err != nil {
		t.Fatalf("helper said %q", line)
	}
	var childID lineage.Identity
	for mid := range memberSet(t, b, id) {
		if mid.PID == uint32(child) {
			childID = mid
		}
	}
	if childID.IsZero() {
		t.Fatal("a child forked by a non-leader thread is not a member")
	}
	err = <-exited
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 3 {
		t.Fatalf("helper ended with %v, want exit 3", err)
	}
	waitFor(t, "exit event", 5*time.Second, func() bool {
		m, ok := rec.tree.Get(id)
		return ok && m.Exited
	})
	m, _ := rec.tree.Get(id)
	if code, ok := m.Status.Exited(); !ok || code != 3 {
		t.Errorf("exit status %v, want exit 3", m.Status)
	}
	if _, ok := memberSet(t, b, id)[id]; ok {
		t.Error("the process is still a member after its whole thread group died")
	}
	testutil.KillIdentity(child, childID.StartTicks)
}

func TestFullMembershipMapIsCountedNotSilent(t *testing.T) {
	eachVariant(t, testFullMembershipMapIsCountedNotSilent)
}

func testFullMembershipMapIsCountedNotSilent(t *testing.T, v loader.Variant) {
	// --on-full=escape: the escapes are counted and said; TestFullMapFailsClosed
	// has the default.
	b := openBPF(t, &Options{MaxMembers: 4, Variant: v, OnFull: loader.OnFullEscape})
	rec := record(t, b)
	mark := testutil.Marker(t)
	testutil.CheckNoLeaks(t, mark)

	var script strings.Builder
	for range 8 {
		fmt.Fprintf(&script, "sleep %s & ", testutil.Sleep(mark))
	}
	script.WriteString("wait")
	id, _ := spawn(t, b, script.String(), loader.RootOptions{})
	t.Cleanup(func() {
		killMembers(t, b, id)
		for _, p := range testutil.Find(mark) {
			testutil.KillIdentity(p.PID, p.StartTicks) // the ones that escaped
		}
	})
	waitFor(t, "eight sleepers", 5*time.Second, func() bool { return len(testutil.Sleepers(mark)) == 8 })
	st, err := b.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if st.MembersFull == 0 {
		t.Fatalf("stats %+v: a full map must be counted", st)
	}
	if n := len(memberSet(t, b, id)); n > 4 {
		t.Errorf("%d members in a map of 4", n)
	}
	waitFor(t, "untracked events", 5*time.Second, func() bool {
		n := 0
		for _, ev := range rec.snapshot() {
			if ev.Untracked {
				n++
			}
		}
		return uint64(n) == st.MembersFull
	})
}

func TestRingBufferLossIsCountedAndMembershipStaysExact(t *testing.T) {
	eachVariant(t, testRingBufferLossIsCountedAndMembershipStaysExact)
}

func testRingBufferLossIsCountedAndMembershipStaysExact(t *testing.T, v loader.Variant) {
	b := openBPF(t, &Options{RingBytes: uint32(os.Getpagesize()), Variant: v})
	// No reader runs: the ring fills up.
	id, j := spawn(t, b, "for i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; do /bin/true; done", loader.RootOptions{})
	if err := j.wait(); err != nil {
		t.Fatal(err)
	}
	st, err := b.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if st.EventsLost == 0 {
		t.Fatalf("stats %+v: a full ring buffer must count lost events", st)
	}
	if st.Forks != 21 || st.Exits != 21 {
		t.Errorf("stats %+v: want 21 forks and exits in the kernel's own count", st)
	}
	if ms := memberSet(t, b, id); len(ms) != 0 {
		t.Errorf("members %v after the job ended", ms)
	}
}

func TestRegisterAdoptsExistingDescendants(t *testing.T) {
	eachVariant(t, testRegisterAdoptsExistingDescendants)
}

func testRegisterAdoptsExistingDescendants(t *testing.T, v loader.Variant) {
	b := openBPF(t, &Options{Variant: v})
	mark := testutil.Marker(t)
	testutil.CheckNoLeaks(t, mark)
	s := testutil.Sleep(mark)

	// A tree that exists before lineage hears of it.
	cmd := exec.Command("sh", "-c", fmt.Sprintf("sh -c 'sleep %[1]s & wait' & sleep %[1]s & read x; sleep %[1]s & read y", s))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stdin.Close(); _ = cmd.Process.Kill(); _ = cmd.Wait() })
	waitFor(t, "the tree", 5*time.Second, func() bool { return len(testutil.Sleepers(mark)) == 2 })
	start, _, _ := testutil.StartTicks(cmd.Process.Pid)
	root := lineage.Identity{PID: uint32(cmd.Process.Pid), StartTicks: start}

	if err := b.Register(root, loader.RootOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { killMembers(t, b, root) })
	ms := memberSet(t, b, root)
	// root, the inner sh, and two sleepers
	if len(ms) != 4 {
		t.Fatalf("members %v, want 4", ms)
	}
	for _, p := range testutil.Find(mark) {
		if _, ok := ms[lineage.Identity{PID: uint32(p.PID), StartTicks: p.StartTicks}]; !ok {
			t.Errorf("descendant %d %q not adopted", p.PID, p.Argv)
		}
	}
	if err := b.Register(root, loader.RootOptions{}); !errors.Is(err, loader.ErrAlreadyTracked) {
		t.Errorf("registering twice: %v, want ErrAlreadyTracked", err)
	}
	// From now on the kernel catches new forks.
	if _, err := fmt.Fprintln(stdin, "go"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a third sleeper", 5*time.Second, func() bool { return len(testutil.Sleepers(mark)) == 3 })
	ms = memberSet(t, b, root)
	for _, p := range testutil.Find(mark) {
		if _, ok := ms[lineage.Identity{PID: uint32(p.PID), StartTicks: p.StartTicks}]; !ok {
			t.Errorf("process %d %q forked after register is not a member", p.PID, p.Argv)
		}
	}
	// One pass for many roots lists what a pass per root lists.
	all, err := b.MembersOfRoots([]lineage.Identity{root, {PID: 1 << 22, StartTicks: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 1 || len(all[root]) != len(ms) {
		t.Errorf("members of roots %v, want the %d of %v", all, len(ms), root)
	}
	for _, m := range all[root] {
		if _, ok := ms[m.Identity]; !ok || m.Root != root {
			t.Errorf("member %v of %v is not one of %v", m.Identity, m.Root, ms)
		}
	}
}

func TestRegisterRefusesBadInputAndChangesNothing(t *testing.T) {
	eachVariant(t, testRegisterRefusesBadInputAndChangesNothing)
}

func testRegisterRefusesBadInputAndChangesNothing(t *testing.T, v loader.Variant) {
	b := openBPF(t, &Options{Variant: v})
	self, _, _ := testutil.StartTicks(os.Getpid())
	cases := []struct {
		name string
		id   lineage.Identity
		want error
	}{
		{"pid 0", lineage.Identity{PID: 0, StartTicks: 1}, lineage.ErrInvalid},
		{"pid 1", lineage.Identity{PID: 1, StartTicks: 1}, lineage.ErrInvalid},
		{"no start time", lineage.Identity{PID: uint32(os.Getpid())}, lineage.ErrInvalid},
		{"no such pid", lineage.Identity{PID: 1 << 30, StartTicks: 5}, lineage.ErrNoProcess},
		{"wrong start time", lineage.Identity{PID: uint32(os.Getpid()), StartTicks: self + 1}, lineage.ErrIdentityMismatch},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := b.Register(c.id, loader.RootOptions{})
			if !errors.Is(err, c.want) {
				t.Fatalf("register %v: %v, want %v", c.id, err, c.want)
			}
			if ms, _ := b.Members(c.id); len(ms) != 0 {
				t.Errorf("members after a refused register: %v", ms)
			}
			if _, err := b.Contain(c.id); !errors.Is(err, loader.ErrNotRoot) {
				t.Errorf("contain after a refused register: %v, want ErrNotRoot", err)
			}
		})
	}
}

func TestUnrelatedProcessesAreNotMembers(t *testing.T) {
	eachVariant(t, testUnrelatedProcessesAreNotMembers)
}

func testUnrelatedProcessesAreNotMembers(t *testing.T, v loader.Variant) {
	b := openBPF(t, &Options{Variant: v})
	mark := testutil.Marker(t)
	testutil.CheckNoLeaks(t, mark)
	id, _ := spawn(t, b, "sleep "+testutil.Sleep(mark), loader.RootOptions{})
	t.Cleanup(func() { killMembers(t, b, id) })

	// Started by the test (not a member) beside the job.
	other := exec.Command("sleep", testutil.Sleep(mark))
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = other.Process.Kill(); _ = other.Wait() })
	waitFor(t, "both sleepers", 5*time.Second, func() bool { return len(testutil.Sleepers(mark)) == 2 })
	for mid := range memberSet(t, b, id) {
		if mid.PID == uint32(other.Process.Pid) {
			t.Errorf("a process started beside the job is a member")
		}
	}
	if n := len(memberSet(t, b, id)); n != 2 {
		t.Errorf("%d members, want 2 (sh and its sleep)", n)
	}
}

// A command that exits at once is registered all the same: the exit hook
// forgets its member entry before its zombie shows, and the spawn must
// read that as an exit, not as a process running untracked.
func TestSpawnOfACommandThatExitsAtOnce(t *testing.T) {
	eachVariant(t, testSpawnOfACommandThatExitsAtOnce)
}

func testSpawnOfACommandThatExitsAtOnce(t *testing.T, v loader.Variant) {
	b := openBPF(t, &Options{Variant: v})
	for i := range 300 {
		cmd := exec.Command("true")
		id, err := b.Spawn(cmd, loader.RootOptions{})
		if err != nil {
			t.Fatalf("spawn %d of true: %v", i, err)
		}
		if err := cmd.Wait(); err != nil {
			t.Fatalf("true %d: %v", i, err)
		}
		if err := b.Forget(id); err != nil {
			t.Fatalf("forget %v: %v", id, err)
		}
	}
}
