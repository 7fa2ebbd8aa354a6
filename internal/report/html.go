package report

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/lineage-dev/lineage/internal/record"
	"github.com/lineage-dev/lineage/lineage"
)

// The HTML report's limits.
const (
	// MaxHTMLProcesses is the most processes WriteHTML accepts: the page
	// holds them all in memory.
	MaxHTMLProcesses = 50_000
	// MaxHTMLRecord is the largest record, in bytes, that the html format
	// reads (see cmd/lineage's report command).
	MaxHTMLRecord = 256 << 20
)

// ErrTooLarge is wrapped when a record is too large for the html format.
var ErrTooLarge = errors.New("too large for the html report")

//go:embed assets/report.html
var page []byte

// dataMark is where the page takes its data.
var dataMark = []byte("/*DATA*/")

// htmlProcess is a Process as the page's script reads it, without what is
// usual, since a page holds thousands: Up is the index of its lineage
// parent in the page's list (-1 for a top, whose parent, outside the
// record, is named by Parent; the depth follows from Up); Outcome is left
// out when "exited", Exit when "exit 0", Exe when it is argv[0]; Open marks
// a process whose end the record lacks. Cmd is its command line as the text
// report writes it ([CommandLine]: quoted for a shell, [comm] without argv);
// Was are those of its earlier execs, oldest first.
type htmlProcess struct {
	PID      uint32         `json:"pid"`
	Start    uint64         `json:"start"`
	Up       int            `json:"up"`
	Parent   string         `json:"parent,omitempty"`
	Cmd      string         `json:"cmd"`
	Was      []string       `json:"was,omitempty"`
	Exe      string         `json:"exe,omitempty"`
	StartUS  int64          `json:"start_us"`
	EndUS    int64          `json:"end_us"`
	Open     bool           `json:"open,omitempty"`
	Exit     string         `json:"exit,omitempty"`
	Outcome  lineage.Result `json:"outcome,omitempty"`
	Leaked   bool           `json:"leaked,omitempty"`
	Outlived bool           `json:"outlived,omitempty"`
	Signals  []string       `json:"signals,omitempty"`
	Reason   string         `json:"reason,omitempty"`
	Redacted bool           `json:"redacted,omitempty"`
	Missing  []record.Kind  `json:"missing,omitempty"`
}

// htmlProcessOf is p as the page reads it; up is its parent's index.
func htmlProcessOf(rep *Report, p *Process, up int) htmlProcess {
	hp := htmlProcess{
		PID: p.ID.PID, Start: p.ID.StartTicks, Up: up, Cmd: CommandLine(p), Exe: p.Exe,
		StartUS: (p.Start - rep.First).Microseconds(), EndUS: (p.End - rep.First).Microseconds(),
		Open: !p.Ended, Outcome: p.Outcome, Leaked: p.Leaked, Outlived: p.outlived,
		Signals: p.Signals, Reason: p.Reason, Redacted: p.Redacted, Missing: p.Missing,
	}
	for _, e := range p.Earlier {
		hp.Was = append(hp.Was, e.commandLine(p))
	}
	if up < 0 {
		hp.Parent = p.Parent.String()
	}
	if len(p.Argv) > 0 && p.Exe == p.Argv[0] && strings.HasPrefix(p.Exe, "/") {
		hp.Exe = ""
	}
	if p.Outcome == lineage.Exited {
		hp.Outcome = ""
	}
	if exit := p.Exit.String(); p.Ended && exit != "exit 0" {
		hp.Exit = exit
	}
	return hp
}

// htmlEntry is an entry of the highlights as the page reads it: the
// process's index in the page's list, and the list's measure.
type htmlEntry struct {
	I     int   `json:"i"`
	Count int64 `json:"count,omitempty"`
}

// htmlHighlights are the report's highlights by index.
type htmlHighlights struct {
	LongestLived  []htmlEntry `json:"longest_lived"`
	OutlivedRoot  []htmlEntry `json:"outlived_root"`
	TopByChildren []htmlEntry `json:"top_by_children"`
	TopBySubtree  []htmlEntry `json:"top_by_subtree"`
	CPUTime       string      `json:"cpu_time"`
}

// htmlData is everything the page shows, inlined as JSON. Its highlights
// name processes by index, and the missing events are the processes' own;
// CommandLine is the header's command, quoted as a process's Cmd is.
type htmlData struct {
	*Report
	CommandLine string         `json:"command_line,omitempty"`
	SpanUS      int64          `json:"span_us"`
	Processes   []htmlProcess  `json:"processes"`
	Highlights  htmlHighlights `json:"highlights"`
	Missing     []Missing      `json:"missing_events,omitempty"`
}

// WriteHTML writes one self-contained HTML page: no external assets, no
// network. It leads with a summary (the counts; the leaks, kept and reaped
// processes; the longest-lived and those that outlived their root; the top
// spawners; the losses, each process a link to its row), then the tree by
// lineage parent with a timeline bar per process, coloured by outcome:
// subtrees collapsed, opened by a click, the path to every leak open. A
// search box filters by argv and pid, a menu by outcome (or events lost); a
// filter shows the matches with their ancestors. Only the rows in view are
// drawn, so the page stays responsive at MaxHTMLProcesses. The data is
// inlined in a <script type="application/json" id="lineage-data"> block,
// JSON with <, > and & escaped so that no argv can close the script. It
// refuses more than MaxHTMLProcesses processes (the error wraps ErrTooLarge
// and says what to use instead).
func (rep *Report) WriteHTML(w io.Writer) error {
	if n := rep.Summary.Processes; n > MaxHTMLProcesses {
		return fmt.Errorf("html report: %d processes: %w (at most %d): use --format chrome-trace and open it in Perfetto (ui.perfetto.dev), or --format tree", n, ErrTooLarge, MaxHTMLProcesses)
	}
	d := htmlData{Report: rep, SpanUS: (rep.Last - rep.First).Microseconds()}
	if len(rep.Header.Command) > 0 {
		d.CommandLine = CommandLine(&Process{Argv: rep.Header.Command})
	}
	index := make(map[*Process]int, rep.Summary.Processes)
	var ups []*Process // the path from a top to the process last visited
	rep.Walk(func(p *Process) bool {
		index[p] = len(d.Processes)
		ups = append(ups[:p.Depth], p)
		up := -1
		if p.Depth > 0 {
			up = index[ups[p.Depth-1]]
		}
		d.Processes = append(d.Processes, htmlProcessOf(rep, p, up))
		return true
	})
	h := rep.Highlights
	d.Highlights = htmlHighlights{
		LongestLived: byIndex(h.LongestLived, index), OutlivedRoot: byIndex(h.OutlivedRoot, index),
		TopByChildren: byIndex(h.TopByChildren, index), TopBySubtree: byIndex(h.TopBySubtree, index),
		CPUTime: h.CPUTime,
	}
	data, err := json.Marshal(d)
	if err != nil {
		return fmt.Errorf("html report: %w", err)
	}
	before, after, ok := bytes.Cut(page, dataMark)
	if !ok {
		return errors.New("html report: the page has no data mark")
	}
	for _, part := range [][]byte{before, data, after} {
		if _, err := w.Write(part); err != nil {
			return fmt.Errorf("html report: %w", err)
		}
	}
	return nil
}

func byIndex(entries []Entry, index map[*Process]int) []htmlEntry {
	out := make([]htmlEntry, len(entries))
	for i, e := range entries {
		out[i] = htmlEntry{I: index[e.p], Count: e.Count}
	}
	return out
}
