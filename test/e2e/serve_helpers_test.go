package e2e

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/lineage-dev/lineage/client"
	"github.com/lineage-dev/lineage/internal/loader"
	"github.com/lineage-dev/lineage/internal/testutil"
)

// daemon is a `lineage serve` a test started, on a socket in a temp dir,
// in a process group of its own (so nothing a test starts shares it).
type daemon struct {
	t      *testing.T
	cmd    *exec.Cmd
	sock   string
	state  string
	stderr *lockedBuffer
	done   chan error
	// env is added to the daemon's environment.
	env []string
	// deafStderr, when set, makes the daemon's stderr a pipe whose reading
	// end is closed once the daemon serves, as a host's that died would be.
	deafStderr bool
	// pin is the daemon's --pin-dir: a pin root of the test's own, whose
	// pins are removed when the test ends, or "none".
	pin string
	// bin, when set, is the binary the daemon runs instead of this test
	// binary (one built without the race detector, to measure memory).
	bin string
}

// startDaemon starts a daemon with the bpf backend, its tracker pinned in a
// pin root of the test's own; it is stopped (SIGTERM, then SIGKILL) and its
// pins removed when the test ends.
func startDaemon(t *testing.T, stateDir string, args ...string) *daemon {
	t.Helper()
	return startDaemonIn(t, stateDir, nil, args...)
}

// startDaemonEnv starts a daemon with env added to its environment.
func startDaemonEnv(t *testing.T, env []string, args ...string) *daemon {
	t.Helper()
	return startDaemonIn(t, "", env, args...)
}

// startDaemonBin starts a daemon that runs bin.
func startDaemonBin(t *testing.T, bin string, args ...string) *daemon {
	t.Helper()
	return startDaemonWith(t, &daemon{bin: bin}, "", args...)
}

func startDaemonIn(t *testing.T, stateDir string, env []string, args ...string) *daemon {
	t.Helper()
	return startDaemonWith(t, &daemon{env: env}, stateDir, args...)
}

func startDaemonWith(t *testing.T, d *daemon, stateDir string, args ...string) *daemon {
	t.Helper()
	requireBackend(t, loader.BackendBPF)
	dir := t.TempDir()
	if stateDir == "" {
		stateDir = filepath.Join(dir, "state")
	}
	d.t, d.sock, d.state, d.stderr = t, filepath.Join(dir, "lineage.sock"), stateDir, &lockedBuffer{}
	// Registered before the stop, so that it runs after it.
	d.pin = testutil.PinRoot(t)
	d.start(args...)
	t.Cleanup(d.stop)
	return d
}

func (d *daemon) start(args ...string) {
	d.t.Helper()
	all := append([]string{"serve", "--backend", "bpf", "--socket", d.sock, "--state-dir", d.state, "--grace", "1s", "--pin-dir", d.pin}, args...)
	d.cmd = lineageCmd(all...)
	if d.bin != "" {
		d.cmd = exec.Command(d.bin, all...)
		d.cmd.Env = append(os.Environ(), noDaemonEnv)
	}
	d.cmd.Env = append(d.cmd.Env, d.env...)
	d.cmd.Stderr = d.stderr
	served := strings.Count(d.stderr.String(), servingNote)
	var pw *os.File
	if d.deafStderr {
		var pr *os.File
		var err error
		if pr, pw, err = os.Pipe(); err != nil {
			d.t.Fatal(err)
		}
		d.cmd.Stderr = pw
		go func() {
			// Copied until the daemon serves, then no one reads.
			defer pr.Close()
			lines := bufio.NewScanner(pr)
			for lines.Scan() {
				fmt.Fprintln(d.stderr, lines.Text())
				if strings.Contains(lines.Text(), servingNote) {
					return
				}
			}
		}()
	}
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err := d.cmd.Start()
	if pw != nil {
		pw.Close()
	}
	if err != nil {
		d.t.Fatal(err)
	}
	d.done = make(chan error, 1)
	go func() { d.done <- d.cmd.Wait() }()
	deadline := time.Now().Add(60 * time.Second)
	for {
		// Serving once the tracker is open, the notes it prints included:
		// the socket listens earlier.
		if strings.Count(d.stderr.String(), servingNote) > served {
			return
		}
		select {
		case err := <-d.done:
			d.t.Fatalf("lineage serve exited: %v\n%s", err, d.stderr)
		default:
		}
		if time.Now().After(deadline) {
			d.t.Fatalf("lineage serve did not serve within 60s (loading the tracker included)\n%s", d.stderr)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// servingNote is what the daemon prints once it serves.
const servingNote = "lineage: serving on "

// lockedBuffer is a daemon's stderr, read while the daemon writes it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// stop ends the daemon with SIGTERM (SIGKILL after 5 s).
func (d *daemon) stop() {
	if d.cmd.ProcessState != nil {
		return
	}
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.done:
	case <-time.After(5 * time.Second):
		_ = d.cmd.Process.Kill()
		<-d.done
	}
	if strings.Contains(d.stderr.String(), "DATA RACE") {
		d.t.Error("the daemon raced")
	}
	if d.t.Failed() {
		d.t.Logf("lineage serve stderr:\n%s", d.stderr)
	}
}

// kill9 kills the daemon as a crash would.
func (d *daemon) kill9() {
	_ = d.cmd.Process.Kill()
	<-d.done
	if strings.Contains(d.stderr.String(), "DATA RACE") {
		d.t.Errorf("the daemon raced:\n%s", d.stderr)
	}
}

// client returns an API client for the daemon.
func (d *daemon) client() *client.Client {
	c := client.New(d.sock)
	d.t.Cleanup(c.Close)
	return c
}

// do sends one request, failing the test on error. The answer is decoded
// into a zeroed out: decoding into a value a test reuses would keep what
// the last answer had and this one omits (an outcome's signals).
func (d *daemon) do(method, path string, body, out any) {
	d.t.Helper()
	if out != nil {
		reflect.ValueOf(out).Elem().SetZero()
	}
	if err := d.client().Do(context.Background(), method, path, body, out); err != nil {
		d.t.Fatalf("%s %s: %v", method, path, err)
	}
}

// apiStatus sends one request and returns the error answer's status, 0 on
// success.
func (d *daemon) apiStatus(method, path string, body any) int {
	err := d.client().Do(context.Background(), method, path, body, nil)
	var ae *client.APIError
	if errors.As(err, &ae) {
		return ae.Status
	}
	if err != nil {
		d.t.Fatalf("%s %s: %v", method, path, err)
	}
	return 0
}

// run runs the lineage CLI against the daemon and returns its stdout and
// exit status.
func (d *daemon) run(args ...string) (string, int) {
	d.t.Helper()
	cmd := lineageCmd(args...)
	cmd.Env = append(cmd.Env, client.EnvSocket+"="+d.sock)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		d.t.Fatalf("lineage %v: %v", args, err)
	}
	if code != 0 {
		d.t.Logf("lineage %s: exit %d: %s", strings.Join(args, " "), code, errb.String())
	}
	return out.String(), code
}

// execRoot runs `lineage exec --session S ... -- sh -c script` and waits
// for the shell to exit (its leftovers live on).
func (d *daemon) execRoot(session, kind, script string) {
	d.t.Helper()
	d.execArgv(session, kind, "sh", "-c", script)
}

// execArgv runs `lineage exec` with argv, its output to /dev/null (its
// leftovers may hold it open), and waits for it.
func (d *daemon) execArgv(session, kind string, argv ...string) {
	d.t.Helper()
	cmd := lineageCmd(append([]string{"exec", "--session", session, "--kind", kind, "--"}, argv...)...)
	cmd.Env = append(cmd.Env, client.EnvSocket+"="+d.sock)
	out, err := os.CreateTemp(d.t.TempDir(), "exec")
	if err != nil {
		d.t.Fatal(err)
	}
	defer out.Close()
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Run(); err != nil {
		text, _ := os.ReadFile(out.Name())
		d.t.Fatalf("lineage exec %v: %v: %s", argv, err, text)
	}
}

// startExec starts `lineage exec` with argv and doesn't wait for it: its
// command runs on as the root. It is waited for when the test ends.
func (d *daemon) startExec(session, kind string, argv ...string) {
	d.t.Helper()
	cmd := lineageCmd(append([]string{"exec", "--session", session, "--kind", kind, "--"}, argv...)...)
	cmd.Env = append(cmd.Env, client.EnvSocket+"="+d.sock)
	if err := cmd.Start(); err != nil {
		d.t.Fatal(err)
	}
	d.t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
}

// sleepers returns the identities of the live sleepers carrying mark.
func sleepers(mark string) []testutil.Proc { return testutil.Sleepers(mark) }

// atLeastSleepers waits up to 20 s for n sleepers carrying mark.
func atLeastSleepers(t *testing.T, mark string, n int) []testutil.Proc {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		ps := sleepers(mark)
		if len(ps) >= n {
			return ps
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d sleepers with %s, want %d", len(ps), mark, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func allGone(t *testing.T, ps []testutil.Proc) {
	t.Helper()
	for _, p := range ps {
		if !testutil.WaitGone(p.PID, p.StartTicks, 30*time.Second) {
			t.Errorf("process %d %q survived", p.PID, p.Argv)
		}
	}
}

func allAlive(t *testing.T, ps []testutil.Proc) {
	t.Helper()
	for _, p := range ps {
		if !testutil.Alive(p.PID, p.StartTicks) {
			t.Errorf("process %d %q did not survive", p.PID, p.Argv)
		}
	}
}

// eventLines streams session's events until ctx ends, a line at a time;
// the channel closes when the stream does.
func (d *daemon) eventLines(t *testing.T, ctx context.Context, session string) <-chan string {
	t.Helper()
	body, err := d.client().Stream(ctx, "/v1/events?session="+session)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { body.Close() })
	lines := make(chan string, 1024)
	go func() {
		sc := bufio.NewScanner(body)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	return lines
}
