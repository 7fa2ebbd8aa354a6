package bpf

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lineage-dev/lineage/internal/loader"
	"github.com/lineage-dev/lineage/internal/proc"
	"github.com/lineage-dev/lineage/internal/testutil"
	"github.com/lineage-dev/lineage/lineage"
)

// What keep rules keep, the kernel spares in the hook run where the rule
// applies: an exe rule at the member's exec, a kept lineage at every fork,
// and a mark for a program passes to the forks that exec nothing.

// keptCopy copies the program name (found on PATH) to a file of its own,
// for an exe rule that keeps it and nothing else, and returns its path and
// its identity as proc.FS.ExeFile resolves it.
func keptCopy(t *testing.T, name string) (string, lineage.FileID) {
	t.Helper()
	src, err := exec.LookPath(name)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "kept-"+name)
	copyFile(t, src, path)
	fs, err := proc.Open("/proc")
	if err != nil {
		t.Fatal(err)
	}
	_, id, err := fs.ExeFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return path, id
}

func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}

// spared says whether the kernel spares id, failing the test when id is
// no member.
func spared(t *testing.T, b *Tracker, id lineage.Identity) bool {
	t.Helper()
	ok, err := b.Spared(id)
	if err != nil {
		t.Fatalf("spared %v: %v", id, err)
	}
	return ok
}

// procID is p's identity.
func procID(p testutil.Proc) lineage.Identity {
	return lineage.Identity{PID: uint32(p.PID), StartTicks: p.StartTicks}
}

func TestKernelSparesAKeptProgramAtItsExec(t *testing.T) {
	eachVariant(t, testKernelSparesAKeptProgramAtItsExec)
}

// testKernelSparesAKeptProgramAtItsExec runs a kept copy of sleep beside a
// plain sleep: the kernel marks the kept one in its exec hook, and says so
// in the event, with no call from user space.
func testKernelSparesAKeptProgramAtItsExec(t *testing.T, v loader.Variant) {
	b := openBPF(t, &Options{Variant: v})
	rec := record(t, b)
	mark := testutil.Marker(t)
	testutil.CheckNoLeaks(t, mark)
	kept, file := keptCopy(t, "sleep")
	id, _ := spawn(t, b, fmt.Sprintf("%s %s & sleep %s & wait", kept, testutil.Sleep(mark), testutil.Sleep(mark)),
		loader.RootOptions{KeepExes: []lineage.FileID{file}})
	t.Cleanup(func() { killMembers(t, b, id) })
	var keptProc, plain testutil.Proc
	waitFor(t, "both sleepers", 10*time.Second, func() bool {
		for _, p := range testutil.Find(mark) {
			switch p.Argv[0] {
			case kept:
				keptProc = p
			case "sleep":
				plain = p
			}
		}
		return keptProc.PID != 0 && plain.PID != 0
	})
	if !spared(t, b, procID(keptProc)) {
		t.Errorf("the kept program %v is not spared in the kernel", keptProc)
	}
	if spared(t, b, procID(plain)) || spared(t, b, id) {
		t.Errorf("the plain sleeper or the shell is spared: only the kept program may be")
	}
	waitFor(t, "the kept program's exec event", 5*time.Second, func() bool {
		for _, ev := range rec.snapshot() {
			if ev.Kind == lineage.EventExec && ev.Process == procID(keptProc) {
				return ev.Spared
			}
		}
		return false
	})
	if st, _ := b.Stats(); st.KeptAtExec != 1 {
		t.Errorf("kept at exec %d, want 1", st.KeptAtExec)
	}
}

func TestKernelSparesAKeptRootFromItsFirstExec(t *testing.T) {
	eachVariant(t, testKernelSparesAKeptRootFromItsFirstExec)
}

// testKernelSparesAKeptRootFromItsFirstExec spawns the kept program as the
// root itself: its one exec happens inside Spawn, before the root's pid is
// known to user space, and the kernel spares it there (the rule waits for
// the spawning root under pid 0).
func testKernelSparesAKeptRootFromItsFirstExec(t *testing.T, v loader.Variant) {
	b := openBPF(t, &Options{Variant: v})
	rec := record(t, b)
	mark := testutil.Marker(t)
	testutil.CheckNoLeaks(t, mark)
	kept, file := keptCopy(t, "sleep")
	cmd := exec.Command(kept, testutil.Sleep(mark))
	id, err := b.Spawn(cmd, loader.RootOptions{KeepExes: []lineage.FileID{file}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	// Spawn returns once the exec is under way (the child closed its
	// descriptors); the exec hook runs before the program's first
	// instruction, and its event says what it did.
	waitFor(t, "the root's exec event", 5*time.Second, func() bool {
		for _, ev := range rec.snapshot() {
			if ev.Kind == lineage.EventExec && ev.Process == id {
				return true
			}
		}
		return false
	})
	if !spared(t, b, id) {
		t.Error("the kept root is not spared in the kernel")
	}
	// The rule moved under the root's pid; nothing waits under pid 0.
	if keys := keepKeys(t, b); !slices.Contains(keys, keepExeKey(id.PID, file)) || slices.ContainsFunc(keys, func(k lineageKeepExe) bool { return k.RootPid == 0 }) {
		t.Errorf("keep_exes %+v, want the rule under root %d alone", keys, id.PID)
	}
	if err := b.Forget(id); err != nil {
		t.Fatal(err)
	}
	if keys := keepKeys(t, b); len(keys) != 0 {
		t.Errorf("keep_exes %+v after the root was forgotten, want none", keys)
	}
}

func keepKeys(t *testing.T, b *Tracker) []lineageKeepExe {
	t.Helper()
	var (
		k     lineageKeepExe
		start uint64
		out   []lineageKeepExe
	)
	it := b.objs.KeepExes.Iterate()
	for it.Next(&k, &start) {
		out = append(out, k)
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestAKeptProgramsForksInheritItsMark(t *testing.T) {
	eachVariant(t, testAKeptProgramsForksInheritItsMark)
}

// testAKeptProgramsForksInheritItsMark keeps a copy of sh: the subshell it
// forks runs the kept program too, and is spared (a kept redis's
// background save); a child that execs sleep is not.
func testAKeptProgramsForksInheritItsMark(t *testing.T, v loader.Variant) {
	b := openBPF(t, &Options{Variant: v})
	rec := record(t, b)
	mark := testutil.Marker(t)
	testutil.CheckNoLeaks(t, mark)
	kept, file := keptCopy(t, "sh")
	script := fmt.Sprintf(`sleep %[1]s & (i=0; while [ $i -lt 2000 ]; do i=$((i+1)); sleep 0.05; done; : %[1]s) & wait`, testutil.Sleep(mark))
	cmd := exec.Command(kept, "-c", script)
	id, err := b.Spawn(cmd, loader.RootOptions{KeepExes: []lineage.FileID{file}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { killMembers(t, b, id); _ = cmd.Process.Kill(); _ = cmd.Wait() })
	var subshell, sleeper lineage.Identity
	// The subshell is the root's child that runs the kept program once the
	// sleeper has exec'd: until then the sleeper's fork runs it too, and
	// the subshell's own forks (of sleep 0.05) are the subshell's children.
	waitFor(t, "the subshell and the sleeper", 10*time.Second, func() bool {
		subshell, sleeper = lineage.Identity{}, lineage.Identity{}
		var candidates []testutil.Proc
		for _, p := range testutil.Find(mark) {
			switch {
			case p.Argv[0] == "sleep":
				sleeper = procID(p)
			case p.Argv[0] == kept && uint32(p.PID) != id.PID:
				if st, err := proc.ReadStat("/proc", p.PID); err == nil && uint32(st.PPID) == id.PID {
					candidates = append(candidates, p)
				}
			}
		}
		if sleeper.IsZero() || len(candidates) != 1 {
			return false
		}
		subshell = procID(candidates[0])
		return true
	})
	if !spared(t, b, id) || !spared(t, b, subshell) {
		t.Errorf("the kept shell (%v) or its subshell (%v) is not spared", spared(t, b, id), spared(t, b, subshell))
	}
	if spared(t, b, sleeper) {
		t.Error("the kept shell's child that exec'd sleep is still spared")
	}
	for _, ev := range rec.snapshot() {
		if ev.Kind == lineage.EventFork && ev.Process == subshell && !ev.Spared {
			t.Error("the subshell's fork event does not say it was born spared")
		}
	}
}

func TestAKeptLineageIsSparedWhole(t *testing.T) { eachVariant(t, testAKeptLineageIsSparedWhole) }

// testAKeptLineageIsSparedWhole: with the root kept whole, every member is
// born spared and stays so across its exec; KeepLineage marks a running
// lineage's members too.
func testAKeptLineageIsSparedWhole(t *testing.T, v loader.Variant) {
	b := openBPF(t, &Options{Variant: v})
	mark := testutil.Marker(t)
	testutil.CheckNoLeaks(t, mark)
	script := fmt.Sprintf("sleep %s & wait", testutil.Sleep(mark))
	kept, _ := spawn(t, b, script, loader.RootOptions{KeepLineage: true})
	later, _ := spawn(t, b, script, loader.RootOptions{})
	t.Cleanup(func() { killMembers(t, b, kept); killMembers(t, b, later) })
	waitFor(t, "both sleepers", 10*time.Second, func() bool { return len(testutil.Sleepers(mark)) == 2 })
	for _, m := range memberSet(t, b, kept) {
		if !spared(t, b, m.Identity) {
			t.Errorf("member %v of a kept lineage is not spared", m.Identity)
		}
	}
	for _, m := range memberSet(t, b, later) {
		if spared(t, b, m.Identity) {
			t.Errorf("member %v is spared before its lineage is kept", m.Identity)
		}
	}
	if err := b.KeepLineage(later); err != nil {
		t.Fatal(err)
	}
	for _, m := range memberSet(t, b, later) {
		if !spared(t, b, m.Identity) {
			t.Errorf("member %v is not spared once its lineage is kept", m.Identity)
		}
	}
	if err := b.KeepLineage(lineage.Identity{PID: 2, StartTicks: 1}); err == nil {
		t.Error("KeepLineage of no root succeeded")
	}
}

func TestAProgramsMarkEndsAtAnotherExec(t *testing.T) {
	eachVariant(t, testAProgramsMarkEndsAtAnotherExec)
}

// testAProgramsMarkEndsAtAnotherExec marks two waiting shells, one for its
// program (SpareProgram), one for good (Spare), and lets both exec sleep:
// the first mark ends there, the second stays.
func testAProgramsMarkEndsAtAnotherExec(t *testing.T, v loader.Variant) {
	b := openBPF(t, &Options{Variant: v})
	mark := testutil.Marker(t)
	testutil.CheckNoLeaks(t, mark)
	trigger := filepath.Join(t.TempDir(), "go")
	script := fmt.Sprintf("while [ ! -e %s ]; do sleep 0.02; done; exec sleep %s", trigger, testutil.Sleep(mark))
	program, _ := spawn(t, b, script, loader.RootOptions{})
	sticky, _ := spawn(t, b, script, loader.RootOptions{})
	t.Cleanup(func() { killMembers(t, b, program); killMembers(t, b, sticky) })
	if err := b.SpareProgram(program); err != nil {
		t.Fatal(err)
	}
	if err := b.Spare(sticky); err != nil {
		t.Fatal(err)
	}
	if !spared(t, b, program) || !spared(t, b, sticky) {
		t.Fatal("a mark did not take")
	}
	if err := os.WriteFile(trigger, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "both shells exec sleep", 10*time.Second, func() bool { return len(testutil.Sleepers(mark)) == 2 })
	if spared(t, b, program) {
		t.Error("the mark for its program outlived its exec of another")
	}
	if !spared(t, b, sticky) {
		t.Error("user space's mark for good ended at its exec")
	}
	if err := b.SpareProgram(lineage.Identity{PID: 2, StartTicks: 1}); err == nil {
		t.Error("SpareProgram of no member succeeded")
	}
}

// The second fork hook inserts what the first did not. The kernel can't be
// made to skip a run on demand, so the tests take the first fork hook away
// (closing its link) and see the second alone keep membership exact.

func TestSecondForkHookAloneKeepsMembershipExact(t *testing.T) {
	withCatcher(t, testSecondForkHookAloneKeepsMembershipExact)
}

func testSecondForkHookAloneKeepsMembershipExact(t *testing.T, b *Tracker) {
	if err := b.links[0].Close(); err != nil { // handle_fork: the first fork hook
		t.Fatal(err)
	}
	rec := record(t, b)
	mark := testutil.Marker(t)
	testutil.CheckNoLeaks(t, mark)
	s := testutil.Sleep(mark)
	id, _ := spawn(t, b, fmt.Sprintf("sleep %s & (setsid sleep %s &) & sh -c 'sleep %s & exec sleep %s' & wait", s, s, s, s), loader.RootOptions{})
	t.Cleanup(func() { killMembers(t, b, id) })
	waitFor(t, "four sleepers", 10*time.Second, func() bool { return len(testutil.Sleepers(mark)) == 4 })
	ms := memberSet(t, b, id)
	for _, p := range testutil.Sleepers(mark) {
		if _, ok := ms[procID(p)]; !ok {
			t.Errorf("sleeper %d is no member: the second fork hook missed it", p.PID)
		}
	}
	st, err := b.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if st.ForksCaught < 5 { // the root, three shells or sleepers forked of it, and the inner sleeper
		t.Errorf("forks caught %d, want every fork since the first hook went", st.ForksCaught)
	}
	waitFor(t, "the caught forks' events", 5*time.Second, func() bool {
		n := 0
		for _, ev := range rec.snapshot() {
			if ev.Kind == lineage.EventFork && ev.Caught {
				n++
			}
		}
		return n >= 5
	})
}

func TestBothForkHooksInsertEachForkOnce(t *testing.T) {
	withCatcher(t, testBothForkHooksInsertEachForkOnce)
}

func testBothForkHooksInsertEachForkOnce(t *testing.T, b *Tracker) {
	rec := record(t, b)
	mark := testutil.Marker(t)
	testutil.CheckNoLeaks(t, mark)
	s := testutil.Sleep(mark)
	id, _ := spawn(t, b, fmt.Sprintf("sleep %s & sleep %s & (sleep %s &) & wait", s, s, s), loader.RootOptions{})
	t.Cleanup(func() { killMembers(t, b, id) })
	waitFor(t, "three sleepers", 10*time.Second, func() bool { return len(testutil.Sleepers(mark)) == 3 })
	waitFor(t, "their fork events", 5*time.Second, func() bool {
		n := 0
		for _, ev := range rec.snapshot() {
			if ev.Kind == lineage.EventFork && ev.Root == id {
				n++
			}
		}
		return n >= 5
	})
	forks := map[lineage.Identity]int{}
	for _, ev := range rec.snapshot() {
		if ev.Kind != lineage.EventFork || ev.Root != id {
			continue
		}
		forks[ev.Process]++
		if ev.Caught {
			t.Errorf("fork of %v says only the second hook saw it", ev.Process)
		}
	}
	for p, n := range forks {
		if n != 1 {
			t.Errorf("%d fork events for %v, want 1", n, p)
		}
	}
	if st, _ := b.Stats(); st.ForksCaught != 0 || st.ForkMisses != 0 {
		t.Errorf("stats %+v: nothing skipped, nothing to catch", st)
	}
}

// tracefsEnv, set to 1, says the test binary runs in a mount namespace of
// its own and is to mount tracefs there before the tests run.
const tracefsEnv = "LINEAGE_LOADER_TEST_TRACEFS"

// withCatcher runs fn with the full program open and its second fork hook
// running. The second fork hook is a classic tracepoint, which attaches
// through tracefs; where none is mounted, the test runs again in a child
// process, in a mount namespace of its own that mounts one (see
// TestMain), and passes or fails as the child does.
func withCatcher(t *testing.T, fn func(t *testing.T, b *Tracker)) {
	t.Helper()
	b := openBPF(t, &Options{Variant: loader.VariantFull}) // skips where BPF can't load
	if on, off := b.ForkCatcher(); !on {
		if !withTracefs(t) {
			b.Close()
			return
		}
		t.Fatalf("no second fork hook: %s", off)
	}
	fn(t, b)
}

// withTracefs reports whether tracefs is mounted for t. Where it is not,
// it runs t again in a child process that mounts it (rerunWithTracefs)
// and reports false: the child's run is t's.
func withTracefs(t *testing.T) bool {
	t.Helper()
	if hasTracefs() || os.Getenv(tracefsEnv) == "1" {
		return true
	}
	rerunWithTracefs(t)
	return false
}

// rerunWithTracefs runs t alone in a child test process in a private
// mount namespace, and fails t when the child fails.
func rerunWithTracefs(t *testing.T) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+t.Name()+"$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), tracefsEnv+"=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS}
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: "+t.Name()) {
		t.Fatalf("run with tracefs mounted: %v\n%s", err, out)
	}
	t.Logf("ran with tracefs mounted in a mount namespace of its own:\n%s", out)
}

// mountTracefs mounts tracefs for a test binary run by rerunWithTracefs.
func mountTracefs() error {
	if err := syscall.Mount("tracefs", "/sys/kernel/tracing", "tracefs", 0, ""); err != nil {
		return fmt.Errorf("mount tracefs: %w", err)
	}
	return nil
}
