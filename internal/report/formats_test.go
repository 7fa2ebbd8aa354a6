package report

import (
	"bytes"
	"encoding/json"
	"errors"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/lineage-dev/lineage/internal/reap"
	"github.com/lineage-dev/lineage/internal/record"
	"github.com/lineage-dev/lineage/lineage"
)

func TestJSONGolden(t *testing.T) {
	rep := build(t, fixture(t))
	var buf bytes.Buffer
	must(t, rep.WriteJSON(&buf))
	golden(t, "fixture.json", buf.Bytes())
	var doc struct {
		Summary   Summary `json:"summary"`
		Processes []struct {
			Process  lineage.Identity   `json:"process"`
			Parent   lineage.Identity   `json:"parent"`
			Argv     []string           `json:"argv"`
			Leaked   bool               `json:"leaked"`
			Children []lineage.Identity `json:"children"`
		} `json:"processes"`
	}
	if err := json.Unmarshal(buf.Bytes(), &doc); err != nil {
		t.Fatalf("not JSON: %v", err)
	}
	if len(doc.Processes) != doc.Summary.Processes || doc.Processes[0].Process.PID != 1000 || len(doc.Processes[0].Children) != 2 {
		t.Errorf("processes %+v", doc.Processes)
	}
}

// traceDoc is the part of the Trace Event Format the tests check.
type traceDoc struct {
	TraceEvents []map[string]any `json:"traceEvents"`
}

// checkTrace checks what Perfetto and chrome://tracing need: every event
// has name, ph, pid, tid and (except metadata) ts; complete events have a
// dur; slices on one track never overlap; every flow start has its finish.
// It returns the complete events.
func checkTrace(t *testing.T, data []byte) []map[string]any {
	t.Helper()
	var doc traceDoc
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatalf("not JSON: %v", err)
	}
	type track struct{ pid, tid float64 }
	slices := map[track][][2]float64{}
	flows := map[float64]string{}
	var complete []map[string]any
	for i, ev := range doc.TraceEvents {
		for _, f := range []string{"name", "ph", "pid", "tid"} {
			if _, ok := ev[f]; !ok {
				t.Fatalf("event %d has no %s: %v", i, f, ev)
			}
		}
		ph := ev["ph"].(string)
		if _, ok := ev["ts"]; !ok && ph != "M" {
			t.Fatalf("event %d has no ts: %v", i, ev)
		}
		switch ph {
		case "X":
			dur, ok := ev["dur"].(float64)
			if !ok || dur < 0 {
				t.Fatalf("complete event %d without a dur: %v", i, ev)
			}
			k := track{ev["pid"].(float64), ev["tid"].(float64)}
			slices[k] = append(slices[k], [2]float64{ev["ts"].(float64), ev["ts"].(float64) + dur})
			complete = append(complete, ev)
		case "s", "f":
			flows[ev["id"].(float64)] += ph
		}
	}
	for k, ss := range slices {
		sort.Slice(ss, func(i, j int) bool { return ss[i][0] < ss[j][0] })
		for i := 1; i < len(ss); i++ {
			if ss[i][0] < ss[i-1][1] {
				t.Errorf("track %v: slices %v and %v overlap", k, ss[i-1], ss[i])
			}
		}
	}
	for id, phs := range flows {
		if phs != "sf" {
			t.Errorf("flow %v: phases %q", id, phs)
		}
	}
	return complete
}

func TestChromeTrace(t *testing.T) {
	rep := build(t, fixture(t))
	var buf bytes.Buffer
	must(t, rep.WriteChromeTrace(&buf))
	golden(t, "fixture.trace.json", buf.Bytes())
	if got := len(checkTrace(t, buf.Bytes())); got != rep.Summary.Processes {
		t.Errorf("%d complete events for %d processes", got, rep.Summary.Processes)
	}
}

func TestChromeTraceReusedPID(t *testing.T) {
	// pid 7 lives twice in one lineage, the second time while its first
	// incarnation's end was never seen: still two tracks, no overlap.
	in := header + "\n" +
		line(`"kind":"fork","boot_ns":1000000,"process":{"pid":7,"start":1},"parent":{"pid":2,"start":1},"root":{"pid":7,"start":1}`) +
		line(`"kind":"fork","boot_ns":2000000,"process":{"pid":7,"start":90},"parent":{"pid":7,"start":1},"root":{"pid":7,"start":1}`) +
		line(`"kind":"exit","boot_ns":3000000,"process":{"pid":7,"start":90},"parent":{"pid":7,"start":1},"root":{"pid":7,"start":1},"exit":{"code":0}`)
	rep := build(t, []byte(in))
	var buf bytes.Buffer
	must(t, rep.WriteChromeTrace(&buf))
	xs := checkTrace(t, buf.Bytes())
	if len(xs) != 2 || xs[0]["tid"] == xs[1]["tid"] {
		t.Errorf("complete events %v", xs)
	}
}

const header = `{"schema":"lineage-record","version":1,"lineage":"t","host":"h","kernel":"k","started":"2026-03-01T12:00:00Z","boot_ns":0}`

func line(fields string) string {
	return `{"wall":"2026-03-01T12:00:00Z",` + fields + "}\n"
}

func TestHTMLInlinesEscapedData(t *testing.T) {
	rep := build(t, fixture(t))
	var buf bytes.Buffer
	must(t, rep.WriteHTML(&buf))
	page := buf.String()
	if n := strings.Count(strings.ToLower(page), "</script>"); n != 2 {
		t.Errorf("%d </script> tags, want the page's own 2: argv broke out", n)
	}
	if strings.Contains(page, "<img") {
		t.Error("argv's <img> reached the page unescaped")
	}
	if regexp.MustCompile(`(?i)(src|href)\s*=\s*["']?(https?:)?//`).MatchString(page) {
		t.Error("the page refers to an external asset")
	}
	// The data is recoverable from the page.
	m := regexp.MustCompile(`(?s)<script type="application/json" id="lineage-data">(.*?)</script>`).FindStringSubmatch(page)
	if m == nil {
		t.Fatal("no data block")
	}
	var data struct {
		Processes []htmlProcess `json:"processes"`
	}
	if err := json.Unmarshal([]byte(m[1]), &data); err != nil {
		t.Fatalf("data block: %v", err)
	}
	// The hostile argv comes as the text report's command line: quoted
	// for a shell, every control character escaped.
	const quoted = `echo $'</script><img src=x onerror=alert(1)>\x1b[2J\x1b[31mred\nline2\xe2\x80\xae'`
	found := false
	for _, p := range data.Processes {
		found = found || p.Cmd == quoted
	}
	if len(data.Processes) != 10 || !found {
		t.Errorf("%d processes, hostile argv shell-quoted: %v", len(data.Processes), found)
	}
}

func TestHTMLRefusesHuge(t *testing.T) {
	rep := &Report{Summary: Summary{Processes: MaxHTMLProcesses + 1}}
	err := rep.WriteHTML(&bytes.Buffer{})
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "chrome-trace") {
		t.Errorf("error %v", err)
	}
}

func TestBadRecords(t *testing.T) {
	tests := []struct {
		name, in string
		err      bool
		text     []string
	}{
		{"empty", "", true, nil},
		{"garbage only", "\x00\x01\x02 nothing here\n", true, nil},
		{"cut short", header + "\n" + line(`"kind":"exec","boot_ns":5,"process":{"pid":9,"start":1},"argv":["x"]`) + `{"kind":"exit","pro`, false,
			[]string{"line 3: cut short", "pid 9"}},
		{"garbage line", header + "\nnot json\n" + line(`"kind":"exec","boot_ns":5,"process":{"pid":9,"start":1},"argv":["x"]`), false,
			[]string{"line 2: not an event", "lines that could not be read: 1"}},
		{"no header", line(`"kind":"exec","boot_ns":5,"process":{"pid":9,"start":1},"argv":["x"]`), false,
			[]string{"line 1: no header", "x  pid 9", "what the record can't tell:"}},
		{"newer schema", strings.Replace(header, `"version":1`, `"version":3`, 1) + "\n" + line(`"kind":"exec","boot_ns":5,"process":{"pid":9,"start":1},"argv":["x"],"future":1`), false,
			[]string{"schema version 3 is newer", "x  pid 9"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := record.NewReader(strings.NewReader(tt.in))
			var rep *Report
			if err == nil {
				rep, err = Build(r)
			}
			if tt.err {
				if !errors.Is(err, lineage.ErrInvalid) {
					t.Fatalf("error %v, want one wrapping ErrInvalid", err)
				}
				if tt.name != "empty" && strings.Contains(err.Error(), "no header") {
					t.Errorf("error %v: says the header is missing, not what could not be read", err)
				}
				return
			}
			must(t, err)
			var text, page, trace, doc bytes.Buffer
			must(t, rep.WriteText(&text, TextOptions{}))
			must(t, rep.WriteHTML(&page))
			must(t, rep.WriteChromeTrace(&trace))
			must(t, rep.WriteJSON(&doc))
			checkTrace(t, trace.Bytes())
			if !json.Valid(doc.Bytes()) {
				t.Error("json report is not JSON")
			}
			for _, want := range tt.text {
				if !strings.Contains(text.String(), want) {
					t.Errorf("text report lacks %q:\n%s", want, text.String())
				}
			}
			if tt.name == "no header" && (rep.Summary.BadLines != 0 || strings.Contains(text.String(), "could not be read")) {
				t.Errorf("a record without a header: %d bad lines; its one line was read:\n%s", rep.Summary.BadLines, text.String())
			}
		})
	}
}

// The outcome is the last word on a process: a keep that an unkeep ended,
// then the reaper's TERM and an exit by TERM, is a termination, not a keep.
func TestOutcomeIsTheLastWord(t *testing.T) {
	var buf bytes.Buffer
	now := 100 * time.Second
	w, err := record.NewWriter(&buf, record.Header{Lineage: "test", Host: "h"}, &record.Options{
		Boot: func() time.Duration { return now },
		Wall: func() time.Time { return time.Unix(0, 0).Add(now) },
	})
	if err != nil {
		t.Fatal(err)
	}
	root, dev, other := id(2000, 500), id(2001, 501), id(2002, 502)
	kept := lineage.Member{Identity: dev, Parent: root, Root: root}
	stays := lineage.Member{Identity: other, Parent: root, Root: root}
	must(t, w.Event(lineage.Event{Kind: lineage.EventFork, Time: now, Process: root, Root: root, IsRoot: true}))
	must(t, w.Event(lineage.Event{Kind: lineage.EventFork, Time: now, Process: dev, Parent: root, Root: root}))
	must(t, w.Event(lineage.Event{Kind: lineage.EventFork, Time: now, Process: other, Parent: root, Root: root}))
	must(t, w.Keep(kept, "keep rule: dev server"))
	must(t, w.Keep(stays, "keep rule: db"))
	must(t, w.Unkeep(kept, "unkeep process:2001@501"))
	must(t, w.Reap(reap.Report{Outcomes: []reap.Outcome{
		{Member: kept, Signal: "TERM", Sent: []string{"TERM"}, Result: lineage.Terminated},
	}}, "session-close"))
	must(t, w.Event(lineage.Event{Kind: lineage.EventExit, Time: now, Process: dev, Root: root, Status: 15}))
	rep := build(t, buf.Bytes())
	outcomes := map[lineage.Identity]lineage.Result{}
	rep.Walk(func(p *Process) bool { outcomes[p.ID] = p.Outcome; return true })
	if outcomes[dev] != lineage.Terminated || outcomes[other] != lineage.Kept {
		t.Errorf("outcomes %v: want the unkept one terminated, the kept one kept", outcomes)
	}
	var text bytes.Buffer
	if err := rep.WriteText(&text, TextOptions{}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(text.String(), "kept (session-close)") || !strings.Contains(text.String(), "reaped: TERM, terminated") {
		t.Errorf("the text says the unkept process was kept:\n%s", text.String())
	}
}

// A process is named by its exec: its exit's comm is its last thread's, a
// thread's own name.
func TestCommIsTheExecs(t *testing.T) {
	in := header + "\n" +
		line(`"kind":"fork","boot_ns":1000000,"process":{"pid":7,"start":1},"parent":{"pid":2,"start":1},"root":{"pid":7,"start":1},"comm":"sh","is_root":true`) +
		line(`"kind":"fork","boot_ns":2000000,"process":{"pid":8,"start":2},"parent":{"pid":7,"start":1},"root":{"pid":7,"start":1},"comm":"sh"`) +
		line(`"kind":"exec","boot_ns":2500000,"process":{"pid":8,"start":2},"parent":{"pid":7,"start":1},"root":{"pid":7,"start":1},"comm":"redis-server","exe":"/usr/bin/redis-server"`) +
		line(`"kind":"exit","boot_ns":3000000,"process":{"pid":8,"start":2},"parent":{"pid":7,"start":1},"root":{"pid":7,"start":1},"comm":"bio_aof_fsync","exit":{"code":0}`) +
		line(`"kind":"exit","boot_ns":4000000,"process":{"pid":7,"start":1},"parent":{"pid":2,"start":1},"root":{"pid":7,"start":1},"comm":"sh","exit":{"code":0}`)
	rep := build(t, []byte(in))
	comms := map[uint32]string{}
	rep.Walk(func(p *Process) bool { comms[p.ID.PID] = p.Comm; return true })
	if comms[7] != "sh" || comms[8] != "redis-server" {
		t.Errorf("comms %v: want sh and redis-server", comms)
	}
}

// The JSON report's lists are there when empty, as []: never absent, never
// null.
func TestJSONListsAreThereWhenEmpty(t *testing.T) {
	in := header + "\n" + line(`"kind":"fork","boot_ns":1000000,"process":{"pid":7,"start":1},"parent":{"pid":2,"start":1},"root":{"pid":7,"start":1},"is_root":true`) +
		line(`"kind":"exit","boot_ns":2000000,"process":{"pid":7,"start":1},"parent":{"pid":2,"start":1},"root":{"pid":7,"start":1},"exit":{"code":0}`)
	var buf bytes.Buffer
	must(t, build(t, []byte(in)).WriteJSON(&buf))
	var doc, highlights map[string]json.RawMessage
	must(t, json.Unmarshal(buf.Bytes(), &doc))
	must(t, json.Unmarshal(doc["highlights"], &highlights))
	for key, v := range map[string]json.RawMessage{"problems": doc["problems"], "unknowns": doc["unknowns"], "gaps": doc["gaps"],
		"missing_events": doc["missing_events"], "highlights.leaks": highlights["leaks"], "highlights.kept": highlights["kept"],
		"highlights.reaped": highlights["reaped"], "highlights.top_by_children": highlights["top_by_children"]} {
		if string(v) != "[]" {
			t.Errorf("%s is %s, want []", key, v)
		}
	}
}
