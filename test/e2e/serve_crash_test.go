package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lineage-dev/lineage/api"
	"github.com/lineage-dev/lineage/internal/loader/bpf"
	"github.com/lineage-dev/lineage/internal/proc"
	"github.com/lineage-dev/lineage/internal/testutil"
)

// slowLeftovers are bash processes a session's root left behind that take
// their time over SIGTERM: each notes the TERM (its pid, into terms) and
// runs on, forking nothing, until the test writes lines to fifo; then it
// forks one sleeper per line it reads. Each ends by itself within two
// minutes.
type slowLeftovers struct {
	fifo, terms, ready string
	mark               string // in the shells' argv (the script's name)
	forked             string // in the argv of the sleepers they fork
	shells             []testutil.Proc
}

func startSlowLeftovers(t *testing.T, d *daemon, session string, n int) *slowLeftovers {
	t.Helper()
	mark := testutil.Marker(t)
	dir := t.TempDir()
	l := &slowLeftovers{fifo: filepath.Join(dir, "lines"), terms: filepath.Join(dir, "terms"), ready: filepath.Join(dir, "ready"),
		mark: "leftover-" + mark, forked: mark + "2"}
	if err := syscall.Mkfifo(l.fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(dir, l.mark+".sh")
	body := fmt.Sprintf(`trap 'echo $$ >> %q' TERM
exec 3<>%q
echo $$ >> %q
while [ $SECONDS -lt 120 ]; do
	if read -t 5 x <&3; then sleep %s & fi
done
`, l.terms, l.fifo, l.ready, testutil.Sleep(l.forked))
	if err := os.WriteFile(script, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	testutil.CheckNoLeaks(t, l.mark)
	testutil.CheckNoLeaks(t, l.forked)
	t.Cleanup(func() {
		for _, p := range append(testutil.Find(l.mark), testutil.Sleepers(l.forked)...) {
			testutil.KillIdentity(p.PID, p.StartTicks)
		}
	})
	d.execRoot(session, "autonomous", fmt.Sprintf("for i in $(seq %d); do setsid bash %s </dev/null >/dev/null 2>&1 & done", n, script))
	// Each is ready, its trap set, once it wrote its pid.
	var pids []string
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		data, _ := os.ReadFile(l.ready)
		if pids = strings.Fields(string(data)); len(pids) >= n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d leftovers ready, want %d", len(pids), n)
		}
	}
	for _, p := range pids {
		pid, err := strconv.Atoi(p)
		if err != nil {
			t.Fatal(err)
		}
		start, _, err := testutil.StartTicks(pid)
		if err != nil {
			t.Fatalf("leftover %d: %v", pid, err)
		}
		l.shells = append(l.shells, testutil.Proc{PID: pid, StartTicks: start})
	}
	return l
}

// termed waits until a leftover has had its SIGTERM.
func (l *slowLeftovers) termed(t *testing.T) {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if data, _ := os.ReadFile(l.terms); len(data) > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("no leftover had its SIGTERM within 60s")
		}
	}
}

// gone waits up to timeout for every leftover to be gone.
func (l *slowLeftovers) gone(t *testing.T, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for _, p := range l.shells {
		if !testutil.WaitGone(p.PID, p.StartTicks, time.Until(deadline)) {
			t.Errorf("leftover %d survived", p.PID)
		}
	}
}

// The daemon is killed (-9) while it closes a session of 100 leftovers that
// take their time over SIGTERM (--grace 30s), right after the first of them
// had its TERM. The close was saved as begun before anything was signalled:
// the restarted daemon finishes it. None is left, nothing is contained, and
// the session answers as closed.
func TestServeCrashDuringACloseIsFinished(t *testing.T) {
	d := startDaemon(t, "", "--grace", "30s")
	l := startSlowLeftovers(t, d, "crash", 100)
	go func() {
		// Cut short by the kill: its answer never comes.
		_ = d.client().Do(context.Background(), "POST", "/v1/sessions/crash/close", nil, nil)
	}()
	l.termed(t)
	d.kill9()
	if !strings.Contains(snapshot2(t, d), `"closing":true`) {
		t.Errorf("the saved state does not say the close began:\n%s", snapshot2(t, d))
	}
	d.start("--grace", "30s")
	l.gone(t, 2*time.Minute)
	for deadline := time.Now().Add(time.Minute); d.apiStatus("GET", "/v1/sessions/crash", nil) != 404; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the session still answers a minute after its leftovers were gone")
		}
	}
	reaping, _, err := bpf.PinnedReaping(d.pin)
	if err != nil {
		t.Fatal(err)
	}
	if len(reaping) != 0 {
		t.Errorf("roots still marked as reaping after the close was finished: %v", reaping)
	}
	var ss []api.Session
	d.do("GET", "/v1/sessions", nil, &ss)
	if len(ss) != 0 {
		t.Errorf("sessions after the finished close: %+v", ss)
	}
	if !strings.Contains(d.stderr.String(), "session crash: its close (or its parent's) began before the last daemon stopped") {
		t.Errorf("the restarted daemon did not say it finishes the close:\n%s", d.stderr)
	}
}

// snapshot2 is the daemon's state files, as they are on disk.
func snapshot2(t *testing.T, d *daemon) string {
	t.Helper()
	files := stateFiles(t, d)
	return files["state.json"] + files["state.journal"]
}

// The same crash, and no daemon after it: the daemon's death kills
// nothing, and the kill-at-birth it armed ends with its lease, within
// bpf.ReapLease of its death. Then the leftovers fork again, and their
// children live; not one leftover was killed.
func TestServeCrashDuringACloseKillsNothing(t *testing.T) {
	d := startDaemon(t, "", "--grace", "30s")
	l := startSlowLeftovers(t, d, "crash", 100)
	go func() {
		_ = d.client().Do(context.Background(), "POST", "/v1/sessions/crash/close", nil, nil)
	}()
	l.termed(t)
	d.kill9()
	died := proc.BootTime()
	reaping, lease, err := bpf.PinnedReaping(d.pin)
	if err != nil {
		t.Fatal(err)
	}
	if len(reaping) == 0 {
		t.Error("no root marked as reaping: the close was not under way")
	}
	if lease > died+bpf.ReapLease {
		t.Errorf("the reaper's lease ends %v after the daemon died, want at most %v", lease-died, bpf.ReapLease)
	}
	// Past the lease, and not before: the marks are left, and kill nothing.
	for proc.BootTime() <= lease {
		time.Sleep(min(lease-proc.BootTime(), time.Second) + time.Millisecond)
	}
	f, err := os.OpenFile(l.fifo, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(strings.Repeat("\n", len(l.shells))); err != nil {
		t.Fatal(err)
	}
	f.Close()
	var born []testutil.Proc
	for deadline := time.Now().Add(30 * time.Second); len(born) < len(l.shells); time.Sleep(20 * time.Millisecond) {
		born = testutil.Sleepers(l.forked)
		if time.Now().After(deadline) {
			t.Fatalf("%d children of the leftovers live, want %d: the lineage can't fork", len(born), len(l.shells))
		}
	}
	time.Sleep(200 * time.Millisecond) // a kill at birth would have landed
	allAlive(t, born)
	allAlive(t, l.shells)
	if data, _ := os.ReadFile(l.terms); len(data) == 0 {
		t.Error("no leftover noted its TERM")
	}
}
