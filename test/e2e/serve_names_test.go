package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lineage-dev/lineage/api"
	"github.com/lineage-dev/lineage/client"
	"github.com/lineage-dev/lineage/internal/testutil"
)

// rootCLI runs the lineage CLI as root against the daemon and returns its
// stderr and exit status.
func (d *daemon) rootCLI(args ...string) (string, int) {
	d.t.Helper()
	cmd := lineageCmd(args...)
	cmd.Env = append(cmd.Env, client.EnvSocket+"="+d.sock)
	var errb bytes.Buffer
	cmd.Stderr = &errb
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return errb.String(), ee.ExitCode()
	}
	if err != nil {
		d.t.Fatal(err)
	}
	return errb.String(), 0
}

// A session's name is its opener's. uid 65534 opens build-43: root's
// `lineage exec --session build-43` is refused and runs nothing, through
// the fast path's fallback and with the daemon's words, and so is `roots
// add`; with --join root's command runs, tracked in that session. uid
// 65534 can't take root's session, join or not.
func TestServeSessionNamesAreOwned(t *testing.T) {
	d := startDaemon(t, "")
	n := asNobody(t, d)
	mark := testutil.Marker(t)
	testutil.CheckNoLeaks(t, mark)
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if msg, code := n.lineage("session", "open", "build-43", "--kind", "autonomous"); code != 0 {
		t.Fatalf("uid 65534's open: %s", msg)
	}
	before := snapshot(t, d)

	ran := filepath.Join(dir, "ran")
	msg, code := d.rootCLI("exec", "--session", "build-43", "--", "touch", ran)
	if code == 0 || !strings.Contains(msg, `session "build-43" was opened by uid 65534`) || !strings.Contains(msg, "--join") {
		t.Errorf("root's exec into uid 65534's session: exit %d %q, want refused, saying so", code, msg)
	}
	if _, err := os.Stat(ran); err == nil {
		t.Error("root's command ran in uid 65534's session")
	}
	sleeper := startSleep(t, exec.Command("sleep", testutil.Sleep(mark)))
	pid, _, _ := strings.Cut(sleeper, "@")
	if msg, code := d.rootCLI("roots", "add", pid, "--session", "build-43"); code == 0 || !strings.Contains(msg, "opened by uid 65534") {
		t.Errorf("root's roots add into uid 65534's session: exit %d %q, want refused", code, msg)
	}
	if after := snapshot(t, d); after != before {
		t.Errorf("refusals changed the state:\nbefore %s\nafter  %s", before, after)
	}

	if msg, code := d.rootCLI("exec", "--join", "--session", "build-43", "--", "touch", ran); code != 0 {
		t.Fatalf("root's exec --join: exit %d %q", code, msg)
	}
	if _, err := os.Stat(ran); err != nil {
		t.Errorf("root's command did not run with --join: %v", err)
	}
	if msg, code := d.rootCLI("exec", "--join", "--session", "no-such-session", "--", "touch", ran+"2"); code == 0 || !strings.Contains(msg, "no session") {
		t.Errorf("exec --join of no session: exit %d %q, want refused", code, msg)
	}

	// Root's session, to uid 65534: taken, join or not.
	d.do("POST", "/v1/sessions", api.OpenSession{ID: "roots-own"}, nil)
	for _, args := range [][]string{
		{"exec", "--session", "roots-own", "--", "touch", ran + "3"},
		{"exec", "--join", "--session", "roots-own", "--", "touch", ran + "3"},
		{"session", "open", "roots-own"},
	} {
		n.refused(`session id "roots-own" is taken`, args...)
	}
	if _, err := os.Stat(ran + "3"); err == nil {
		t.Error("uid 65534's command ran in root's session")
	}
	var s api.Session
	d.do("GET", "/v1/sessions/roots-own", nil, &s)
	if s.UID != 0 || len(s.Roots) != 0 {
		t.Errorf("root's session after uid 65534's tries: %+v", s)
	}
	d.do("POST", "/v1/sessions/build-43/close", nil, nil)
	d.do("POST", "/v1/sessions/roots-own/close", nil, nil)
}

// curl sends one request as uid 65534 and returns the status and body.
func (n *nobody) curl(method, path string) (int, string) {
	n.t.Helper()
	cmd := n.cmd("curl", "-s", "-X", method, "-o", "-", "-w", "\n%{http_code}", "--unix-socket", n.d.sock, "http://lineage"+path)
	out, err := cmd.Output()
	if err != nil {
		n.t.Fatalf("curl %s %s as uid 65534: %v", method, path, err)
	}
	body, code, _ := strings.Cut(strings.TrimSuffix(string(out), "\n"), "\n")
	if i := strings.LastIndex(string(out), "\n"); i >= 0 {
		body, code = string(out[:i]), string(out[i+1:])
	}
	status, err := strconv.Atoi(strings.TrimSpace(code))
	if err != nil {
		n.t.Fatalf("curl %s %s: status %q", method, path, code)
	}
	return status, body
}

// To uid 65534, root's session, root and process answer 404 with exactly
// the body of ones that don't exist (their names aside), on every path
// that names them; root still sees them.
func TestServeOtherUIDsThingsAreNotFound(t *testing.T) {
	d := startDaemon(t, "")
	n := asNobody(t, d)
	mark := testutil.Marker(t)
	testutil.CheckNoLeaks(t, mark)
	d.startExec("roots-private", "autonomous", "sh", "-c", fmt.Sprintf("sleep %s & exec sleep %s", testutil.Sleep(mark+"1"), testutil.Sleep(mark)))
	root := atLeastSleepers(t, mark, 2)
	var s api.Session
	deadline := time.Now().Add(20 * time.Second)
	for d.do("GET", "/v1/sessions/roots-private", nil, &s); len(s.Roots) == 0; d.do("GET", "/v1/sessions/roots-private", nil, &s) {
		if time.Now().After(deadline) {
			t.Fatal("no root in roots-private")
		}
		time.Sleep(20 * time.Millisecond)
	}
	rootID := s.Roots[0].Root.String()
	member := atLeastSleepers(t, mark+"1", 1)[0]
	memberID := fmt.Sprintf("%d@%d", member.PID, member.StartTicks)
	const (
		ghostSession = "roots-privatX"
		ghostID      = "4194000@12345"
	)
	for _, c := range []struct{ method, real, ghost, name, ghostName string }{
		{"GET", "/v1/sessions/roots-private", "/v1/sessions/" + ghostSession, "roots-private", ghostSession},
		{"GET", "/v1/sessions/roots-private/report", "/v1/sessions/" + ghostSession + "/report", "roots-private", ghostSession},
		{"POST", "/v1/sessions/roots-private/turn-end", "/v1/sessions/" + ghostSession + "/turn-end", "roots-private", ghostSession},
		{"POST", "/v1/sessions/roots-private/close", "/v1/sessions/" + ghostSession + "/close", "roots-private", ghostSession},
		{"GET", "/v1/roots?session=roots-private", "/v1/roots?session=" + ghostSession, "roots-private", ghostSession},
		{"GET", "/v1/events?session=roots-private", "/v1/events?session=" + ghostSession, "roots-private", ghostSession},
		{"GET", "/v1/roots/" + rootID, "/v1/roots/" + ghostID, rootID, ghostID},
		{"DELETE", "/v1/roots/" + rootID, "/v1/roots/" + ghostID, rootID, ghostID},
		{"GET", "/v1/why/" + memberID, "/v1/why/" + ghostID, memberID, ghostID},
		{"DELETE", "/v1/keeps/" + memberID, "/v1/keeps/" + ghostID, memberID, ghostID},
	} {
		gotStatus, got := n.curl(c.method, c.real)
		wantStatus, want := n.curl(c.method, c.ghost)
		if gotStatus != 404 || wantStatus != 404 || strings.ReplaceAll(got, c.name, c.ghostName) != want {
			t.Errorf("%s %s as uid 65534: %d %s\nwant as for %s: %d %s", c.method, c.real, gotStatus, got, c.ghost, wantStatus, want)
		}
	}
	// A keep on root's process: as on a process in no session.
	msg, _ := n.lineage("keep", memberID)
	ghostMsg, _ := n.lineage("keep", ghostID)
	if strings.ReplaceAll(msg, memberID, ghostID) != ghostMsg || !strings.Contains(msg, "404") {
		t.Errorf("keep of root's process as uid 65534: %q, want as for none: %q", msg, ghostMsg)
	}
	// Nothing changed, and root sees it all.
	if code := d.apiStatus("GET", "/v1/roots/"+rootID, nil); code != 0 {
		t.Errorf("root's GET of its own root: %d", code)
	}
	allAlive(t, root)
	d.do("POST", "/v1/sessions/roots-private/close", nil, nil)
	allGone(t, root)
}

// A session can't be opened under a parent that is closing (409): a child
// opened during its parent's close would be left behind by it. One opened
// before the close is closed with it.
func TestServeNoChildOfAClosingParent(t *testing.T) {
	d := startDaemon(t, "", "--grace", "3s")
	mark := testutil.Marker(t)
	testutil.CheckNoLeaks(t, mark)
	d.do("POST", "/v1/sessions", api.OpenSession{ID: "parent", Kind: "autonomous"}, nil)
	d.do("POST", "/v1/sessions", api.OpenSession{ID: "child-before", Parent: "parent", Kind: "autonomous"}, nil)
	// A leftover that takes its time over SIGTERM (it becomes a sleep, and
	// forks nothing) holds the close open for the daemon's grace.
	dir := t.TempDir()
	fifo, ready := filepath.Join(dir, "fifo"), filepath.Join(dir, "ready")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	d.execRoot("parent", "autonomous", fmt.Sprintf(`setsid sh -c 'trap "exec sleep %s" TERM; exec 3<>%s; echo > %s; read x <&3' >/dev/null 2>&1 &`, testutil.Sleep(mark), fifo, ready))
	// Its trap set before the close: a TERM earlier would end it at once.
	testutil.Eventually(t, 20*time.Second, "the leftover ready", func() bool {
		_, err := os.Stat(ready)
		return err == nil
	})
	closed := make(chan api.Ended, 1)
	go func() {
		var end api.Ended
		_ = d.client().Do(context.Background(), "POST", "/v1/sessions/parent/close", nil, &end)
		closed <- end
	}()
	var s api.Session
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if d.apiStatus("GET", "/v1/sessions/parent", nil) == 0 {
			d.do("GET", "/v1/sessions/parent", nil, &s)
			if s.Closing {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("the parent's close did not begin within 20s")
		}
	}
	err := d.client().Do(context.Background(), "POST", "/v1/sessions", api.OpenSession{ID: "child-during", Parent: "parent"}, nil)
	var ae *client.APIError
	if !errors.As(err, &ae) || ae.Status != 409 || !strings.Contains(ae.Body.Error, `session "parent" is closing`) {
		t.Errorf("a child opened during its parent's close: %v, want 409, the parent closing", err)
	}
	end := <-closed
	if len(end.Children) != 1 || end.Children[0].Session != "child-before" {
		t.Errorf("the close's children: %+v, want child-before", end.Children)
	}
	for _, id := range []string{"parent", "child-before", "child-during"} {
		if code := d.apiStatus("GET", "/v1/sessions/"+id, nil); code != 404 {
			t.Errorf("session %s after the parent's close: %d, want 404", id, code)
		}
	}
}
