package e2e

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lineage-dev/lineage/api"
	"github.com/lineage-dev/lineage/internal/loader/bpf"
	"github.com/lineage-dev/lineage/internal/testutil"
	"github.com/lineage-dev/lineage/lineage"
)

// waitRoots waits up to 20 s for session id to have n roots, and returns it.
func (d *daemon) waitRoots(id string, n int) api.Session {
	d.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		var s api.Session
		if d.apiStatus("GET", "/v1/sessions/"+id, nil) == 0 {
			d.do("GET", "/v1/sessions/"+id, nil, &s)
			if len(s.Roots) == n {
				return s
			}
		}
		if time.Now().After(deadline) {
			d.t.Fatalf("session %s: roots %+v, want %d", id, s.Roots, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitFile waits up to 20 s for path to exist.
func waitFile(t *testing.T, path string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, err := os.Stat(path); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not appear", path)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// The kill -9 and restart test: the daemon is killed as a crash would, a
// member double-forks while no daemon runs, and the restarted daemon has
// that process as a member (from the pinned map: /proc adoption could not
// find it, its parent gone) and reaps it at the session's close.
func TestServeKill9KeepsTrackingWhileDown(t *testing.T) {
	d := startDaemon(t, "")
	mark := testutil.Marker(t)
	testutil.CheckNoLeaks(t, mark)
	dir := t.TempDir()
	ready, trigger := filepath.Join(dir, "ready"), filepath.Join(dir, "fork-now")
	d.startExec("down", "autonomous", "sh", "-c", fmt.Sprintf(
		": > %s; while [ ! -e %s ]; do sleep 0.05; done; (setsid sleep %s &); exec sleep %s",
		ready, trigger, testutil.Sleep(mark+"1"), testutil.Sleep(mark)))
	root := d.waitRoots("down", 1).Roots[0].Root

	// Not before the command runs: lineage exec gives up if the daemon
	// dies before it answers.
	waitFile(t, ready)
	d.kill9()
	if err := os.WriteFile(trigger, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	forked := atLeastSleepers(t, mark+"1", 1)
	left := append(atLeastSleepers(t, mark, 2), forked...)
	d.start()

	var r api.Root
	d.do("GET", "/v1/roots/"+root.String(), nil, &r)
	want := lineage.Identity{PID: uint32(forked[0].PID), StartTicks: forked[0].StartTicks}
	found := false
	for _, m := range r.Members {
		found = found || m.Process == want
	}
	if !found {
		t.Fatalf("root %s members %+v: the process forked while the daemon was down (%s) is missing", root, r.Members, want)
	}
	var end api.Ended
	d.do("POST", "/v1/sessions/down/close", nil, &end)
	allGone(t, left)
}

// A clean SIGTERM leaves the tracker pinned; --uninstall refuses while a
// daemon answers, and once none does, unpins it all and says so.
func TestServeUninstallUnpins(t *testing.T) {
	d := startDaemon(t, "")
	set := filepath.Join(d.pin, fmt.Sprintf("v%d", bpf.LayoutVersion))
	uninstall := func() (string, error) {
		cmd := lineageCmd("serve", "--uninstall", "--pin-dir", d.pin)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := uninstall(); err == nil || !strings.Contains(out, "stop it first") {
		t.Errorf("uninstall beside a running daemon: %v: %s, want a refusal", err, out)
	}
	d.stop()
	if _, err := os.Stat(filepath.Join(set, "layout")); err != nil {
		t.Fatalf("after SIGTERM: %v, want the tracker still pinned", err)
	}
	if out, err := uninstall(); err != nil || !strings.Contains(out, "unpinned") {
		t.Fatalf("uninstall: %v: %s", err, out)
	}
	if _, err := os.Stat(d.pin); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("pin dir after --uninstall: %v, want it gone", err)
	}
}

// A restart asking for another --max-members keeps the pinned size and says
// so on stderr.
func TestServeRestartKeepsThePinnedSize(t *testing.T) {
	d := startDaemon(t, "", "--max-members", "2048")
	d.stop()
	d.start("--max-members", "4096")
	if want := "holds 2048 members, not the 4096 asked for"; !strings.Contains(d.stderr.String(), want) {
		t.Errorf("stderr %q: want a note that says %q", d.stderr, want)
	}
}

// With the tracker pinned, a root that exits while no daemon runs stays its
// lineage's root after the restart, its leftovers its members, and a turn
// end reaps them.
func TestServeRestartKeepsAGoneRootsLineage(t *testing.T) {
	d := startDaemon(t, "")
	mark := testutil.Marker(t)
	testutil.CheckNoLeaks(t, mark)
	dir := t.TempDir()
	trigger := filepath.Join(dir, "exit-now")
	d.startExec("gone", "autonomous", "sh", "-c", fmt.Sprintf(
		"setsid sleep %s & while [ ! -e %s ]; do sleep 0.05; done", testutil.Sleep(mark), trigger))
	left := atLeastSleepers(t, mark, 1)
	root := d.waitRoots("gone", 1).Roots[0].Root
	d.kill9()
	if err := os.WriteFile(trigger, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if !testutil.WaitGone(int(root.PID), root.StartTicks, 30*time.Second) {
		t.Fatalf("root %s did not exit", root)
	}
	d.start()
	if s := d.waitRoots("gone", 1); s.Roots[0].Root != root {
		t.Fatalf("restored roots %+v, want the gone root %s", s.Roots, root)
	}
	d.do("POST", "/v1/sessions/gone/turn-end", nil, nil)
	allGone(t, left)
}
