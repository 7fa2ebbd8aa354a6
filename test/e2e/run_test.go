package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/lineage-dev/lineage/client"
	"github.com/lineage-dev/lineage/internal/job"
	"github.com/lineage-dev/lineage/internal/loader"
	"github.com/lineage-dev/lineage/internal/loader/bpf"
	"github.com/lineage-dev/lineage/internal/testutil"
	"github.com/lineage-dev/lineage/lineage"
)

// backends are the backends every escape test runs against. The bpf one is
// skipped only where BPF can't load (and fails then under
// LINEAGE_REQUIRE_BPF=1).
var backends = []string{loader.BackendBPF, loader.BackendProc}

// variant is how a test's `lineage run` tracks its job: with a backend of
// its own, or through a daemon's tracker.
type variant struct {
	name    string
	backend string
	daemon  bool
}

// variants are the ways every escape test runs: each backend standalone,
// and bpf through a daemon (which needs bpf too).
var variants = []variant{
	{loader.BackendBPF, loader.BackendBPF, false},
	{loader.BackendProc, loader.BackendProc, false},
	{"bpf via daemon", loader.BackendBPF, true},
}

// setup prepares v for a test: it skips where v's backend can't run, and
// for the daemon starts one (stopped when the test ends). It returns the
// environment lineage run needs.
func (v variant) setup(t *testing.T) []string {
	t.Helper()
	requireBackend(t, v.backend)
	if !v.daemon {
		return nil
	}
	d := startDaemon(t, "")
	return []string{client.EnvSocket + "=" + d.sock}
}

// check fails the test unless the report says the job ran as v says.
func (v variant) check(t *testing.T, rep *job.Report) {
	t.Helper()
	want := job.TrackerStandalone
	if v.daemon {
		want = job.TrackerDaemon
	}
	if rep.Backend.Backend != v.backend || rep.Tracker != want {
		t.Errorf("report says backend %q, tracker %q; want %q, %q", rep.Backend.Backend, rep.Tracker, v.backend, want)
	}
}

func requireBackend(t *testing.T, backend string) {
	t.Helper()
	if backend != loader.BackendBPF {
		return
	}
	b, err := bpf.Open(nil)
	if err == nil {
		b.Close()
		return
	}
	if !errors.Is(err, loader.ErrUnavailable) {
		t.Fatalf("open bpf: %v", err)
	}
	testutil.SkipWithoutBPF(t, err)
}

// bystander is a process started beside the job that must survive it.
type bystander struct {
	cmd   *exec.Cmd
	start uint64
	what  string
}

func startBystander(t *testing.T, what string, cmd *exec.Cmd) *bystander {
	t.Helper()
	if err := cmd.Start(); err != nil {
		t.Fatalf("start bystander %s: %v", what, err)
	}
	start, _, err := testutil.StartTicks(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return &bystander{cmd: cmd, start: start, what: what}
}

func (b *bystander) check(t *testing.T) {
	t.Helper()
	if !testutil.Alive(b.cmd.Process.Pid, b.start) {
		t.Errorf("bystander %s (pid %d) did not survive", b.what, b.cmd.Process.Pid)
	}
}

// runResult is one `lineage run`.
type runResult struct {
	code   int
	stderr string
	report *job.Report
	// maxRSS is lineage's peak resident set, in KiB, as its own mm
	// counted it (VmHWM): not the rusage of a child os/exec started with
	// vfork, which begins at its parent's peak.
	maxRSS int64
}

// runLimit is how long one `lineage run` of a test may take: a minute, or
// two on a slow machine (slowEnv), where loading the program alone takes
// seconds; either scaled by testutil.WaitScale, as every wait is.
func runLimit() time.Duration {
	if os.Getenv(slowEnv) == "1" {
		return 2 * time.Minute * testutil.WaitScale()
	}
	return time.Minute * testutil.WaitScale()
}

// runJob runs lineage in a process group of its own, with two bystanders
// beside the job: one with an exact copy of lineage's environment, and one
// in lineage's own process group. It fails the test if either is harmed or
// if any process carrying mark is left alive.
func runJob(t *testing.T, mark string, env []string, args ...string) runResult {
	t.Helper()
	dir := t.TempDir()
	reportPath := filepath.Join(dir, "report.json")
	cmd := lineageCmd(append([]string{"run", "--report", reportPath, "--grace", "1s"}, args...)...)
	cmd.Env = append(cmd.Env, env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// A leftover holding lineage's stderr open must not keep Wait waiting.
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })

	sameEnv := exec.Command("sleep", testutil.Sleep(mark+"9"))
	sameEnv.Env = cmd.Env
	by1 := startBystander(t, "with the job's environment", sameEnv)
	samePG := exec.Command("sleep", testutil.Sleep(mark+"9"))
	samePG.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pgid: cmd.Process.Pid}
	by2 := startBystander(t, "in lineage's process group", samePG)

	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	peak := watchPeakRSS(cmd.Process.Pid)
	var err error
	select {
	case err = <-done:
	case <-time.After(runLimit()):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("lineage run did not finish within %v; stderr:\n%s", runLimit(), stderr.String())
	}
	res := runResult{stderr: stderr.String(), maxRSS: peak()}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		res.code = ee.ExitCode()
	case errors.Is(err, exec.ErrWaitDelay):
		// lineage exited, but something it left alive holds its stderr:
		// the survivors check below names it.
		res.code = cmd.ProcessState.ExitCode()
		t.Errorf("lineage exited, but its stderr stayed open %v longer", cmd.WaitDelay)
	default:
		t.Fatal(err)
	}
	if raw, err := os.ReadFile(reportPath); err == nil {
		res.report = &job.Report{}
		if err := json.Unmarshal(raw, res.report); err != nil {
			t.Fatalf("report: %v\n%s", err, raw)
		}
	}
	// Once lineage is gone, nothing of the job may live.
	for _, p := range testutil.Find(mark) {
		if strings.Contains(strings.Join(p.Argv, " "), mark+"9") {
			continue // a bystander
		}
		t.Errorf("survivor %d %q", p.PID, p.Argv)
		testutil.KillIdentity(p.PID, p.StartTicks)
	}
	by1.check(t)
	by2.check(t)
	if t.Failed() {
		t.Logf("lineage stderr:\n%s", res.stderr)
	}
	return res
}

// watchPeakRSS reads pid's VmHWM every few milliseconds, until the
// returned function is called (once pid has exited), which returns the
// last reading, in KiB. VmHWM only grows while the process lives, so the
// last reading is its peak up to a few milliseconds before its exit.
func watchPeakRSS(pid int) func() int64 {
	var last atomic.Int64
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		path := fmt.Sprintf("/proc/%d/status", pid)
		for {
			if b, err := os.ReadFile(path); err == nil {
				for line := range strings.Lines(string(b)) {
					if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
						if kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64); err == nil && kb > 0 {
							last.Store(kb)
						}
					}
				}
			}
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	return func() int64 {
		close(stop)
		<-done
		return last.Load()
	}
}

// escape is a job that leaves something behind.
type escape struct {
	name string
	// script is run by sh -c; %[1]s is a sleep argument carrying the marker.
	script string
	// leftBehind is how many processes with the marker outlive the job.
	leftBehind int
	// args are extra lineage flags.
	args []string
	// want checks the report further.
	want func(t *testing.T, res runResult)
}

const settle = "\nsleep 0.4" // let the leftovers get going before the job exits

var escapes = []escape{
	{name: "background", script: "sleep %[1]s &" + settle, leftBehind: 1},
	{name: "nohup", script: "nohup sleep %[1]s >/dev/null 2>&1 &" + settle, leftBehind: 1},
	{name: "setsid", script: "setsid sleep %[1]s &" + settle, leftBehind: 1},
	{name: "double fork daemon", script: "(setsid sh -c 'sleep %[1]s & exit 0' &)" + settle, leftBehind: 1},
	{name: "env -i daemon", script: "env -i /bin/sh -c 'sleep %[1]s &' &" + settle, leftBehind: 1},
	{name: "ignores SIGTERM", script: `sh -c 'trap "" TERM; exec sleep %[1]s' &` + settle, leftBehind: 1,
		want: func(t *testing.T, res runResult) {
			if n := countOutcomes(res, lineage.Killed, "KILL"); n != 1 {
				t.Errorf("%d members killed with SIGKILL, want the TERM-ignorer", n)
			}
		}},
	{name: "stopped", script: "sleep %[1]s & kill -STOP $!" + settle, leftBehind: 1},
	{name: "100 nested shells", script: nestedShells(100) + " &\nsleep 2", leftBehind: 101},
	{name: "300 sleepers", script: "i=0; while [ $i -lt 300 ]; do sleep %[1]s & i=$((i+1)); done; sleep 1", leftBehind: 300},
	{name: "leader thread exited", script: testModeEnv + `=leader-exit "$LINEAGE_TEST_BINARY" %[1]s &` + settle, leftBehind: 1},
	{name: "new pid namespace", script: "unshare --pid --fork sleep %[1]s &" + settle, leftBehind: 2},
}

// nestedShells builds a chain of n shells, each the parent of the next, the
// last one sleeping; every shell's argv carries the marker.
func nestedShells(n int) string {
	return fmt.Sprintf(`n=%d; s=%%[1]s; f='if [ "$1" -gt 0 ]; then sh -c "$0" "$0" $(($1 - 1)) "$2"; else sleep "$2"; fi'; sh -c "$f" "$f" $n "$s"`, n-1)
}

func countOutcomes(res runResult, result lineage.Result, signal string) int {
	if res.report == nil || res.report.Reap == nil {
		return 0
	}
	n := 0
	for _, o := range res.report.Reap.Outcomes {
		if o.Result == result && o.Signal == signal {
			n++
		}
	}
	return n
}

func TestRunCatchesEveryEscape(t *testing.T) {
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			daemonEnv := v.setup(t)
			for _, e := range escapes {
				t.Run(e.name, func(t *testing.T) {
					mark := testutil.Marker(t)
					testutil.CheckNoLeaks(t, mark)
					script := strings.ReplaceAll(fmt.Sprintf(e.script, testutil.Sleep(mark)), "%[1]s", testutil.Sleep(mark))
					env := []string{"LINEAGE_TEST_BINARY=" + os.Args[0]}
					if !strings.Contains(e.script, "LINEAGE_TEST_BINARY") {
						env = nil
					}
					env = append(env, daemonEnv...)
					args := append([]string{"--backend", v.backend}, e.args...)
					args = append(args, "--", "sh", "-c", script+"; exit 5")
					res := runJob(t, mark, env, args...)
					if res.code != 5 {
						t.Errorf("exit status %d, want the job's own 5; stderr:\n%s", res.code, res.stderr)
					}
					if res.report == nil {
						t.Fatalf("no JSON report; stderr:\n%s", res.stderr)
					}
					v.check(t, res.report)
					if got := markedOutcomes(res, mark); got < e.leftBehind {
						t.Errorf("report accounts for %d marked processes, want %d left behind; stderr:\n%s", got, e.leftBehind, res.stderr)
					}
					if res.report.Reap != nil && len(res.report.Reap.Survivors) != 0 {
						t.Errorf("survivors %v", res.report.Reap.Survivors)
					}
					if e.want != nil {
						e.want(t, res)
					}
				})
			}
		})
	}
}

// markedOutcomes counts the report's outcomes whose argv carries mark and
// that ended during the reap.
func markedOutcomes(res runResult, mark string) int {
	if res.report == nil || res.report.Reap == nil {
		return 0
	}
	n := 0
	for _, o := range res.report.Reap.Outcomes {
		if strings.Contains(strings.Join(o.Argv, " "), mark) && (o.Result == lineage.Exited || o.Result == lineage.Vanished || o.Result == lineage.Terminated || o.Result == lineage.Killed) {
			n++
		}
	}
	return n
}
