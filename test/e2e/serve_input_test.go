package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lineage-dev/lineage/api"
	"github.com/lineage-dev/lineage/internal/server"
	"github.com/lineage-dev/lineage/internal/testutil"
)

// raw sends body as is and returns the status and the decoded error.
func (d *daemon) raw(method, path, body string) (int, api.Error) {
	d.t.Helper()
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", d.sock)
	}}}
	defer hc.CloseIdleConnections()
	req, err := http.NewRequest(method, "http://x"+path, strings.NewReader(body))
	if err != nil {
		d.t.Fatal(err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		d.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	var e api.Error
	if resp.StatusCode >= 400 {
		if err := json.Unmarshal(data, &e); err != nil || e.Error == "" || e.Code == "" {
			d.t.Errorf("%s %s: error body %q is not {error, code}", method, path, data)
		}
	}
	return resp.StatusCode, e
}

func TestServeRefusesBadInputAndChangesNothing(t *testing.T) {
	d := startDaemon(t, "")
	mark := testutil.Marker(t)
	testutil.CheckNoLeaks(t, mark)
	live := startSleep(t, exec.Command("sleep", testutil.Sleep(mark)))
	livePID, liveStart := ident(t, live)
	d.do("POST", "/v1/roots", api.AddRoot{PID: int64(livePID), Start: liveStart, Session: "keep"}, nil)
	other := startSleep(t, exec.Command("sleep", testutil.Sleep(mark)))
	otherPID, otherStart := ident(t, other)
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	thread := threadOf(t, mark)
	before := snapshot(t, d)
	root := fmt.Sprintf("%d@%d", livePID, liveStart)
	for _, c := range []struct {
		method, path, body string
		status             int
	}{
		{"POST", "/v1/roots", `{"pid":`, 400},
		{"POST", "/v1/roots", `[]`, 400},
		{"POST", "/v1/roots", `{"pid":2,"session":"a"} {}`, 400},
		{"POST", "/v1/roots", `{"pid":` + strings.Repeat(" ", server.MaxBody) + `2}`, 413},
		{"POST", "/v1/roots", `{"pid":2,"session":"a","extra":1}`, 400},
		{"POST", "/v1/roots", `{"session":"a"}`, 400},
		{"POST", "/v1/roots", `{"pid":0,"session":"a"}`, 400},
		{"POST", "/v1/roots", `{"pid":-5,"session":"a"}`, 400},
		{"POST", "/v1/roots", `{"pid":1,"session":"a"}`, 400},
		{"POST", "/v1/roots", `{"pid":"12","session":"a"}`, 400},
		{"POST", "/v1/roots", `{"pid":99999999999,"session":"a"}`, 400},
		{"POST", "/v1/roots", fmt.Sprintf(`{"pid":%d,"session":"a"}`, gone.Process.Pid), 404},
		{"POST", "/v1/roots", fmt.Sprintf(`{"pid":%d,"start":%d,"session":"a"}`, livePID, liveStart+1), 404},
		{"POST", "/v1/roots", fmt.Sprintf(`{"pid":%d,"start":%d,"session":"keep"}`, livePID, liveStart), 409},
		{"POST", "/v1/roots", fmt.Sprintf(`{"pid":%d,"session":"../x"}`, livePID), 400},
		{"POST", "/v1/roots", fmt.Sprintf(`{"pid":%d}`, livePID), 400},
		{"POST", "/v1/roots", fmt.Sprintf(`{"pid":%d,"session":"a"}`, thread), 400},
		{"POST", "/v1/sessions", `{"id":"keep"}`, 409},
		{"POST", "/v1/sessions", `{"id":"x","parent":"nope"}`, 404},
		{"POST", "/v1/sessions", `{"id":"x","owner":{"pid":1,"start":1}}`, 400},
		{"POST", "/v1/sessions", fmt.Sprintf(`{"id":"x","owner":{"pid":%d,"start":5}}`, gone.Process.Pid), 404},
		{"POST", "/v1/sessions", `{"id":"has space"}`, 400},
		{"POST", "/v1/sessions", `{"kind":7}`, 400},
		{"POST", "/v1/sessions", `{"id":"x","kind":"bogus"}`, 400},
		{"POST", "/v1/sessions", `{"id":"x","kind":"Autonomous"}`, 400},
		{"POST", "/v1/sessions", `{"id":"x","keep":["exe:/nonexistent/program"]}`, 400},
		{"POST", "/v1/sessions", `{"id":"x","keep":["exe:/etc/passwd"]}`, 400},
		{"POST", "/v1/roots", fmt.Sprintf(`{"pid":%d,"session":"y","keep":["exe:/nonexistent/program"]}`, livePID), 400},
		{"POST", "/v1/roots", fmt.Sprintf(`{"pid":%d,"session":"a","kind":"bogus"}`, livePID), 400},
		{"POST", "/v1/roots", fmt.Sprintf(`{"pid":%d,"session":"keep","kind":"bogus"}`, livePID), 400},
		// "keep" is interactive: a turn end would not do what this asks.
		{"POST", "/v1/roots", fmt.Sprintf(`{"pid":%d,"start":%d,"session":"keep","kind":"autonomous"}`, otherPID, otherStart), 409},
		{"POST", "/v1/arms", `{"session":"keep","kind":"autonomous"}`, 409},
		// "keep" has no owner and no keep rules: they are set when it opens.
		{"POST", "/v1/roots", fmt.Sprintf(`{"pid":%d,"start":%d,"session":"keep","owner":{"pid":%d,"start":%d}}`, otherPID, otherStart, livePID, liveStart), 409},
		{"POST", "/v1/roots", fmt.Sprintf(`{"pid":%d,"start":%d,"session":"keep","keep":["%d@%d"]}`, otherPID, otherStart, otherPID, otherStart), 409},
		{"GET", "/v1/sessions/nope", ``, 404},
		{"GET", "/v1/sessions/nope/report", ``, 404},
		{"POST", "/v1/sessions/nope/turn-end", ``, 404},
		{"POST", "/v1/sessions/nope/close", ``, 404},
		{"GET", "/v1/sessions/keep/close", ``, 405},
		{"DELETE", "/v1/sessions", ``, 405},
		{"PUT", "/v1/roots", ``, 405},
		{"POST", "/metrics", ``, 405},
		{"POST", "/v1/roots/" + root, ``, 405},
		{"GET", "/v1/roots/abc", ``, 400},
		{"GET", "/v1/roots/5@0", ``, 400},
		{"GET", "/v1/roots/" + fmt.Sprintf("%d@%d", livePID, liveStart+1), ``, 404},
		{"DELETE", "/v1/roots/" + fmt.Sprintf("%d@%d", livePID, liveStart+1), ``, 404},
		{"POST", "/v1/keeps", `{"process":"abc"}`, 400},
		{"POST", "/v1/keeps", `{"process":"` + root + `","ttl":"-1s"}`, 400},
		{"POST", "/v1/keeps", `{"process":"` + root + `","ttl":"forever"}`, 400},
		{"POST", "/v1/keeps", fmt.Sprintf(`{"process":"%d@5"}`, gone.Process.Pid), 404},
		{"GET", "/v1/events?session=nope", ``, 404},
		{"GET", "/v2/sessions", ``, 404},
		{"GET", "/", ``, 404},
	} {
		if got, e := d.raw(c.method, c.path, c.body); got != c.status {
			t.Errorf("%s %s %.60q: status %d (%s), want %d", c.method, c.path, c.body, got, e.Error, c.status)
		}
	}
	if after := snapshot(t, d); after != before {
		t.Errorf("bad input changed the state:\nbefore %s\nafter  %s", before, after)
	}
	if _, e := d.raw("POST", "/v1/roots", fmt.Sprintf(`{"pid":%d,"start":%d,"session":"keep","kind":"autonomous"}`, otherPID, otherStart)); !strings.Contains(e.Error, `session "keep" is interactive, not autonomous`) {
		t.Errorf("a root asking another kind of a session: %q, want the session's kind named", e.Error)
	}
	if _, e := d.raw("POST", "/v1/roots", fmt.Sprintf(`{"pid":%d,"start":%d,"session":"keep","owner":{"pid":%d,"start":%d}}`, otherPID, otherStart, livePID, liveStart)); !strings.Contains(e.Error, fmt.Sprintf(`session "keep" has no owner, not %d@%d`, livePID, liveStart)) {
		t.Errorf("a root asking an owner of a session without one: %q, want it said", e.Error)
	}
	if _, e := d.raw("POST", "/v1/roots", fmt.Sprintf(`{"pid":%d,"start":%d,"session":"keep","keep":["%d@%d"]}`, otherPID, otherStart, otherPID, otherStart)); !strings.Contains(e.Error, "POST /v1/keeps") {
		t.Errorf("a root asking keep rules of a session that exists: %q, want the way to add them named", e.Error)
	}
	// Its own kind, or none, joins it.
	d.do("POST", "/v1/roots", api.AddRoot{PID: int64(otherPID), Start: otherStart, Session: "keep", Kind: "interactive"}, nil)
	// A session's own owner and keep rules join it too.
	third := startSleep(t, exec.Command("sleep", testutil.Sleep(mark)))
	thirdPID, thirdStart := ident(t, third)
	owner := fmt.Sprintf(`"owner":{"pid":%d,"start":%d},"keep":["%s"]`, livePID, liveStart, other)
	for _, c := range []struct {
		path, body string
		status     int
	}{
		{"/v1/sessions", `{"id":"owned",` + owner + `}`, 201},
		{"/v1/roots", fmt.Sprintf(`{"pid":%d,"start":%d,"session":"owned",%s}`, thirdPID, thirdStart, owner), 201},
	} {
		if code, e := d.raw("POST", c.path, c.body); code != c.status {
			t.Errorf("POST %s %s: %d (%s), want %d", c.path, c.body, code, e.Error, c.status)
		}
	}
	if code, e := d.raw("POST", "/v1/roots", fmt.Sprintf(`{"pid":%d,"start":%d,"session":"owned","owner":{"pid":%d,"start":%d}}`, thirdPID, thirdStart, otherPID, otherStart)); code != 409 || !strings.Contains(e.Error, fmt.Sprintf(`session "owned" is owned by %d@%d, not %d@%d`, livePID, liveStart, otherPID, otherStart)) {
		t.Errorf("a root asking another owner: %d %q, want 409 naming both", code, e.Error)
	}
	d.do("POST", "/v1/sessions/owned/close", nil, nil)
	// No kind is interactive.
	var s api.Session
	d.do("POST", "/v1/sessions", api.OpenSession{ID: "plain"}, &s)
	if s.Kind != "interactive" {
		t.Errorf("no kind: %q, want interactive", s.Kind)
	}
	d.do("POST", "/v1/sessions/plain/close", nil, nil)
	d.do("POST", "/v1/sessions/keep/close", nil, nil)
}

// threadOf starts a process with a second thread, both living a finite
// time, and returns that thread's id: a task of the process, not a
// process.
func threadOf(t *testing.T, mark string) int {
	t.Helper()
	python := testutil.LookTool(t, "python3")
	cmd := exec.Command(python, "-c", "import sys, threading, time\n"+
		"th = threading.Thread(target=time.sleep, args=(float(sys.argv[1]),))\nth.start()\nth.join()", testutil.Sleep(mark))
	startSleep(t, cmd)
	var tid int
	waitFor(t, "the second thread", func() bool {
		tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", cmd.Process.Pid))
		for _, task := range tasks {
			if id, err := strconv.Atoi(task.Name()); err == nil && id != cmd.Process.Pid {
				tid = id
				return true
			}
		}
		return false
	})
	return tid
}

// snapshot is the daemon's sessions and its state (the snapshot file and
// the journal), as text.
func snapshot(t *testing.T, d *daemon) string {
	t.Helper()
	var ss []api.Session
	d.do("GET", "/v1/sessions", nil, &ss)
	data, _ := json.Marshal(ss)
	state, err := os.ReadFile(filepath.Join(d.state, "state.json"))
	if err != nil {
		t.Fatal(err)
	}
	journal, err := os.ReadFile(filepath.Join(d.state, "state.journal"))
	if err != nil {
		t.Fatal(err)
	}
	return string(data) + string(state) + string(journal)
}

// A request header larger than the API needs is refused (431) before the
// daemon holds it: one client's connections can't each pin a megabyte.
func TestServeRefusesAHugeHeader(t *testing.T) {
	d := startDaemon(t, "")
	c, err := net.Dial("unix", d.sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	req := "GET /v1/status HTTP/1.1\r\nHost: x\r\nX-Pad: " + strings.Repeat("a", 64<<10) + "\r\n\r\n"
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	status, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || !strings.HasPrefix(status, "HTTP/1.1 431") {
		t.Errorf("a 64 KiB header: %q, %v; want 431", status, err)
	}
	var st api.Status
	d.do("GET", "/v1/status", nil, &st) // and the daemon serves on
}
