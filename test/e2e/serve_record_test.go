package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lineage-dev/lineage/api"
	"github.com/lineage-dev/lineage/internal/testutil"
)

// recordFiles lists the record files in dir, oldest first.
func recordFiles(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".jsonl") {
			out = append(out, e.Name())
		}
	}
	slices.Sort(out)
	return out
}

// waitFor polls cond for up to 30 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited 30s for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// sessionProcess is what the test reads of `lineage report --format json`.
type sessionProcess struct {
	Process struct {
		PID int `json:"pid"`
	} `json:"process"`
	Parent struct {
		PID int `json:"pid"`
	} `json:"parent"`
	Argv    []string `json:"argv"`
	Leaked  bool     `json:"leaked"`
	IsRoot  bool     `json:"is_root"`
	Outcome string   `json:"outcome"`
	Signals []string `json:"signals"`
}

// A session with a leaky command is recorded as it happens; `lineage
// report` on its file shows every process under its lineage parent, the
// leak at the turn's end and the reap at the close. The directory keeps
// --record-keep files, the oldest closed sessions' removed first, an open
// session's never.
func TestServeRecordDirRecordsEachSession(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "records")
	d := startDaemon(t, "", "--record-dir", dir, "--record-keep", "3")
	mark := testutil.Marker(t)
	testutil.CheckNoLeaks(t, mark)
	d.execRoot("rec", "interactive", fmt.Sprintf("sh -c 'middle=%s; setsid sleep %s & exit 0'; exit 0", mark, testutil.Sleep(mark)))
	left := atLeastSleepers(t, mark, 1)
	d.do("POST", "/v1/sessions/rec/turn-end", nil, nil) // interactive: reported, a leak
	d.do("POST", "/v1/sessions/rec/close", nil, nil)    // reaped
	allGone(t, left)

	files := recordFiles(t, dir)
	if len(files) != 1 || !strings.HasSuffix(files[0], "-rec.jsonl") {
		t.Fatalf("record files %v, want the session's", files)
	}
	path := filepath.Join(dir, files[0])
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("record %s: %v, mode %v, want 0600", path, err, fi.Mode())
	}
	const exit = `"kind":"exit","boot_ns":`
	waitFor(t, "the reaped sleeper's exit in the record", func() bool {
		data, _ := os.ReadFile(path)
		return strings.Count(string(data), exit) >= 3 && strings.Contains(string(data), `"kind":"signal"`)
	})
	checkSessionReport(t, path, left[0].PID, mark)

	// Three more sessions, closed, and one open: the oldest go first.
	for _, s := range []string{"b1", "b2", "b3"} {
		d.execArgv(s, "interactive", "true")
		d.do("POST", "/v1/sessions/"+s+"/close", nil, nil)
	}
	d.startExec("open1", "interactive", "sleep", testutil.Sleep(mark))
	waitFor(t, "the open session's record", func() bool {
		fs := recordFiles(t, dir)
		return len(fs) > 0 && strings.HasSuffix(fs[len(fs)-1], "-open1.jsonl")
	})
	var fs []string
	defer func() {
		if t.Failed() {
			t.Logf("record files: %v", fs)
		}
	}()
	waitFor(t, "the directory pruned to 3 files: b2, b3 and open1", func() bool {
		fs = recordFiles(t, dir)
		return len(fs) == 3 && strings.HasSuffix(fs[0], "-b2.jsonl") && strings.HasSuffix(fs[1], "-b3.jsonl")
	})
	d.do("POST", "/v1/sessions/open1/close", nil, nil)
	allGone(t, sleepers(mark))
}

// checkSessionReport runs `lineage report --format json` on a session's
// record and checks the leaked, then reaped, sleeper and its parents.
func checkSessionReport(t *testing.T, path string, sleeper int, mark string) {
	t.Helper()
	cmd := lineageCmd("report", "--format", "json", path)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("lineage report: %v", err)
	}
	var rep struct {
		Header struct {
			Session string `json:"session"`
		} `json:"header"`
		Processes []sessionProcess `json:"processes"`
	}
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("lineage report: %v\n%s", err, out)
	}
	byPID := map[int]sessionProcess{}
	for _, p := range rep.Processes {
		byPID[p.Process.PID] = p
	}
	s, ok := byPID[sleeper]
	middle, okm := byPID[s.Parent.PID]
	root, okr := byPID[middle.Parent.PID]
	if !ok || !okm || !okr || rep.Header.Session != "rec" {
		t.Fatalf("report of session %q: want the sleeper %d, its parent and the root in it: %s", rep.Header.Session, sleeper, out)
	}
	if !strings.Contains(strings.Join(middle.Argv, " "), "middle="+mark) || !root.IsRoot || middle.IsRoot {
		t.Errorf("sleeper's parent %+v and its parent %+v: want the middle shell under the root", middle, root)
	}
	if !s.Leaked || (s.Outcome != "terminated" && s.Outcome != "killed") || len(s.Signals) == 0 {
		t.Errorf("sleeper %+v: want leaked at the turn end, then reaped at the close", s)
	}
}

// A session id another uid closed moments ago is refused while its record
// still takes the events that name the id: the new session's events would
// be written into the other uid's record. The same uid may reopen it.
func TestServeRecordOfAClosedSessionTakesNoOtherUIDsEvents(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "records")
	d := startDaemon(t, "", "--record-dir", dir)
	n := asNobody(t, d)
	if msg, code := n.lineage("session", "open", "reused", "--kind", "autonomous"); code != 0 {
		t.Fatalf("uid 65534's session open: %s", msg)
	}
	if msg, code := n.lineage("session", "close", "reused"); code != 0 {
		t.Fatalf("uid 65534's session close: %s", msg)
	}
	if code := d.apiStatus("POST", "/v1/sessions", api.OpenSession{ID: "reused", Kind: "autonomous"}); code != http.StatusConflict {
		t.Errorf("root opening the id uid 65534 just closed: status %d, want 409 while its record is written", code)
	}
	if msg, code := n.lineage("session", "open", "reused", "--kind", "autonomous"); code != 0 {
		t.Errorf("uid 65534 reopening its own id: %s", msg)
	}
	n.lineage("session", "close", "reused")
}

// A session that runs more than its record may hold: the record stops at
// --record-max-bytes and closes with a loss that counts what was not
// written, and `lineage report` reads it and says so.
func TestServeRecordStopsAtItsBound(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "records")
	const bound = 4096
	d := startDaemon(t, "", "--record-dir", dir, "--record-max-bytes", "4K")
	// 200 processes: a fork, an exec and an exit each, far past 4 KiB.
	d.execRoot("big", "autonomous", "i=0; while [ $i -lt 200 ]; do /bin/true; i=$((i+1)); done")
	d.do("POST", "/v1/sessions/big/close", nil, nil)
	var path string
	var data []byte
	waitFor(t, "the record closed with its bound's loss", func() bool {
		if fs := recordFiles(t, dir); len(fs) == 1 {
			path = filepath.Join(dir, fs[0])
			data, _ = os.ReadFile(path)
		}
		return strings.Contains(string(data), `"reason":"bound: `)
	})
	// The bound is checked before each line: the file holds at most one
	// line past it, then the closing losses.
	if len(data) > 2*bound {
		t.Errorf("record of %d bytes, bound %d", len(data), bound)
	}
	var loss struct {
		Count  uint64 `json:"count"`
		Reason string `json:"reason"`
	}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		if strings.Contains(line, `"reason":"bound: `) {
			if err := json.Unmarshal([]byte(line), &loss); err != nil {
				t.Fatalf("loss line %s: %v", line, err)
			}
		}
	}
	// Of the 600 events, those past the first 4 KiB: most of them.
	if loss.Count < 300 || !strings.Contains(loss.Reason, "4KiB (--record-max-bytes)") {
		t.Errorf("loss %+v: want most of 600 events counted, naming the bound", loss)
	}
	out, err := lineageCmd("report", "--format", "json", path).Output()
	if err != nil {
		t.Fatalf("lineage report: %v", err)
	}
	var rep struct {
		Gaps []struct {
			Count  uint64 `json:"count"`
			Reason string `json:"reason"`
		} `json:"gaps"`
	}
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("lineage report: %v\n%s", err, out)
	}
	found := false
	for _, g := range rep.Gaps {
		found = found || (g.Count == loss.Count && strings.HasPrefix(g.Reason, "bound: "))
	}
	if !found {
		t.Errorf("the report's gaps %+v do not name the bound's loss %+v", rep.Gaps, loss)
	}
}
