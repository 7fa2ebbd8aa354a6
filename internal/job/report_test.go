package job

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lineage-dev/lineage/internal/loader"
	"github.com/lineage-dev/lineage/internal/proc"
	"github.com/lineage-dev/lineage/internal/reap"
	"github.com/lineage-dev/lineage/lineage"
	"github.com/lineage-dev/lineage/policy"
)

var update = flag.Bool("update", false, "rewrite testdata/report from the current code")

func TestReportText(t *testing.T) {
	root := lineage.Identity{PID: 100, StartTicks: 5}
	leak := lineage.Identity{PID: 101, StartTicks: 6}
	r := &Report{
		Command: []string{"sh", "-c", "sleep 1 &"},
		Root:    root,
		Backend: loader.Choice{Backend: "bpf"},
		JobTook: 1500 * time.Millisecond,
		Reap: &reap.Report{Containment: "kernel", Outcomes: []reap.Outcome{
			{Member: lineage.Member{Identity: leak, Parent: root}, Argv: []string{"sleep", "1"}, Signal: "TERM", Result: lineage.Terminated},
		}},
		Decision: "reap: the root exited",
		Stats:    loader.Stats{EventsLost: 3, Undecodable: 2, Unattributed: 1},
	}
	r.SetStatus(0)
	r.WarnLosses("bpf")
	var out bytes.Buffer
	r.WriteText(&out, TextOptions{})
	text := out.String()
	for _, want := range []string{"job sh -c 'sleep 1 &': exit 0 after 1.5s (backend bpf)", "1 process left behind", "101@6", "TERM", "terminated", "sleep 1", "3 events lost", "2 events could not be decoded", "1 orphan could not be attributed"} {
		if !strings.Contains(text, want) {
			t.Errorf("report lacks %q:\n%s", want, text)
		}
	}
}

// One of a thing is said in the singular.
func TestWarningsSayOneInTheSingular(t *testing.T) {
	r := &Report{Stats: loader.Stats{EventsLost: 1, Undecodable: 1, Unattributed: 1}}
	r.WarnLosses("bpf")
	want := []string{"1 event lost: ", "1 event could not be decoded ", "1 orphan could not be attributed "}
	if len(r.Warnings) != len(want) {
		t.Fatalf("warnings %q", r.Warnings)
	}
	for i, w := range want {
		if !strings.HasPrefix(r.Warnings[i], w) {
			t.Errorf("warning %q, want it to start %q", r.Warnings[i], w)
		}
	}
}

// TestReportGolden holds the text and JSON forms to what they were when the
// report lived in cmd/lineage: both are interfaces people and scripts read.
func TestReportGolden(t *testing.T) {
	dir := filepath.Join("testdata", "report")
	for name, mk := range goldenReports() {
		for _, opts := range []TextOptions{{}, {Verbose: true}, {Quiet: true}, {Verbose: true, Quiet: true}} {
			var out bytes.Buffer
			mk().WriteText(&out, opts)
			checkGolden(t, filepath.Join(dir, fmt.Sprintf("%s-v%t-q%t.txt", name, opts.Verbose, opts.Quiet)), out.Bytes())
		}
		path := filepath.Join(t.TempDir(), "report.json")
		if err := mk().WriteJSONFile(path); err != nil {
			t.Fatal(err)
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		checkGolden(t, filepath.Join(dir, name+".json"), raw)
		var back Report
		if err := json.Unmarshal(raw, &back); err != nil || back.Version != ReportVersion {
			t.Errorf("%s: read back: version %d, %v", name, back.Version, err)
		}
	}
}

func checkGolden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs:\n--- want\n%s\n--- got\n%s", path, want, got)
	}
}

func TestWriteJSONFileFails(t *testing.T) {
	r := &Report{}
	err := r.WriteJSONFile(filepath.Join(t.TempDir(), "no such dir", "r.json"))
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("got %v, want a missing directory", err)
	}
}

// TestReportFromSteps checks what the decision records (the wait's end is
// jobrun's: TestRootFill).
func TestReportFromSteps(t *testing.T) {
	for _, c := range []struct {
		name    string
		end     End
		reaping policy.Reaping
		kept    bool
		check   func(t *testing.T, r *Report)
	}{
		{name: "exit", end: End{Exited: true, Status: 3 << 8}, check: func(t *testing.T, r *Report) {
			if r.Decision != "reap: the root exited" || r.Reaping != (policy.Reaping{}).String() {
				t.Errorf("decision %q, reaping %q", r.Decision, r.Reaping)
			}
		}},
		{name: "signal", end: End{Exited: true, Status: 9, Interrupted: os.Interrupt}, check: func(t *testing.T, r *Report) {
			if r.Decision != "reap: the root exited" {
				t.Errorf("decision %q", r.Decision)
			}
		}},
		{name: "deadline", end: End{Deadline: true}, check: func(t *testing.T, r *Report) {
			if r.Decision != "reap: the deadline passed" {
				t.Errorf("decision %q", r.Decision)
			}
		}},
		{name: "off", end: End{Exited: true}, reaping: policy.Reaping{Off: true, By: "LINEAGE_REAPING=off"}, check: func(t *testing.T, r *Report) {
			if !strings.HasPrefix(r.Decision, "report: reaping is off") || r.Reaping != "off (LINEAGE_REAPING=off)" {
				t.Errorf("decision %q, reaping %q", r.Decision, r.Reaping)
			}
		}},
		{name: "kept", end: End{Exited: true}, kept: true, check: func(t *testing.T, r *Report) {
			if !strings.HasPrefix(r.Decision, "report: the root is kept on purpose") {
				t.Errorf("decision %q", r.Decision)
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var r Report
			r.Decided(policy.Decide(policy.Input{Event: c.end.Event(), Reaping: c.reaping, Kept: c.kept}), c.reaping)
			c.check(t, &r)
		})
	}
}

func TestLeftBehind(t *testing.T) {
	root := lineage.Identity{PID: 100, StartTicks: 5}
	other := lineage.Identity{PID: 101, StartTicks: 6}
	reaped := &Report{Root: root, Reap: &reap.Report{Outcomes: []reap.Outcome{
		{Member: lineage.Member{Identity: root}}, {Member: lineage.Member{Identity: other}, Result: lineage.Vanished},
	}}}
	if n, v := reaped.LeftBehind(), reaped.Vanished(); n != 1 || v != 1 {
		t.Errorf("reaped: %d left behind, %d vanished; want 1, 1", n, v)
	}
	reported := &Report{Root: root, Leftovers: []Leftover{{Member: lineage.Member{Identity: root}}}}
	if n := reported.LeftBehind(); n != 0 {
		t.Errorf("reported: %d left behind, want 0: the root is not a leftover", n)
	}
}

// TestReportFill checks that reap outcomes are completed from the event
// tree, never overwritten by it.
func TestReportFill(t *testing.T) {
	root := lineage.Identity{PID: 100, StartTicks: 5}
	child := lineage.Identity{PID: 101, StartTicks: 6}
	born := lineage.Identity{PID: 102, StartTicks: 7}
	tree := lineage.NewTree()
	for _, ev := range []lineage.Event{
		{Kind: lineage.EventFork, Process: root, Root: root, IsRoot: true, Comm: "sh"},
		{Kind: lineage.EventFork, Process: child, Parent: root, Root: root, Comm: "sh"},
		{Kind: lineage.EventExec, Process: child, Root: root, Comm: "sleep", Filename: "/bin/sleep", Argv: []string{"sleep", "9"}},
		{Kind: lineage.EventExit, Process: child, Root: root, Status: 15},
		{Kind: lineage.EventFork, Process: born, Parent: child, Root: root, Contained: true},
	} {
		tree.Apply(ev)
	}
	own := lineage.ExitStatus(9)
	r := &Report{Root: root, Reap: &reap.Report{Outcomes: []reap.Outcome{
		{Member: lineage.Member{Identity: root}, Argv: []string{"sh", "-c", "x"}, Status: &own},
		{Member: lineage.Member{Identity: child}},
	}}}
	r.Fill(tree)
	if len(r.Contained) != 1 || r.Contained[0] != born {
		t.Errorf("contained %v, want [%v]", r.Contained, born)
	}
	rootOut, childOut := r.Reap.Outcomes[0], r.Reap.Outcomes[1]
	if len(rootOut.Argv) != 3 || rootOut.Member.Comm != "sh" || *rootOut.Status != own {
		t.Errorf("root outcome %+v: its own argv and status must stay, its comm come from the tree", rootOut)
	}
	if len(childOut.Argv) != 2 || childOut.Member.Comm != "sleep" || childOut.Status == nil || *childOut.Status != 15 {
		t.Errorf("child outcome %+v, want argv, comm and status from the tree", childOut)
	}
}

// The proc backend's limit is true of a run with no record too.
func TestProcLimitNamesNoRecordItMayNotHave(t *testing.T) {
	r := &Report{}
	r.WarnLosses(loader.BackendProc)
	if len(r.Limits) != 1 || strings.Contains(r.Limits[0], "in the record") || !strings.Contains(r.Limits[0], "between two scans is never seen") {
		t.Errorf("limits %q", r.Limits)
	}
}

// The table lists every signal the reaper sent, in order, as lineage
// report shows them from the record: the proc backend's stop first, and
// the CONT that lets the stopped member act on its TERM.
func TestTableListsTheSignalsSent(t *testing.T) {
	root := lineage.Identity{PID: 100, StartTicks: 5}
	r := &Report{
		Command: []string{"sh"}, Root: root, Backend: loader.Choice{Backend: loader.BackendProc}, Decision: "reap: the root exited",
		Reap: &reap.Report{Containment: lineage.ContainStop, Outcomes: []reap.Outcome{
			{Member: lineage.Member{Identity: lineage.Identity{PID: 101, StartTicks: 6}, Parent: root}, Argv: []string{"sleep", "1"},
				Signal: "TERM", Sent: []string{"STOP", "TERM", "CONT"}, Result: lineage.Terminated},
			{Member: lineage.Member{Identity: lineage.Identity{PID: 102, StartTicks: 6}, Parent: root}, Argv: []string{"sleep", "2"},
				Signal: "KILL", Sent: []string{"STOP", "TERM", "CONT", "KILL"}, Result: lineage.Killed},
		}},
	}
	r.SetStatus(0)
	var out bytes.Buffer
	r.WriteText(&out, TextOptions{})
	for _, want := range []string{"SIGNALS", "STOP→TERM→CONT       terminated", "STOP→TERM→CONT→KILL  killed"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("no %q in:\n%s", want, out.String())
		}
	}
}

// Redact masks the secret in every command line the report holds, and
// nothing else.
func TestReportRedactMasksEveryCommandLine(t *testing.T) {
	id := lineage.Identity{PID: 10, StartTicks: 5}
	secret := []string{"deploy", "--token=abc123", "x"}
	rep := &Report{
		Command:   slices.Clone(secret),
		Leftovers: []Leftover{{Member: lineage.Member{Identity: id, Argv: slices.Clone(secret)}, Argv: slices.Clone(secret)}},
		Reap:      &reap.Report{Outcomes: []reap.Outcome{{Member: lineage.Member{Identity: id, Argv: slices.Clone(secret)}, Argv: slices.Clone(secret)}}},
	}
	rep.Redact(regexp.MustCompile(`token=\S+`))
	want := []string{"deploy", "--***", "x"}
	for what, got := range map[string][]string{
		"command":         rep.Command,
		"leftover":        rep.Leftovers[0].Argv,
		"leftover member": rep.Leftovers[0].Member.Argv,
		"reaped":          rep.Reap.Outcomes[0].Argv,
		"reaped member":   rep.Reap.Outcomes[0].Member.Argv,
	} {
		if !slices.Equal(got, want) {
			t.Errorf("%s: %q, want %q", what, got, want)
		}
	}
	var buf bytes.Buffer
	rep.WriteText(&buf, TextOptions{Verbose: true})
	if strings.Contains(buf.String(), "abc123") {
		t.Errorf("the text report shows the secret:\n%s", buf.String())
	}
	rep.Redact(nil) // masks nothing, and doesn't fail
}

// The job's own row names no parent (its parent is lineage), whatever the
// backend knows of it; a member's names its lineage parent, and one the
// tracker never knew the parent of shows "?".
func TestParentTextOfTheJob(t *testing.T) {
	root := lineage.Identity{PID: 300, StartTicks: 30}
	r := &Report{Root: root}
	for _, c := range []struct {
		m    lineage.Member
		want string
	}{
		{lineage.Member{Identity: root, Parent: lineage.Identity{PID: 299, StartTicks: 29}}, "-"},
		{lineage.Member{Identity: lineage.Identity{PID: 301, StartTicks: 31}, Parent: root}, "300"},
		{lineage.Member{Identity: lineage.Identity{PID: 302, StartTicks: 32}, Root: root}, "?"},
	} {
		if got := r.parentText(c.m); got != c.want {
			t.Errorf("parent of %v: %q, want %q", c.m.Identity, got, c.want)
		}
	}
}

// A leftover younger than one clock tick is timed from its start tick, as a
// reap's outcomes are, not rounded down to no age at all.
func TestLeftoverYoungerThanATickHasAnAge(t *testing.T) {
	fs, err := proc.Open("/proc")
	if err != nil {
		t.Fatal(err)
	}
	now := lineage.DurationToTicks(proc.BootTime())
	var r Report
	// A pid no process has: /proc has nothing to add.
	r.AddLeftovers([]lineage.Member{{Identity: lineage.Identity{PID: 1 << 30, StartTicks: now}}}, lineage.NewTree(), fs)
	if age := r.Leftovers[0].Age; age <= 0 || age > time.Second {
		t.Errorf("a leftover started this tick is %v old", age)
	}
}
