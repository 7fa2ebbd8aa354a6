//go:build linux

package reap

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lineage-dev/lineage/internal/testutil"
	"github.com/lineage-dev/lineage/lineage"
)

// modes are the two ways a lineage is contained: a containment the caller
// provides (here a name only: these lineages don't fork while reaped), and
// the reaper's own stop containment.
var modes = []struct {
	name    string
	contain func() (lineage.Containment, error)
	// pre and post are the signals the mode sends around TERM to a member
	// that is not stopped.
	pre, post []string
}{
	{name: "given", contain: func() (lineage.Containment, error) { return "given", nil }},
	{name: "stop", pre: []string{"STOP"}, post: []string{"CONT"}},
}

func sent(parts ...[]string) []string { return slices.Concat(parts...) }

func identities(ms []lineage.Member) []lineage.Identity {
	out := make([]lineage.Identity, len(ms))
	for i, m := range ms {
		out[i] = m.Identity
	}
	return out
}

func reapJob(t *testing.T, j *job, opts Options) Report {
	t.Helper()
	if opts.Poll == 0 {
		opts.Poll = 5 * time.Millisecond
	}
	rep, err := Reap(context.Background(), j, opts)
	if err != nil {
		logReport(t, rep)
		t.Fatalf("Reap: %v", err)
	}
	return rep
}

func TestReapObeysTerm(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode.name, func(t *testing.T) {
			l := newLab(t)
			j := l.start("sleep 60 & sleep 60 & echo ready; wait")
			rep := reapJob(t, j, Options{Grace: 10 * time.Second, Contain: mode.contain})
			out := checkReport(t, j, rep)
			if len(out) != 3 {
				t.Errorf("%d outcomes, want 3 (sh and two sleeps)", len(out))
			}
			for id, o := range out {
				if o.Result != lineage.Terminated || o.Signal != "TERM" {
					t.Errorf("%s %q: %s by %q, want terminated by TERM", id, o.Argv, o.Result, o.Signal)
				}
				if want := sent(mode.pre, []string{"TERM"}, mode.post); !slices.Equal(o.Sent, want) {
					t.Errorf("%s %q: sent %v, want %v", id, o.Argv, o.Sent, want)
				}
				if o.Status != nil {
					if sig, ok := o.Status.Signaled(); !ok || sig != unix.SIGTERM {
						t.Errorf("%s %q: status %v, want signal TERM", id, o.Argv, *o.Status)
					}
				}
			}
			if string(rep.Containment) != mode.name {
				t.Errorf("containment %q, want %q", rep.Containment, mode.name)
			}
			if rep.Took > 30*time.Second {
				t.Errorf("took %v: members that obey TERM should not wait for the grace", rep.Took)
			}
		})
	}
}

// Members that ignore TERM gain nothing from the grace: they are killed at
// once, and the report says why.
func TestReapIgnoresTerm(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode.name, func(t *testing.T) {
			l := newLab(t)
			// Ignored signals stay ignored across fork and exec.
			j := l.start("trap '' TERM; sleep 60 & sleep 60 & echo ready; wait")
			rep := reapJob(t, j, Options{Grace: time.Minute, Contain: mode.contain})
			out := checkReport(t, j, rep)
			if len(out) != 3 {
				t.Errorf("%d outcomes, want 3", len(out))
			}
			for id, o := range out {
				if o.Result != lineage.Killed || o.Signal != "KILL" || o.Reason != whyIgnoresTerm {
					t.Errorf("%s %q: %s by %q (%q), want killed because it ignores TERM", id, o.Argv, o.Result, o.Signal, o.Reason)
				}
				if want := sent(mode.pre, []string{"KILL"}); !slices.Equal(o.Sent, want) {
					t.Errorf("%s %q: sent %v, want %v", id, o.Argv, o.Sent, want)
				}
			}
			if rep.Took > 30*time.Second {
				t.Errorf("took %v: members that ignore TERM waited for the grace", rep.Took)
				logReport(t, rep)
			}
		})
	}
}

// holdOut returns shell functions: hold SECONDS execs a process that
// catches TERM, does nothing about it, and exits 0 after SECONDS; held N
// waits until N of them have their handler in place.
func holdOut(t *testing.T) string {
	return fmt.Sprintf(`held=%s
hold() { exec perl -MTime::HiRes=time,sleep -e '$SIG{TERM} = sub {}; open my $f, ">>", $ARGV[1] or die; print $f "x\n"; close $f; $e = time + $ARGV[0]; sleep 0.01 while time < $e' "$1" "$held"; }
held() { until [ "$(cat "$held" 2>/dev/null | wc -l)" -ge "$1" ]; do sleep 0.01; done; }
`, shellQuote(filepath.Join(t.TempDir(), "held")))
}

// Members that catch TERM and stay get their whole grace, then KILL.
func TestReapCatchesTerm(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode.name, func(t *testing.T) {
			l := newLab(t)
			j := l.start(holdOut(t) + "trap : TERM; hold 60 & hold 60 & held 2; echo ready; while :; do wait; done")
			grace := 300 * time.Millisecond
			rep := reapJob(t, j, Options{Grace: grace, Contain: mode.contain})
			out := checkReport(t, j, rep)
			if len(out) != 3 {
				t.Errorf("%d outcomes, want 3", len(out))
			}
			for id, o := range out {
				if o.Result != lineage.Killed || o.Signal != "KILL" || o.Reason != "" {
					t.Errorf("%s %q: %s by %q (%q), want killed", id, o.Argv, o.Result, o.Signal, o.Reason)
				}
				if want := sent(mode.pre, []string{"TERM"}, mode.post, mode.pre, []string{"KILL"}); !slices.Equal(o.Sent, want) {
					t.Errorf("%s %q: sent %v, want %v", id, o.Argv, o.Sent, want)
				}
			}
			if rep.Took < grace {
				t.Errorf("took %v, less than the grace %v", rep.Took, grace)
			}
		})
	}
}

// Ignoring TERM among members that obey it: only the deaf one is killed at
// once; the rest are terminated.
func TestReapIgnoresTermMixed(t *testing.T) {
	l := newLab(t)
	j := l.start("sleep 60 & (trap '' TERM; exec sleep 61) & echo ready; wait")
	deaf := j.find("sleep", "61")
	rep := reapJob(t, j, Options{Grace: time.Minute, Contain: modes[0].contain})
	out := checkReport(t, j, rep)
	if len(out) != 3 || len(deaf) != 1 {
		t.Fatalf("%d outcomes, %d deaf members; want 3 and 1", len(out), len(deaf))
	}
	for id, o := range out {
		want := lineage.Terminated
		if id == deaf[0] {
			want = lineage.Killed
		}
		if o.Result != want {
			t.Errorf("%s %q: %s (%q), want %s", id, o.Argv, o.Result, o.Reason, want)
		}
	}
	if rep.Took > 30*time.Second {
		t.Errorf("took %v", rep.Took)
	}
}

// A member stopped by someone else gets SIGCONT right after SIGTERM, and
// exits well before the grace ends.
func TestReapStoppedMember(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode.name, func(t *testing.T) {
			l := newLab(t)
			j := l.start("sleep 60 & echo ready; wait")
			sleeper := j.find("sleep", "60")
			if len(sleeper) != 1 {
				t.Fatalf("found %v", sleeper)
			}
			fd, err := unix.PidfdOpen(int(sleeper[0].PID), 0)
			if err != nil {
				t.Fatal(err)
			}
			defer unix.Close(fd)
			if err := unix.PidfdSendSignal(fd, unix.SIGSTOP, nil, 0); err != nil {
				t.Fatal(err)
			}
			waitState(t, sleeper[0], "T")
			rep := reapJob(t, j, Options{Grace: time.Minute, Contain: mode.contain})
			out := checkReport(t, j, rep)
			o := out[sleeper[0]]
			if o.Result != lineage.Terminated {
				t.Errorf("stopped sleeper: %s, want terminated", o.Result)
			}
			if want := sent(mode.pre, []string{"TERM", "CONT"}); !slices.Equal(o.Sent, want) {
				t.Errorf("stopped sleeper: sent %v, want %v", o.Sent, want)
			}
			if rep.Took > 10*time.Second {
				t.Errorf("took %v: the stopped member should have acted on TERM", rep.Took)
			}
		})
	}
}

func waitState(t *testing.T, id lineage.Identity, state string) {
	t.Helper()
	testutil.Eventually(t, 10*time.Second, fmt.Sprintf("%s to reach state %s", id, state), func() bool {
		st, ok := readStat(int(id.PID))
		return ok && st.id == id && st.state == state
	})
}

// A zombie member (its parent never waits) is dead already: it is reported
// as exited and sent nothing.
func TestReapZombie(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode.name, func(t *testing.T) {
			l := newLab(t)
			j := l.start("sleep 0.01 & echo ready; exec sleep 60")
			var zombie lineage.Identity
			testutil.Eventually(t, 10*time.Second, "a zombie member", func() bool {
				for _, m := range j.members() {
					if st, ok := readStat(int(m.PID)); ok && st.id == m.Identity && st.state == "Z" {
						zombie = m.Identity
					}
				}
				return !zombie.IsZero()
			})
			rep := reapJob(t, j, Options{Grace: 10 * time.Second, Contain: mode.contain})
			out := checkReport(t, j, rep)
			// Once its parent is gone, the nursery may reap it before the
			// reaper looks: then it has vanished.
			if o := out[zombie]; (o.Result != lineage.Exited && o.Result != lineage.Vanished) || len(o.Sent) > 0 {
				t.Errorf("zombie: %s, sent %v; want exited, nothing sent", o.Result, o.Sent)
			}
			if len(out) != 2 {
				t.Errorf("%d outcomes, want 2", len(out))
			}
			for id, o := range out {
				if id != zombie && o.Result != lineage.Terminated {
					t.Errorf("%s %q: %s, want terminated", id, o.Argv, o.Result)
				}
			}
		})
	}
}

// A member whose leader thread has exited while another runs on shows as a
// zombie in /proc, but lives: it is signalled like any other.
func TestReapLeaderExited(t *testing.T) {
	l := newLab(t)
	j := l.start(leaderExitEnv + "=1 " + shellQuote(os.Args[0]) + "; sleep 60")
	var m lineage.Identity
	testutil.Eventually(t, 20*time.Second, "a member whose leader thread exited", func() bool {
		for _, c := range j.members() {
			if st, ok := readStat(int(c.PID)); ok && st.id == c.Identity && st.state == "Z" && st.threads > 1 {
				m = c.Identity
			}
		}
		return !m.IsZero()
	})
	if !running(m) {
		t.Fatalf("%s does not count as running", m)
	}
	rep := reapJob(t, j, Options{Grace: 10 * time.Second, Contain: modes[0].contain})
	out := checkReport(t, j, rep)
	if o := out[m]; o.Result != lineage.Terminated || !slices.Equal(o.Sent, []string{"TERM"}) {
		t.Errorf("the process with an exited leader: %s, sent %v; want terminated by TERM", o.Result, o.Sent)
	}
}

func TestReapLinger(t *testing.T) {
	t.Run("all exit", func(t *testing.T) {
		l := newLab(t)
		j := l.start("sleep 0.3 & sleep 0.3 & echo ready; wait")
		called := false
		rep := reapJob(t, j, Options{Linger: 20 * time.Second, Contain: func() (lineage.Containment, error) { called = true; return "given", nil }})
		out := checkReport(t, j, rep)
		for id, o := range out {
			if o.Result != lineage.Exited || len(o.Sent) > 0 {
				t.Errorf("%s %q: %s, sent %v; want exited, nothing sent", id, o.Argv, o.Result, o.Sent)
			}
		}
		if called || rep.Containment != "" {
			t.Errorf("contained (%q) a lineage that was gone", rep.Containment)
		}
		if rep.Took > 30*time.Second {
			t.Errorf("took %v: the linger should end when the lineage is empty", rep.Took)
		}
	})
	t.Run("some exit", func(t *testing.T) {
		l := newLab(t)
		j := l.start("sleep 0.3 & sleep 60 & echo ready; wait")
		sh, sleeper := j.root, j.find("sleep", "60")[0]
		linger := time.Second
		rep := reapJob(t, j, Options{Linger: linger, Grace: 10 * time.Second})
		out := checkReport(t, j, rep)
		for id, o := range out {
			want := lineage.Exited // the short sleeper
			if id == sh || id == sleeper {
				want = lineage.Terminated
			}
			if o.Result != want {
				t.Errorf("%s %q: %s, want %s", id, o.Argv, o.Result, want)
			}
		}
		if rep.Phases.Linger < linger {
			t.Errorf("lingered %v, less than %v", rep.Phases.Linger, linger)
		}
	})
}

// The init of a PID namespace of its own, with no TERM handler, drops a
// TERM sent from outside: it is killed without waiting for the grace.
func TestReapNamespaceInit(t *testing.T) {
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("no unshare")
	}
	l := newLab(t)
	j := l.start("unshare --pid --fork sleep 62 & echo ready; wait")
	init := j.find("sleep", "62")
	rep := reapJob(t, j, Options{Grace: time.Minute, Contain: modes[0].contain})
	out := checkReport(t, j, rep)
	if o := out[init[0]]; o.Result != lineage.Killed || o.Reason != whyDeafInit || !slices.Equal(o.Sent, []string{"TERM", "KILL"}) {
		t.Errorf("the namespace's init %s: %s (%q), sent %v; want killed as deaf to TERM after TERM", init[0], o.Result, o.Reason, o.Sent)
	}
	if rep.Took > 30*time.Second {
		t.Errorf("took %v: the namespace's init waited for the grace", rep.Took)
		logReport(t, rep)
	}
}

// Members that catch TERM but exit on their own during the grace are not
// killed: they ended after TERM, by exit.
func TestReapExitDuringGrace(t *testing.T) {
	l := newLab(t)
	j := l.start(holdOut(t) + "trap : TERM; hold 1 & held 1; echo ready; wait; wait")
	rep := reapJob(t, j, Options{Grace: time.Minute, Contain: modes[0].contain})
	out := checkReport(t, j, rep)
	if len(out) != 2 {
		t.Errorf("%d outcomes, want 2", len(out))
	}
	for id, o := range out {
		if o.Result != lineage.Terminated || !slices.Equal(o.Sent, []string{"TERM"}) {
			t.Errorf("%s %q: %s, sent %v; want terminated after TERM alone", id, o.Argv, o.Result, o.Sent)
		}
		if o.Status != nil {
			if code, ok := o.Status.Exited(); !ok || code != 0 {
				t.Errorf("%s %q: status %v, want exit 0", id, o.Argv, *o.Status)
			}
		}
	}
	if rep.Took > 30*time.Second {
		t.Errorf("took %v", rep.Took)
	}
}

// A member that forks while it is being terminated: its new children are
// found, signalled and reported, under either containment.
func TestReapForkWhileTerminating(t *testing.T) {
	for _, mode := range modes {
		t.Run("forks on TERM/"+mode.name, func(t *testing.T) {
			l := newLab(t)
			// The loop's own sleeps are members too; the TERM handler
			// forks two sleepers, then the shell exits.
			j := l.start(`trap 'sleep 60 & sleep 60 & exit 0' TERM; echo ready
i=0; while [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done`)
			sh := j.root
			before := identities(j.members())
			grace := 3 * time.Second
			rep := reapJob(t, j, Options{Grace: grace, Contain: mode.contain})
			out := checkReport(t, j, rep)
			if o := out[sh]; o.Result != lineage.Terminated {
				t.Errorf("the shell %s: %s, want terminated (it exits on TERM)", sh, o.Result)
			}
			late := 0
			for id, o := range out {
				if slices.Contains(before, id) {
					continue
				}
				// A child forked from a shell that traps TERM may
				// get the TERM before it resets its handler, and so
				// lose it; then it is killed at the end.
				// Forked during the reap: found, and signalled if it
				// was still there.
				if len(o.Sent) > 0 && o.Sent[0] == "TERM" && (o.Result == lineage.Terminated || o.Result == lineage.Killed) {
					late++
				}
			}
			if late < 2 {
				t.Errorf("%d members forked during the reap were found and terminated, want at least the 2 the TERM handler forks", late)
				logReport(t, rep)
			}
			if rep.Took > grace+5*time.Second {
				t.Errorf("took %v", rep.Took)
				logReport(t, rep)
			}
		})
	}
	t.Run("forks through the grace", func(t *testing.T) {
		l := newLab(t)
		// The shell catches TERM and forks on every 50 ms.
		j := l.start(`trap : TERM; echo ready
i=0; while [ $i -lt 1200 ]; do sleep 60 & sleep 0.05; i=$((i+1)); done`)
		sh := j.root
		rep := reapJob(t, j, Options{Grace: time.Second})
		out := checkReport(t, j, rep)
		newcomers := 0
		for _, o := range out {
			if len(o.Sent) > 0 && o.Sent[0] == "TERM" {
				newcomers++ // first seen during the grace
			}
		}
		if o := out[sh]; o.Result != lineage.Killed {
			t.Errorf("the forking shell %s: %s, want killed", sh, o.Result)
		}
		if newcomers == 0 {
			t.Error("no member forked during the grace was found")
			logReport(t, rep)
		}
	})
}

// A bounded fork storm, each child forking too, all ignoring TERM: reaped
// completely, every member accounted for, the kill phase within a second.
func TestReapForkStorm(t *testing.T) {
	l := newLab(t)
	j := l.start(`trap '' TERM
storm() { if [ "$1" -gt 0 ]; then for k in 1 2 3 4; do storm $(($1 - 1)) & done; fi; exec sleep 60; }
echo ready; storm 4`)
	time.Sleep(100 * time.Millisecond) // let it get going
	rep := reapJob(t, j, Options{Grace: 200 * time.Millisecond})
	out := checkReport(t, j, rep)
	t.Logf("%d members, %d killed, kill phase %v, took %v", len(out), rep.Count(lineage.Killed), rep.Phases.Kill, rep.Took)
	// Contained, the storm ends with its kill phase: a storm that outran
	// containment would keep it going until the reap gave up. (Its speed
	// is measured by the benchmarks, not here.)
	if rep.Phases.Kill > 20*time.Second {
		t.Errorf("kill phase took %v: the storm outran containment", rep.Phases.Kill)
	}
	if len(out) < 10 {
		t.Errorf("only %d members: the storm did not start", len(out))
	}
}

// testingMany is the size of the big lineage.
const testingMany = 5000

func TestReapMany(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns 5,000 processes")
	}
	l := newLab(t)
	start := time.Now()
	j := l.start(manyScript(testingMany, false))
	spawned := time.Since(start)
	rep := reapJob(t, j, Options{Grace: time.Minute, Contain: modes[0].contain})
	out := checkReport(t, j, rep)
	t.Logf("spawned %d in %v; reaped in %v (%.0f µs/member), %d listings, phases %+v",
		len(out), spawned, rep.Took, float64(rep.Took.Microseconds())/float64(len(out)), j.listed, rep.Phases)
	if len(out) != testingMany+1 {
		t.Errorf("%d outcomes, want %d", len(out), testingMany+1)
	}
	if n := rep.Count(lineage.Terminated); n != len(out) {
		t.Errorf("%d terminated of %d", n, len(out))
	}
}

// manyScript starts n members blocked reading fd 3 (plain forks, no exec:
// fast to start; they end when the test closes the pipe), then waits for
// them.
func manyScript(n int, ignoreTerm bool) string {
	return manyScriptThen(n, ignoreTerm, "wait")
}

// manyScriptThen is manyScript with the shell's last command given.
func manyScriptThen(n int, ignoreTerm bool, then string) string {
	s := "i=0; while [ $i -lt " + strconv.Itoa(n) + " ]; do { read x <&3; } & i=$((i+1)); done; echo ready; " + then
	if ignoreTerm {
		s = "trap '' TERM; " + s
	}
	return s
}

// A Source that wrongly lists protected processes: nothing is sent to them,
// and each is refused in the report with a reason.
func TestReapProtected(t *testing.T) {
	l := newLab(t)
	j := l.start("sleep 60 & echo ready; wait")
	self := identityOf(t, os.Getpid())
	parent := identityOf(t, os.Getppid())
	thread := ownThread(t)
	kthreadd := identityOf(t, 2)
	extra := map[lineage.Identity]string{
		self:                     "the reaper itself",
		parent:                   "ancestor",
		identityOf(t, 1):         "pid 0 and 1",
		thread:                   "not a process",
		l.bystanders[0]:          "protected by the caller",
		{PID: 0}:                 "pid 0 and 1",
		{PID: 99, StartTicks: 0}: "no start time",
	}
	if st, ok := readStat(2); ok && kthreadd == st.id {
		extra[kthreadd] = "kernel thread"
	}
	for id := range extra {
		j.extra = append(j.extra, lineage.Member{Identity: id})
	}
	rec := realSignaler(t)
	rep := reapJob(t, j, Options{Grace: 10 * time.Second, Signaler: rec, Protect: []lineage.Identity{l.bystanders[0]}})
	out := checkReport(t, j, rep)
	for id, why := range extra {
		o := out[id]
		if o.Result != lineage.Refused || !strings.Contains(o.Reason, why) {
			t.Errorf("%s: %s %q; want refused: %s", id, o.Result, o.Reason, why)
		}
		if len(o.Sent) > 0 || len(rec.sentTo(int(id.PID))) > 0 {
			t.Errorf("%s: sent %v (recorded %v)", id, o.Sent, rec.sentTo(int(id.PID)))
		}
		if id.PID > 0 && id.StartTicks > 0 && !running(id) {
			t.Errorf("%s no longer runs", id)
		}
	}
	if n := rep.Count(lineage.Terminated); n != 2 {
		t.Errorf("%d terminated, want 2 (sh and sleep)", n)
	}
}

// ownThread returns the identity of a thread of this process other than the
// main one (the Go runtime always has several).
func ownThread(t *testing.T) lineage.Identity {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		tid, _ := strconv.Atoi(e.Name())
		if tid != os.Getpid() {
			if st, ok := readStat(tid); ok {
				return st.id
			}
		}
	}
	t.Fatal("no second thread")
	return lineage.Identity{}
}

// A live pid listed with the wrong start time is a stranger: nothing is sent.
func TestReapIdentityMismatch(t *testing.T) {
	l := newLab(t)
	j := l.start("sleep 60 & echo ready; wait")
	sleeper := j.find("sleep", "60")
	if len(sleeper) != 1 {
		t.Fatalf("found %v", sleeper)
	}
	for _, delta := range []int64{+1, -1} {
		wrong := sleeper[0]
		wrong.StartTicks = uint64(int64(wrong.StartTicks) + delta)
		rec := realSignaler(t)
		src := SourceFunc(func() ([]lineage.Member, error) {
			return []lineage.Member{{Identity: wrong}}, nil
		})
		rep, err := Reap(context.Background(), src, Options{Grace: time.Second, Signaler: rec})
		if err != nil {
			t.Fatal(err)
		}
		if len(rep.Outcomes) != 1 {
			t.Fatalf("%d outcomes", len(rep.Outcomes))
		}
		o := rep.Outcomes[0]
		if o.Result != lineage.Vanished || !strings.Contains(o.Reason, "identity mismatch") || len(o.Sent) > 0 {
			t.Errorf("start %+d: %s %q sent %v; want vanished on identity mismatch, nothing sent", delta, o.Result, o.Reason, o.Sent)
		}
		if s := rec.sentTo(int(wrong.PID)); len(s) > 0 {
			t.Errorf("start %+d: sent %v to the stranger", delta, s)
		}
		if !running(sleeper[0]) {
			t.Fatalf("start %+d: the live process was harmed", delta)
		}
	}
}

func TestReapKeep(t *testing.T) {
	l := newLab(t)
	j := l.start("sleep 61 & sleep 60 & echo ready; wait")
	keep := func(m lineage.Member) (bool, string) {
		return slices.Equal(m.Argv, []string{"sleep", "61"}), "dev server"
	}
	rec := realSignaler(t)
	rep := reapJob(t, j, Options{Grace: 10 * time.Second, Keep: keep, Signaler: rec})
	out := checkReport(t, j, rep)
	kept := j.find("sleep", "61")
	if len(kept) != 1 {
		t.Fatalf("kept sleeper: %v", kept)
	}
	if o := out[kept[0]]; o.Result != lineage.Kept || o.Reason != "dev server" || len(o.Sent) > 0 {
		t.Errorf("kept: %s %q sent %v", o.Result, o.Reason, o.Sent)
	}
	if s := rec.sentTo(int(kept[0].PID)); len(s) > 0 {
		t.Errorf("sent %v to a kept member", s)
	}
	if n := rep.Count(lineage.Terminated); n != 2 {
		t.Errorf("%d terminated, want 2", n)
	}
}

func TestReapContainFails(t *testing.T) {
	l := newLab(t)
	j := l.start("sleep 60 & echo ready; wait")
	calls := 0
	rep := reapJob(t, j, Options{Grace: 10 * time.Second, Contain: func() (lineage.Containment, error) {
		calls++
		return "", errors.New("map update refused")
	}})
	checkReport(t, j, rep)
	if calls != 1 {
		t.Errorf("Contain called %d times, want once", calls)
	}
	if rep.Containment != lineage.ContainStop || len(rep.Warnings) != 1 || !strings.Contains(rep.Warnings[0], "map update refused") {
		t.Errorf("containment %q, warnings %q; want the stop containment and a warning", rep.Containment, rep.Warnings)
	}
}

// When ctx ends mid-reap, the known members are killed at once, not left
// stopped or waiting for their grace.
func TestReapCanceled(t *testing.T) {
	l := newLab(t)
	j := l.start(holdOut(t) + "trap : TERM; hold 60 & hold 60 & held 2; echo ready; while :; do wait; done")
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	rep, err := Reap(ctx, j, Options{Grace: 30 * time.Second})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Reap: %v, want the deadline", err)
	}
	if rep.Took > 30*time.Second {
		t.Errorf("took %v after the deadline", rep.Took)
	}
	for _, o := range rep.Outcomes {
		if !slices.Contains(o.Sent, "KILL") && o.Result != lineage.Killed {
			t.Errorf("%s %q: %s, sent %v; want KILL sent", o.Member.Identity, o.Argv, o.Result, o.Sent)
		}
	}
	for _, id := range j.all() {
		if !testutil.Until(5*time.Second, func() bool { return !running(id) }) {
			t.Errorf("%s still runs after the cut-short reap", id)
		}
	}
}

func TestReapEmpty(t *testing.T) {
	rep, err := Reap(context.Background(), SourceFunc(func() ([]lineage.Member, error) { return nil, nil }),
		Options{Contain: func() (lineage.Containment, error) { t.Error("Contain called"); return "", nil }})
	if err != nil || len(rep.Outcomes) != 0 || rep.Containment != "" {
		t.Errorf("Reap of nothing: %+v, %v", rep, err)
	}
}

func TestReapSourceFails(t *testing.T) {
	l := newLab(t)
	j := l.start("trap '' TERM; sleep 60 & echo ready; wait")
	calls := 0
	boom := errors.New("backend gone")
	src := SourceFunc(func() ([]lineage.Member, error) {
		if calls++; calls > 1 {
			return nil, boom
		}
		return j.Members()
	})
	rep, err := Reap(context.Background(), src, Options{Grace: 30 * time.Second})
	if !errors.Is(err, boom) {
		t.Fatalf("Reap: %v, want the source's error", err)
	}
	// The known set was stopped; it must not be left so.
	for _, o := range rep.Outcomes {
		if !slices.Contains(o.Sent, "KILL") && o.Result != lineage.Killed {
			t.Errorf("%s %q: %s, sent %v; want KILL sent", o.Member.Identity, o.Argv, o.Result, o.Sent)
		}
	}
}

func TestReapInvalidOptions(t *testing.T) {
	src := SourceFunc(func() ([]lineage.Member, error) { t.Error("Source called"); return nil, nil })
	for name, opts := range map[string]Options{
		"negative grace":  {Grace: -time.Second},
		"negative linger": {Linger: -1},
		"negative poll":   {Poll: -1},
	} {
		if _, err := Reap(context.Background(), src, opts); !errors.Is(err, lineage.ErrInvalid) {
			t.Errorf("%s: %v, want lineage.ErrInvalid", name, err)
		}
	}
	if _, err := Reap(context.Background(), nil, Options{}); !errors.Is(err, lineage.ErrInvalid) {
		t.Errorf("nil source: %v, want lineage.ErrInvalid", err)
	}
}
