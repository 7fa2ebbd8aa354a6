package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lineage-dev/lineage/client"
	"github.com/lineage-dev/lineage/internal/job"
	"github.com/lineage-dev/lineage/internal/loader"
	"github.com/lineage-dev/lineage/internal/testutil"
)

// stormScript is a bounded fork storm: every process logs its pid, then
// forks children as fast as it can, each of which does the same one level
// down, and finally sleeps. At most width^depth processes (about 1,400).
// The job exits once the storm has run 0.7 s and started at least minRan
// processes (on a slow machine, such as an emulated one, that takes
// longer), or after 300 more polls. With orphans, a process that forked
// exits at once instead of sleeping: its children are orphans the moment
// they are born, so /proc adoption by parent pid can't find a child whose
// fork no hook saw, and only the leaves, which sleep, are left to reap.
func stormScript(log, sleepArg string, width, depth, minRan int, orphans bool) string {
	end := "exec sleep " + sleepArg
	if orphans {
		end = `[ "$d" -gt 0 ] && exit 0; ` + end
	}
	return fmt.Sprintf(`storm='echo $$ $1 >> %[1]s; d=$1; if [ "$d" -gt 0 ]; then i=0; while [ $i -lt %[3]d ]; do sh -c "$0" "$0" $((d - 1)) & i=$((i + 1)); done; fi; %[2]s'
sh -c "$storm" "$storm" %[4]d &
sleep 0.7
n=0; while [ $n -lt 300 ] && [ "$(cat %[1]s 2>/dev/null | wc -l)" -lt %[5]d ]; do sleep 0.1; n=$((n + 1)); done`, log, end, width, depth, minRan)
}

// slowEnv, set to 1, says the tests run on a slow machine (the kernel
// matrix's emulated CPU, a few forks a second): the fork storm is smaller
// (85 processes instead of 1,555, at least 20 of them started before the
// job exits) and its kill phase is not timed.
const slowEnv = "LINEAGE_TEST_SLOW"

// TestRunReapsAForkStormCompletely reaps fork storms: every process that
// ran and lives at the reap is in the report, or was killed at birth. On
// kernels whose tracepoints run preemptible, the kernel skips runs of the
// fork hook in a storm; the second fork hook inserts those forks, /proc
// adoption finds any both missed whose parent lives, and the orphans storm
// leaves no parent to find them by. Its log line ("storm: ...") gives the
// kernel's miss counters and what saw the missed forks.
func TestRunReapsAForkStormCompletely(t *testing.T) {
	slow := os.Getenv(slowEnv) == "1"
	width, depth, minRan := 6, 4, 50
	if slow {
		width, depth, minRan = 4, 3, 20
	}
	for _, backend := range backends {
		for _, orphans := range []bool{false, true} {
			name := backend
			if orphans {
				name += "/orphans"
			}
			t.Run(name, func(t *testing.T) { testRunReapsAForkStorm(t, backend, width, depth, minRan, orphans, slow, nil) })
		}
	}
}

// TestRunThroughDaemonReapsAForkStormCompletely is the orphans storm
// through a daemon: the front, the job's orphanage, inherits the orphans,
// and the daemon adopts from its children those that no fork hook saw.
// Its log line ("storm: ...") gives the daemon's counters, from its
// metrics.
func TestRunThroughDaemonReapsAForkStormCompletely(t *testing.T) {
	slow := os.Getenv(slowEnv) == "1"
	width, depth, minRan := 6, 4, 50
	if slow {
		width, depth, minRan = 4, 3, 20
	}
	d := startDaemon(t, "")
	testRunReapsAForkStorm(t, loader.BackendBPF, width, depth, minRan, true, slow, d)
}

// testRunReapsAForkStorm runs a storm under lineage run: standalone with
// backend, or through d when it is set.
func testRunReapsAForkStorm(t *testing.T, backend string, width, depth, minRan int, orphans, slow bool, d *daemon) {
	requireBackend(t, backend)
	mark := testutil.Marker(t)
	testutil.CheckNoLeaks(t, mark)
	log := filepath.Join(t.TempDir(), "pids")
	args := []string{"--backend", backend}
	var env []string
	if d != nil {
		args, env = nil, []string{client.EnvSocket + "=" + d.sock}
	}
	args = append(args, "--", "sh", "-c", stormScript(log, testutil.Sleep(mark), width, depth, minRan, orphans))
	res := runJob(t, mark, env, args...)
	if res.report == nil || res.report.Reap == nil {
		t.Fatalf("no reap in the report; stderr:\n%s", res.stderr)
	}
	if d != nil && !strings.Contains(res.stderr, "via daemon") {
		t.Fatalf("the run did not go through the daemon; stderr:\n%s", res.stderr)
	}
	// Every process that ran and lives at the reap is accounted for: in
	// the reap's outcomes, or killed at birth. In the orphans storm only
	// the leaves live on.
	accounted := map[uint32]bool{}
	for _, o := range res.report.Reap.Outcomes {
		accounted[o.Member.PID] = true
	}
	for _, id := range res.report.Contained {
		accounted[id.PID] = true
	}
	ran := readStorm(t, log)
	unseen := 0
	for _, p := range ran {
		if (!orphans || p.leaf) && !accounted[p.pid] {
			unseen++
		}
	}
	st := res.report.Stats
	if d != nil {
		// The front's report has no tracker of its own to count: the
		// daemon's metrics do (all but the second hook's own misses,
		// which the hook misses include).
		m := scrape(t, d, "")
		st = loader.Stats{
			HookMisses:       uint64(m.value(t, "lineage_hook_misses_total")),
			ForkMisses:       uint64(m.value(t, "lineage_fork_hook_misses_total")),
			ForksCaught:      uint64(m.value(t, "lineage_forks_caught_total")),
			AdoptedOrphans:   uint64(m.value(t, "lineage_adopted_processes_total", "from", "orphanage")),
			AdoptedAfterMiss: uint64(m.value(t, "lineage_adopted_processes_total", "from", "parent") + m.value(t, "lineage_adopted_processes_total", "from", "orphanage")),
			Unattributed:     uint64(m.value(t, "lineage_unattributed_orphans_total")),
		}
	}
	t.Logf("storm: %s: %d processes ran, %d outcomes, %d killed at birth; the kernel skipped %d runs of the fork hook, "+
		"the second fork hook added %d and was skipped %d times, /proc adoption added %d (%d of them orphans); %d unseen by any hook and any adoption "+
		"(kill phase %v, containment %s, all hooks' skipped runs %d)",
		map[bool]string{false: "parents live", true: "orphans"}[orphans], len(ran), len(res.report.Reap.Outcomes), len(res.report.Contained),
		st.ForkMisses, st.ForksCaught, st.CatcherMisses, st.AdoptedAfterMiss, st.AdoptedOrphans, unseen,
		res.report.Reap.Phases.Kill, res.report.Reap.Containment, st.HookMisses)
	if unseen > 0 {
		t.Errorf("%d of %d processes that ran are not in the report", unseen, len(ran))
	}
	if len(ran) < minRan {
		t.Errorf("only %d processes ran: the storm did not storm", len(ran))
	}
	// Contained, the storm ends with the kill phase; how fast is the
	// benchmarks' to measure.
	if backend == loader.BackendBPF && !slow && res.report.Reap.Phases.Kill > 20*time.Second {
		t.Errorf("kill phase took %v: the storm outran containment", res.report.Reap.Phases.Kill)
	}
}

// stormProcess is one line of a storm's log: a process that ran, and
// whether it was a leaf (it forked nothing).
type stormProcess struct {
	pid  uint32
	leaf bool
}

func readStorm(t *testing.T, path string) []stormProcess {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []stormProcess
	for _, line := range strings.Split(string(raw), "\n") {
		var pid uint32
		var depth int
		if n, _ := fmt.Sscanf(line, "%d %d", &pid, &depth); n == 2 {
			out = append(out, stormProcess{pid: pid, leaf: depth == 0})
		}
	}
	return out
}

func TestRunReportsAFullMembershipMap(t *testing.T) {
	requireBackend(t, loader.BackendBPF)
	mark := testutil.Marker(t)
	s := testutil.Sleep(mark)
	t.Cleanup(func() {
		// The processes that could not be tracked escaped: the test ends
		// them, by identity.
		for _, p := range testutil.Find(mark) {
			testutil.KillIdentity(p.PID, p.StartTicks)
		}
	})
	script := strings.Repeat("setsid sleep "+s+" >/dev/null 2>&1 & ", 6) + "sleep 0.3"
	// --on-full=escape: today's escape, counted and said (TestRunFullMap has
	// the default, kill).
	res := runJobNoLeakCheck(t, "--backend", "bpf", "--max-members", "3", "--on-full", "escape", "--", "sh", "-c", script)
	if res.report == nil {
		t.Fatalf("no report; stderr:\n%s", res.stderr)
	}
	if res.report.Stats.MembersFull == 0 {
		t.Errorf("stats %+v: the full map is not counted", res.report.Stats)
	}
	if !strings.Contains(res.stderr, "not tracked") || !strings.Contains(res.stderr, "--max-members") {
		t.Errorf("stderr does not say processes escaped tracking:\n%s", res.stderr)
	}
}

// runJobNoLeakCheck runs lineage with a JSON report and returns the result,
// for tests that expect processes to escape and end them themselves.
func runJobNoLeakCheck(t *testing.T, args ...string) runResult {
	t.Helper()
	reportPath := filepath.Join(t.TempDir(), "report.json")
	cmd := lineageCmd(append([]string{"run", "--report", reportPath, "--grace", "1s"}, args...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	err := cmd.Run()
	res := runResult{stderr: stderr.String()}
	if cmd.ProcessState == nil {
		t.Fatalf("run lineage: %v", err)
	}
	res.code = cmd.ProcessState.ExitCode()
	if raw, err := os.ReadFile(reportPath); err == nil {
		res.report = &job.Report{}
		if err := json.Unmarshal(raw, res.report); err != nil {
			t.Fatalf("report: %v\n%s", err, raw)
		}
	}
	return res
}
