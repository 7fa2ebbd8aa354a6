package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lineage-dev/lineage/internal/reap"
	"github.com/lineage-dev/lineage/internal/record"
	"github.com/lineage-dev/lineage/lineage"
)

// The processes of the gap fixture (lossRecord).
var (
	gapRoot   = id(3000, 10000) // complete
	gapA      = id(3001, 10001) // complete, before the gap
	gapB      = id(3002, 10025) // its fork was lost in the gap
	gapC      = id(3003, 10021) // its exit was lost in the gap
	gapD      = id(3004, 10050) // no exit, its last event after the gap
	gapE      = id(3005, 10022) // its exec was lost; the loss names it, with the kind
	gapF      = id(3006, 10023) // every event lost; the loss names it, without kinds
	gapG      = id(3007, 10060) // no fork, started after the gap
	gapL      = id(3008, 10010) // a leak, killed
	gapFrom   = 100200 * time.Millisecond
	gapTo     = 100300 * time.Millisecond
	gapLosses = uint64(6) // B's fork, C's exit, E's exec, F's fork, exec and exit
)

// lossRecord writes, through record.Writer as the tracker does, the record
// of a job whose ring buffer overflowed between +0.200 s and +0.300 s: the
// events that fell in that gap are missing. With placed, the loss says when
// it happened and names the two members the tracker knew (E and F);
// without, it carries only its count, as every loss did before.
// jobWriter writes a record of the job "sh job" to buf, on a clock that
// reads *now (boot time; the wall clock follows it).
func jobWriter(tb testing.TB, buf *bytes.Buffer, now *time.Duration) *record.Writer {
	tb.Helper()
	w, err := record.NewWriter(buf, record.Header{Lineage: "test", Host: "h", Kernel: "6.18", Command: []string{"sh", "job"}}, &record.Options{
		Boot: func() time.Duration { return *now },
		Wall: func() time.Time { return time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC).Add(*now) },
	})
	if err != nil {
		tb.Fatal(err)
	}
	return w
}

func lossRecord(tb testing.TB, placed bool) []byte {
	tb.Helper()
	var buf bytes.Buffer
	now := 100 * time.Second
	w := jobWriter(tb, &buf, &now)
	at := func(ms int) time.Duration { return 100*time.Second + time.Duration(ms)*time.Millisecond }
	ev := func(kind lineage.EventKind, ms int, p lineage.Identity, argv ...string) lineage.Event {
		e := lineage.Event{Kind: kind, Time: at(ms), Process: p, Parent: gapRoot, Root: gapRoot, Comm: "c"}
		switch {
		case p == gapRoot:
			e.Parent = id(50, 100)
		case kind == lineage.EventExec:
			e.Argv, e.Filename = argv, "/bin/"+argv[0]
		case kind == lineage.EventExit:
			e.Status = 0
		}
		return e
	}
	rootFork := ev(lineage.EventFork, 0, gapRoot)
	rootFork.IsRoot = true
	for _, e := range []lineage.Event{
		rootFork, ev(lineage.EventExec, 1, gapRoot, "sh", "job"),
		ev(lineage.EventFork, 10, gapA), ev(lineage.EventExec, 11, gapA, "a"), ev(lineage.EventExit, 100, gapA),
		ev(lineage.EventFork, 100, gapL), ev(lineage.EventExec, 101, gapL, "daemon"),
		ev(lineage.EventExec, 260, gapB, "b"), ev(lineage.EventExit, 400, gapB),
		ev(lineage.EventFork, 210, gapC), ev(lineage.EventExec, 215, gapC, "c"),
		ev(lineage.EventFork, 220, gapE), ev(lineage.EventExit, 280, gapE),
		ev(lineage.EventFork, 500, gapD), ev(lineage.EventExec, 510, gapD, "d"),
		ev(lineage.EventExec, 610, gapG, "g"), ev(lineage.EventExit, 620, gapG),
		ev(lineage.EventExit, 900, gapRoot),
	} {
		must(tb, w.Event(e))
	}
	now = at(901)
	daemon := lineage.Member{Identity: gapL, Parent: gapRoot, Root: gapRoot}
	must(tb, w.Leak(daemon, "root exited"))
	now = at(1000)
	must(tb, w.Reap(reap.Report{Outcomes: []reap.Outcome{{Member: daemon, Sent: []string{"TERM"}, Result: lineage.Terminated}}}, "root exited"))
	must(tb, w.Event(lineage.Event{Kind: lineage.EventExit, Time: at(1010), Process: gapL, Parent: gapRoot, Root: gapRoot, Status: lineage.ExitStatus(syscall.SIGTERM)}))
	now = at(1100)
	if placed {
		must(tb, w.LossIn(gapLosses, "events lost", record.Placement{From: gapFrom, To: gapTo, Members: []record.LostMember{
			{Process: gapE, Kinds: []record.Kind{record.KindExec}},
			{Process: gapF},
		}}))
	} else {
		must(tb, w.LossOf(gapLosses, "events lost"))
	}
	must(tb, w.LossOf(3, "untracked: the membership map was full"))
	return buf.Bytes()
}

// wantMissing are the processes each variant of the gap fixture marks.
func wantMissing(placed bool) map[lineage.Identity][]record.Kind {
	fork, exec, exit := record.KindFork, record.KindExec, record.KindExit
	if placed {
		// D's exit can't have been in a gap that ended before D's last
		// event, nor G's fork in one that ended before G began; E's exec
		// is known only because the loss names it.
		return map[lineage.Identity][]record.Kind{gapB: {fork}, gapC: {exit}, gapE: {exec}, gapF: {fork, exit}}
	}
	// Absence alone: every process without its fork or exit, but the leak
	// (whose exit is in the record) and the root.
	return map[lineage.Identity][]record.Kind{gapB: {fork}, gapC: {exit}, gapD: {exit}, gapG: {fork}}
}

func TestLossPlacedAndMarkedInEveryFormat(t *testing.T) {
	for _, placed := range []bool{true, false} {
		t.Run(map[bool]string{true: "placed", false: "unplaced"}[placed], func(t *testing.T) {
			rep := build(t, lossRecord(t, placed))
			want := wantMissing(placed)
			checkMarks(t, rep, want)
			checkGaps(t, rep, placed, len(want))
			checkTextMarks(t, rep, placed, want)
			checkJSONMarks(t, rep, want)
			checkTraceMarks(t, rep, placed, want)
			checkHTMLMarks(t, rep, want)
		})
	}
}

func checkMarks(t *testing.T, rep *Report, want map[lineage.Identity][]record.Kind) {
	t.Helper()
	got := map[lineage.Identity][]record.Kind{}
	rep.Walk(func(p *Process) bool {
		if len(p.Missing) > 0 {
			got[p.ID] = p.Missing
		}
		return true
	})
	if !mapsEqual(got, want) {
		t.Errorf("marked %v, want %v", got, want)
	}
	if rep.Summary.Missing != len(want) || len(rep.Missing) != len(want) {
		t.Errorf("summary counts %d marked, the list %d, want %d", rep.Summary.Missing, len(rep.Missing), len(want))
	}
}

func mapsEqual(a, b map[lineage.Identity][]record.Kind) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if !slices.Equal(v, b[k]) {
			return false
		}
	}
	return true
}

func checkGaps(t *testing.T, rep *Report, placed bool, touched int) {
	t.Helper()
	if len(rep.Gaps) != 2 {
		t.Fatalf("gaps %+v, want the loss and the escapes", rep.Gaps)
	}
	g, esc := rep.Gaps[0], rep.Gaps[1]
	if g.Placed != placed || g.Count != gapLosses || g.Escapes || !esc.Escapes || esc.Touched != 0 {
		t.Errorf("gaps %+v", rep.Gaps)
	}
	if placed && (g.From != gapFrom || g.To != gapTo || g.Touched != touched || g.Named != 2) {
		t.Errorf("placed gap %+v, want from %v to %v touching %d", g, gapFrom, gapTo, touched)
	}
	if !placed && g.Touched != 0 {
		t.Errorf("an unplaced gap touches %d: marks by absence are nobody's gap's", g.Touched)
	}
}

func checkTextMarks(t *testing.T, rep *Report, placed bool, want map[lineage.Identity][]record.Kind) {
	t.Helper()
	var buf bytes.Buffer
	must(t, rep.WriteText(&buf, TextOptions{}))
	text := buf.String()
	marked := 0
	for _, l := range strings.Split(text, "\n") {
		m := regexp.MustCompile(`pid (\d+) .*\[((?:\w+ not recorded(?:, )?)+)\]$`).FindStringSubmatch(l)
		if m == nil {
			continue
		}
		marked++
		var pid uint32
		fmt.Sscan(m[1], &pid)
		p := findPID(t, rep, pid)
		if words := eventsNotRecorded(want[p.ID]); m[2] != words {
			t.Errorf("pid %d marked %q, want %q", pid, m[2], words)
		}
	}
	if marked != len(want) {
		t.Errorf("%d tree lines marked, want %d:\n%s", marked, len(want), text)
	}
	line := "events lost: 6, not placed in time"
	if placed {
		line = "events lost: 6, between +0.200s and +0.300s, naming 2 processes: 4 processes touched"
	}
	for _, s := range []string{line, "untracked: the membership map was full: 3 (processes the full membership map could not hold", fmt.Sprintf("%d processes marked", len(want))} {
		if !strings.Contains(text, s) {
			t.Errorf("the text lacks %q:\n%s", s, text)
		}
	}
}

func findPID(t *testing.T, rep *Report, pid uint32) *Process {
	t.Helper()
	var found *Process
	rep.Walk(func(p *Process) bool {
		if p.ID.PID == pid {
			found = p
		}
		return found == nil
	})
	if found == nil {
		t.Fatalf("no process %d", pid)
	}
	return found
}

func checkJSONMarks(t *testing.T, rep *Report, want map[lineage.Identity][]record.Kind) {
	t.Helper()
	var buf bytes.Buffer
	must(t, rep.WriteJSON(&buf))
	var doc struct {
		Missing []struct {
			Process lineage.Identity `json:"process"`
			Events  []record.Kind    `json:"events"`
			Gaps    []int            `json:"gaps"`
		} `json:"missing_events"`
		Gaps      []Gap `json:"gaps"`
		Processes []struct {
			Process lineage.Identity `json:"process"`
			Missing []record.Kind    `json:"missing"`
		} `json:"processes"`
	}
	if err := json.Unmarshal(buf.Bytes(), &doc); err != nil {
		t.Fatalf("json report: %v", err)
	}
	listed := map[lineage.Identity][]record.Kind{}
	for _, m := range doc.Missing {
		listed[m.Process] = m.Events
		if rep.Gaps[0].Placed && !slices.Equal(m.Gaps, []int{0}) {
			t.Errorf("%v listed in gaps %v, want [0]", m.Process, m.Gaps)
		}
	}
	if !mapsEqual(listed, want) {
		t.Errorf("the json lists %v, want %v", listed, want)
	}
	own := map[lineage.Identity][]record.Kind{}
	for _, p := range doc.Processes {
		if p.Missing != nil {
			own[p.Process] = p.Missing
		}
	}
	if !mapsEqual(own, want) {
		t.Errorf("the json's processes carry %v, want %v", own, want)
	}
	if len(doc.Gaps) != 2 || doc.Gaps[0].Placed != rep.Gaps[0].Placed || doc.Gaps[0].From != rep.Gaps[0].From {
		t.Errorf("the json's gaps %+v", doc.Gaps)
	}
}

func checkTraceMarks(t *testing.T, rep *Report, placed bool, want map[lineage.Identity][]record.Kind) {
	t.Helper()
	var buf bytes.Buffer
	must(t, rep.WriteChromeTrace(&buf))
	complete := checkTrace(t, buf.Bytes())
	got := map[lineage.Identity][]record.Kind{}
	var gaps []map[string]any
	for _, ev := range complete {
		if ev["cat"] == "loss" {
			gaps = append(gaps, ev)
			continue
		}
		args := ev["args"].(map[string]any)
		missing, ok := args["missing"].([]any)
		if !ok {
			continue
		}
		var kinds []record.Kind
		for _, k := range missing {
			kinds = append(kinds, record.Kind(k.(string)))
		}
		got[lineage.Identity{PID: uint32(args["pid"].(float64)), StartTicks: uint64(args["start"].(float64))}] = kinds
	}
	if !mapsEqual(got, want) {
		t.Errorf("the trace marks %v, want %v", got, want)
	}
	switch {
	case placed && len(gaps) != 1:
		t.Errorf("the trace draws %d gaps, want 1", len(gaps))
	case placed:
		g := gaps[0]
		from := float64((gapFrom - rep.First).Microseconds())
		if g["pid"] != float64(gapsPID) || g["ts"] != from || g["dur"] != float64((gapTo-gapFrom).Microseconds()) {
			t.Errorf("the trace's gap %v, want ts %v", g, from)
		}
	case len(gaps) != 0:
		t.Errorf("the trace draws an unplaced gap: %v", gaps)
	}
}

func checkHTMLMarks(t *testing.T, rep *Report, want map[lineage.Identity][]record.Kind) {
	t.Helper()
	data := htmlDataOf(t, rep)
	got := map[lineage.Identity][]record.Kind{}
	for _, p := range data.Processes {
		if p.Missing != nil {
			got[lineage.Identity{PID: p.PID, StartTicks: p.Start}] = p.Missing
		}
	}
	if !mapsEqual(got, want) {
		t.Errorf("the page's data marks %v, want %v", got, want)
	}
}

// htmlDataOf renders rep as a page and decodes the data inlined in it.
func htmlDataOf(t *testing.T, rep *Report) htmlDataDoc {
	t.Helper()
	var buf bytes.Buffer
	must(t, rep.WriteHTML(&buf))
	m := regexp.MustCompile(`(?s)<script type="application/json" id="lineage-data">(.*?)</script>`).FindSubmatch(buf.Bytes())
	if m == nil {
		t.Fatal("no data block")
	}
	var data htmlDataDoc
	if err := json.Unmarshal(m[1], &data); err != nil {
		t.Fatalf("data block: %v", err)
	}
	return data
}

// htmlDataDoc is the part of the page's data the tests read.
type htmlDataDoc struct {
	Processes []htmlProcess `json:"processes"`
	Gaps      []Gap         `json:"gaps"`
}

// In Chromium, the filter for events not recorded shows the processes
// whose events fell in the gap, each with a badge that says which, and the
// placed gap is drawn across the timeline.
func TestLossMarkedInChromium(t *testing.T) {
	rep := build(t, lossRecord(t, true))
	d := startDevtools(t, 1280, 800)
	d.open(writePage(t, rep))
	d.eval(`(function () { var o = document.getElementById("outcome"); o.value = "missing"; o.dispatchEvent(new Event("change")); })()`, nil)
	var badges map[string]string
	d.eval(`(function () {
		var out = {};
		document.querySelectorAll("#layer .row").forEach(function (r) {
			var b = r.querySelector(".badge.miss");
			if (b) out[r.querySelector(".pid").textContent] = b.textContent;
		});
		return out;
	})()`, &badges)
	want := map[string]string{}
	for p, kinds := range wantMissing(true) {
		want[fmt.Sprint(p.PID)] = eventsNotRecorded(kinds)
	}
	if fmt.Sprint(badges) != fmt.Sprint(want) {
		t.Errorf("badges %v, want %v", badges, want)
	}
	var bands int
	d.eval(`document.querySelectorAll("#bands .band").length`, &bands)
	if bands != 1 {
		t.Errorf("%d gap bands drawn, want 1", bands)
	}
	var card string
	d.eval(`document.getElementById("card-losses").textContent`, &card)
	if !strings.Contains(card, "events lost: 6, between +0.200s and +0.300s, 4 processes touched") || !strings.Contains(card, "with events not recorded: 4") {
		t.Errorf("losses card: %q", card)
	}
	if c := d.consoleMessages(); len(c) > 0 {
		t.Errorf("console: %v", c)
	}
}
