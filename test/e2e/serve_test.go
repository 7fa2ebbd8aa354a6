package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lineage-dev/lineage/api"
	"github.com/lineage-dev/lineage/internal/record"
	"github.com/lineage-dev/lineage/internal/testutil"
	"github.com/lineage-dev/lineage/lineage"
)

// results counts an answer's outcomes by result.
func results(e api.Ended) map[lineage.Result]int {
	n := map[lineage.Result]int{}
	for _, r := range e.Roots {
		for _, o := range r.Outcomes {
			n[o.Result]++
		}
	}
	for _, c := range e.Children {
		for k, v := range results(c) {
			n[k] += v
		}
	}
	return n
}

func TestServeAutonomousTurnEndReapsLeftovers(t *testing.T) {
	d := startDaemon(t, "")
	mark := testutil.Marker(t)
	testutil.CheckNoLeaks(t, mark)
	s := testutil.Sleep(mark)
	d.execRoot("auto", "autonomous", fmt.Sprintf(
		"setsid sleep %[1]s & (setsid sh -c 'sleep %[1]s & exit 0' &); nohup sleep %[1]s >/dev/null 2>&1 & sleep 0.3", s))
	left := atLeastSleepers(t, mark, 3)
	var end api.Ended
	d.do("POST", "/v1/sessions/auto/turn-end", nil, &end)
	allGone(t, left)
	if n := results(end); n[lineage.Terminated]+n[lineage.Killed] != 3 {
		t.Errorf("outcomes %v, want 3 ended by the reaper", n)
	}
	for _, o := range end.Roots[0].Outcomes {
		if o.Kind != "autonomous" || o.Session != "auto" || len(o.Signals) == 0 || len(o.Argv) == 0 {
			t.Errorf("outcome %+v: want kind, session, signals and argv", o)
		}
	}
	// The root's lineage is empty: it is forgotten.
	var roots []api.Root
	d.do("GET", "/v1/roots?session=auto", nil, &roots)
	if len(roots) != 0 {
		t.Errorf("roots after the turn: %+v", roots)
	}
}

func TestServeAutonomousTurnEndReapsRedis(t *testing.T) {
	redis := testutil.LookTool(t, "redis-server")
	d := startDaemon(t, "")
	mark := testutil.Marker(t)
	testutil.CheckNoLeaks(t, mark)
	port := 20000 + os.Getpid()%20000
	dir := t.TempDir()
	// The marker in the pid file's path lets the leak guard find it.
	d.execRoot("redis", "autonomous", fmt.Sprintf("%s --port %d --daemonize yes --dir %s --pidfile %s/%s.pid --save ''", redis, port, dir, dir, mark))
	var rep api.Ended
	d.do("GET", "/v1/sessions/redis/report", nil, &rep)
	if n := results(rep)[lineage.Reported]; n != 1 {
		t.Fatalf("report: %d reported, want the daemonized redis: %+v", n, rep)
	}
	o := rep.Roots[0].Outcomes[0]
	var end api.Ended
	d.do("POST", "/v1/sessions/redis/turn-end", nil, &end)
	if !testutil.WaitGone(int(o.Process.PID), o.Process.StartTicks, 30*time.Second) {
		t.Errorf("redis %s survived the turn end: %+v", o.Process, end)
	}
}

func TestServeInteractiveTurnReportsThenCloseReaps(t *testing.T) {
	d := startDaemon(t, "")
	mark := testutil.Marker(t)
	testutil.CheckNoLeaks(t, mark)
	d.execRoot("inter", "interactive", fmt.Sprintf("setsid sleep %s & sleep 0.2", testutil.Sleep(mark)))
	dev := atLeastSleepers(t, mark, 1)
	var end api.Ended
	d.do("POST", "/v1/sessions/inter/turn-end", nil, &end)
	if n := results(end); n[lineage.Reported] != 1 || len(n) != 1 {
		t.Errorf("turn end outcomes %v, want the dev server reported", n)
	}
	time.Sleep(100 * time.Millisecond)
	allAlive(t, dev)
	d.do("POST", "/v1/sessions/inter/close", nil, &end)
	allGone(t, dev)
	if n := results(end); n[lineage.Terminated] != 1 {
		t.Errorf("close outcomes %v, want the dev server terminated", n)
	}
	if st := d.apiStatus("GET", "/v1/sessions/inter", nil); st != 404 {
		t.Errorf("closed session: status %d, want 404", st)
	}
}

func TestServeNestedCloseReapsOnlyItsOwnRoots(t *testing.T) {
	d := startDaemon(t, "")
	mark := testutil.Marker(t)
	testutil.CheckNoLeaks(t, mark)
	d.do("POST", "/v1/sessions", api.OpenSession{ID: "parent", Kind: "interactive"}, nil)
	d.do("POST", "/v1/sessions", api.OpenSession{ID: "child", Kind: "interactive", Parent: "parent"}, nil)
	d.execRoot("parent", "", fmt.Sprintf("setsid sleep %s1 & sleep 0.2", testutil.Sleep(mark)))
	d.execRoot("child", "", fmt.Sprintf("setsid sleep %s2 & sleep 0.2", testutil.Sleep(mark)))
	parent, child := atLeastSleepers(t, mark+"1", 1), atLeastSleepers(t, mark+"2", 1)
	var end api.Ended
	d.do("POST", "/v1/sessions/child/close", nil, &end)
	allGone(t, child)
	allAlive(t, parent)
	// A parent's close closes its open children first.
	d.do("POST", "/v1/sessions", api.OpenSession{ID: "child2", Parent: "parent"}, nil)
	d.execRoot("child2", "", fmt.Sprintf("setsid sleep %s3 & sleep 0.2", testutil.Sleep(mark)))
	child2 := atLeastSleepers(t, mark+"3", 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	lines := d.eventLines(t, ctx, "")
	<-lines // the header
	d.do("POST", "/v1/sessions/parent/close", nil, &end)
	allGone(t, append(parent, child2...))
	if len(end.Children) != 1 || end.Children[0].Session != "child2" {
		t.Errorf("parent close: children %+v, want child2", end.Children)
	}
	if first := firstSignalled(t, lines, parent[0], child2[0]); first != child2[0].PID {
		t.Errorf("the parent's leftover %d was signalled before the child's %d", parent[0].PID, child2[0].PID)
	}
}

// firstSignalled reads events until both a and b have had a signal event,
// and returns the pid of the one signalled first.
func firstSignalled(t *testing.T, lines <-chan string, a, b testutil.Proc) int {
	t.Helper()
	ids := map[lineage.Identity]int{
		{PID: uint32(a.PID), StartTicks: a.StartTicks}: a.PID,
		{PID: uint32(b.PID), StartTicks: b.StartTicks}: b.PID,
	}
	var order []int
	timeout := time.After(20 * time.Second)
	for len(order) < 2 {
		select {
		case line := <-lines:
			var ev record.Event
			if err := json.Unmarshal([]byte(line), &ev); err != nil {
				t.Fatalf("event %q: %v", line, err)
			}
			if pid, ok := ids[ev.Process]; ok && ev.Kind == record.KindSignal && !slices.Contains(order, pid) {
				order = append(order, pid)
			}
		case <-timeout:
			t.Fatalf("signal events seen for %v, want %d and %d", order, a.PID, b.PID)
		}
	}
	return order[0]
}

func TestServeOwnerExitClosesSession(t *testing.T) {
	ownerExitClosesSession(t, startDaemon(t, ""), "interactive")
}

// ownerExitClosesSession opens a session of kind on d, owned by a process
// the test starts, with a setsid'd leftover in it; ends the owner; and
// checks that the leftover is reaped and the session gone.
func ownerExitClosesSession(t *testing.T, d *daemon, kind string) {
	t.Helper()
	mark := testutil.Marker(t)
	testutil.CheckNoLeaks(t, mark)
	owner := exec.Command("sleep", testutil.Sleep(mark+"9"))
	if err := owner.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = owner.Process.Kill(); _ = owner.Wait() })
	start, _, err := testutil.StartTicks(owner.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	oid := lineage.Identity{PID: uint32(owner.Process.Pid), StartTicks: start}
	d.do("POST", "/v1/sessions", api.OpenSession{ID: "owned", Kind: kind, Owner: &oid}, nil)
	d.execRoot("owned", "", fmt.Sprintf("setsid sleep %s & sleep 0.2", testutil.Sleep(mark)))
	left := atLeastSleepers(t, mark, 1)
	_ = owner.Process.Kill()
	_ = owner.Wait()
	allGone(t, left)
	deadline := time.Now().Add(5 * time.Second)
	for d.apiStatus("GET", "/v1/sessions/owned", nil) != 404 {
		if time.Now().After(deadline) {
			t.Fatal("session still open after its owner died")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestServeExecCatchesSetsidAsFirstInstruction(t *testing.T) {
	d := startDaemon(t, "")
	mark := testutil.Marker(t)
	testutil.CheckNoLeaks(t, mark)
	d.execArgv("first", "autonomous", "setsid", "-f", "sleep", testutil.Sleep(mark))
	left := atLeastSleepers(t, mark, 1)
	var end api.Ended
	d.do("POST", "/v1/sessions/first/turn-end", nil, &end)
	allGone(t, left)
}

func TestServeExecWithoutDaemonRunsNothing(t *testing.T) {
	mark := testutil.Marker(t)
	testutil.CheckNoLeaks(t, mark)
	sock := t.TempDir() + "/none.sock"
	cmd := lineageCmd("exec", "--socket", sock, "--session", "s", "--", "sleep", testutil.Sleep(mark))
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("exec without a daemon succeeded: %s", out)
	}
	if len(testutil.Find(mark)) != 0 {
		t.Error("the command ran")
	}
	if msg := string(out); !strings.Contains(msg, "no lineage daemon reachable at "+sock) {
		t.Errorf("exec without a daemon said %q, want it to name the socket it tried", msg)
	}
}
