package e2e

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/lineage-dev/lineage/api"
	"github.com/lineage-dev/lineage/client"
	"github.com/lineage-dev/lineage/internal/record"
	"github.com/lineage-dev/lineage/internal/testutil"
	"github.com/lineage-dev/lineage/lineage"
)

// curl sends one request with curl and decodes the answer into out; it
// returns the HTTP status.
func (d *daemon) curl(method, path, body string, out any) int {
	d.t.Helper()
	tool := testutil.LookTool(d.t, "curl")
	args := []string{"-s", "--unix-socket", d.sock, "-X", method, "-w", "\n%{http_code}", "http://x" + path}
	if body != "" {
		args = append(args, "-H", "Content-Type: application/json", "-d", body)
	}
	raw, err := exec.Command(tool, args...).Output()
	if err != nil {
		d.t.Fatalf("curl %s %s: %v", method, path, err)
	}
	text := strings.TrimSpace(string(raw))
	cut := strings.LastIndexByte(text, '\n')
	status, err := strconv.Atoi(text[cut+1:])
	if err != nil || cut < 0 {
		d.t.Fatalf("curl %s %s: answer %q", method, path, raw)
	}
	if err := json.Unmarshal([]byte(text[:cut]), out); err != nil {
		d.t.Fatalf("curl %s %s: %d %q: %v", method, path, status, text[:cut], err)
	}
	return status
}

// runJSON runs a client command with --json and decodes its answer.
func (d *daemon) runJSON(out any, args ...string) {
	d.t.Helper()
	text, code := d.run(append(args, "--json")...)
	if code != 0 {
		d.t.Fatalf("lineage %s: exit %d", strings.Join(args, " "), code)
	}
	if err := json.Unmarshal([]byte(text), out); err != nil {
		d.t.Fatalf("lineage %s --json: %q: %v", strings.Join(args, " "), text, err)
	}
}

// The sessions driven from outside Go's client: an interactive
// one opened with curl, its dev server started by `lineage exec`,
// reported by `lineage session report` and `lineage turn end`, reaped by
// curl's close, while `lineage events` streams it; an autonomous one
// opened by `lineage session open`, whose leftovers curl's turn end reaps.
func TestServeSessionsThroughCLIAndCurl(t *testing.T) {
	d := startDaemon(t, "")
	mark := testutil.Marker(t)
	testutil.CheckNoLeaks(t, mark)

	var s api.Session
	if st := d.curl("POST", "/v1/sessions", `{"id":"cc","kind":"interactive","label":"by curl"}`, &s); st != 201 || s.Kind != "interactive" || s.Label != "by curl" {
		t.Fatalf("curl open: %d %+v", st, s)
	}
	events := lineageCmd("events", "--session", "cc")
	events.Env = append(events.Env, client.EnvSocket+"="+d.sock)
	stream := &lockedBuffer{}
	events.Stdout = stream
	if err := events.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = events.Process.Kill(); _ = events.Wait() })
	waitFor(t, "the event stream's header", func() bool { return strings.Contains(stream.String(), record.SchemaName) })

	dexec := lineageCmd("exec", "--session", "cc", "--label", "dev server", "--", "sh", "-c", fmt.Sprintf("setsid sleep %s & sleep 0.2", testutil.Sleep(mark+"1")))
	dexec.Env = append(dexec.Env, client.EnvSocket+"="+d.sock)
	if err := dexec.Run(); err != nil {
		t.Fatalf("lineage exec: %v", err)
	}
	dev := atLeastSleepers(t, mark+"1", 1)
	var rep, turn, closed api.Ended
	d.runJSON(&rep, "session", "report", "cc")
	d.runJSON(&turn, "turn", "end", "cc")
	for name, e := range map[string]api.Ended{"session report": rep, "turn end": turn} {
		if n := results(e); n[lineage.Reported] != 1 || len(n) != 1 {
			t.Errorf("%s: outcomes %v, want the dev server reported", name, n)
		}
	}
	allAlive(t, dev)
	if st := d.curl("POST", "/v1/sessions/cc/close", "", &closed); st != 200 {
		t.Fatalf("curl close: status %d", st)
	}
	allGone(t, dev)
	if n := results(closed); n[lineage.Terminated]+n[lineage.Killed] != 1 {
		t.Errorf("curl close: outcomes %v, want the dev server ended", n)
	}
	devID := lineage.Identity{PID: uint32(dev[0].PID), StartTicks: dev[0].StartTicks}
	// The outcome says who, what, whence, how long, which signals, and how it ended.
	if len(closed.Roots) != 1 || len(closed.Roots[0].Outcomes) != 1 {
		t.Fatalf("curl close: %+v, want one root with one outcome", closed)
	}
	if o := closed.Roots[0].Outcomes[0]; o.Process != devID || o.Label != "dev server" || o.Session != "cc" || o.Kind != "interactive" ||
		o.Age <= 0 || len(o.Signals) == 0 || len(o.Argv) == 0 || o.Argv[0] != "sleep" {
		t.Errorf("curl close: outcome %+v, want the dev server's identity, label, session, kind, age, signals and argv", o)
	}
	var e api.Error
	if st := d.curl("GET", "/v1/sessions/cc", "", &e); st != 404 || e.Code != "not_found" {
		t.Errorf("curl get of a closed session: %d %+v, want 404 not_found", st, e)
	}
	sawStream(t, stream, devID)

	d.runJSON(&s, "session", "open", "ca", "--kind", "autonomous")
	if s.ID != "ca" || s.Kind != "autonomous" {
		t.Fatalf("session open --json: %+v", s)
	}
	d.execRoot("ca", "", fmt.Sprintf("setsid sleep %[1]s & (setsid sh -c 'sleep %[1]s & exit 0' &); sleep 0.2", testutil.Sleep(mark+"2")))
	left := atLeastSleepers(t, mark+"2", 2)
	var end api.Ended
	if st := d.curl("POST", "/v1/sessions/ca/turn-end", "", &end); st != 200 || end.Kind != "autonomous" {
		t.Fatalf("curl turn end: %d %+v", st, end)
	}
	allGone(t, left)
	if n := results(end); n[lineage.Terminated]+n[lineage.Killed] != 2 {
		t.Errorf("curl turn end: outcomes %v, want both leftovers ended", n)
	}
}

// sawStream waits for `lineage events` to have printed, in the record
// schema, the dev server's fork, exec and the reap's signal.
func sawStream(t *testing.T, stream *lockedBuffer, dev lineage.Identity) {
	t.Helper()
	var seen map[record.Kind]bool
	waitFor(t, "the dev server's fork, exec and signal in `lineage events`", func() bool {
		seen = map[record.Kind]bool{}
		lines := strings.Split(strings.TrimSpace(stream.String()), "\n")
		var h record.Header
		if err := json.Unmarshal([]byte(lines[0]), &h); err != nil || h.Schema != record.SchemaName {
			t.Fatalf("the stream's first line %q: %v", lines[0], err)
		}
		for _, l := range lines[1:] {
			var ev record.Event
			if err := json.Unmarshal([]byte(l), &ev); err != nil || !ev.Kind.Known() {
				t.Fatalf("event line %q: %v", l, err)
			}
			if ev.Process == dev {
				seen[ev.Kind] = true
			}
		}
		return seen[record.KindFork] && seen[record.KindExec] && seen[record.KindSignal]
	})
}
