package e2e

// The front (lineage) and the tracker beside it (lineage-tracker): the
// front runs the client commands itself and hands the tracker's commands
// to it, in place.

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lineage-dev/lineage/client"
	"github.com/lineage-dev/lineage/internal/cli"
	"github.com/lineage-dev/lineage/internal/loader"
	"github.com/lineage-dev/lineage/internal/testutil"
	"github.com/lineage-dev/lineage/lineage"
)

// binResult is how a run of a built binary ended.
type binResult struct {
	stdout, stderr string
	code           int
}

// runBin runs bin with args, its socket nowhere unless env names one,
// and waits for it.
func runBin(t *testing.T, bin string, env []string, args ...string) binResult {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(append(os.Environ(), noDaemonEnv), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	res := binResult{stdout: out.String(), stderr: errb.String()}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		res.code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("%s %v: %v", bin, args, err)
	}
	return res
}

// TestFront drives the front, with the tracker beside it and without.
func TestFront(t *testing.T) {
	front, tracker := frontBin, trackerBin
	t.Run("help", func(t *testing.T) { testFrontHelp(t, front, tracker) })
	t.Run("no tracker", func(t *testing.T) { testFrontWithoutTracker(t, front) })
	t.Run("daemon", func(t *testing.T) { testFrontDrivesTheDaemon(t, front, tracker) })
	t.Run("setcap", func(t *testing.T) { testFrontSetcap(t, front, tracker) })
}

// A setcap install puts the capabilities on lineage-tracker alone: the
// front, run by uid 65534, hands run to it by execve, where they apply.
func testFrontSetcap(t *testing.T, front, tracker string) {
	requireBackend(t, loader.BackendBPF)
	setcap := testutil.LookTool(t, "setcap")
	setpriv := testutil.LookTool(t, "setpriv")
	dir, err := os.MkdirTemp("", "lineage-lean-setcap")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	installed := filepath.Join(dir, "lineage")
	copyFile(t, front, installed)
	copyFile(t, tracker, filepath.Join(dir, cli.TrackerBinary))
	if out, err := exec.Command(setcap, "cap_bpf,cap_perfmon,cap_kill+ep", filepath.Join(dir, cli.TrackerBinary)).CombinedOutput(); err != nil {
		t.Fatalf("setcap: %v\n%s", err, out)
	}
	mark := testutil.Marker(t)
	testutil.CheckNoLeaks(t, mark)
	cmd := exec.Command(setpriv, "--reuid", "65534", "--regid", "65534", "--clear-groups", "--", installed,
		"run", "--standalone", "--grace", "1s", "--", "sh", "-c", "setsid sleep "+testutil.Sleep(mark)+" </dev/null >/dev/null 2>&1 & exit 6")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), noDaemonEnv)
	stderr, read := stderrFile(t)
	cmd.Stderr = stderr
	err = cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 6 {
		t.Errorf("lineage run as uid 65534: %v, want the job's exit 6; stderr:\n%s", err, read())
	}
	if !strings.Contains(read(), "(backend bpf)") {
		t.Errorf("the tracker's capabilities did not apply through the front's execve:\n%s", read())
	}
	if ps := sleepers(mark); len(ps) != 0 {
		t.Errorf("leftovers outlived lineage run: %v", ps)
		allGone(t, ps)
	}
}

// Without lineage-tracker beside it, the front still runs its own
// commands, and a heavy one fails with the path it looked for.
func testFrontWithoutTracker(t *testing.T, built string) {
	front := filepath.Join(t.TempDir(), "lineage")
	data, err := os.ReadFile(built)
	if err == nil {
		err = os.WriteFile(front, data, 0o755)
	}
	if err != nil {
		t.Fatal(err)
	}
	tracker := filepath.Join(filepath.Dir(front), cli.TrackerBinary)
	for _, args := range [][]string{{"serve"}, {"run", "--", "true"}, {"doctor"}, {"serve", "--help"}} {
		res := runBin(t, front, nil, args...)
		if res.code != lineage.ExitFailure || !strings.Contains(res.stderr, tracker) {
			t.Errorf("lineage %v without the tracker: exit %d, stderr %q; want %d naming %s", args, res.code, res.stderr, lineage.ExitFailure, tracker)
		}
	}
	res := runBin(t, front, nil, "version")
	if res.code != 0 || !regexp.MustCompile(`^lineage \S+ \(.*bpf [0-9a-f]{12}\)\n$`).MatchString(res.stdout) {
		t.Errorf("lineage version: exit %d, %q; want the BPF objects' digest", res.code, res.stdout)
	}
	res = runBin(t, front, nil, "status")
	if res.code == 0 || !strings.Contains(res.stderr, client.ErrNoDaemon.Error()) {
		t.Errorf("lineage status with no daemon: exit %d, stderr %q", res.code, res.stderr)
	}
}

// `lineage --help` lists every command the tracker has, with the
// tracker's words, and the tracker's commands' own help is the tracker's.
func testFrontHelp(t *testing.T, front, tracker string) {
	help := runBin(t, front, nil, "--help").stdout
	listed := 0
	for line := range strings.Lines(runBin(t, tracker, nil, "--help").stdout) {
		m := regexp.MustCompile(`^  (\S+) +(\S.*)$`).FindStringSubmatch(strings.TrimRight(line, "\n"))
		if m == nil || strings.HasPrefix(m[1], "-") {
			continue
		}
		listed++
		if !strings.Contains(help, line) {
			t.Errorf("lineage --help lacks the tracker's %q (%s):\n%s", m[1], m[2], help)
		}
	}
	if listed < 5 {
		t.Errorf("the tracker's --help lists %d commands", listed)
	}
	for _, args := range [][]string{{"serve", "--help"}, {"help", "run"}} {
		got := runBin(t, front, nil, args...)
		want := runBin(t, tracker, nil, args...)
		if got.code != 0 || got.stdout != want.stdout || !strings.Contains(got.stdout, "--") {
			t.Errorf("lineage %v: exit %d, help %q; want the tracker's %q", args, got.code, got.stdout, want.stdout)
		}
	}
}

// leanDaemon is `lineage serve` started through the front.
type leanDaemon struct {
	cmd    *exec.Cmd
	sock   string
	stderr *lockedBuffer
	done   chan error
}

func startLeanDaemon(t *testing.T, front string) *leanDaemon {
	t.Helper()
	requireBackend(t, loader.BackendBPF)
	dir := t.TempDir()
	d := &leanDaemon{sock: filepath.Join(dir, "lineage.sock"), stderr: &lockedBuffer{}, done: make(chan error, 1)}
	d.cmd = exec.Command(front, "serve", "--backend", "bpf", "--socket", d.sock, "--state-dir", filepath.Join(dir, "state"), "--pin-dir", "none", "--grace", "1s")
	d.cmd.Env = append(os.Environ(), noDaemonEnv)
	d.cmd.Stderr = d.stderr
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { d.done <- d.cmd.Wait() }()
	t.Cleanup(func() {
		_ = d.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-d.done:
		case <-time.After(10 * time.Second):
			_ = d.cmd.Process.Kill()
			<-d.done
		}
		if t.Failed() {
			t.Logf("lineage serve stderr:\n%s", d.stderr)
		}
	})
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(d.stderr.String(), servingNote) {
		select {
		case err := <-d.done:
			t.Fatalf("lineage serve exited: %v\n%s", err, d.stderr)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("lineage serve did not serve within 60s\n%s", d.stderr)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return d
}

// The front hands serve and a standalone run to the tracker, in place,
// and runs exec and run through the daemon; exit statuses pass through and
// leftovers are reaped either way.
func testFrontDrivesTheDaemon(t *testing.T, front, tracker string) {
	d := startLeanDaemon(t, front)
	exe, err := os.Readlink("/proc/" + strconv.Itoa(d.cmd.Process.Pid) + "/exe")
	if err != nil || exe != tracker {
		t.Errorf("the daemon started as %s runs %q (%v): want the tracker, same pid", front, exe, err)
	}
	mark := testutil.Marker(t)
	testutil.CheckNoLeaks(t, mark)
	sock := []string{client.EnvSocket + "=" + d.sock}
	leak := "setsid sleep " + testutil.Sleep(mark) + " </dev/null >/dev/null 2>&1 & exit "

	res := runBin(t, front, sock, "exec", "--session", "lean", "--kind", "autonomous", "--", "sh", "-c", leak+"3")
	if res.code != 3 {
		t.Errorf("lineage exec: exit %d, want the command's 3; stderr %q", res.code, res.stderr)
	}
	left := atLeastSleepers(t, mark, 1)
	if res := runBin(t, front, sock, "session", "close", "lean"); res.code != 0 {
		t.Errorf("lineage session close: exit %d: %s", res.code, res.stderr)
	}
	allGone(t, left)

	for _, c := range []struct {
		name    string
		args    []string
		code    int
		tracker string
	}{
		{"through the daemon", []string{"run", "-v", "--grace", "1s", "--"}, 4, "via daemon"},
		{"standalone", []string{"run", "--standalone", "--grace", "1s", "--"}, 5, ""},
	} {
		args := append(c.args, "sh", "-c", leak+strconv.Itoa(c.code))
		res := runBin(t, front, sock, args...)
		if res.code != c.code {
			t.Errorf("%s: lineage run exit %d, want the job's %d; stderr:\n%s", c.name, res.code, c.code, res.stderr)
		}
		if !strings.Contains(res.stderr, "sleep "+testutil.Sleep(mark)) || !strings.Contains(res.stderr, c.tracker) {
			t.Errorf("%s: the report does not name the leftover (or %q):\n%s", c.name, c.tracker, res.stderr)
		}
		if ps := sleepers(mark); len(ps) != 0 {
			t.Errorf("%s: leftovers outlived lineage run: %v", c.name, ps)
			allGone(t, ps)
		}
	}
	testFrontRunsRunItself(t, front, tracker, sock)
}

// A run through the daemon runs in the front itself; a standalone one in
// the tracker. The job's parent is lineage run (the held root becomes the
// command in place), so the job reads which binary that is.
func testFrontRunsRunItself(t *testing.T, front, tracker string, sock []string) {
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"through the daemon", []string{"run", "-q", "--"}, front},
		{"standalone", []string{"run", "-q", "--standalone", "--"}, tracker},
	} {
		res := runBin(t, front, sock, append(c.args, "sh", "-c", `readlink /proc/$PPID/exe`)...)
		if got := strings.TrimSpace(res.stdout); res.code != 0 || got != c.want {
			t.Errorf("%s: lineage run ran as %q (exit %d), want %s; stderr:\n%s", c.name, got, res.code, c.want, res.stderr)
		}
	}
}
