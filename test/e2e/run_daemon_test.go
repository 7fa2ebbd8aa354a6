package e2e

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lineage-dev/lineage/api"
	"github.com/lineage-dev/lineage/client"
	"github.com/lineage-dev/lineage/internal/job"
	"github.com/lineage-dev/lineage/internal/testutil"
	"github.com/lineage-dev/lineage/lineage"
)

// bpfFiles counts the BPF objects (programs, maps, links) that process pid
// holds open.
func bpfFiles(t *testing.T, pid int) int {
	t.Helper()
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	fds, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, fd := range fds {
		if target, err := os.Readlink(filepath.Join(dir, fd.Name())); err == nil && strings.HasPrefix(target, "anon_inode:bpf") {
			n++
		}
	}
	return n
}

// With a daemon running, concurrent runs load nothing of their own: the
// host keeps one copy of lineage's programs, the daemon's. bpftool lists
// the host's programs: of the copies of lineage's (other tests may load
// theirs meanwhile), the daemon's pinned links run one of each, and no
// process of the 8 runs holds any; a standalone run beside them shows
// that the check sees a copy where there is one.
func TestRunThroughDaemonLoadsNothingOfItsOwn(t *testing.T) {
	bpftool := testutil.LookTool(t, "bpftool")
	d := startDaemon(t, "")
	mark := testutil.Marker(t)
	testutil.CheckNoLeaks(t, mark)
	before := hostProgs(t, bpftool)
	mine := checkDaemonProgs(t, bpftool, d, before)
	const runs = 8
	var cmds []*exec.Cmd
	var stderrs []*bytes.Buffer
	for range runs {
		var stderr bytes.Buffer
		cmd := startUntilReadyWith(t, func(cmd *exec.Cmd) {
			cmd.Stderr = &stderr
			cmd.Env = append(cmd.Env, client.EnvSocket+"="+d.sock)
		}, "run", "-v", "--grace", "1s", "--", "sh", "-c", "echo ready; sleep "+testutil.Sleep(mark))
		cmds = append(cmds, cmd)
		stderrs = append(stderrs, &stderr)
	}
	var roots []api.Root
	d.do("GET", "/v1/roots", nil, &roots)
	if len(roots) != runs {
		t.Errorf("the daemon tracks %d roots, want the %d runs'", len(roots), runs)
	}
	// Each run is its job's orphanage: the parent, a child subreaper,
	// that inherits what the job's lineage orphans.
	fronts := map[lineage.Identity]bool{}
	for _, cmd := range cmds {
		start, _, err := testutil.StartTicks(cmd.Process.Pid)
		if err != nil {
			t.Fatal(err)
		}
		fronts[lineage.Identity{PID: uint32(cmd.Process.Pid), StartTicks: start}] = true
	}
	seen := map[lineage.Identity]bool{}
	for _, r := range roots {
		if r.Orphanage == nil || !fronts[*r.Orphanage] || seen[*r.Orphanage] {
			t.Errorf("root %s: orphanage %v, want the lineage run that registered it", r.Root, r.Orphanage)
			continue
		}
		seen[*r.Orphanage] = true
	}
	if n := bpfFiles(t, d.cmd.Process.Pid); n == 0 {
		t.Fatal("the daemon holds no BPF object: the check can't see them")
	}
	for _, cmd := range cmds {
		if n := bpfFiles(t, cmd.Process.Pid); n != 0 {
			t.Errorf("lineage run %d holds %d BPF objects of its own", cmd.Process.Pid, n)
		}
	}
	checkOneCopy(t, bpftool, d, before, mine, cmds, mark)
	for i, cmd := range cmds {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		err := cmd.Wait()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 128+int(syscall.SIGTERM) {
			t.Errorf("run %d ended with %v, want exit %d; stderr:\n%s", i, err, 128+15, stderrs[i])
		}
		if !strings.Contains(stderrs[i].String(), "(backend bpf via daemon)") {
			t.Errorf("run %d's report does not name the daemon:\n%s", i, stderrs[i])
		}
	}
	d.do("GET", "/v1/roots", nil, &roots)
	if len(roots) != 0 {
		t.Errorf("the daemon still tracks %v", roots)
	}
}

// A run SIGKILLed with its process group, as a CI runner's hard cancel
// does, while the daemon tracks its job: the daemon, outside that group,
// sees the run die and reaps the job.
func TestRunThroughDaemonHardCancelLeavesNothing(t *testing.T) {
	d := startDaemon(t, "")
	mark := testutil.Marker(t)
	testutil.CheckNoLeaks(t, mark)
	s := testutil.Sleep(mark)
	cmd := startUntilReadyWith(t, func(cmd *exec.Cmd) {
		cmd.Env = append(cmd.Env, client.EnvSocket+"="+d.sock)
	}, "run", "--", "sh", "-c",
		fmt.Sprintf("setsid sleep %[1]s & (sleep %[1]s &) & nohup sleep %[1]s >/dev/null 2>&1 & sleep 0.3; echo ready; sleep %[1]s", s))
	ps := atLeastSleepers(t, mark, 4)
	// The test started lineage in a process group of its own.
	if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	deadline := time.Now().Add(20 * time.Second)
	for len(testutil.Sleepers(mark)) > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	allGone(t, ps)
	for _, p := range testutil.Sleepers(mark) {
		t.Errorf("left alive: %d %q", p.PID, p.Argv)
		testutil.KillIdentity(p.PID, p.StartTicks)
	}
	var sessions []api.Session
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		d.do("GET", "/v1/sessions", nil, &sessions)
		if len(sessions) == 0 || time.Now().After(deadline) {
			break
		}
	}
	if len(sessions) != 0 {
		t.Errorf("the dead run's session is still open: %+v", sessions)
	}
}

// A root run hands its job only to a root daemon: a socket that a
// non-root process listens on is not trusted, wherever LINEAGE_SOCKET
// points, and the run loads a tracker of its own.
func TestRunTrustsOnlyARootDaemon(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("only a root run refuses a non-root daemon")
	}
	requireBackend(t, variants[0].backend)
	perl := testutil.LookTool(t, "perl")
	mark := testutil.Marker(t)
	testutil.CheckNoLeaks(t, mark)
	dir, err := os.MkdirTemp("", "lineage-untrusted")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "lineage.sock")
	// It listens as nobody, and answers nothing.
	listener := exec.Command(perl, "-MIO::Socket::UNIX", "-e",
		`my $s = IO::Socket::UNIX->new(Type => SOCK_STREAM(), Local => $ARGV[0], Listen => 5) or die "listen: $!"; sleep $ARGV[1];`,
		sock, testutil.Sleep(mark+"9"))
	listener.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	by := startBystander(t, "the untrusted listener", listener)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(sock); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the untrusted listener did not listen")
		}
	}
	res := runJob(t, mark, []string{client.EnvSocket + "=" + sock}, "-v", "--", "true")
	if res.code != 0 {
		t.Errorf("exit status %d; stderr:\n%s", res.code, res.stderr)
	}
	if res.report == nil || res.report.Tracker != job.TrackerStandalone {
		t.Errorf("the job did not run standalone; stderr:\n%s", res.stderr)
	}
	if !strings.Contains(res.stderr, "runs as uid 65534, not root") {
		t.Errorf("-v does not say why the daemon was not used:\n%s", res.stderr)
	}
	by.check(t)
}

// With a daemon reachable, a daemon-wide flag or --standalone gives the
// job a tracker of its own, and -v says why, once (not again from
// lineage-tracker); without one, -v says so too.
func TestRunSaysWhoseTrackerItUses(t *testing.T) {
	d := startDaemon(t, "")
	withDaemon := []string{client.EnvSocket + "=" + d.sock}
	cases := []struct {
		name    string
		env     []string
		args    []string
		tracker string
		says    string
	}{
		{"daemon", withDaemon, nil, job.TrackerDaemon, "via the daemon at " + d.sock},
		{"--standalone", withDaemon, []string{"--standalone"}, job.TrackerStandalone, "standalone: --standalone"},
		// The proc backend, where a flag allows: a standalone bpf spawn
		// is not what is tested here.
		{"--max-members", withDaemon, []string{"--max-members", "5000", "--backend", "proc"}, job.TrackerStandalone, "--max-members is daemon-wide"},
		{"--backend proc", withDaemon, []string{"--backend", "proc"}, job.TrackerStandalone, "--backend proc is daemon-wide"},
		{"--interval", withDaemon, []string{"--interval", "50ms", "--backend", "proc"}, job.TrackerStandalone, "--interval is daemon-wide"},
		{"--on-full", withDaemon, []string{"--on-full", "escape", "--backend", "proc"}, job.TrackerStandalone, "--on-full is daemon-wide"},
		{"no daemon", nil, nil, job.TrackerStandalone, "standalone: no daemon to use at /nonexistent/"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			mark := testutil.Marker(t)
			testutil.CheckNoLeaks(t, mark)
			args := append(append([]string{"-v"}, c.args...), "--", "true")
			res := runJob(t, mark, c.env, args...)
			if res.code != 0 {
				t.Fatalf("exit %d; stderr:\n%s", res.code, res.stderr)
			}
			if res.report == nil {
				t.Fatalf("no report; stderr:\n%s", res.stderr)
			}
			if res.report.Tracker != c.tracker {
				t.Errorf("report: tracker %q, want %q", res.report.Tracker, c.tracker)
			}
			if n := strings.Count(res.stderr, c.says); n != 1 {
				t.Errorf("-v says %q %d times, want once:\n%s", c.says, n, res.stderr)
			}
		})
	}
}

// A run inside a job that the daemon tracks can't register its own job
// there (it is a member already): it runs standalone, and the daemon keeps
// no session of it.
func TestRunInsideADaemonJobRunsStandalone(t *testing.T) {
	d := startDaemon(t, "")
	mark := testutil.Marker(t)
	testutil.CheckNoLeaks(t, mark)
	inner := filepath.Join(t.TempDir(), "inner.json")
	res := runJob(t, mark, []string{client.EnvSocket + "=" + d.sock}, "--", frontBin, "run", "-v", "--report", inner, "--",
		"sh", "-c", "setsid sleep "+testutil.Sleep(mark)+" & exit 4")
	if res.code != 4 {
		t.Errorf("exit %d, want the inner job's 4; stderr:\n%s", res.code, res.stderr)
	}
	raw, err := os.ReadFile(inner)
	if err != nil {
		t.Fatalf("inner report: %v; stderr:\n%s", err, res.stderr)
	}
	if !strings.Contains(string(raw), `"tracker": "standalone"`) || !strings.Contains(string(raw), `"terminated"`) {
		t.Errorf("the inner run did not reap its leftover standalone:\n%s", raw)
	}
	var sessions []api.Session
	d.do("GET", "/v1/sessions", nil, &sessions)
	if len(sessions) != 0 {
		t.Errorf("sessions left on the daemon: %+v", sessions)
	}
}
