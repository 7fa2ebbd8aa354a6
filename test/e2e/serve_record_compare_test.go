package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lineage-dev/lineage/internal/record"
	"github.com/lineage-dev/lineage/internal/testutil"
	"github.com/lineage-dev/lineage/lineage"
)

// comparedJob leaves three leftovers behind: a sleeper, a sleeper in a
// session of its own, and a shell that ignores SIGTERM with its sleeper
// (which inherits the ignored TERM), so the reaper must kill both. It
// ends once all of them run (the test writes the FIFO, %[2]s, when it sees
// the three sleepers), after a short-lived /bin/true. %[1]s is a marked
// sleep argument. Every process execs a program of its own, so its last
// argv names it in both records.
const comparedJob = `sleep %[1]s1 & setsid sleep %[1]s2 & sh -c 'trap "" TERM; sleep %[1]s3; exit 0' termless & /bin/true quick; read x < %[2]s; exit 0`

// comparedProcess is what both records must say alike of one process,
// named by its last exec's argv: what legitimately differs between a
// standalone run and the same job through a daemon is left out.
//
//   - times (boot_ns, wall) and pids: two runs of one job;
//   - the header: the daemon's names the session, the standalone's the
//     command;
//   - the reasons: the standalone's say why its job ended ("root exited"),
//     the daemon's which event settled it ("turn-end");
//   - the order of a process's exit and the reap's signal events: exits
//     come from the tracker's events as they happen, signals once the reap
//     is done (what a signal did is its result, in both);
//   - the root's fork: lineage run forks its root, and the record has that
//     fork; lineage exec registers itself, then becomes the command, so the
//     daemon saw no fork of it.
type comparedProcess struct {
	Parent  string   // the parent's name
	Execs   []string // each exec's argv
	Forks   int
	Exits   int
	Leaks   int
	Signals []string // each signal sent, in order, the last with its result
	Keeps   int
	Exit    string // how it ended
	IsRoot  bool
}

// A standalone record and a daemon's per-session record of the same leaky
// job say the same of each of its processes: kinds, lineage parents, leak
// marks, the signals with their results, exit statuses; and `lineage
// report --format json` of each says the same (leaked, outcome, signals,
// result, exit).
func TestServeRecordSaysWhatAStandaloneRecordSays(t *testing.T) {
	requireBackend(t, "bpf")
	mark := testutil.Marker(t)
	testutil.CheckNoLeaks(t, mark)
	s := testutil.Sleep(mark)

	// Standalone. Both runs read one FIFO, so that the root's argv is the
	// same.
	fifo := makeFIFO(t)
	standalone := filepath.Join(t.TempDir(), "standalone.jsonl")
	go releaseWhenRunning(s, fifo)
	res := runJob(t, mark, nil, "--backend", "bpf", "--record", standalone, "--", "sh", "-c", fmt.Sprintf(comparedJob, s, fifo))
	if res.code != 0 {
		t.Fatalf("lineage run: exit %d:\n%s", res.code, res.stderr)
	}

	// The same job through a daemon, reaped at an autonomous turn end.
	dir := filepath.Join(t.TempDir(), "records")
	d := startDaemon(t, "", "--record-dir", dir)
	go releaseWhenRunning(s, fifo)
	d.execRoot("cmp", "autonomous", fmt.Sprintf(comparedJob, s, fifo))
	d.do("POST", "/v1/sessions/cmp/turn-end", nil, nil)
	d.do("POST", "/v1/sessions/cmp/close", nil, nil)
	for _, n := range []string{"1", "2", "3"} {
		allGone(t, sleepers(s+n))
	}
	var daemonRecord string
	waitFor(t, "the daemon's record of every exit", func() bool {
		files := recordFiles(t, dir)
		if len(files) != 1 {
			return false
		}
		daemonRecord = filepath.Join(dir, files[0])
		procs := recordedProcesses(t, daemonRecord)
		return len(procs) > 0 && allEnded(procs)
	})

	want, got := recordedProcesses(t, standalone), recordedProcesses(t, daemonRecord)
	if !allEnded(want) {
		t.Errorf("standalone record: a process has no exit: %+v", want)
	}
	if leaks := countLeaks(want); leaks != 4 {
		t.Errorf("standalone record: %d leaks, want the 4 leftovers", leaks)
	}
	compareRecorded(t, want, got)
	compareReports(t, reportRecord(t, standalone), reportRecord(t, daemonRecord))
	if t.Failed() {
		for _, p := range []string{standalone, daemonRecord} {
			raw, _ := os.ReadFile(p)
			t.Logf("%s:\n%s", p, raw)
		}
	}
}

// makeFIFO makes a FIFO in a temp dir.
func makeFIFO(t *testing.T) string {
	t.Helper()
	fifo := filepath.Join(t.TempDir(), "go")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	return fifo
}

// releaseWhenRunning writes a line to fifo once the three sleepers of
// comparedJob run, their arguments s1, s2 and s3 (or after a minute, so the
// job ends anyway; the comparison then fails on what is missing).
func releaseWhenRunning(s, fifo string) {
	testutil.Until(time.Minute, func() bool {
		for _, n := range []string{"1", "2", "3"} {
			if len(testutil.Sleepers(s+n)) == 0 {
				return false
			}
		}
		return true
	})
	if f, err := os.OpenFile(fifo, os.O_WRONLY, 0); err == nil {
		_, _ = f.WriteString("\n")
		f.Close()
	}
}

// recordedProcesses reads a record's events into one comparedProcess per
// process, by name.
func recordedProcesses(t *testing.T, path string) map[string]*comparedProcess {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var events []record.Event
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for first := true; sc.Scan(); first = false {
		if first {
			continue // the header
		}
		var ev record.Event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			continue // a line still being written
		}
		events = append(events, ev)
	}
	// A process is named by its last exec's argv.
	names := map[lineage.Identity]string{}
	for _, ev := range events {
		if ev.Kind == record.KindExec {
			names[ev.Process] = strings.Join(ev.Argv, " ")
		}
	}
	out := map[string]*comparedProcess{}
	for _, ev := range events {
		if ev.Process.IsZero() {
			continue // a loss
		}
		name, ok := names[ev.Process]
		if !ok {
			name = "unnamed " + ev.Process.String()
		}
		p := out[name]
		if p == nil {
			p = &comparedProcess{}
			out[name] = p
		}
		if !ev.Parent.IsZero() {
			if pn, ok := names[ev.Parent]; ok {
				p.Parent = pn
			}
		}
		switch ev.Kind {
		case record.KindFork:
			p.Forks++
			p.IsRoot = p.IsRoot || ev.IsRoot
		case record.KindExec:
			p.Execs = append(p.Execs, strings.Join(ev.Argv, " "))
		case record.KindExit:
			p.Exits++
			p.Exit = ev.Exit.String()
		case record.KindLeak:
			p.Leaks++
		case record.KindKeep:
			p.Keeps++
		case record.KindSignal:
			sig := ev.Signal
			if ev.Result != "" {
				sig += " " + ev.Result
			}
			p.Signals = append(p.Signals, sig)
		}
	}
	return out
}

func allEnded(procs map[string]*comparedProcess) bool {
	for _, p := range procs {
		if p.Exits == 0 {
			return false
		}
	}
	return true
}

func countLeaks(procs map[string]*comparedProcess) int {
	n := 0
	for _, p := range procs {
		n += p.Leaks
	}
	return n
}

// compareRecorded compares two records' processes field by field.
func compareRecorded(t *testing.T, want, got map[string]*comparedProcess) {
	t.Helper()
	for _, name := range sortedKeys(want, got) {
		w, g := want[name], got[name]
		if w == nil || g == nil {
			t.Errorf("process %q: in the standalone record %v, in the daemon's %v", name, w != nil, g != nil)
			continue
		}
		// The root's fork: see comparedProcess.
		if w.IsRoot {
			w, g = clone(w), clone(g)
			w.Forks, w.IsRoot, w.Parent = 0, false, ""
			g.Parent = ""
		}
		wv, gv := reflect.ValueOf(*w), reflect.ValueOf(*g)
		for i := range wv.NumField() {
			if !reflect.DeepEqual(wv.Field(i).Interface(), gv.Field(i).Interface()) {
				t.Errorf("process %q: %s: standalone %v, daemon %v", name, wv.Type().Field(i).Name, wv.Field(i), gv.Field(i))
			}
		}
	}
}

func clone(p *comparedProcess) *comparedProcess { c := *p; return &c }

func sortedKeys[V any](ms ...map[string]V) []string {
	var keys []string
	for _, m := range ms {
		for k := range m {
			if !slices.Contains(keys, k) {
				keys = append(keys, k)
			}
		}
	}
	slices.Sort(keys)
	return keys
}

// compareReports compares what `lineage report --format json` says of
// each process of the two records, by argv: times, pids and the header
// legitimately differ.
func compareReports(t *testing.T, want, got reportedRecord) {
	t.Helper()
	type said struct {
		Ended   bool
		Signals []string
		Result  string
		Leaked  bool
		IsRoot  bool
		Outcome string
		Exit    string
	}
	byArgv := func(rec reportedRecord) map[string]said {
		out := map[string]said{}
		for _, p := range rec.Processes {
			s := said{Ended: p.Ended, Signals: p.Signals, Result: p.Result, Leaked: p.Leaked, IsRoot: p.IsRoot, Outcome: p.Outcome}
			if p.Exit != nil && p.Exit.Code != nil {
				s.Exit = fmt.Sprint(*p.Exit.Code)
			}
			out[strings.Join(p.Argv, " ")] = s
		}
		return out
	}
	w, g := byArgv(want), byArgv(got)
	for _, argv := range sortedKeys(w, g) {
		if !reflect.DeepEqual(w[argv], g[argv]) {
			t.Errorf("lineage report of %q: standalone %+v, daemon %+v", argv, w[argv], g[argv])
		}
	}
}
