package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/lineage-dev/lineage/api"
	"github.com/lineage-dev/lineage/internal/testutil"
)

// dropSessions removes the sessions ids from the daemon's state (its
// snapshot and its journal's records), as a lost write would have left it.
func dropSessions(t *testing.T, d *daemon, ids ...string) {
	t.Helper()
	dropped := map[string]bool{}
	drop := func(all []any) []any {
		return slices.DeleteFunc(all, func(s any) bool {
			m, _ := s.(map[string]any)
			id := fmt.Sprint(m["id"])
			dropped[id] = dropped[id] || slices.Contains(ids, id)
			return slices.Contains(ids, id)
		})
	}
	editJSONLines(t, filepath.Join(d.state, "state.json"), drop)
	editJSONLines(t, filepath.Join(d.state, "state.journal"), drop)
	for _, id := range ids {
		if !dropped[id] {
			t.Fatalf("state in %s: no session %s", d.state, id)
		}
	}
}

// editJSONLines rewrites each line of the file at path (a JSON object) with
// its "sessions" edited by edit.
func editJSONLines(t *testing.T, path string, edit func([]any) []any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []byte
	for line := range strings.Lines(string(data)) {
		var v map[string]any
		if err := json.Unmarshal([]byte(line), &v); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		all, _ := v["sessions"].([]any)
		v["sessions"] = edit(all)
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		out = append(append(out, b...), '\n')
	}
	if err := os.WriteFile(path, out, 0o600); err != nil {
		t.Fatal(err)
	}
}

// Roots the pinned tracker holds that the state file doesn't list are
// not left tracked by no session: the restarted daemon puts those with a
// live process in a recovered session (root's, interactive: a turn end
// reports), which `session ls` shows and whose close reaps them, and
// forgets those with none. Sessions the state file lists stay as they were.
func TestServeRestartRecoversUnlistedRoots(t *testing.T) {
	d := startDaemon(t, "")
	mark := testutil.Marker(t)
	testutil.CheckNoLeaks(t, mark)
	d.execRoot("listed", "autonomous", fmt.Sprintf("setsid sleep %s1 & sleep 0.2", testutil.Sleep(mark)))
	d.execRoot("lost", "autonomous", fmt.Sprintf("setsid sleep %s2 & sleep 0.2", testutil.Sleep(mark)))
	d.execRoot("dead", "autonomous", "true")
	listed := atLeastSleepers(t, mark+"1", 1)
	lost := atLeastSleepers(t, mark+"2", 1)
	var gone api.Session
	d.do("GET", "/v1/sessions/lost", nil, &gone)

	d.kill9()
	dropSessions(t, d, "lost", "dead")
	d.start()
	if !strings.Contains(d.stderr.String(), "in session recovered") {
		t.Errorf("the daemon did not say where the unlisted roots went:\n%s", d.stderr)
	}
	var rec api.Session
	d.do("GET", "/v1/sessions/recovered", nil, &rec)
	if len(rec.Roots) != 1 || rec.Roots[0].Root != gone.Roots[0].Root || rec.UID != 0 || rec.Kind != "interactive" {
		t.Fatalf("recovered session %+v, want root %s only, uid 0, interactive", rec, gone.Roots[0].Root)
	}
	if out, code := d.run("session", "ls"); code != 0 || !strings.Contains(out, "recovered") {
		t.Errorf("session ls: exit %d:\n%s", code, out)
	}
	var s api.Session
	d.do("GET", "/v1/sessions/listed", nil, &s)
	if len(s.Roots) != 1 {
		t.Errorf("listed session after the restart: %+v", s)
	}

	d.do("POST", "/v1/sessions/recovered/turn-end", nil, nil)
	allAlive(t, lost)
	allAlive(t, listed)
	d.do("POST", "/v1/sessions/recovered/close", nil, nil)
	allGone(t, lost)
	allAlive(t, listed)
	d.do("POST", "/v1/sessions/listed/close", nil, nil)
	allGone(t, listed)
}
