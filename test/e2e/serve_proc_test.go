package e2e

import (
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lineage-dev/lineage/api"
	"github.com/lineage-dev/lineage/internal/loader"
	"github.com/lineage-dev/lineage/internal/testutil"
	"github.com/lineage-dev/lineage/lineage"
)

// startProcDaemon starts a daemon with the proc backend (no BPF needed);
// it is stopped when the test ends.
func startProcDaemon(t *testing.T) *daemon {
	t.Helper()
	dir := t.TempDir()
	d := &daemon{t: t, sock: filepath.Join(dir, "lineage.sock"), state: filepath.Join(dir, "state"), stderr: &lockedBuffer{}, pin: "none"}
	// The last --backend wins over start's.
	d.start("--backend", "proc")
	t.Cleanup(d.stop)
	return d
}

// notStopped fails the test if p is not alive or is stopped (state T).
func notStopped(t *testing.T, p testutil.Proc, when string) {
	t.Helper()
	start, state, err := testutil.StartTicks(p.PID)
	switch {
	case err != nil || start != p.StartTicks:
		t.Errorf("%s: process %d %q is gone", when, p.PID, p.Argv)
	case strings.HasPrefix(state, "T") || state == "t":
		t.Errorf("%s: process %d %q is left stopped (state %s)", when, p.PID, p.Argv, state)
	}
}

// With the proc backend, which contains a lineage by stopping it, a kept
// member is never stopped: not while the rest of its lineage (its own
// children included) is stopped and killed at a turn end, nor when the
// session closes and leaves it running, untracked.
func TestServeProcKeptMemberIsNeverLeftStopped(t *testing.T) {
	d := startProcDaemon(t)
	mark := testutil.Marker(t)
	testutil.CheckNoLeaks(t, mark)
	s := testutil.Sleep(mark)
	// The kept shell forks all along, so that its children are stopped
	// and killed while it is spared. It counts only the sleeps that slept:
	// a child killed at birth returns at once, and a loop that counted
	// those would end early during a long reap, as if it had been killed.
	// The root lives on until the turn end: the poller links a child to
	// its root only while its parent is there to be read, and a loaded
	// machine can delay the first poll past a short-lived root.
	d.startExec("pk", "autonomous", "sh", "-c", fmt.Sprintf(
		"setsid sh -c 'i=0; while [ $i -lt 2000 ]; do sleep 0.01 && i=$((i+1)); done' kept-%[1]s1 & setsid sleep %[1]s2 & sleep %[1]s3", s))
	kept := atLeastProcs(t, "kept-"+s+"1")
	other := atLeastSleepers(t, s+"2", 1)
	keepOnceMember(t, d, kept)
	var end api.Ended
	d.do("POST", "/v1/sessions/pk/turn-end", nil, &end)
	allGone(t, other)
	if n := results(end); n["kept"] != 1 {
		t.Errorf("turn end outcomes %v, want one kept", n)
	}
	if !sentStop(end) {
		t.Errorf("no member was stopped: the proc backend's containment was not used: %+v", end)
	}
	notStopped(t, kept, "after the turn end")
	neverSignalled(t, end, kept)
	// A fresh answer: decoding into the last one would keep what its
	// outcomes had and this one omits.
	var closed api.Ended
	d.do("POST", "/v1/sessions/pk/close", nil, &closed)
	notStopped(t, kept, "after the close")
	neverSignalled(t, closed, kept)
	if !testutil.KillIdentity(kept.PID, kept.StartTicks) {
		t.Error("the kept shell could not be ended")
	}
}

// neverSignalled fails t if end's outcome for p says it was sent anything,
// or was anything but kept.
func neverSignalled(t *testing.T, end api.Ended, p testutil.Proc) {
	t.Helper()
	for _, r := range end.Roots {
		for _, o := range r.Outcomes {
			if int(o.Process.PID) == p.PID && o.Process.StartTicks == p.StartTicks && (o.Result != lineage.Kept || len(o.Signals) > 0) {
				t.Errorf("the kept process %d: %s (%s), signals %v", p.PID, o.Result, o.Reason, o.Signals)
			}
		}
	}
}

// keepOnceMember keeps p once the proc backend's poller has adopted it: a
// keep of a process the poller has not yet seen is answered 404, and a
// loaded machine can delay the poll.
func keepOnceMember(t *testing.T, d *daemon, p testutil.Proc) {
	t.Helper()
	keep := api.AddKeep{Process: fmt.Sprintf("%d@%d", p.PID, p.StartTicks)}
	deadline := time.Now().Add(30 * time.Second)
	for {
		status := d.apiStatus("POST", "/v1/keeps", keep)
		if status == 0 {
			return
		}
		if status != http.StatusNotFound || time.Now().After(deadline) {
			t.Fatalf("keep %s: status %d", keep.Process, status)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// With the proc backend, a reap on behalf of uid 65534 refuses root's
// process in that uid's session, and leaves it running, not stopped.
func TestServeProcRefusedMemberIsNeverLeftStopped(t *testing.T) {
	d := startProcDaemon(t)
	n := asNobody(t, d)
	mark := testutil.Marker(t)
	testutil.CheckNoLeaks(t, mark)
	own := startSleep(t, n.cmd("sleep", testutil.Sleep(mark)))
	ownPID, _, _ := strings.Cut(own, "@")
	if msg, code := n.lineage("roots", "add", ownPID, "--session", "mine", "--kind", "autonomous"); code != 0 {
		t.Fatalf("registering its own process: %s", msg)
	}
	other := startSleep(t, exec.Command("sleep", testutil.Sleep(mark)))
	otherPID, otherStart := ident(t, other)
	d.do("POST", "/v1/roots", api.AddRoot{PID: int64(otherPID), Session: "mine", Join: true}, nil)
	if msg, code := n.lineage("turn", "end", "mine"); code != 0 {
		t.Fatalf("ending its own session's turn: %s", msg)
	}
	if pid, start := ident(t, own); !testutil.WaitGone(pid, start, 30*time.Second) {
		t.Error("its own process survived the turn end")
	}
	notStopped(t, testutil.Proc{PID: otherPID, StartTicks: otherStart, Argv: []string{"sleep"}}, "after a refused reap")
	// Root's close reaps it.
	d.do("POST", "/v1/sessions/mine/close", nil, nil)
	if !testutil.WaitGone(otherPID, otherStart, 30*time.Second) {
		t.Error("root's close left root's process running")
	}
}

// sentStop reports whether the reap stopped any member (SIGSTOP).
func sentStop(end api.Ended) bool {
	for _, r := range end.Roots {
		for _, o := range r.Outcomes {
			if slices.Contains(o.Signals, "STOP") {
				return true
			}
		}
	}
	return false
}

// Through a daemon with the proc backend, a double fork whose middle
// process dies before any scan sees it leaves its grandchild to `lineage
// run`, the job's parent and subreaper, which registered the job as its
// orphanage: the daemon adopts the grandchild from lineage's children and
// reaps it (it escaped before, reparented to a process that tracked
// nothing).
func TestRunThroughProcDaemonAdoptsTheFrontsOrphans(t *testing.T) {
	d := startProcDaemon(t)
	mark := testutil.Marker(t)
	testutil.CheckNoLeaks(t, mark)
	const forks = 5
	script := fmt.Sprintf("i=0; while [ $i -lt %d ]; do (sleep %s &); i=$((i+1)); done; sleep 0.4; exit 5", forks, testutil.Sleep(mark))
	// runJob fails the test for any survivor.
	res := runJob(t, mark, []string{"LINEAGE_SOCKET=" + d.sock}, "--", "sh", "-c", script)
	if res.code != 5 {
		t.Errorf("exit status %d, want the job's own 5; stderr:\n%s", res.code, res.stderr)
	}
	if res.report == nil {
		t.Fatalf("no JSON report; stderr:\n%s", res.stderr)
	}
	variant{"proc via daemon", loader.BackendProc, true}.check(t, res.report)
	if got := markedOutcomes(res, mark); got != forks {
		t.Errorf("report accounts for %d of the %d double-forked sleepers; stderr:\n%s", got, forks, res.stderr)
	}
}
