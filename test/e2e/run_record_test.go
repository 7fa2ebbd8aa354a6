package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lineage-dev/lineage/internal/buildinfo"
	"github.com/lineage-dev/lineage/internal/loader"
	"github.com/lineage-dev/lineage/internal/testutil"
)

// recordedJob is a make -j-like job: three parallel children, a chain of
// short-lived processes, forty /bin/true that each live about a
// millisecond, a double-forked daemon left behind, and a child that ignores
// SIGTERM, which the reaper must kill. %[1]s is a marked, finite sleep
// argument. "; exit 0" keeps sh from exec-ing its last command in place.
const recordedJob = `
for i in 1 2 3; do sh -c "sleep 0.2; exit $i" cc$i & done
sh -c 'sh -c "/bin/true chain; exit 0"; exit 0'
i=1; while [ $i -le 40 ]; do /bin/true quick$i; i=$((i+1)); done
(setsid sleep %[1]s &)
sh -c 'trap "" TERM; exec sleep %[1]s' &
wait %%1 %%2 %%3
sleep 0.3
exit 3`

// reportedProcess is the part of `lineage report --format json`'s process
// that the test looks at.
type reportedProcess struct {
	ID       struct{ PID uint32 } `json:"process"`
	Parent   struct{ PID uint32 } `json:"parent"`
	Argv     []string             `json:"argv"`
	Start    int64                `json:"start_ns"`
	End      int64                `json:"end_ns"`
	Ended    bool                 `json:"ended"`
	Signals  []string             `json:"signals"`
	Result   string               `json:"result"`
	Leaked   bool                 `json:"leaked"`
	IsRoot   bool                 `json:"is_root"`
	Outcome  string               `json:"outcome"`
	Missing  []string             `json:"missing"`
	Exit     *struct{ Code *int } `json:"exit"`
	Lifetime int64                `json:"lifetime_ns"`
}

type reportedRecord struct {
	Header struct {
		Backend string          `json:"backend"`
		Limits  []string        `json:"limits"`
		Build   *buildinfo.Info `json:"build"`
	} `json:"header"`
	Processes []reportedProcess `json:"processes"`
}

func TestRunRecordsAJob(t *testing.T) {
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			requireBackend(t, backend)
			mark := testutil.Marker(t)
			testutil.CheckNoLeaks(t, mark)
			path := filepath.Join(t.TempDir(), "trace.jsonl")
			script := strings.ReplaceAll(recordedJob, "%[1]s", testutil.Sleep(mark))
			script = strings.ReplaceAll(script, "%%", "%")
			env := []string{"SUDO_UID=65534", "SUDO_GID=65534"}
			res := runJob(t, mark, env, "--backend", backend, "--record", path, "--", "sh", "-c", script)
			if res.code != 3 {
				t.Fatalf("exit status %d, want 3; stderr:\n%s", res.code, res.stderr)
			}
			checkPrivate(t, path, 65534)
			// A check below may stop the test: the record is logged then too.
			t.Cleanup(func() {
				if t.Failed() {
					raw, _ := os.ReadFile(path)
					t.Logf("record:\n%s", raw)
				}
			})
			rec := reportRecord(t, path)
			if rec.Header.Backend != backend {
				t.Errorf("header backend %q, want %q", rec.Header.Backend, backend)
			}
			if (backend == loader.BackendProc) != (len(rec.Header.Limits) > 0) {
				t.Errorf("header limits %q on %s", rec.Header.Limits, backend)
			}
			// The record and the report name the binary that made them, as
			// its version says.
			if b := binaryBuild(t); rec.Header.Build == nil || *rec.Header.Build != b || res.report.Build == nil || *res.report.Build != b {
				t.Errorf("record build %+v, report build %+v, want %+v", rec.Header.Build, res.report.Build, b)
			}
			checkRecordedJob(t, rec.Processes, mark, backend, skippedExecs(t, path))
			tree, err := lineageCmd("report", path).Output()
			if err != nil || strings.Count(string(tree), "LEAK") != 2 || !strings.Contains(string(tree), "backend: "+backend) {
				t.Errorf("lineage report (tree): %v: want two LEAK marks and the backend:\n%s", err, tree)
			}
		})
	}
}

// binaryBuild is what the lineage under test says of its build (`lineage
// version --json`): the kernel matrix's binaries are stamped by make, this
// test binary is not.
func binaryBuild(t *testing.T) buildinfo.Info {
	t.Helper()
	out, err := lineageCmd("version", "--json").Output()
	if err != nil {
		t.Fatalf("lineage version --json: %v", err)
	}
	var b buildinfo.Info
	if err := json.Unmarshal(out, &b); err != nil {
		t.Fatalf("lineage version --json: %v\n%s", err, out)
	}
	return b
}

// checkPrivate checks that path is 0600 and owned by uid.
func checkPrivate(t *testing.T, path string, uid uint32) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st := fi.Sys().(*syscall.Stat_t); fi.Mode().Perm() != 0o600 || st.Uid != uid || st.Gid != uid {
		t.Errorf("record mode %v, owner %d:%d, want 0600 %d:%d", fi.Mode().Perm(), st.Uid, st.Gid, uid, uid)
	}
}

// reportRecord runs `lineage report --format json` on path.
func reportRecord(t *testing.T, path string) reportedRecord {
	t.Helper()
	cmd := lineageCmd("report", "--format", "json", path)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("lineage report: %v", err)
	}
	var rec reportedRecord
	if err := json.Unmarshal(out, &rec); err != nil {
		t.Fatalf("report json: %v\n%s", err, out)
	}
	return rec
}

// skippedExecs counts the exec and exit hook runs the kernel skipped, as
// the record at path says (a kernel whose tracepoints run preemptible,
// such as 7.x, skips some under load): an exec so lost leaves its process
// under its parent's argv, an exit so lost leaves it without its end.
func skippedExecs(t *testing.T, path string) *execBudget {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b := &execBudget{t: t}
	for _, line := range strings.Split(string(raw), "\n") {
		var ev struct {
			Kind, Reason string
			Count        int
		}
		if json.Unmarshal([]byte(line), &ev) == nil && ev.Kind == "loss" && ev.Reason == "exec and exit hook runs the kernel skipped" {
			b.left += ev.Count
		}
	}
	return b
}

// execBudget lets a check find a process's exec or exit missing as many
// times as the record said the kernel skipped exec and exit hook runs, and
// no more.
type execBudget struct {
	t    *testing.T
	left int
}

// excuses reports whether n processes missing from what argv names are
// ones the record said it may lack, and takes them from the budget.
func (b *execBudget) excuses(argv string, n int) bool {
	if n <= 0 || n > b.left {
		return false
	}
	b.left -= n
	b.t.Logf("%d processes with argv %q missing: the record says the kernel skipped exec and exit hook runs", n, argv)
	return true
}

func checkRecordedJob(t *testing.T, procs []reportedProcess, mark, backend string, skipped *execBudget) {
	t.Helper()
	var root *reportedProcess
	byArgv := map[string][]*reportedProcess{}
	for i := range procs {
		p := &procs[i]
		if p.IsRoot {
			root = p
			continue
		}
		argv := strings.Join(p.Argv, " ")
		byArgv[argv] = append(byArgv[argv], p)
	}
	if root == nil || root.Exit == nil || root.Exit.Code == nil || *root.Exit.Code != 3 {
		t.Fatalf("root: %+v", root)
	}
	one := func(argv string) *reportedProcess {
		if ps := byArgv[argv]; len(ps) == 1 {
			return ps[0]
		} else if len(ps) == 0 && skipped.excuses(argv, 1) {
			return nil
		}
		t.Errorf("%d processes with argv %q, want 1", len(byArgv[argv]), argv)
		return nil
	}
	if backend == loader.BackendBPF {
		for i := 1; i <= 3; i++ {
			cc := fmt.Sprintf("sh -c sleep 0.2; exit %d cc%d", i, i)
			if p := one(cc); p != nil {
				skipped.checkEnded(p, root.ID.PID, cc, i)
			}
		}
		checkChain(skipped, one, root.ID.PID)
		checkQuick(t, byArgv, root.ID.PID, skipped)
	}
	sleepers := byArgv["sleep "+testutil.Sleep(mark)]
	if len(sleepers) < 2 && skipped.excuses("sleep "+testutil.Sleep(mark), 2-len(sleepers)) {
		return
	}
	if len(sleepers) != 2 {
		t.Fatalf("%d marked sleepers, want the daemon and the TERM-ignorer", len(sleepers))
	}
	daemon, killed := sleepers[0], sleepers[1]
	if daemon.Result == "killed" {
		daemon, killed = killed, daemon
	}
	if !daemon.Leaked || daemon.Result != "terminated" || !skipped.ended(daemon, "daemon") {
		t.Errorf("daemon: leaked %v, result %q, ended %v", daemon.Leaked, daemon.Result, daemon.Ended)
	}
	if backend == loader.BackendBPF && (daemon.Parent.PID == root.ID.PID || daemon.Parent.PID == 0) {
		t.Errorf("daemon's lineage parent %d: want the subshell that forked it", daemon.Parent.PID)
	}
	if backend == loader.BackendBPF && killed.Parent.PID != root.ID.PID {
		t.Errorf("TERM-ignorer's lineage parent %d, want the root %d", killed.Parent.PID, root.ID.PID)
	}
	if !killed.Leaked || killed.Result != "killed" || len(killed.Signals) == 0 || killed.Signals[len(killed.Signals)-1] != "KILL" {
		t.Errorf("TERM-ignorer: leaked %v, signals %v, result %q", killed.Leaked, killed.Signals, killed.Result)
	}
}

// checkChain checks the short-lived chain root → sh → sh → /bin/true.
func checkChain(skipped *execBudget, one func(string) *reportedProcess, root uint32) {
	skipped.t.Helper()
	outer := one(`sh -c sh -c "/bin/true chain; exit 0"; exit 0`)
	inner := one("sh -c /bin/true chain; exit 0")
	tru := one("/bin/true chain")
	if outer == nil || inner == nil || tru == nil {
		return
	}
	skipped.checkEnded(outer, root, "outer chain shell", 0)
	skipped.checkEnded(inner, outer.ID.PID, "inner chain shell", 0)
	skipped.checkEnded(tru, inner.ID.PID, "/bin/true chain", 0)
}

// checkQuick checks the forty /bin/true: each has its argv and its end,
// and those that lived under a millisecond are there like the others.
func checkQuick(t *testing.T, byArgv map[string][]*reportedProcess, root uint32, skipped *execBudget) {
	t.Helper()
	fast := 0
	var shortest time.Duration = time.Hour
	for i := 1; i <= 40; i++ {
		argv := fmt.Sprintf("/bin/true quick%d", i)
		ps := byArgv[argv]
		if len(ps) == 0 && skipped.excuses(argv, 1) {
			continue
		}
		if len(ps) != 1 {
			t.Errorf("%d processes with argv %q, want 1", len(ps), argv)
			continue
		}
		if !skipped.checkEnded(ps[0], root, argv, 0) {
			continue
		}
		life := time.Duration(ps[0].Lifetime)
		shortest = min(shortest, life)
		if life < time.Millisecond {
			fast++
		}
	}
	// An overloaded machine may not run /bin/true in under a millisecond
	// at all: then the check can only say so.
	if fast == 0 {
		t.Logf("no /bin/true lived under a millisecond here (shortest %v): the sub-millisecond case was not exercised", shortest)
		return
	}
	t.Logf("%d of 40 /bin/true lived under a millisecond (shortest %v), each recorded with its argv", fast, shortest)
}

// checkEnded checks p's lineage parent and that it exited with code, and
// reports whether its exit is in the record (its lifetime known).
func (b *execBudget) checkEnded(p *reportedProcess, parent uint32, what string, code int) bool {
	t := b.t
	t.Helper()
	if p.Parent.PID != parent {
		t.Errorf("%s: lineage parent %d, want %d", what, p.Parent.PID, parent)
	}
	if !b.ended(p, what) {
		t.Errorf("%s: ended %v leaked %v missing %v, want its exit", what, p.Ended, p.Leaked, p.Missing)
		return false
	}
	if !p.Ended {
		return false
	}
	if p.Leaked || p.Exit == nil || p.Exit.Code == nil || *p.Exit.Code != code {
		t.Errorf("%s: leaked %v exit %+v, want exit %d", what, p.Leaked, p.Exit, code)
	}
	return true
}

// ended reports whether p's end is in the record, or else is one the
// record said it may lack: the report marks its exit missing, and the
// kernel's skipped exit hook runs, taken from the budget, excuse it.
func (b *execBudget) ended(p *reportedProcess, what string) bool {
	if p.Ended {
		return true
	}
	if !slices.Contains(p.Missing, "exit") || b.left == 0 {
		return false
	}
	b.left--
	b.t.Logf("%s: its exit is missing and marked so: the record says the kernel skipped exec and exit hook runs", what)
	return true
}

func TestRunRecordRedactsAndRefusesABadPattern(t *testing.T) {
	dir := t.TempDir()
	path, touched := filepath.Join(dir, "trace.jsonl"), filepath.Join(dir, "ran")
	cmd := lineageCmd("run", "--record", path, "--redact", "(", "--", "touch", touched)
	out, err := cmd.CombinedOutput()
	if cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != 125 || !strings.Contains(string(out), "--redact") {
		t.Errorf("bad --redact: %v, output %q; want exit 125 naming --redact", err, out)
	}
	for _, p := range []string{path, touched} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s exists: something ran", p)
		}
	}

	// The job's command line and a leftover's hold the secret.
	mark := testutil.Marker(t)
	testutil.CheckNoLeaks(t, mark)
	reportPath := filepath.Join(dir, "report.json")
	cmd = lineageCmd("run", "--backend", "proc", "--record", path, "--report", reportPath, "--redact", `token=\S+`, "--", "sh", "-c",
		fmt.Sprintf(`setsid sh -c "sleep %s" token=hunter2 & sleep 0.2`, testutil.Sleep(mark)), "token=hunter2")
	out, err = cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("run: %v\n%s", err, out)
	}
	if strings.Contains(string(out), "hunter2") || !strings.Contains(string(out), "***") {
		t.Errorf("report on stderr not redacted:\n%s", out)
	}
	for _, p := range []string{path, reportPath} {
		raw, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(raw), "hunter2") || !strings.Contains(string(raw), "***") {
			t.Errorf("%s not redacted:\n%s", p, raw)
		}
	}
	checkPrivate(t, path, uint32(os.Getuid()))
	if left := testutil.Find(mark); len(left) != 0 {
		t.Errorf("left alive: %v", left)
	}
}

func TestRunRecordRefusesASymlink(t *testing.T) {
	dir := t.TempDir()
	target, link := filepath.Join(dir, "target"), filepath.Join(dir, "link")
	if err := os.WriteFile(target, []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	touched := filepath.Join(dir, "ran")
	cmd := lineageCmd("run", "--record", link, "--", "touch", touched)
	out, _ := cmd.CombinedOutput()
	if cmd.ProcessState.ExitCode() != 125 || !strings.Contains(string(out), "symbolic link") {
		t.Errorf("exit %d, output %q: want 125 and a refusal", cmd.ProcessState.ExitCode(), out)
	}
	if _, err := os.Lstat(touched); err == nil {
		t.Error("the job ran")
	}
	if b, _ := os.ReadFile(target); string(b) != "keep" {
		t.Errorf("target: %q", b)
	}
}
