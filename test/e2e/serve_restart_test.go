package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lineage-dev/lineage/api"
	"github.com/lineage-dev/lineage/client"
	"github.com/lineage-dev/lineage/internal/testutil"
)

// A daemon killed with SIGKILL and started again has its sessions, roots
// and keeps back, and reaps as before; its death killed nothing.
func TestServeRestartRestoresSessions(t *testing.T) {
	d := startDaemon(t, "")
	mark := testutil.Marker(t)
	testutil.CheckNoLeaks(t, mark)
	// The root lives on, so the restarted daemon finds its lineage again.
	d.startExec("restart", "autonomous", "sh", "-c", fmt.Sprintf("setsid sleep %[1]s1 & sleep %[1]s2 & exec sleep %[1]s3", testutil.Sleep(mark)))
	left := atLeastSleepers(t, mark, 3)
	kept := atLeastSleepers(t, mark+"1", 1)[0]
	d.do("POST", "/v1/keeps", api.AddKeep{Process: fmt.Sprintf("%d@%d", kept.PID, kept.StartTicks)}, nil)
	var before api.Session
	d.do("GET", "/v1/sessions/restart", nil, &before)

	d.kill9()
	allAlive(t, left)
	// The session was opened after the daemon's first snapshot: the
	// journal has it, and the restarted daemon compacts it into a new one.
	if snap := stateFiles(t, d); strings.Contains(snap["state.json"], `"id":"restart"`) || !strings.Contains(snap["state.journal"], `"id":"restart"`) {
		t.Errorf("state before the restart: %q, want the session in the journal alone", snap)
	}
	d.start()
	if snap := stateFiles(t, d); !strings.Contains(snap["state.json"], `"id":"restart"`) {
		t.Errorf("state after the restart: %q, want the session in the snapshot", snap)
	}
	var after api.Session
	d.do("GET", "/v1/sessions/restart", nil, &after)
	if len(after.Roots) != 1 || after.Roots[0].Root != before.Roots[0].Root || len(after.Keeps) != 1 || after.Kind != "autonomous" {
		t.Fatalf("restored session %+v, want %+v", after, before)
	}
	var end api.Ended
	d.do("POST", "/v1/sessions/restart/turn-end", nil, &end)
	var reaped []testutil.Proc
	for _, p := range left {
		if p.PID != kept.PID {
			reaped = append(reaped, p)
		}
	}
	allGone(t, reaped)
	allAlive(t, []testutil.Proc{kept})
	// A keep spares at the close too: the process is left running, and
	// untracked.
	d.do("POST", "/v1/sessions/restart/close", nil, &end)
	if n := results(end); n["kept"] != 1 {
		t.Errorf("close outcomes %v, want the kept process kept", n)
	}
	allAlive(t, []testutil.Proc{kept})
	testutil.KillIdentity(kept.PID, kept.StartTicks)
}

// Without pinning, a root that exits while no daemon runs leaves its members
// behind; the restarted daemon registers the saved ones that still live as
// roots.
func TestServeRestartFindsLeftoversOfAGoneRoot(t *testing.T) {
	d := startDaemon(t, "", "--pin-dir", "none")
	mark := testutil.Marker(t)
	testutil.CheckNoLeaks(t, mark)
	// The root lives until the test closes its stdin.
	release, word, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	root := lineageCmd("exec", "--session", "gone", "--kind", "autonomous", "--", "sh", "-c",
		fmt.Sprintf("setsid sleep %s1 </dev/null & read x || true", testutil.Sleep(mark)))
	root.Env = append(root.Env, client.EnvSocket+"="+d.sock)
	root.Stdin = release
	if err := root.Start(); err != nil {
		t.Fatal(err)
	}
	release.Close()
	t.Cleanup(func() { word.Close(); _ = root.Process.Kill(); _ = root.Wait() })
	left := atLeastSleepers(t, mark+"1", 1)
	// Without pinning, the members of every root are saved every 2 s.
	saved := fmt.Sprintf(`{"process":{"pid":%d,`, left[0].PID)
	testutil.Eventually(t, 20*time.Second, fmt.Sprintf("the leftover %d in the saved state", left[0].PID), func() bool {
		snap := stateFiles(t, d)
		return strings.Contains(snap["state.json"]+snap["state.journal"], saved)
	})
	d.kill9()
	// The root exits while no daemon runs.
	word.Close()
	if err := root.Wait(); err != nil {
		t.Fatalf("the root: %v", err)
	}
	d.start("--pin-dir", "none")
	var s api.Session
	d.do("GET", "/v1/sessions/gone", nil, &s)
	if len(s.Roots) != 1 || s.Roots[0].Root.PID != uint32(left[0].PID) {
		t.Fatalf("restored roots %+v, want the leftover", s.Roots)
	}
	d.do("POST", "/v1/sessions/gone/turn-end", nil, nil)
	allGone(t, left)
}

// stateFiles is the daemon's state directory: each file's contents by name.
func stateFiles(t *testing.T, d *daemon) map[string]string {
	t.Helper()
	files := map[string]string{}
	for _, name := range []string{"state.json", "state.journal"} {
		data, err := os.ReadFile(filepath.Join(d.state, name))
		if err != nil {
			t.Fatal(err)
		}
		files[name] = string(data)
	}
	return files
}
