package e2e

import (
	"bufio"
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lineage-dev/lineage/api"
	"github.com/lineage-dev/lineage/internal/testutil"
	"github.com/lineage-dev/lineage/policy"
)

// A keep can be removed, by its session's owner only; the removal is in
// the event stream, bad input changes nothing, and what the keep spared is
// reaped at the next turn end.
func TestServeKeepRemoved(t *testing.T) {
	d := startDaemon(t, "")
	n := asNobody(t, d)
	mark := testutil.Marker(t)
	testutil.CheckNoLeaks(t, mark)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	d.do("POST", "/v1/sessions", api.OpenSession{ID: "k", Kind: "autonomous"}, nil)
	lines := d.eventLines(t, ctx, "k")
	d.execRoot("k", "autonomous", fmt.Sprintf("setsid sleep %s & sleep 0.2", testutil.Sleep(mark)))
	left := atLeastSleepers(t, mark, 1)
	id := fmt.Sprintf("%d@%d", left[0].PID, left[0].StartTicks)
	if _, code := d.run("keep", id); code != 0 {
		t.Fatal("keep failed")
	}

	before := snapshot(t, d)
	for _, c := range []struct {
		method, path string
		status       int
	}{
		{"DELETE", "/v1/keeps/abc", 400},
		{"DELETE", "/v1/keeps/root:abc", 400},
		{"DELETE", "/v1/keeps/5@0", 400},
		{"DELETE", "/v1/keeps/1@5", 400},
		{"DELETE", fmt.Sprintf("/v1/keeps/%d@%d", left[0].PID, left[0].StartTicks+1), 404},
		{"DELETE", "/v1/keeps/root:" + id, 404},
		{"GET", "/v1/keeps/" + id, 405},
		{"POST", "/v1/keeps/" + id, 405},
	} {
		if got, e := d.raw(c.method, c.path, ""); got != c.status {
			t.Errorf("%s %s: status %d (%s), want %d", c.method, c.path, got, e.Error, c.status)
		}
	}
	if _, code := d.run("keep", "--rm", "--ttl", "1m", id); code == 0 {
		t.Error("keep --rm --ttl was accepted")
	}
	// Another uid's keep is as one that doesn't exist.
	n.refused("404 not_found", "keep", "--rm", id)
	if after := snapshot(t, d); after != before {
		t.Errorf("refused removals changed the state:\nbefore %s\nafter  %s", before, after)
	}

	var end api.Ended
	d.do("POST", "/v1/sessions/k/turn-end", nil, &end)
	allAlive(t, left)
	out, code := d.run("keep", "--rm", id, "--json")
	if code != 0 || !strings.Contains(out, `"rule": "`+id+`"`) {
		t.Fatalf("keep --rm: exit %d: %s", code, out)
	}
	var s api.Session
	d.do("GET", "/v1/sessions/k", nil, &s)
	if len(s.Keeps) != 0 {
		t.Errorf("keeps after removal: %+v", s.Keeps)
	}
	if got := d.apiStatus("DELETE", "/v1/keeps/"+id, nil); got != 404 {
		t.Errorf("removing it again: %d, want 404", got)
	}
	d.do("POST", "/v1/sessions/k/turn-end", nil, &end)
	allGone(t, left)

	for timeout := time.After(10 * time.Second); ; {
		select {
		case line := <-lines:
			if strings.Contains(line, `"kind":"unkeep"`) && strings.Contains(line, `"reason":"unkeep `+id+`"`) {
				return
			}
		case <-timeout:
			t.Fatal("no unkeep event for the removal in the stream")
		}
	}
}

// A keep with a TTL ends by itself, and its expiry is in the event stream.
func TestServeKeepExpiryIsInTheStream(t *testing.T) {
	d := startDaemon(t, "")
	mark := testutil.Marker(t)
	testutil.CheckNoLeaks(t, mark)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	d.execRoot("x", "autonomous", fmt.Sprintf("setsid sleep %s & sleep 0.2", testutil.Sleep(mark)))
	left := atLeastSleepers(t, mark, 1)
	body, err := d.client().Stream(ctx, "/v1/events?session=x")
	if err != nil {
		t.Fatal(err)
	}
	defer body.Close()
	id := fmt.Sprintf("%d@%d", left[0].PID, left[0].StartTicks)
	d.do("POST", "/v1/keeps", api.AddKeep{Process: id, TTL: "1s"}, nil)
	sc := bufio.NewScanner(body)
	expired := make(chan bool, 1)
	go func() {
		for sc.Scan() {
			if strings.Contains(sc.Text(), `"reason":"keep expired `+id+`"`) {
				expired <- true
				return
			}
		}
	}()
	select {
	case <-expired:
	case <-time.After(30 * time.Second):
		t.Fatal("no expiry event in the stream")
	}
	var s api.Session
	d.do("GET", "/v1/sessions/x", nil, &s)
	if len(s.Keeps) != 0 {
		t.Errorf("keeps after the expiry: %+v", s.Keeps)
	}
	d.do("POST", "/v1/sessions/x/close", nil, nil)
	allGone(t, left)
}

// A session's exe: keep can be removed too, its path URL-escaped in the
// API and as given on `lineage keep --rm`; what it spared is reaped at the
// next turn end.
func TestServeKeepExeRemoved(t *testing.T) {
	d := startDaemon(t, "")
	mark := testutil.Marker(t)
	testutil.CheckNoLeaks(t, mark)
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Fatal(err)
	}
	rule, err := policy.KeepExe(sleep)
	if err != nil {
		t.Fatal(err)
	}
	d.do("POST", "/v1/sessions", api.OpenSession{ID: "ke", Kind: "autonomous", Keep: []policy.Keep{rule}}, nil)
	d.execRoot("ke", "autonomous", fmt.Sprintf("setsid sleep %s & sleep 0.2", testutil.Sleep(mark)))
	left := atLeastSleepers(t, mark, 1)
	d.do("POST", "/v1/sessions/ke/turn-end", nil, nil)
	allAlive(t, left)

	escaped := "/v1/keeps/" + url.PathEscape(rule.String())
	before := snapshot(t, d)
	for _, c := range []struct {
		path   string
		status int
	}{
		{"/v1/keeps/" + url.PathEscape("exe:bin/sleep"), 400},
		{"/v1/keeps/" + url.PathEscape("exe:"+sleep+"/"), 400},
		{"/v1/keeps/" + url.PathEscape("exe:/nonexistent/sleep"), 404},
	} {
		if got, e := d.raw("DELETE", c.path, ""); got != c.status {
			t.Errorf("DELETE %s: status %d (%s), want %d", c.path, got, e.Error, c.status)
		}
	}
	if _, code := d.run("keep", "--rm", "--root", rule.String()); code == 0 {
		t.Error("keep --rm --root exe:... was accepted")
	}
	if after := snapshot(t, d); after != before {
		t.Errorf("refused removals changed the state:\nbefore %s\nafter  %s", before, after)
	}

	out, code := d.run("keep", "--rm", rule.String(), "--json")
	if code != 0 || !strings.Contains(out, `"rule": "`+rule.String()+`"`) {
		t.Fatalf("keep --rm %s: exit %d: %s", rule, code, out)
	}
	var s api.Session
	d.do("GET", "/v1/sessions/ke", nil, &s)
	if len(s.Keeps) != 0 {
		t.Errorf("keeps after removal: %+v", s.Keeps)
	}
	if got, _ := d.raw("DELETE", escaped, ""); got != 404 {
		t.Errorf("DELETE %s again: %d, want 404", escaped, got)
	}
	d.do("POST", "/v1/sessions/ke/turn-end", nil, nil)
	allGone(t, left)
	d.do("POST", "/v1/sessions/ke/close", nil, nil)
}

// A keep whose TTL ran out while no daemon ran expires when the daemon
// starts again, with its event (in the session's record, which is written
// from the restore on), and the restored session no longer holds it.
func TestServeKeepExpiresAfterRestart(t *testing.T) {
	records := t.TempDir()
	d := startDaemon(t, "", "--record-dir", records)
	mark := testutil.Marker(t)
	testutil.CheckNoLeaks(t, mark)
	d.execRoot("kr", "autonomous", fmt.Sprintf("setsid sleep %s & sleep 0.2", testutil.Sleep(mark)))
	left := atLeastSleepers(t, mark, 1)
	id := fmt.Sprintf("%d@%d", left[0].PID, left[0].StartTicks)
	d.do("POST", "/v1/keeps", api.AddKeep{Process: id, TTL: "1s"}, nil)
	d.kill9()
	time.Sleep(1500 * time.Millisecond)
	d.start("--record-dir", records)

	want := `"reason":"keep expired ` + id + `"`
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		files, _ := filepath.Glob(filepath.Join(records, "*-kr.jsonl"))
		found := false
		for _, f := range files {
			data, _ := os.ReadFile(f)
			found = found || strings.Contains(string(data), want)
		}
		if found {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s in the session's record %v", want, files)
		}
	}
	var s api.Session
	d.do("GET", "/v1/sessions/kr", nil, &s)
	if len(s.Keeps) != 0 {
		t.Errorf("keeps after the restart: %+v", s.Keeps)
	}
	d.do("POST", "/v1/sessions/kr/close", nil, nil)
	allGone(t, left)
}

// An exe: rule that names the program through a symbolic link (/bin/sleep
// where /bin links to /usr/bin) spares it after a restart too: the
// restored rule is resolved again.
func TestServeKeepExeResolvedAfterRestart(t *testing.T) {
	resolved, err := filepath.EvalSymlinks("/bin/sleep")
	if err != nil || resolved == "/bin/sleep" {
		t.Skipf("/bin/sleep is not a symbolic link here (%s, %v)", resolved, err)
	}
	d := startDaemon(t, "")
	mark := testutil.Marker(t)
	testutil.CheckNoLeaks(t, mark)
	rule, err := policy.KeepExe("/bin/sleep")
	if err != nil {
		t.Fatal(err)
	}
	d.do("POST", "/v1/sessions", api.OpenSession{ID: "kl", Kind: "autonomous", Keep: []policy.Keep{rule}}, nil)
	d.execRoot("kl", "autonomous", fmt.Sprintf("setsid sleep %s & sleep 0.2", testutil.Sleep(mark)))
	left := atLeastSleepers(t, mark, 1)
	t.Cleanup(func() {
		for _, p := range left {
			testutil.KillIdentity(p.PID, p.StartTicks)
		}
	})
	d.stop()
	d.start()
	d.do("POST", "/v1/sessions/kl/turn-end", nil, nil)
	allAlive(t, left)
	d.do("POST", "/v1/sessions/kl/close", nil, nil)
}
