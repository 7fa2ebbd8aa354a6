package record

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/lineage-dev/lineage/lineage"
)

const goodHeader = `{"schema":"lineage-record","version":1,"lineage":"t","host":"h","kernel":"k","started":"2026-03-01T12:00:00Z","boot_ns":0}`

func event(pid int) string {
	return `{"kind":"exec","boot_ns":1,"wall":"2026-03-01T12:00:00Z","process":{"pid":` + itoa(pid) + `,"start":7},"parent":{"pid":0,"start":0},"root":{"pid":0,"start":0},"argv":["x"]}`
}

func TestReaderDamage(t *testing.T) {
	tests := []struct {
		name     string
		in       string
		events   int
		problems []string // substrings, in order
	}{
		{"clean", goodHeader + "\n" + event(5) + "\n", 1, nil},
		{"cut short", goodHeader + "\n" + event(5) + "\n" + event(6)[:40], 1, []string{"line 3: cut short"}},
		{"no final newline", goodHeader + "\n" + event(5), 1, nil},
		{"garbage line", goodHeader + "\n" + "\x00\x01garbage\n" + event(5) + "\n", 1, []string{"line 2: not an event"}},
		{"newer schema", strings.Replace(goodHeader, `"version":1`, `"version":9`, 1) + "\n" + event(5) + "\n" + `{"kind":"teleport","process":{"pid":5,"start":7}}` + "\n", 1,
			[]string{"line 1: schema version 9 is newer", "line 3: unknown event kind \"teleport\""}},
		{"no header", event(5) + "\n" + event(6) + "\n", 2, []string{"line 1: no header"}},
		{"garbage header", "hello\n" + event(5) + "\n", 1, []string{"line 1: no header", "line 1: not an event"}},
		{"blank lines", "\n\n" + goodHeader + "\n\n" + event(5) + "\n", 1, nil},
		{"no process", goodHeader + "\n" + `{"kind":"exit"}` + "\n", 0, []string{"line 2: exit event names no process"}},
		{"too long", goodHeader + "\n" + `{"kind":"exec","argv":["` + strings.Repeat("a", MaxLine) + `"]}` + "\n" + event(5) + "\n", 1, []string{"line 2: longer than"}},
		{"too long at the end", goodHeader + "\n" + strings.Repeat("a", MaxLine+1), 0, []string{"line 2: longer than"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, evs := readAll(t, []byte(tt.in))
			if len(evs) != tt.events {
				t.Errorf("%d events, want %d", len(evs), tt.events)
			}
			got := r.Problems()
			if len(got) != len(tt.problems) {
				t.Fatalf("problems %q, want %q", got, tt.problems)
			}
			for i, p := range got {
				if !strings.Contains(p.String(), tt.problems[i]) {
					t.Errorf("problem %d: %q, want %q", i, p, tt.problems[i])
				}
			}
		})
	}
}

func TestReaderEmpty(t *testing.T) {
	for _, in := range []string{"", "\n\n  \n"} {
		_, err := NewReader(strings.NewReader(in))
		if !errors.Is(err, lineage.ErrInvalid) || !strings.Contains(err.Error(), "empty") {
			t.Errorf("%q: error %v", in, err)
		}
	}
}

// A run report is one indented JSON document: the reader says what it is,
// and how to make a record, rather than reading its lines as events.
func TestReaderRefusesARunReport(t *testing.T) {
	report := "{\n  \"version\": 1,\n  \"command\": [\"true\"],\n  \"backend\": {\"backend\": \"bpf\"},\n  \"decision\": \"reap: the root exited\"\n}\n"
	_, err := NewReader(strings.NewReader(report))
	if !errors.Is(err, lineage.ErrInvalid) || !strings.Contains(err.Error(), "run report (lineage run --report)") || !strings.Contains(err.Error(), "lineage run --record") {
		t.Errorf("a run report: %v, want it named, and how to record", err)
	}
	_, err = NewReader(strings.NewReader("{\n  \"a\": 1\n}\n"))
	if !errors.Is(err, lineage.ErrInvalid) || !strings.Contains(err.Error(), "indented JSON document") {
		t.Errorf("another JSON document: %v", err)
	}
	// A record's first line is a whole object: never refused as a document.
	if _, err := NewReader(strings.NewReader(goodHeader + "\n" + event(5) + "\n")); err != nil {
		t.Errorf("a record: %v", err)
	}
}

func TestReaderReadError(t *testing.T) {
	boom := errors.New("boom")
	r, err := NewReader(io.MultiReader(strings.NewReader(goodHeader+"\n"), iotest.ErrReader(boom)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Next(); !errors.Is(err, boom) {
		t.Errorf("next: %v", err)
	}
}

func TestReaderKeepsAtMostMaxProblems(t *testing.T) {
	in := goodHeader + "\n" + strings.Repeat("junk\n", MaxProblems+7)
	r, evs := readAll(t, []byte(in))
	if len(evs) != 0 || len(r.Problems()) != MaxProblems || r.Dropped() != 7 {
		t.Errorf("%d events, %d problems, %d dropped", len(evs), len(r.Problems()), r.Dropped())
	}
}

// FuzzReader feeds the reader arbitrary records: it must never panic, never
// loop, and every event it returns must be one it validated.
func FuzzReader(f *testing.F) {
	f.Add([]byte(goodHeader + "\n" + event(5) + "\n"))
	f.Add([]byte(goodHeader + "\n" + event(5)[:30]))
	f.Add([]byte("\n"))
	f.Add([]byte(`{"schema":"lineage-record","version":2}` + "\n" + `{"kind":"loss","count":3}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := NewReader(bytes.NewReader(data))
		if err != nil {
			if !errors.Is(err, lineage.ErrInvalid) {
				t.Fatalf("error not invalid: %v", err)
			}
			return
		}
		for n := 0; ; n++ {
			ev, err := r.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if !ev.Kind.Known() || (ev.Kind != KindLoss && ev.Process.IsZero()) {
				t.Fatalf("invalid event returned: %+v", ev)
			}
			if n > len(data) {
				t.Fatal("more events than bytes")
			}
		}
	})
}
