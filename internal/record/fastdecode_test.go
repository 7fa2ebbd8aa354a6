package record

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/lineage-dev/lineage/internal/reap"
	"github.com/lineage-dev/lineage/lineage"
)

// writtenLines are event lines as the Writer writes them, of every kind.
func writtenLines(tb testing.TB) [][]byte {
	var buf bytes.Buffer
	now := 5 * time.Second
	opts := &Options{Boot: func() time.Duration { return now }, Wall: func() time.Time { return time.Unix(1_770_000_000, 5) }}
	w, err := NewWriter(&buf, Header{}, opts)
	if err != nil {
		tb.Fatal(err)
	}
	id := lineage.Identity{PID: 4_000_000_000, StartTicks: 1 << 60}
	p := lineage.Identity{PID: 2, StartTicks: 3}
	evs := []lineage.Event{
		{Kind: lineage.EventFork, Time: time.Second, Process: id, Parent: p, Root: id, Comm: "sh", IsRoot: true, Untracked: true, Contained: true},
		{Kind: lineage.EventExec, Time: time.Second, Process: id, Parent: p, Root: id, Filename: "/bin/é", Argv: []string{"a&b<c>", `q"\`, "\x00\t\u2028", "\xff", ""}, ArgvTruncated: true},
		{Kind: lineage.EventExec, Process: id, Argv: []string{}},
		{Kind: lineage.EventExit, Process: id, Status: 9},
		{Kind: lineage.EventExit, Process: id, Status: 3 << 8},
		{Kind: lineage.EventExit, Process: id, Status: lineage.StatusUnknown},
	}
	for _, ev := range evs {
		if err := w.Event(ev); err != nil {
			tb.Fatal(err)
		}
	}
	m := lineage.Member{Identity: id, Parent: p, Root: id, Comm: "x"}
	_ = w.Leak(m, "root exited")
	_ = w.Reap(reap.Report{Outcomes: []reap.Outcome{{Member: m, Sent: []string{"TERM", "KILL"}, Result: lineage.Killed, Argv: []string{"x"}}, {Member: m, Result: lineage.Kept, Reason: "rule"}}}, "deadline")
	_ = w.LossOf(7, "events lost")
	lines := bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte("\n"))
	return lines[1:]
}

// sameAsJSON checks that decodeFast, when it reads line, reads it as
// encoding/json does; it returns whether decodeFast read it.
func sameAsJSON(t *testing.T, line []byte) bool {
	fast, ok := decodeFast(line)
	if !ok {
		return false
	}
	var slow Event
	if err := json.Unmarshal(line, &slow); err != nil {
		t.Fatalf("fast decoder read %q, encoding/json refuses it: %v", line, err)
	}
	if !reflect.DeepEqual(fast, slow) {
		t.Fatalf("%q:\nfast %+v\njson %+v", line, fast, slow)
	}
	return true
}

func TestDecodeFastReadsWhatTheWriterWrites(t *testing.T) {
	for _, line := range writtenLines(t) {
		if !sameAsJSON(t, line) {
			t.Errorf("fast decoder left to encoding/json: %s", line)
		}
	}
}

func TestDecodeFastLeavesTheUnusualToJSON(t *testing.T) {
	for _, line := range []string{
		`{"kind":"exec","kind":"exit"}`,
		`{"Kind":"exec"}`,
		`{"kind":null}`,
		`{"kind":"exec","boot_ns":1.5}`,
		`{"kind":"exec","boot_ns":01}`,
		`{"kind":"exec","process":{"pid":-1}}`,
		`{"kind":"exec","process":{"pid":4294967296}}`,
		`{"kind":"exec","new_field":1}`,
		`{"kind":"exec"} x`,
		`{"kind":"exec","exit":{"code":1,"code":2}}`,
		`{"kind":"exec","is_root":tru}`,
		`{"ki\u006ed":"exec"}`,
		"{\"kind\":\"ex\tec\"}",
	} {
		if sameAsJSON(t, []byte(line)) {
			t.Errorf("fast decoder read %s", line)
		}
	}
}

// FuzzDecodeFast holds the fast decoder to encoding/json: whatever it reads,
// encoding/json reads the same.
func FuzzDecodeFast(f *testing.F) {
	for _, line := range writtenLines(f) {
		f.Add(line)
	}
	f.Add([]byte(`{"kind":"exec","argv":["\ud800","\u00e9"],"wall":"2026-03-01T12:00:00+01:00"}`))
	f.Fuzz(func(t *testing.T, line []byte) { sameAsJSON(t, line) })
}

func TestDecodeFastNumbersAtTheirLimits(t *testing.T) {
	for _, line := range []string{
		`{"kind":"exec","process":{"pid":4294967295,"start":18446744073709551615}}`,
		`{"kind":"exec","process":{"pid":4294967296,"start":1}}`,
		`{"kind":"exec","process":{"pid":1,"start":18446744073709551616}}`,
		`{"kind":"exec","process":{"start":2,"pid":1}}`,
		`{"kind":"exec","boot_ns":9223372036854775807}`,
		`{"kind":"exec","boot_ns":9223372036854775808}`,
		`{"kind":"exec","boot_ns":-9223372036854775808}`,
		`{"kind":"exec","boot_ns":-0}`,
		`{"kind":"loss","count":18446744073709551615}`,
		`{"kind":"loss","count":99999999999999999999}`,
		`{"kind":"exit","exit":{"code":-1,"core":true}}`,
	} {
		sameAsJSON(t, []byte(line))
	}
}

// TestAppendEventIsMarshal holds the Writer's hand encoder to json.Marshal,
// byte for byte.
func TestAppendEventIsMarshal(t *testing.T) {
	code, uid := -3, uint32(0)
	wall := time.Date(2026, 3, 1, 12, 0, 0, 120, time.UTC)
	evs := []Event{
		{},
		{Kind: "x<y>", Boot: -5, Wall: wall, Comm: "a\"b\\c\x01é\u2028\xff", IsRoot: true, Untracked: true, Contained: true, Exe: "/bin/&",
			Argv: []string{"", "plain", "<tag>"}, ArgvTruncated: true, Redacted: true, UID: &uid, EUID: &uid,
			Exit: &Exit{Code: &code, Signal: "KILL", Core: true}, Signal: "TERM", Reason: "r", Result: "killed", Count: 1 << 63},
		{Kind: KindExec, Wall: wall.In(time.FixedZone("x", 3600)), Argv: []string{}, Exit: &Exit{}},
		{Kind: KindExit, Exit: &Exit{Signal: "SEGV"}},
	}
	for _, line := range writtenLines(t) {
		var ev Event
		if err := json.Unmarshal(line, &ev); err != nil {
			t.Fatal(err)
		}
		evs = append(evs, ev)
	}
	for _, ev := range evs {
		want, err := json.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := appendEvent(nil, &ev)
		if !ok || !bytes.Equal(got, want) {
			t.Errorf("\ngot  %s\nwant %s", got, want)
		}
	}
	far := Event{Wall: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}
	if _, ok := appendEvent(nil, &far); ok {
		t.Error("year 10000 encoded by hand")
	}
}
