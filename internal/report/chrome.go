package report

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/lineage-dev/lineage/lineage"
)

// traceEvent is one event of the Trace Event Format (the JSON that
// chrome://tracing and Perfetto open). Times are microseconds.
type traceEvent struct {
	Name string         `json:"name"`
	Cat  string         `json:"cat,omitempty"`
	Ph   string         `json:"ph"`
	TS   float64        `json:"ts"`
	Dur  *float64       `json:"dur,omitempty"`
	PID  uint32         `json:"pid"`
	TID  int            `json:"tid"`
	ID   int            `json:"id,omitempty"`
	BP   string         `json:"bp,omitempty"`
	Args map[string]any `json:"args,omitempty"`
}

// WriteChromeTrace writes the report in the Trace Event Format. Every
// process is one complete ("X") event on a track of its own: the trace's
// pid is the process's root pid, its tid the process's Track (a counter per
// incarnation, so that a reused pid never overlaps itself). Metadata events
// name the processes and tracks and keep the tracks in tree order; each fork
// is a flow from the parent's track to the child's. A process whose events
// fell in a gap says which in its args ("missing"); the gaps placed in time
// are complete events of their own on a "record gaps" track (trace pid 0),
// and otherData lists every gap. Times are microseconds from the record's
// first event. It writes process by process.
func (rep *Report) WriteChromeTrace(w io.Writer) error {
	bw := bufio.NewWriterSize(w, 64<<10)
	bw.WriteString(`{"displayTimeUnit":"ms","otherData":`)
	other, _ := json.Marshal(map[string]any{"schema": rep.Header.Schema, "host": rep.Header.Host, "kernel": rep.Header.Kernel, "summary": rep.Summary, "gaps": rep.Gaps})
	bw.Write(other)
	bw.WriteString(`,"traceEvents":[`)
	tw := &traceWriter{w: bw, rep: rep, named: make(map[uint32]bool)}
	order := 0
	rep.Walk(func(p *Process) bool {
		order++
		tw.process(p, order)
		return tw.err == nil
	})
	tw.gaps()
	if tw.err != nil {
		return fmt.Errorf("chrome trace: %w", tw.err)
	}
	bw.WriteString("]}\n")
	return bw.Flush()
}

type traceWriter struct {
	w     *bufio.Writer
	buf   []byte // one event's JSON (chromeenc.go)
	rep   *Report
	named map[uint32]bool // trace pids already named
	n     int
	err   error
}

func (t *traceWriter) emit(ev traceEvent) {
	if t.err != nil {
		return
	}
	if t.n > 0 {
		t.w.WriteByte(',')
	}
	t.n++
	t.buf, t.err = appendEvent(t.buf[:0], &ev)
	if t.err == nil {
		_, t.err = t.w.Write(t.buf)
	}
}

func (t *traceWriter) micros(d time.Duration) float64 {
	return float64((d - t.rep.First).Nanoseconds()) / 1e3
}

// tracePID is the trace process a process is drawn in: its root's pid.
func tracePID(p *Process) uint32 {
	if p.Root.IsZero() {
		return p.ID.PID
	}
	return p.Root.PID
}

func (t *traceWriter) process(p *Process, order int) {
	pid := tracePID(p)
	label := shorten(CommandLine(p), 120)
	if !t.named[pid] {
		t.named[pid] = true
		t.emit(traceEvent{Name: "process_name", Ph: "M", PID: pid, Args: map[string]any{"name": fmt.Sprintf("lineage root %d", pid)}})
	}
	t.emit(traceEvent{Name: "thread_name", Ph: "M", PID: pid, TID: p.Track, Args: map[string]any{"name": fmt.Sprintf("%d %s", p.ID.PID, label)}})
	t.emit(traceEvent{Name: "thread_sort_index", Ph: "M", PID: pid, TID: p.Track, Args: map[string]any{"sort_index": order}})
	dur := float64(p.Lifetime().Nanoseconds()) / 1e3
	t.emit(traceEvent{Name: label, Cat: string(p.Outcome), Ph: "X", TS: t.micros(p.Start), Dur: &dur, PID: pid, TID: p.Track, Args: processArgs(p)})
	for _, c := range p.children {
		// The flow starts inside the parent's slice and ends at the child's.
		at := min(max(c.Start, p.Start), p.End)
		t.emit(traceEvent{Name: "fork", Cat: "fork", Ph: "s", ID: c.Track, TS: t.micros(at), PID: pid, TID: p.Track})
		t.emit(traceEvent{Name: "fork", Cat: "fork", Ph: "f", BP: "e", ID: c.Track, TS: t.micros(c.Start), PID: tracePID(c), TID: c.Track})
	}
}

// gapsPID is the trace process of the record's gaps: no process of a
// lineage is pid 0.
const gapsPID = 0

// gaps draws each gap placed in time on a track of its own (gaps may
// overlap), in the "record gaps" trace process.
func (t *traceWriter) gaps() {
	named := false
	for i, g := range t.rep.Gaps {
		if !g.Placed || g.Escapes {
			continue
		}
		if !named {
			named = true
			t.emit(traceEvent{Name: "process_name", Ph: "M", PID: gapsPID, Args: map[string]any{"name": "record gaps"}})
		}
		name := fmt.Sprintf("%s: %d", lineage.Printable(g.what()), g.Count)
		t.emit(traceEvent{Name: "thread_name", Ph: "M", PID: gapsPID, TID: i + 1, Args: map[string]any{"name": fmt.Sprintf("gap %d", i)}})
		dur := float64((g.To - g.From).Nanoseconds()) / 1e3
		t.emit(traceEvent{Name: name, Cat: "loss", Ph: "X", TS: t.micros(g.From), Dur: &dur, PID: gapsPID, TID: i + 1,
			Args: map[string]any{"count": g.Count, "reason": g.what(), "touched": g.Touched, "named": g.Named}})
	}
}

func processArgs(p *Process) map[string]any {
	args := map[string]any{
		"pid":     p.ID.PID,
		"start":   p.ID.StartTicks,
		"parent":  p.Parent.String(),
		"argv":    p.Argv,
		"outcome": p.Outcome,
		"end":     p.Exit.String(),
	}
	if p.Leaked {
		args["leaked"] = true
	}
	if len(p.Signals) > 0 {
		args["signals"] = p.Signals
	}
	if p.Reason != "" {
		args["reason"] = p.Reason
	}
	if len(p.Missing) > 0 {
		missing := make([]string, len(p.Missing))
		for i, k := range p.Missing {
			missing[i] = string(k)
		}
		args["missing"] = missing
		args["not_recorded"] = notRecorded(p)
	}
	return args
}
