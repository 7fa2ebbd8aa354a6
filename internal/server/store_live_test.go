package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lineage-dev/lineage/api"
	"github.com/lineage-dev/lineage/internal/loader"
	"github.com/lineage-dev/lineage/internal/server/store"
	"github.com/lineage-dev/lineage/internal/testutil"
	"github.com/lineage-dev/lineage/internal/tracker"
	"github.com/lineage-dev/lineage/lineage"
)

// liveServer is a Server with a state directory, served on a socket in a
// temporary directory, and the processes a test started for it.
type liveServer struct {
	t     *testing.T
	srv   *Server
	dir   string
	http  *http.Client
	mark  string
	procs []*exec.Cmd
}

func startLiveServer(t *testing.T) *liveServer {
	t.Helper()
	dir := t.TempDir()
	sock := filepath.Join(dir, "lineage.sock")
	ln, err := Listen(sock, ListenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := Open(Options{Tracker: tracker.TrackerOptions{Backend: loader.BackendBPF}, StateDir: filepath.Join(dir, "state"), Grace: time.Second})
	if err != nil {
		ln.Close()
		testutil.SkipWithoutBPF(t, err)
		t.Fatal(err)
	}
	l := &liveServer{t: t, srv: srv, dir: filepath.Join(dir, "state"), mark: testutil.Marker(t)}
	l.http = &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
	go srv.Serve(ln)
	testutil.CheckNoLeaks(t, l.mark)
	t.Cleanup(func() {
		srv.Close()
		for _, c := range l.procs {
			testutil.KillIdentity(c.Process.Pid, startTicks(c.Process.Pid))
			c.Wait()
		}
	})
	return l
}

func startTicks(pid int) uint64 {
	start, _, err := testutil.StartTicks(pid)
	if err != nil {
		return 0 // gone: nothing to kill
	}
	return start
}

// do sends a request and decodes a 2xx answer into out.
func (l *liveServer) do(method, path string, body, out any) {
	l.t.Helper()
	var in io.Reader
	if body != nil {
		data, _ := json.Marshal(body)
		in = bytes.NewReader(data)
	}
	req, _ := http.NewRequest(method, "http://lineage"+path, in)
	resp, err := l.http.Do(req)
	if err != nil {
		l.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		l.t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, data)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			l.t.Fatalf("%s %s: %v", method, path, err)
		}
	}
}

// root starts a sleep and registers it as a root of session sid, which
// exists (its kind is its own).
func (l *liveServer) root(sid string) lineage.Identity {
	l.t.Helper()
	c := exec.Command("sleep", testutil.Sleep(l.mark))
	if err := c.Start(); err != nil {
		l.t.Fatal(err)
	}
	l.procs = append(l.procs, c)
	start, _, err := testutil.StartTicks(c.Process.Pid)
	if err != nil {
		l.t.Fatal(err)
	}
	l.do("POST", "/v1/roots", api.AddRoot{PID: int64(c.Process.Pid), Start: start, Session: sid}, nil)
	return lineage.Identity{PID: uint32(c.Process.Pid), StartTicks: start}
}

// The live server's sessions, after opens, registrations, keeps and
// closes, are what its state directory reads back as, crashed (no
// compaction: a snapshot and its journal) and closed (one snapshot).
func TestJournalRoundTripThroughTheServer(t *testing.T) {
	l := startLiveServer(t)
	for i := range 6 {
		l.do("POST", "/v1/sessions", api.OpenSession{ID: fmt.Sprint("s", i), Kind: "autonomous", Label: fmt.Sprint("session ", i)}, nil)
	}
	var kept []lineage.Identity
	for i := range 12 {
		id := l.root(fmt.Sprint("s", i%6))
		if i%4 == 0 {
			l.do("POST", "/v1/keeps", api.AddKeep{Process: id.String(), Root: true}, nil)
			kept = append(kept, id)
		}
	}
	l.do("POST", "/v1/keeps", api.AddKeep{Process: kept[1].String(), TTL: "1h"}, nil)
	l.do("POST", "/v1/sessions/s1/close", nil, nil)
	l.do("POST", "/v1/sessions/s3/close", nil, nil)
	l.do("POST", "/v1/sessions", api.OpenSession{ID: "late", Kind: "interactive"}, nil)
	l.root("late")

	var live []api.Session
	l.do("GET", "/v1/sessions", nil, &live)
	if len(live) != 5 {
		t.Fatalf("%d sessions live, want 5", len(live))
	}
	want := store.State{NextID: l.srv.nextIDNow(), Sessions: live}
	if lines := journalLines(t, l.dir); len(lines) < 10 {
		t.Errorf("%d journal lines for some 25 changes", len(lines))
	}
	crashed, log := loaded(t, l.dir)
	sameSessions(t, withoutMembers(crashed), want)
	if log != "" {
		t.Errorf("notes: %s", log)
	}
	if err := l.srv.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(l.dir, store.JournalName)); !os.IsNotExist(err) {
		t.Errorf("a journal after a clean close: %v", err)
	}
	sameSessions(t, withoutMembers(readSnapshot(t, l.dir)), want)
}

// withoutMembers is st without the roots' members, which the state lists
// (for a tracker that isn't pinned) and the API's session views don't.
func withoutMembers(st store.State) store.State {
	for i := range st.Sessions {
		for k := range st.Sessions[i].Roots {
			st.Sessions[i].Roots[k].Members = nil
		}
	}
	return st
}

// nextIDNow is the server's next session number.
func (s *Server) nextIDNow() int {
	s.reg.mu.Lock()
	defer s.reg.mu.Unlock()
	return s.reg.nextID
}

// A request's save writes the session it changed, whatever else is open:
// with 200 sessions open, a registration appends one line holding that
// session alone.
func TestServerSavesWhatARequestChanged(t *testing.T) {
	l := startLiveServer(t)
	for i := range 200 {
		l.do("POST", "/v1/sessions", api.OpenSession{ID: fmt.Sprint("idle", i), Kind: "autonomous"}, nil)
	}
	l.do("POST", "/v1/sessions", api.OpenSession{ID: "busy", Kind: "autonomous"}, nil)
	before := len(journalLines(t, l.dir))
	l.root("busy")
	lines := journalLines(t, l.dir)
	if len(lines) != before+1 {
		t.Fatalf("%d journal lines after a registration, want %d", len(lines), before+1)
	}
	var rec struct {
		Sessions []api.Session `json:"sessions"`
		Removed  []string      `json:"removed"`
	}
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &rec); err != nil {
		t.Fatal(err)
	}
	if len(rec.Sessions) != 1 || rec.Sessions[0].ID != "busy" || len(rec.Sessions[0].Roots) != 1 || len(rec.Removed) != 0 {
		t.Errorf("the registration's record %s: want session busy alone, with its root", lines[len(lines)-1])
	}
}

func journalLines(t *testing.T, dir string) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, store.JournalName))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
}

// loaded reads the state directory back as a restarting server would (the
// live server holds the directory's lock: a store opened takes none).
func loaded(t *testing.T, dir string) (store.State, string) {
	t.Helper()
	f, err := store.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	st, ok, err := f.Load(func(format string, args ...any) { fmt.Fprintf(&log, format, args...) })
	if err != nil || !ok {
		t.Fatalf("load: ok %v, %v", ok, err)
	}
	return st, log.String()
}

// readSnapshot is the snapshot's next id and sessions, as written.
func readSnapshot(t *testing.T, dir string) store.State {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, store.SnapshotName))
	if err != nil {
		t.Fatal(err)
	}
	var st store.State
	if err := json.Unmarshal(data, &st); err != nil {
		t.Fatal(err)
	}
	return st
}

// sameSessions fails t unless got holds the sessions of want, in any order,
// and its next id.
func sameSessions(t *testing.T, got, want store.State) {
	t.Helper()
	sorted := func(st store.State) string {
		ss := slices.Clone(st.Sessions)
		slices.SortFunc(ss, func(a, b api.Session) int { return strings.Compare(a.ID, b.ID) })
		data, _ := json.Marshal(ss)
		return fmt.Sprintf("next %d %s", st.NextID, data)
	}
	if g, w := sorted(got), sorted(want); g != w {
		t.Errorf("read back:\n%.2000s\nwant:\n%.2000s", g, w)
	}
}
