package e2e

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lineage-dev/lineage/api"
	"github.com/lineage-dev/lineage/client"
	"github.com/lineage-dev/lineage/internal/testutil"
)

// nobody runs the lineage CLI as uid 65534 through setpriv.
type nobody struct {
	t   *testing.T
	bin string
	d   *daemon
}

// asNobody copies the test binary where uid 65534 can run it and opens the
// daemon's socket to everyone.
func asNobody(t *testing.T, d *daemon) *nobody {
	t.Helper()
	testutil.LookTool(t, "setpriv")
	dir, err := os.MkdirTemp("", "lineage-nobody")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	bin := filepath.Join(dir, "lineage")
	copyFile(t, frontBin, bin)
	copyFile(t, trackerBin, filepath.Join(dir, "lineage-tracker"))
	for _, p := range []string{dir, filepath.Dir(d.sock), filepath.Dir(filepath.Dir(d.sock))} {
		if err := os.Chmod(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(d.sock, 0o666); err != nil {
		t.Fatal(err)
	}
	return &nobody{t: t, bin: bin, d: d}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	in, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
}

// cmd returns argv run as uid 65534, with lineage's test environment.
func (n *nobody) cmd(argv ...string) *exec.Cmd {
	cmd := exec.Command("setpriv", append([]string{"--reuid", "65534", "--regid", "65534", "--clear-groups", "--"}, argv...)...)
	cmd.Env = append(os.Environ(), client.EnvSocket+"="+n.d.sock)
	return cmd
}

// lineage runs the CLI as uid 65534 and returns its stderr and exit status.
func (n *nobody) lineage(args ...string) (string, int) {
	n.t.Helper()
	cmd := n.cmd(append([]string{n.bin}, args...)...)
	var errb bytes.Buffer
	cmd.Stderr = &errb
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return errb.String(), ee.ExitCode()
	}
	if err != nil {
		n.t.Fatal(err)
	}
	return errb.String(), 0
}

// refused checks that the CLI as uid 65534 fails with want in its message.
func (n *nobody) refused(want string, args ...string) {
	n.t.Helper()
	msg, code := n.lineage(args...)
	if code == 0 || !strings.Contains(msg, want) {
		n.t.Errorf("lineage %s as uid 65534: exit %d %q, want refused with %q", strings.Join(args, " "), code, msg, want)
	}
}

// startSleep starts a sleep (as cmd builds it) and returns its identity.
func startSleep(t *testing.T, cmd *exec.Cmd) string {
	t.Helper()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	start, _, err := testutil.StartTicks(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%d@%d", cmd.Process.Pid, start)
}

func TestServeAuthorisesByPeerUID(t *testing.T) {
	d := startDaemon(t, "")
	n := asNobody(t, d)
	mark := testutil.Marker(t)
	testutil.CheckNoLeaks(t, mark)
	rootsSleep := startSleep(t, exec.Command("sleep", testutil.Sleep(mark)))
	rootsPID, _, _ := strings.Cut(rootsSleep, "@")
	d.do("POST", "/v1/roots", api.AddRoot{PID: atoi(t, rootsPID), Session: "roots"}, nil)
	before := snapshot(t, d)

	n.refused("invalid pid 1", "roots", "add", "1", "--session", "mine") // refused before the daemon is asked
	// Another uid's process is as one that doesn't exist, in the same
	// words, its start time unnamed.
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	goneMsg, _ := n.lineage("roots", "add", strconv.Itoa(gone.Process.Pid), "--session", "mine")
	_, start, _ := strings.Cut(rootsSleep, "@")
	for _, args := range [][]string{{"roots", "add", rootsPID, "--session", "mine"}, {"roots", "add", rootsPID, "--start", "5", "--session", "mine"}} {
		msg, code := n.lineage(args...)
		if code == 0 || !strings.Contains(msg, "404 not_found") || strings.ReplaceAll(msg, rootsPID, "PID") != strings.ReplaceAll(goneMsg, strconv.Itoa(gone.Process.Pid), "PID") || strings.Contains(msg, start) {
			t.Errorf("lineage %s as uid 65534: exit %d %q; want a 404 in the words of a pid that doesn't exist (%q), naming no start time", strings.Join(args, " "), code, msg, goneMsg)
		}
	}
	// Root's session, root and process are, to uid 65534, as ones that
	// don't exist.
	for _, args := range [][]string{
		{"session", "report", "roots"}, {"session", "close", "roots"}, {"turn", "end", "roots"},
		{"keep", rootsSleep}, {"roots", "rm", rootsSleep}, {"roots", "show", rootsSleep},
		{"roots", "ls", "--session", "roots"},
	} {
		n.refused("404 not_found", args...)
	}
	if out, code := n.lineage("session", "ls"); code != 0 || strings.Contains(out, "roots") {
		t.Errorf("session ls as uid 65534: %d %q", code, out)
	}
	// Refused, and nothing changed: root's session, its root, no keep.
	if after := snapshot(t, d); after != before {
		t.Errorf("refusals changed the state:\nbefore %s\nafter  %s", before, after)
	}
	if pid, start := ident(t, rootsSleep); !testutil.Alive(pid, start) {
		t.Error("root's process died while uid 65534 was refused")
	}

	// Its own process: registered. A root-owned process that root put in
	// its session is reported at its close, never killed on its behalf.
	own := startSleep(t, n.cmd("sleep", testutil.Sleep(mark)))
	ownPID, _, _ := strings.Cut(own, "@")
	if msg, code := n.lineage("roots", "add", ownPID, "--session", "mine", "--kind", "autonomous"); code != 0 {
		t.Fatalf("registering its own process: %s", msg)
	}
	other := startSleep(t, exec.Command("sleep", testutil.Sleep(mark)))
	otherPID, _, _ := strings.Cut(other, "@")
	d.do("POST", "/v1/roots", api.AddRoot{PID: atoi(t, otherPID), Session: "mine", Join: true}, nil)
	if msg, code := n.lineage("session", "close", "mine"); code != 0 {
		t.Fatalf("closing its own session: %s", msg)
	}
	if pid, start := ident(t, own); !testutil.WaitGone(pid, start, 30*time.Second) {
		t.Error("its own process survived its session's close")
	}
	if pid, start := ident(t, other); !testutil.Alive(pid, start) {
		t.Error("root's process was killed on behalf of uid 65534")
	} else {
		testutil.KillIdentity(pid, start)
	}
	d.do("POST", "/v1/sessions/roots/close", nil, nil)
}

func atoi(t *testing.T, s string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func ident(t *testing.T, s string) (int, uint64) {
	t.Helper()
	pid, start, _ := strings.Cut(s, "@")
	st, err := strconv.ParseUint(start, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return int(atoi(t, pid)), st
}
