package poll

import (
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lineage-dev/lineage/internal/loader"
	"github.com/lineage-dev/lineage/internal/testutil"
	"github.com/lineage-dev/lineage/lineage"
)

// openRealProc opens the proc backend on the real /proc, in the test process:
// without the subreaper bit, which belongs in helpers (see
// proc_helper_linux_test.go).
func openRealProc(t *testing.T) (*Poller, *procEvents) {
	t.Helper()
	p, err := Open(nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p, collectProcEvents(t, p)
}

// waitMembers polls Members until cond holds.
func waitMembers(t *testing.T, b loader.Backend, root lineage.Identity, what string, cond func([]lineage.Member) bool) []lineage.Member {
	t.Helper()
	var ms []lineage.Member
	if !testutil.Until(10*time.Second, func() bool {
		var err error
		if ms, err = b.Members(root); err != nil {
			t.Fatal(err)
		}
		return cond(ms)
	}) {
		t.Fatalf("%s: members %+v", what, ms)
	}
	return ms
}

func hasArgv(ms []lineage.Member, arg string) (lineage.Member, bool) {
	for _, m := range ms {
		if slices.Contains(m.Argv, arg) {
			return m, true
		}
	}
	return lineage.Member{}, false
}

func TestProcSpawnSeesForkExecExit(t *testing.T) {
	marker := testutil.Marker(t)
	testutil.CheckNoLeaks(t, marker)
	testutil.KillAtCleanup(t, marker)
	p, events := openRealProc(t)
	arg := testutil.Sleep(marker)
	cmd := exec.Command("sh", "-c", "sleep "+arg+" & wait")
	root, err := p.Spawn(cmd, loader.RootOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	start, _, err := testutil.StartTicks(cmd.Process.Pid)
	if err != nil || root != (lineage.Identity{PID: uint32(cmd.Process.Pid), StartTicks: start}) {
		t.Fatalf("root %s, want pid %d start %d (%v)", root, cmd.Process.Pid, start, err)
	}
	ms := waitMembers(t, p, root, "sleeper", func(ms []lineage.Member) bool { _, ok := hasArgv(ms, arg); return ok })
	sleeper, _ := hasArgv(ms, arg)
	if sleeper.Parent != root || sleeper.Root != root {
		t.Errorf("sleeper %+v: want parent and root %s", sleeper, root)
	}
	if fork := events.of(root, lineage.EventFork); len(fork) != 1 || !fork[0].IsRoot {
		t.Errorf("root fork: %+v", fork)
	}
	if ex := events.of(root, lineage.EventExec); len(ex) != 1 || !slices.Equal(ex[0].Argv, cmd.Args) {
		t.Errorf("root exec: %+v, want argv %q", ex, cmd.Args)
	}
	if ex := events.of(sleeper.Identity, lineage.EventExec); len(ex) != 1 || !slices.Equal(ex[0].Argv, []string{"sleep", arg}) || !strings.HasSuffix(ex[0].Filename, "sleep") {
		t.Errorf("sleeper exec: %+v", ex)
	}

	if !testutil.KillIdentity(int(sleeper.PID), sleeper.StartTicks) {
		t.Fatal("could not kill the sleeper")
	}
	select {
	case <-waited:
	case <-time.After(10 * time.Second):
		t.Fatal("the job did not end")
	}
	waitMembers(t, p, root, "all gone", func(ms []lineage.Member) bool { return len(ms) == 0 })
	for _, id := range []lineage.Identity{root, sleeper.Identity} {
		if exit := events.of(id, lineage.EventExit); len(exit) != 1 {
			t.Errorf("%s: exit events %+v", id, exit)
		}
	}
}

func TestProcZombieRootCountsAsExitedWithItsStatus(t *testing.T) {
	p, events := openRealProc(t)
	cmd := exec.Command("sh", "-c", "exit 7")
	root, err := p.Spawn(cmd, loader.RootOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Not waited for yet: a zombie, which counts as exited.
	waitMembers(t, p, root, "zombie root", func(ms []lineage.Member) bool { return len(ms) == 0 })
	exit := events.of(root, lineage.EventExit)
	if len(exit) != 1 {
		t.Fatalf("exit events %+v", exit)
	}
	if code, ok := exit[0].Status.Exited(); !ok || code != 7 {
		t.Errorf("status %s, want exit 7", exit[0].Status)
	}
	// The poller left the zombie to its owner.
	if err := cmd.Wait(); err == nil || cmd.ProcessState.ExitCode() != 7 {
		t.Errorf("wait: %v, exit code %d", err, cmd.ProcessState.ExitCode())
	}
}

func TestProcRegisterAdoptsExistingDescendants(t *testing.T) {
	marker := testutil.Marker(t)
	testutil.CheckNoLeaks(t, marker)
	testutil.KillAtCleanup(t, marker)
	p, events := openRealProc(t)
	a1, a2 := testutil.Sleep(marker)+"1", testutil.Sleep(marker)+"2"
	cmd := exec.Command("sh", "-c", fmt.Sprintf("sleep %s & (sleep %s & wait) & wait", a1, a2))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	start, _, err := testutil.StartTicks(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	root := lineage.Identity{PID: uint32(cmd.Process.Pid), StartTicks: start}
	// Both sleepers exec'd: sh's own argv carries the marker too.
	testutil.Eventually(t, 10*time.Second, "both sleepers to exec", func() bool { return len(testutil.Sleepers(marker)) == 2 })
	if err := p.Register(root, loader.RootOptions{}); err != nil {
		t.Fatal(err)
	}
	ms, err := p.Members(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, arg := range []string{a1, a2} {
		m, ok := hasArgv(ms, arg)
		if !ok {
			t.Errorf("sleeper %s not adopted: %+v", arg, ms)
			continue
		}
		if fork := events.of(m.Identity, lineage.EventFork); len(fork) != 1 || fork[0].Root != root {
			t.Errorf("adopted sleeper's fork: %+v", fork)
		}
	}
	if len(ms) != 4 {
		t.Errorf("%d members, want 4 (sh, subshell, two sleepers): %+v", len(ms), ms)
	}
	if err := p.Register(root, loader.RootOptions{}); !errors.Is(err, loader.ErrAlreadyTracked) {
		t.Errorf("second register: %v, want ErrAlreadyTracked", err)
	}
	if c, err := p.Contain(root); err != nil || c != lineage.ContainStop {
		t.Errorf("contain: %v, %v; want %v", c, err, lineage.ContainStop)
	}
	if err := p.Register(lineage.Identity{PID: 1, StartTicks: 1}, loader.RootOptions{}); !errors.Is(err, lineage.ErrInvalid) {
		t.Errorf("register init: %v", err)
	}
	if err := p.Register(root, loader.RootOptions{DieWithSupervisor: true}); !errors.Is(err, loader.ErrUnavailable) {
		t.Errorf("die with supervisor: %v, want ErrUnavailable", err)
	}
	if _, err := p.Spawn(exec.Command("true"), loader.RootOptions{DieWithSupervisor: true}); !errors.Is(err, loader.ErrUnavailable) {
		t.Errorf("spawn with die with supervisor: %v, want ErrUnavailable", err)
	}
	for _, m := range ms {
		if m.Identity != root {
			testutil.KillIdentity(int(m.PID), m.StartTicks)
		}
	}
}

// The escapes of a leaky job, caught through the subreaper: a `&` sleeper,
// a setsid one, a nohup one and a double-forked daemon, each a member after
// the job exits, each killed and reaped by the helper's supervisor, which
// tells the backend its status.
func TestProcCatchesEscapesThroughTheSubreaper(t *testing.T) {
	testProcEscapes(t, false)
}

// The same as an unprivileged user (uid 65534): no BPF, auto falls back to
// proc and says why, and the subreaper still catches every escape.
func TestProcCatchesEscapesUnprivileged(t *testing.T) {
	testProcEscapes(t, true)
}

func testProcEscapes(t *testing.T, unprivileged bool) {
	marker := testutil.Marker(t)
	testutil.CheckNoLeaks(t, marker)
	name := "escapes"
	if unprivileged {
		name = "escapes-unprivileged"
	}
	run := runProcHelperCmd(t, name, testutil.Sleep(marker), unprivileged)
	if unprivileged {
		var choice string
		for _, l := range run.lines {
			if strings.HasPrefix(l, "choice ") {
				choice = l
			}
		}
		if !strings.HasPrefix(choice, "choice proc bpf: not privileged") || !strings.HasSuffix(choice, "; using proc") {
			t.Errorf("unprivileged auto: %q, want proc because bpf is not privileged", choice)
		}
		if !slices.Contains(run.lines, "uid 65534 euid 65534") && slices.ContainsFunc(run.lines, func(l string) bool { return strings.HasPrefix(l, "uid 0 ") }) {
			t.Errorf("the helper did not drop its privileges: %q", run.lines)
		}
	}
	for _, e := range procEscapes {
		id, ok := run.sleepers[e.name]
		if !ok {
			t.Errorf("%s: no sleeper started", e.name)
			continue
		}
		if !run.members[id] || run.escaped[e.name] {
			t.Errorf("%s sleeper %s is not a member", e.name, id)
		}
		if status := run.exits[id]; status != "signal-KILL" {
			t.Errorf("%s sleeper %s: exit %q, want signal-KILL (reaped by the subreaper)", e.name, id, status)
		}
	}
	if t.Failed() {
		t.Logf("helper said:\n%s", strings.Join(run.lines, "\n"))
	}
}

// Without the subreaper, a double fork that completes between two polls
// escapes, as documented: the test asserts the limit, so that a change in it
// is noticed.
func TestProcDoubleForkBetweenPollsEscapesWithoutSubreaper(t *testing.T) {
	marker := testutil.Marker(t)
	testutil.CheckNoLeaks(t, marker)
	run := runProcHelperCmd(t, "no-subreaper", testutil.Sleep(marker), false)
	if _, ok := run.sleepers["double-fork"]; !ok {
		t.Fatalf("no daemon started; helper said:\n%s", strings.Join(run.lines, "\n"))
	}
	if !run.escaped["double-fork"] {
		t.Errorf("the daemon did not escape: the documented limit changed; helper said:\n%s", strings.Join(run.lines, "\n"))
	}
}

// Orphans that are no one's members are still reaped, by the supervisor the
// proc backend runs under: when two spawned roots could each have left one
// (the documented ambiguity, which the backend reports), and when their root
// was forgotten.
func TestProcOrphansThatAreNoOnesMembersAreReaped(t *testing.T) {
	for _, mode := range []string{"ambiguous", "forget"} {
		t.Run(mode, func(t *testing.T) {
			marker := testutil.Marker(t)
			testutil.CheckNoLeaks(t, marker)
			run := runProcHelperCmd(t, mode, testutil.Sleep(marker), false)
			want := 2
			if mode == "forget" {
				want = 1
			}
			if len(run.sleepers) != want {
				t.Fatalf("%d daemons, want %d; helper said:\n%s", len(run.sleepers), want, strings.Join(run.lines, "\n"))
			}
			for _, id := range run.sleepers {
				switch mode {
				case "ambiguous":
					if !run.escapedIDs[id] || !run.untracked[id] {
						t.Errorf("daemon %s: escaped %v, untracked event %v; want both", id, run.escapedIDs[id], run.untracked[id])
					}
				case "forget":
					if !run.members[id] {
						t.Errorf("daemon %s was not a member before its root was forgotten", id)
					}
				}
				if !run.reaped[id] {
					t.Errorf("daemon %s: zombie not reaped", id)
				}
			}
			if t.Failed() {
				t.Logf("helper said:\n%s", strings.Join(run.lines, "\n"))
			}
		})
	}
}
