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

	"github.com/lineage-dev/lineage/internal/loader"
	"github.com/lineage-dev/lineage/internal/testutil"
	"github.com/lineage-dev/lineage/lineage"
)

// termCatcher is a command for sh that catches SIGTERM and lives on for
// secs seconds: it earns the whole grace (one that ignores SIGTERM is
// killed at once, without it).
func termCatcher(secs string) string {
	return `perl -e '$SIG{TERM} = sub {}; $e = time + $ARGV[0]; sleep 1 while time < $e' ` + secs
}

// termNoter is termCatcher that says what it does by files in dir: up once
// it catches SIGTERM, termed at each SIGTERM. Its shell waits for it to
// be up (a SIGTERM before that would kill it), at most 30 s.
func termNoter(secs, dir string) string {
	up, termed := filepath.Join(dir, "up"), filepath.Join(dir, "termed")
	return fmt.Sprintf(`perl -e '$SIG{TERM} = sub { open my $f, ">", $ARGV[2] }; open my $f, ">", $ARGV[1]; close $f; $e = time + $ARGV[0]; sleep 1 while time < $e' %s %q %q &
i=0; while [ ! -e %[2]q ] && [ $i -lt 3000 ]; do sleep 0.01; i=$((i+1)); done`, secs, up, termed)
}

// A member that catches SIGTERM and lives on, with a long grace: only
// --reap-timeout ends the reap in time, and --strict turns the job's 0 into
// 123.
func TestRunReapTimeoutAndStrict(t *testing.T) {
	for _, v := range []variant{variants[1], variants[2]} {
		t.Run(v.name, func(t *testing.T) { testRunReapTimeoutAndStrict(t, v) })
	}
}

func testRunReapTimeoutAndStrict(t *testing.T, v variant) {
	env := v.setup(t)
	for _, strict := range []bool{false, true} {
		t.Run(fmt.Sprintf("strict=%v", strict), func(t *testing.T) {
			mark := testutil.Marker(t)
			testutil.CheckNoLeaks(t, mark)
			args := []string{"--backend", v.backend, "--grace", "60s", "--reap-timeout", "1s"}
			if strict {
				args = append(args, "--strict")
			}
			script := fmt.Sprintf(`%s &`+settle, termCatcher(testutil.Sleep(mark)))
			began := time.Now()
			res := runJob(t, mark, env, append(args, "--", "sh", "-c", script)...)
			if took := time.Since(began); took > 20*time.Second {
				t.Errorf("lineage took %v: --reap-timeout 1s did not bound the reap", took)
			}
			want := 0
			if strict {
				want = lineage.ExitIncomplete
			}
			if res.code != want {
				t.Errorf("exit %d, want %d; stderr:\n%s", res.code, want, res.stderr)
			}
			if res.report == nil || !res.report.ReapTimedOut || len(res.report.Incomplete) == 0 {
				t.Errorf("report does not say the reap timed out: %+v", res.report)
			}
			if !strings.Contains(res.stderr, "lineage: incomplete: ") {
				t.Errorf("stderr does not say what was incomplete:\n%s", res.stderr)
			}
		})
	}
}

// --strict leaves a complete job's status alone.
func TestRunStrictPassesACompleteJobThrough(t *testing.T) {
	mark := testutil.Marker(t)
	testutil.CheckNoLeaks(t, mark)
	res := runJob(t, mark, nil, "--backend", loader.BackendProc, "--strict", "--", "sh", "-c", "sleep "+testutil.Sleep(mark)+" &"+settle)
	if res.code != 0 {
		t.Errorf("exit %d, want 0; stderr:\n%s", res.code, res.stderr)
	}
}

// A signal lineage does not pass on would end it without a reap: it reaps
// first, then exits 128+N.
func TestRunFatalSignalReapsFirst(t *testing.T) {
	for _, v := range []variant{variants[1], variants[2]} {
		t.Run(v.name, func(t *testing.T) { testRunFatalSignalReapsFirst(t, v) })
	}
}

func testRunFatalSignalReapsFirst(t *testing.T, v variant) {
	env := v.setup(t)
	for _, sig := range []syscall.Signal{syscall.SIGUSR1, syscall.SIGALRM, syscall.SIGXCPU} {
		t.Run(sig.String(), func(t *testing.T) {
			mark := testutil.Marker(t)
			testutil.CheckNoLeaks(t, mark)
			s := testutil.Sleep(mark)
			var stderr bytes.Buffer
			cmd := startUntilReadyWith(t, func(cmd *exec.Cmd) {
				cmd.Stderr = &stderr
				cmd.Env = append(cmd.Env, env...)
			}, "run", "--backend", v.backend, "--grace", "1s", "--", "sh", "-c",
				fmt.Sprintf("setsid sleep %[1]s & echo ready; sleep %[1]s", s))
			sleepersOf(t, s, 2)
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			err := cmd.Wait()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 128+int(sig) {
				t.Fatalf("lineage ended with %v, want exit %d; stderr:\n%s", err, 128+int(sig), stderr.String())
			}
			if left := testutil.Find(mark); len(left) != 0 {
				t.Errorf("left alive: %v; stderr:\n%s", left, stderr.String())
			}
		})
	}
}

// The report file's directory is pinned before the job starts: a job that
// swaps it for a symlink, or plants a symlink as the file, redirects
// nothing. The file goes to the invoking user, mode 0644.
func TestRunReportFileCannotBeRedirected(t *testing.T) {
	mark := testutil.Marker(t)
	testutil.CheckNoLeaks(t, mark)
	dir := t.TempDir()
	sub := filepath.Join(dir, "sub")
	elsewhere := filepath.Join(dir, "elsewhere")
	for _, d := range []string{sub, elsewhere} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	victim := filepath.Join(elsewhere, "victim")
	if err := os.WriteFile(victim, []byte("keep me\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	report := filepath.Join(sub, "report.json")
	script := fmt.Sprintf("mv %[1]s %[1]s.old && ln -s %[2]s %[1]s && ln -s %[3]s %[1]s.old/report.json", sub, elsewhere, victim)
	cmd := lineageCmd("run", "--backend", loader.BackendProc, "--report", report, "--", "sh", "-c", script)
	cmd.Env = append(cmd.Env, "SUDO_UID=65534", "SUDO_GID=65534")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if b, _ := os.ReadFile(victim); string(b) != "keep me\n" {
		t.Errorf("the planted symlink's target was overwritten: %q", b)
	}
	if _, err := os.Lstat(filepath.Join(elsewhere, "report.json")); err == nil {
		t.Error("the report followed the symlinked directory")
	}
	fi, err := os.Lstat(filepath.Join(sub+".old", "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	if !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o644 || st.Uid != 65534 || st.Gid != 65534 {
		t.Errorf("report is %v owned by %d:%d, want a regular file, 0644, 65534:65534", fi.Mode(), st.Uid, st.Gid)
	}
}

// In a time namespace that shifts boot time, /proc's start times don't
// match the kernel's: the bpf backend is refused, loudly.
func TestRunRefusesATimeNamespace(t *testing.T) {
	requireBackend(t, loader.BackendBPF)
	testutil.LookTool(t, "unshare")
	dir := t.TempDir()
	witness := filepath.Join(dir, "ran")
	lc := lineageCmd("run", "--backend", loader.BackendBPF, "--", "touch", witness)
	cmd := exec.Command("unshare", append([]string{"--time", "--boottime", "86400", "--"}, lc.Args...)...)
	cmd.Env = lc.Env
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != lineage.ExitFailure || !strings.Contains(string(out), "time namespace") {
		t.Fatalf("got %v, want exit %d naming the time namespace:\n%s", err, lineage.ExitFailure, out)
	}
	if _, err := os.Stat(witness); err == nil {
		t.Error("the job ran")
	}
}

// --user runs the job as another user; its leftovers are reaped as usual.
func TestRunAsAnotherUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("--user needs root")
	}
	mark := testutil.Marker(t)
	testutil.CheckNoLeaks(t, mark)
	var stdout bytes.Buffer
	cmd := lineageCmd("run", "--backend", loader.BackendProc, "--grace", "1s", "--user", "nobody", "--",
		"sh", "-c", "id -u; id -g; id -G; sleep "+testutil.Sleep(mark)+" &"+settle)
	cmd.Stdout = &stdout
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	lines := strings.Fields(stdout.String())
	if len(lines) < 3 || lines[0] != "65534" || lines[1] != "65534" || lines[2] != "65534" {
		t.Errorf("job ran as uid, gid, groups %q, want nobody's 65534", lines)
	}
	if !strings.Contains(stderr.String(), "1 process left behind") {
		t.Errorf("the leftover was not reaped:\n%s", stderr.String())
	}
}

// --user from a lineage that may not take another user's ids (not root,
// without CAP_SETUID and CAP_SETGID) is lineage's own failure, exit 125,
// saying what it needs; the command never runs.
func TestRunAsAnotherUserNeedsPrivilege(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root, to run lineage as uid 65534")
	}
	setpriv := testutil.LookTool(t, "setpriv")
	dir, err := os.MkdirTemp("", "lineage-user")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	front := filepath.Join(dir, "lineage")
	copyFile(t, frontBin, front)
	copyFile(t, trackerBin, filepath.Join(dir, "lineage-tracker"))
	// Only root may write in dir: the witness is there if the job ran as
	// root.
	witness := filepath.Join(dir, "ran")
	cmd := exec.Command(setpriv, "--reuid", "65534", "--regid", "65534", "--clear-groups", "--", front, "run", "--user", "root", "--", "touch", witness)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), noDaemonEnv)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != lineage.ExitFailure {
		t.Errorf("got %v, want exit %d:\n%s", err, lineage.ExitFailure, out)
	}
	if !strings.HasPrefix(string(out), `lineage: --user "root": `) || !strings.Contains(string(out), "needs root, or CAP_SETUID and CAP_SETGID") || strings.Count(string(out), "\n") != 1 {
		t.Errorf("want one line saying what --user needs:\n%s", out)
	}
	if _, err := os.Stat(witness); err == nil {
		t.Error("the job ran")
	}
}

// --keep exe: matches the program as users name it: through a symlink, and
// after the binary was replaced while it ran. A rule that matched nothing
// is reported.
func TestRunKeepExeThroughSymlinkAndUpgrade(t *testing.T) {
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			requireBackend(t, backend)
			mark := testutil.Marker(t)
			t.Cleanup(func() {
				for _, p := range testutil.Find(mark) {
					testutil.KillIdentity(p.PID, p.StartTicks)
				}
			})
			dir := t.TempDir()
			sleepPath, err := exec.LookPath("sleep")
			if err != nil {
				t.Fatal(err)
			}
			sleepPath, _ = filepath.EvalSymlinks(sleepPath)
			link := filepath.Join(dir, "link-to-sleep")
			if err := os.Symlink(sleepPath, link); err != nil {
				t.Fatal(err)
			}
			mine := filepath.Join(dir, "mysleep")
			raw, err := os.ReadFile(sleepPath)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(mine, raw, 0o755); err != nil {
				t.Fatal(err)
			}
			unused := filepath.Join(dir, "unused-"+mark)
			if err := os.WriteFile(unused, raw, 0o755); err != nil {
				t.Fatal(err)
			}
			s := testutil.Sleep(mark)
			// One sleep runs by its real path, one runs mysleep, which is
			// then upgraded (replaced) while it runs.
			script := fmt.Sprintf("setsid %[2]s %[1]s >/dev/null 2>&1 & setsid %[3]s %[1]s >/dev/null 2>&1 & sleep 0.3; cp %[3]s %[3]s.new && mv %[3]s.new %[3]s; sleep 0.1",
				s, sleepPath, mine)
			cmd := lineageCmd("run", "--backend", backend, "--grace", "1s",
				"--keep", "exe:"+link, "--keep", "exe:"+mine, "--keep", "exe:"+unused,
				"--", "sh", "-c", script)
			outb, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("%v: %s", err, outb)
			}
			var left []testutil.Proc
			for _, p := range testutil.Find(mark) {
				if len(p.Argv) == 2 && p.Argv[1] == s {
					left = append(left, p)
				}
			}
			if len(left) != 2 {
				t.Errorf("%d sleepers left, want both kept; output:\n%s", len(left), outb)
			}
			if !strings.Contains(string(outb), "--keep exe:"+unused+" matched no process") {
				t.Errorf("the rule that matched nothing is not reported:\n%s", outb)
			}
		})
	}
}

// A fatal signal in the middle of a reap cuts it short: what the reaper
// knows of (stopped members too, with the proc backend's containment) is
// killed, and lineage exits 128+N at once.
func TestRunFatalSignalMidReap(t *testing.T) {
	for _, v := range []variant{variants[1], variants[2]} {
		t.Run(v.name, func(t *testing.T) { testRunFatalSignalMidReap(t, v) })
	}
}

func testRunFatalSignalMidReap(t *testing.T, v variant) {
	env := v.setup(t)
	mark := testutil.Marker(t)
	testutil.CheckNoLeaks(t, mark)
	dir := t.TempDir()
	var stderr bytes.Buffer
	cmd := startUntilReadyWith(t, func(cmd *exec.Cmd) {
		cmd.Stderr = &stderr
		cmd.Env = append(cmd.Env, env...)
	}, "run", "--backend", v.backend, "--grace", "60s", "--", "sh", "-c",
		"setsid "+termNoter(testutil.Sleep(mark), dir)+"\necho ready")
	// The job exits once the catcher is up; the reap then TERMs it and
	// waits out its grace.
	testutil.Eventually(t, 30*time.Second, "the catcher's SIGTERM", func() bool {
		_, err := os.Stat(filepath.Join(dir, "termed"))
		return err == nil
	})
	began := time.Now()
	if err := cmd.Process.Signal(syscall.SIGUSR2); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 128+int(syscall.SIGUSR2) {
		t.Fatalf("lineage ended with %v, want exit %d; stderr:\n%s", err, 128+int(syscall.SIGUSR2), stderr.String())
	}
	if took := time.Since(began); took > 10*time.Second {
		t.Errorf("lineage took %v to end after the signal", took)
	}
	if left := testutil.Find(mark); len(left) != 0 {
		t.Errorf("left alive: %v; stderr:\n%s", left, stderr.String())
	}
}

// A report path that is already a symlink (or a device) is refused before
// the job starts: replacing it is never what the user meant.
func TestRunRefusesAReportPathThatIsNoFile(t *testing.T) {
	dir := t.TempDir()
	link := filepath.Join(dir, "link.json")
	if err := os.Symlink(filepath.Join(dir, "target"), link); err != nil {
		t.Fatal(err)
	}
	witness := filepath.Join(dir, "ran")
	out, err := lineageCmd("run", "--backend", loader.BackendProc, "--report", link, "--", "touch", witness).CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != lineage.ExitFailure || !strings.Contains(string(out), "not a regular file") {
		t.Fatalf("got %v, want exit %d:\n%s", err, lineage.ExitFailure, out)
	}
	if _, err := os.Stat(witness); err == nil {
		t.Error("the job ran")
	}
}
