package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lineage-dev/lineage/api"
	"github.com/lineage-dev/lineage/internal/record"
	"github.com/lineage-dev/lineage/internal/testutil"
	"github.com/lineage-dev/lineage/lineage"
)

// The event stream is the record schema: a header, then the session's
// fork, exec and exit events and its reap's signal events, and nothing of
// other sessions.
func TestServeEventsStreamTheRecordSchema(t *testing.T) {
	d := startDaemon(t, "")
	mark := testutil.Marker(t)
	testutil.CheckNoLeaks(t, mark)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	d.do("POST", "/v1/sessions", api.OpenSession{ID: "ev", Kind: "autonomous"}, nil)
	lines := d.eventLines(t, ctx, "ev")
	d.execRoot("other", "autonomous", "true")
	d.execRoot("ev", "", fmt.Sprintf("setsid sleep %s & sleep 0.2", testutil.Sleep(mark)))
	left := atLeastSleepers(t, mark, 1)
	d.do("POST", "/v1/sessions/ev/turn-end", nil, nil)
	allGone(t, left)
	sleeper := lineage.Identity{PID: uint32(left[0].PID), StartTicks: left[0].StartTicks}

	var h record.Header
	if err := json.Unmarshal([]byte(<-lines), &h); err != nil || h.Schema != record.SchemaName {
		t.Fatalf("header %+v: %v", h, err)
	}
	seen := map[record.Kind]bool{}
	timeout := time.After(10 * time.Second)
	for !(seen[record.KindSignal] && seen[record.KindExit]) {
		select {
		case line := <-lines:
			var ev record.Event
			dec := json.NewDecoder(strings.NewReader(line))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&ev); err != nil || !ev.Kind.Known() {
				t.Fatalf("event %q: %v", line, err)
			}
			if ev.Kind == record.KindExec && len(ev.Argv) > 0 && ev.Argv[0] == "true" {
				t.Errorf("another session's event: %s", line)
			}
			if ev.Process == sleeper {
				seen[ev.Kind] = true
			}
		case <-timeout:
			t.Fatalf("events of the sleeper seen: %v, want fork, exec, signal and exit", seen)
		}
	}
	if !seen[record.KindFork] || !seen[record.KindExec] {
		t.Errorf("events of the sleeper seen: %v, want fork and exec too", seen)
	}
}

// LINEAGE_REAPING=off in the daemon's environment wins over --reaping on:
// an autonomous turn end only reports.
func TestServeKillSwitchFromEnvironmentWins(t *testing.T) {

	d := startDaemonEnv(t, []string{"LINEAGE_REAPING=off"}, "--reaping", "on")
	mark := testutil.Marker(t)
	testutil.CheckNoLeaks(t, mark)
	d.execRoot("off", "autonomous", fmt.Sprintf("setsid sleep %s & sleep 0.2", testutil.Sleep(mark)))
	left := atLeastSleepers(t, mark, 1)
	var end api.Ended
	d.do("POST", "/v1/sessions/off/turn-end", nil, &end)
	if n := results(end); n[lineage.Reported] != 1 || !strings.Contains(end.Reaping, "LINEAGE_REAPING=off") {
		t.Errorf("turn end with reaping off: %v, %q", n, end.Reaping)
	}
	allAlive(t, left)
	d.do("POST", "/v1/sessions/off/close", nil, &end)
	allAlive(t, left)
	testutil.KillIdentity(left[0].PID, left[0].StartTicks)
}

// A kept process survives an autonomous turn end, and may fork afterwards:
// its lineage is no longer contained once the reap is over.
func TestServeKeptProcessSurvivesAndForks(t *testing.T) {
	d := startDaemon(t, "")
	mark := testutil.Marker(t)
	testutil.CheckNoLeaks(t, mark)
	s := testutil.Sleep(mark)
	fifo := filepath.Join(t.TempDir(), "go")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	// The kept shell waits, childless, for the test's word, then forks.
	d.execRoot("kept", "autonomous", fmt.Sprintf(
		"setsid sh -c 'read x < %[2]s; sleep %[1]s2; true' kept-%[1]s1 & setsid sleep %[1]s3 & sleep 0.2", s, fifo))
	shell := atLeastProcs(t, "kept-"+s+"1")
	other := atLeastSleepers(t, s+"3", 1)
	d.do("POST", "/v1/keeps", api.AddKeep{Process: fmt.Sprintf("%d@%d", shell.PID, shell.StartTicks)}, nil)
	var end api.Ended
	d.do("POST", "/v1/sessions/kept/turn-end", nil, &end)
	allGone(t, other)
	if n := results(end); n["kept"] != 1 {
		t.Errorf("turn end outcomes %v, want one kept", n)
	}
	if err := os.WriteFile(fifo, []byte("go\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	later := atLeastSleepers(t, s+"2", 1)
	time.Sleep(100 * time.Millisecond)
	allAlive(t, later)
	d.do("POST", "/v1/sessions/kept/close", nil, &end)
	allGone(t, later)
}

// atLeastProcs waits for a process whose last argv word is token (the
// name of a `sh -c SCRIPT NAME`; the script that starts it only carries
// it).
func atLeastProcs(t *testing.T, token string) testutil.Proc {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); ; {
		for _, p := range testutil.Find(token) {
			if len(p.Argv) > 0 && p.Argv[len(p.Argv)-1] == token {
				return p
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no process with %s", token)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// The tracker's gaps reach the streams as they happen: a daemon whose
// membership map holds 8 processes kills, at birth, what a root forks past
// that (--on-full kill, the default), and a stream filtered to that
// session, or to another, gets a loss event naming the full map.
func TestServeEventsStreamTheTrackersLosses(t *testing.T) {
	d := startDaemon(t, "", "--max-members", "8")
	mark := testutil.Marker(t)
	testutil.CheckNoLeaks(t, mark)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	d.do("POST", "/v1/sessions", api.OpenSession{ID: "full", Kind: "autonomous"}, nil)
	d.do("POST", "/v1/sessions", api.OpenSession{ID: "bystander", Kind: "autonomous"}, nil)
	streams := map[string]<-chan string{"full": d.eventLines(t, ctx, "full"), "bystander": d.eventLines(t, ctx, "bystander")}
	// Closed before the daemon stops, whatever the test's end: the daemon's
	// death kills nothing.
	t.Cleanup(func() {
		d.apiStatus("POST", "/v1/sessions/full/close", nil)
		d.apiStatus("POST", "/v1/sessions/bystander/close", nil)
	})
	// The sleepers past the map's room are killed at birth; the shell's
	// status is its own (exit is a builtin: no fork).
	d.execRoot("full", "", fmt.Sprintf("i=0; while [ $i -lt 16 ]; do sleep %s </dev/null >/dev/null 2>&1 & i=$((i+1)); done; exit 0", testutil.Sleep(mark)))
	for name, lines := range streams {
		timeout := time.After(30 * time.Second)
		for found := false; !found; {
			select {
			case line := <-lines:
				var ev record.Event
				if err := json.Unmarshal([]byte(line), &ev); err != nil {
					t.Fatalf("stream %s: %q: %v", name, line, err)
				}
				found = ev.Kind == record.KindLoss && ev.Reason == "untracked: the membership map was full" && ev.Count > 0
			case <-timeout:
				t.Fatalf("stream %s: no loss event for the full map within 30 s", name)
			}
		}
	}
	if code := d.apiStatus("POST", "/v1/sessions/full/close", nil); code != 0 {
		t.Errorf("close: %d", code)
	}
}
