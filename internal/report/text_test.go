package report

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lineage-dev/lineage/internal/record"
	"github.com/lineage-dev/lineage/lineage"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// golden compares got with testdata/NAME, or rewrites it under -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		must(t, os.MkdirAll("testdata", 0o755))
		must(t, os.WriteFile(path, got, 0o644))
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file (-update to accept):\n%s", name, got)
	}
}

func TestTextGolden(t *testing.T) {
	rep := build(t, fixture(t))
	for _, color := range []bool{false, true} {
		var buf bytes.Buffer
		must(t, rep.WriteText(&buf, TextOptions{Color: color}))
		name := "fixture.txt"
		if color {
			name = "fixture.color.txt"
		}
		golden(t, name, buf.Bytes())
	}
}

func TestTextEscapesWhatMembersControl(t *testing.T) {
	rep := build(t, fixture(t))
	var buf bytes.Buffer
	must(t, rep.WriteText(&buf, TextOptions{}))
	out := buf.String()
	if strings.ContainsAny(out, "\x1b\u202e") {
		t.Error("raw escape or bidi control in the text report")
	}
	for _, want := range []string{`$'</script>`, `\x1b[2J`, `\nline2`, `\xe2\x80\xae'`} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q", want)
		}
	}
	// Every line but the ones it writes itself starts with a tree glyph or
	// a known word: a newline in argv did not start a line of its own.
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "line2") {
			t.Errorf("argv newline broke the tree: %q", line)
		}
	}
}

func TestTreeShape(t *testing.T) {
	rep := build(t, fixture(t))
	s := rep.Summary
	if s.Processes != 10 || s.Roots != 1 || s.Leaks != 2 || s.Reaped != 1 || s.Kept != 1 || s.Lost != 2 {
		t.Errorf("summary %+v", s)
	}
	got := map[uint32]*Process{}
	rep.Walk(func(p *Process) bool { got[p.ID.PID] = p; return true })
	checks := []struct {
		pid, parent uint32
		depth       int
		outcome     lineage.Result
	}{
		{1000, 50, 0, lineage.Exited}, {1001, 1000, 1, lineage.Exited}, {1002, 1001, 2, lineage.Exited},
		{1012, 1011, 4, lineage.Exited}, {1020, 1001, 2, lineage.Killed}, {1030, 1000, 1, lineage.Kept},
	}
	for _, c := range checks {
		p := got[c.pid]
		if p == nil || p.Parent.PID != c.parent || p.Depth != c.depth || p.Outcome != c.outcome {
			t.Errorf("pid %d: %+v, want parent %d depth %d %s", c.pid, p, c.parent, c.depth, c.outcome)
		}
	}
	if d := got[1020]; !d.Leaked || strings.Join(d.Signals, ",") != "TERM,KILL" || d.Exit.String() != "signal KILL" {
		t.Errorf("daemon %+v", d)
	}
}

// recordOf is the record of events, its clocks at 100 s after boot, then
// at end when it closes.
func recordOf(t *testing.T, end time.Duration, events ...lineage.Event) []byte {
	t.Helper()
	var buf bytes.Buffer
	now := 100 * time.Second
	opts := &record.Options{Boot: func() time.Duration { return now }, Wall: func() time.Time { return time.Unix(1_770_000_000, 0).Add(now) }}
	w, err := record.NewWriter(&buf, record.Header{Lineage: "test", Host: "h", Kernel: "6.18.0"}, opts)
	must(t, err)
	for _, ev := range events {
		must(t, w.Event(ev))
	}
	now = end
	must(t, w.Close())
	return buf.Bytes()
}

// A member whose parent the record lacks (the proc backend never saw the
// fork of a double-forked daemon: parent 0) is drawn under its root, and
// the line says why, rather than as a root of its own.
func TestMemberWithoutItsParentIsDrawnUnderItsRoot(t *testing.T) {
	now := 100 * time.Second
	root, daemon, orphan := id(1000, 10000), id(1002, 10010), id(1003, 10011)
	lost := id(1001, 10005) // a parent the record never names
	rep := build(t, recordOf(t, now+3*time.Millisecond,
		lineage.Event{Kind: lineage.EventFork, Time: now, Process: root, Parent: id(50, 100), Root: root, IsRoot: true},
		lineage.Event{Kind: lineage.EventExec, Time: now, Process: root, Parent: id(50, 100), Root: root, Argv: []string{"sh", "-c", "x"}, Filename: "/bin/sh"},
		lineage.Event{Kind: lineage.EventExec, Time: now + time.Millisecond, Process: daemon, Root: root, Argv: []string{"sleep", "600"}, Filename: "/bin/sleep"},
		lineage.Event{Kind: lineage.EventExec, Time: now + time.Millisecond, Process: orphan, Parent: lost, Root: root, Argv: []string{"sleep", "601"}, Filename: "/bin/sleep"},
		lineage.Event{Kind: lineage.EventExit, Time: now + 2*time.Millisecond, Process: root, Parent: id(50, 100), Root: root},
	))
	if len(rep.tops) != 1 || rep.tops[0].ID != root {
		t.Fatalf("tops %v, want the root alone", rep.tops)
	}
	under := map[lineage.Identity]*Process{}
	for _, c := range rep.tops[0].Children() {
		under[c.ID] = c
	}
	for _, p := range []lineage.Identity{daemon, orphan} {
		if c := under[p]; c == nil || !c.UnderRoot {
			t.Errorf("%v is not drawn under its root: %+v", p, c)
		}
	}
	var text bytes.Buffer
	must(t, rep.WriteText(&text, TextOptions{}))
	for _, want := range []string{"[parent unknown]", "[parent 1001@10005 not in the record]"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("the tree lacks %q:\n%s", want, text.String())
		}
	}
}

// A process that exec'd more than once is named by its last exec, and
// the report keeps the ones before: the shell that became the daemon.
func TestEarlierExecsAreKept(t *testing.T) {
	now := 100 * time.Second
	root, daemon := id(1000, 10000), id(1001, 10001)
	rep := build(t, recordOf(t, now+6*time.Millisecond,
		lineage.Event{Kind: lineage.EventFork, Time: now, Process: root, Parent: id(50, 100), Root: root, IsRoot: true},
		lineage.Event{Kind: lineage.EventExec, Time: now, Process: root, Parent: id(50, 100), Root: root, Argv: []string{"sh", "-c", "x"}, Filename: "/bin/sh"},
		lineage.Event{Kind: lineage.EventFork, Time: now + time.Millisecond, Process: daemon, Parent: root, Root: root},
		lineage.Event{Kind: lineage.EventExec, Time: now + 2*time.Millisecond, Process: daemon, Parent: root, Root: root, Argv: []string{"sh", "-c", "exec env A=1 redis-server"}, Filename: "/bin/sh"},
		lineage.Event{Kind: lineage.EventExec, Time: now + 3*time.Millisecond, Process: daemon, Parent: root, Root: root, Argv: []string{"env", "A=1", "redis-server"}, Filename: "/usr/bin/env"},
		lineage.Event{Kind: lineage.EventExec, Time: now + 4*time.Millisecond, Process: daemon, Parent: root, Root: root, Argv: []string{"redis-server"}, Filename: "/usr/bin/redis-server"},
		lineage.Event{Kind: lineage.EventExit, Time: now + 5*time.Millisecond, Process: root, Parent: id(50, 100), Root: root},
	))
	var p *Process
	rep.Walk(func(q *Process) bool {
		if q.ID == daemon {
			p = q
		}
		return true
	})
	if p == nil {
		t.Fatal("the daemon is not in the report")
	}
	if got := CommandLine(p); got != "redis-server" || p.Exe != "/usr/bin/redis-server" {
		t.Errorf("the daemon is named %q (%s), want its last exec", got, p.Exe)
	}
	if len(p.Earlier) != 2 || p.Earlier[0].Exe != "/bin/sh" || p.Earlier[1].Argv[0] != "env" || p.Earlier[0].At != 100*time.Second+2*time.Millisecond {
		t.Errorf("earlier execs %+v, want sh then env", p.Earlier)
	}
	if r := rep.tops[0]; len(r.Earlier) != 0 {
		t.Errorf("the root exec'd once, but has earlier execs %+v", r.Earlier)
	}
	var text bytes.Buffer
	must(t, rep.WriteText(&text, TextOptions{}))
	if want := `[was: sh -c 'exec env A=1 redis-server', then env A=1 redis-server]`; !strings.Contains(text.String(), want) {
		t.Errorf("the tree lacks %q:\n%s", want, text.String())
	}
	var js bytes.Buffer
	must(t, rep.WriteJSON(&js))
	if !strings.Contains(js.String(), `"earlier_execs":[{"at_ns":100002000000,"exe":"/bin/sh","argv":["sh","-c","exec env A=1 redis-server"]}`) {
		t.Errorf("the JSON lacks the earlier execs:\n%s", js.String())
	}
	var page bytes.Buffer
	must(t, rep.WriteHTML(&page))
	if want := `"cmd":"redis-server","was":["sh -c 'exec env A=1 redis-server'","env A=1 redis-server"]`; !strings.Contains(page.String(), want) {
		t.Errorf("the page's data lacks %s", want)
	}
}
