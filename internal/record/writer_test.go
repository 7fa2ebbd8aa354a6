package record

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/lineage-dev/lineage/internal/buildinfo"
	"github.com/lineage-dev/lineage/internal/reap"
	"github.com/lineage-dev/lineage/lineage"
)

// fixedClocks are a boot clock at 100 s and a wall clock at a fixed instant.
func fixedClocks() *Options {
	wall := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	return &Options{
		Boot: func() time.Duration { return 100 * time.Second },
		Wall: func() time.Time { return wall },
	}
}

func readAll(t *testing.T, data []byte) (*Reader, []Event) {
	t.Helper()
	r, err := NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("new reader: %v", err)
	}
	var evs []Event
	for {
		ev, err := r.Next()
		if err == io.EOF {
			return r, evs
		}
		if err != nil {
			t.Fatalf("next: %v", err)
		}
		evs = append(evs, ev)
	}
}

var (
	rootID  = lineage.Identity{PID: 100, StartTicks: 5000}
	childID = lineage.Identity{PID: 101, StartTicks: 5001}
	superID = lineage.Identity{PID: 99, StartTicks: 4000}
)

func TestWriterRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	w, err := NewWriter(&buf, Header{Lineage: "test", Host: "h", Kernel: "6.18"}, fixedClocks())
	if err != nil {
		t.Fatal(err)
	}
	status := lineage.ExitStatus(syscall.SIGKILL)
	steps := []error{
		w.Event(lineage.Event{Kind: lineage.EventFork, Time: 90 * time.Second, Process: rootID, Parent: superID, Root: rootID, IsRoot: true}),
		w.Event(lineage.Event{Kind: lineage.EventExec, Time: 91 * time.Second, Process: rootID, Root: rootID, Filename: "/bin/sh", Argv: []string{"sh", "-c", "x"}}),
		w.Event(lineage.Event{Kind: lineage.EventExit, Time: 95 * time.Second, Process: childID, Parent: rootID, Root: rootID, Status: status}),
		w.Leak(lineage.Member{Identity: childID, Parent: rootID, Root: rootID}, "root exited"),
		w.Loss(3),
		w.Loss(0),
		w.Reap(reap.Report{Outcomes: []reap.Outcome{{Member: lineage.Member{Identity: childID, Parent: rootID, Root: rootID}, Sent: []string{"TERM", "KILL"}, Result: lineage.Killed}}}, "deadline"),
	}
	for i, err := range steps {
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
	}
	r, evs := readAll(t, buf.Bytes())
	if h := r.Header(); h.Schema != SchemaName || h.Version != SchemaVersion || h.Host != "h" || h.Boot != 100*time.Second {
		t.Errorf("header %+v", h)
	}
	if len(r.Problems()) != 0 {
		t.Errorf("problems %v", r.Problems())
	}
	kinds := ""
	for _, ev := range evs {
		kinds += string(ev.Kind) + " "
	}
	if want := "fork exec exit leak loss signal signal "; kinds != want {
		t.Fatalf("kinds %q, want %q", kinds, want)
	}
	if got := evs[0].Wall; !got.Equal(time.Date(2026, 3, 1, 11, 59, 50, 0, time.UTC)) {
		t.Errorf("fork wall time %v: 10 s before the header's", got)
	}
	if evs[1].Exe != "/bin/sh" || strings.Join(evs[1].Argv, " ") != "sh -c x" {
		t.Errorf("exec %+v", evs[1])
	}
	if evs[2].Exit.String() != "signal KILL" {
		t.Errorf("exit %v", evs[2].Exit)
	}
	if evs[4].Count != 3 {
		t.Errorf("loss %+v", evs[4])
	}
	if last := evs[6]; last.Signal != "KILL" || last.Result != "killed" || last.Reason != "deadline" || evs[5].Signal != "TERM" {
		t.Errorf("signals %+v %+v", evs[5], last)
	}
}

func TestWriterRedacts(t *testing.T) {
	var buf bytes.Buffer
	opts := fixedClocks()
	opts.Redact = regexp.MustCompile(`token=\S+`)
	w, err := NewWriter(&buf, Header{Command: []string{"deploy", "token=abc"}}, opts)
	if err != nil {
		t.Fatal(err)
	}
	argv := []string{"curl", "-H", "token=s3cret", "x"}
	if err := w.Event(lineage.Event{Kind: lineage.EventExec, Process: rootID, Argv: argv}); err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(buf.Bytes(), []byte("s3cret")) || bytes.Contains(buf.Bytes(), []byte("abc")) {
		t.Fatalf("secret written: %s", buf.Bytes())
	}
	if argv[2] != "token=s3cret" {
		t.Error("the caller's argv was changed")
	}
	_, evs := readAll(t, buf.Bytes())
	if got := evs[0].Argv[2]; got != lineage.ArgvMask || !evs[0].Redacted {
		t.Errorf("argv[2] %q redacted %v", got, evs[0].Redacted)
	}
}

func TestWriterConcurrent(t *testing.T) {
	var buf bytes.Buffer
	w, err := NewWriter(&buf, Header{}, fixedClocks())
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				id := lineage.Identity{PID: uint32(1000*g + i + 2), StartTicks: 1}
				_ = w.Event(lineage.Event{Kind: lineage.EventExec, Process: id, Argv: []string{strings.Repeat("a", 300)}})
			}
		})
	}
	wg.Wait()
	r, evs := readAll(t, buf.Bytes())
	if len(evs) != 1600 || len(r.Problems()) != 0 {
		t.Fatalf("%d events, problems %v", len(evs), r.Problems())
	}
}

func TestCreateIsPrivate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "trace.jsonl")
	if err := os.WriteFile(path, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	w, err := Create(path, Header{}, fixedClocks())
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if mode := st.Mode().Perm(); mode != 0o600 {
		t.Errorf("mode %o, want 600", mode)
	}
	if err := w.Loss(1); !errors.Is(err, os.ErrClosed) {
		t.Errorf("write after close: %v", err)
	}
}

// TestExecIDs: an exec event's uid and euid reach the record when the
// tracker saw them, and are left out when it didn't.
func TestExecIDs(t *testing.T) {
	ev := lineage.Event{Kind: lineage.EventExec, Process: lineage.Identity{PID: 2, StartTicks: 3}}
	uid, euid := execIDs(ev)
	if uid != nil || euid != nil {
		t.Errorf("uid %v euid %v for an exec whose credentials are unknown", uid, euid)
	}
	ev.CredsKnown, ev.UID, ev.EUID = true, 1000, 0
	uid, euid = execIDs(ev)
	if uid == nil || euid == nil || *uid != 1000 || *euid != 0 {
		t.Errorf("uid %v euid %v, want 1000 and 0", uid, euid)
	}
}

func TestHostHeaderNamesTheBuild(t *testing.T) {
	var buf bytes.Buffer
	if _, err := NewWriter(&buf, HostHeader([]string{"true"}), nil); err != nil {
		t.Fatal(err)
	}
	var h Header
	if err := json.Unmarshal(buf.Bytes(), &h); err != nil {
		t.Fatal(err)
	}
	if want := buildinfo.Get(); h.Build == nil || *h.Build != want || h.Lineage != want.Version {
		t.Errorf("header %+v (build %+v), want lineage %s and build %+v", h, h.Build, want.Version, want)
	}
}
