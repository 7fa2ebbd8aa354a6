package report

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/lineage-dev/lineage/internal/lineage"
)

// The HTML report's limits.
const (
	// DrawLimit is how many processes the timeline draws; beyond it the
	// page says how many are not drawn and its search narrows them down.
	DrawLimit = 2000
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

// htmlProcess is a Process as the page's script reads it.
type htmlProcess struct {
	PID      uint32         `json:"pid"`
	Start    uint64         `json:"start"`
	Parent   string         `json:"parent"`
	Depth    int            `json:"depth"`
	Argv     []string       `json:"argv,omitempty"`
	Comm     string         `json:"comm,omitempty"`
	Exe      string         `json:"exe,omitempty"`
	StartUS  int64          `json:"start_us"`
	EndUS    int64          `json:"end_us"`
	Ended    bool           `json:"ended"`
	Exit     string         `json:"exit"`
	Outcome  lineage.Result `json:"outcome"`
	Leaked   bool           `json:"leaked,omitempty"`
	Signals  []string       `json:"signals,omitempty"`
	Reason   string         `json:"reason,omitempty"`
	Redacted bool           `json:"redacted,omitempty"`
}

// htmlData is everything the page shows, inlined as JSON.
type htmlData struct {
	*Report
	SpanUS    int64         `json:"span_us"`
	DrawLimit int           `json:"draw_limit"`
	Processes []htmlProcess `json:"processes"`
}

// WriteHTML writes one self-contained HTML page: no external assets, no
// network. It shows a summary, the record's problems, and a timeline with
// one bar per process in tree order, coloured by outcome, leaks marked,
// details on hover and a search box. The data is inlined in a
// <script type="application/json" id="lineage-data"> block, JSON with <, >
// and & escaped so that no argv can close the script. It draws at most
// DrawLimit bars and refuses more than MaxHTMLProcesses processes (the
// error wraps ErrTooLarge and says what to use instead).
func (rep *Report) WriteHTML(w io.Writer) error {
	if n := rep.Summary.Processes; n > MaxHTMLProcesses {
		return fmt.Errorf("html report: %d processes: %w (at most %d): use --format chrome-trace and open it in Perfetto (ui.perfetto.dev), or --format tree", n, ErrTooLarge, MaxHTMLProcesses)
	}
	d := htmlData{Report: rep, DrawLimit: DrawLimit, SpanUS: (rep.Last - rep.First).Microseconds()}
	rep.Walk(func(p *Process) bool {
		d.Processes = append(d.Processes, htmlProcess{
			PID: p.ID.PID, Start: p.ID.StartTicks, Parent: p.Parent.String(), Depth: p.Depth,
			Argv: p.Argv, Comm: p.Comm, Exe: p.Exe,
			StartUS: (p.Start - rep.First).Microseconds(), EndUS: (p.End - rep.First).Microseconds(),
			Ended: p.Ended, Exit: p.Exit.String(), Outcome: p.Outcome, Leaked: p.Leaked,
			Signals: p.Signals, Reason: p.Reason, Redacted: p.Redacted,
		})
		return true
	})
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
