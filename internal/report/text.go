package report

import (
	"bufio"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/lineage-dev/lineage/internal/lineage"
)

// TextOptions tune [Report.WriteText].
type TextOptions struct {
	// Color adds ANSI colours: leaks in bold red, reaped processes in
	// yellow, kept ones in cyan. Set it only for a terminal.
	Color bool
}

// maxIndent is the deepest level the tree draws; deeper processes are
// drawn at that indentation with their depth.
const maxIndent = 40

// ANSI styles.
const (
	styleReset = "\x1b[0m"
	styleLeak  = "\x1b[1;31m"
	styleReap  = "\x1b[33m"
	styleKept  = "\x1b[36m"
	styleDim   = "\x1b[2m"
)

type textWriter struct {
	w     *bufio.Writer
	rep   *Report
	color bool
}

// WriteText writes the report as a tree by lineage parent, like pstree: one
// line per process with its command line, pid, start (from the record's
// first event), lifetime and end; leaks marked LEAK; then the summary and
// what the record could not tell. Everything a process controls is escaped.
func (rep *Report) WriteText(w io.Writer, opts TextOptions) error {
	t := &textWriter{w: bufio.NewWriterSize(w, 64<<10), rep: rep, color: opts.Color}
	t.header()
	for _, p := range rep.tops {
		t.node(p, "", "", 0)
	}
	t.footer()
	return t.w.Flush()
}

func (t *textWriter) style(style, s string) string {
	if !t.color || style == "" {
		return s
	}
	return style + s + styleReset
}

func (t *textWriter) header() {
	h := t.rep.Header
	if !t.rep.HasHeader {
		fmt.Fprintln(t.w, "record: no header")
		return
	}
	fmt.Fprintf(t.w, "record: %s v%d, lineage %s, host %s, kernel %s, started %s\n",
		lineage.Printable(h.Schema), h.Version, lineage.Printable(h.Lineage), lineage.Printable(h.Host), lineage.Printable(h.Kernel), h.Started.UTC().Format(time.RFC3339))
	if len(h.Command) > 0 {
		fmt.Fprintf(t.w, "command: %s\n", CommandLine(&Process{Argv: h.Command}))
	}
	if h.Backend != "" {
		fmt.Fprintf(t.w, "backend: %s\n", lineage.Printable(h.Backend))
	}
}

// node writes p and its subtree. lead prefixes p's own line, indent its
// children's.
func (t *textWriter) node(p *Process, lead, indent string, depth int) {
	t.w.WriteString(t.style(styleDim, lead))
	if depth > maxIndent {
		t.w.WriteString(t.style(styleDim, fmt.Sprintf("[depth %d] ", depth)))
	}
	t.line(p)
	kids := p.children
	for i, c := range kids {
		if depth >= maxIndent {
			t.node(c, indent, indent, depth+1)
			continue
		}
		if i == len(kids)-1 {
			t.node(c, indent+"└─ ", indent+"   ", depth+1)
		} else {
			t.node(c, indent+"├─ ", indent+"│  ", depth+1)
		}
	}
}

func (t *textWriter) line(p *Process) {
	if p.Leaked {
		t.w.WriteString(t.style(styleLeak, "LEAK") + " ")
	}
	t.w.WriteString(shorten(CommandLine(p), maxLabel))
	fmt.Fprintf(t.w, "  %s", t.style(styleDim, fmt.Sprintf("pid %d +%s %s", p.ID.PID, seconds(p.Start-t.rep.First), lifetime(p))))
	end, style := t.end(p)
	fmt.Fprintf(t.w, "  %s\n", t.style(style, end))
}

// end says how p ended, and the style to say it in.
func (t *textWriter) end(p *Process) (string, string) {
	reason := ""
	if p.Reason != "" {
		reason = " (" + lineage.Printable(p.Reason) + ")"
	}
	switch p.Outcome {
	case lineage.Killed, lineage.Terminated:
		return fmt.Sprintf("reaped: %s, %s%s", strings.Join(p.Signals, "→"), p.Outcome, reason), styleReap
	case lineage.Kept:
		return "kept" + reason, styleKept
	case lineage.Leaked:
		if p.Ended {
			return "outlived its root, then " + p.Exit.String() + reason, styleLeak
		}
		return "still alive at the end of the record" + reason, styleLeak
	case lineage.Exited:
		return p.Exit.String(), ""
	}
	return "end unknown", ""
}

func lifetime(p *Process) string {
	if !p.Ended {
		return "≥" + seconds(p.Lifetime())
	}
	return "lived " + seconds(p.Lifetime())
}

func seconds(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	return fmt.Sprintf("%.3fs", d.Seconds())
}

func (t *textWriter) footer() {
	s := t.rep.Summary
	fmt.Fprintf(t.w, "\nprocesses %d, roots %d, %s, reaped %d, kept %d, lost events %d\n",
		s.Processes, s.Roots, t.style(leakStyle(s.Leaks), fmt.Sprintf("leaks %d", s.Leaks)), s.Reaped, s.Kept, s.Lost)
	if len(t.rep.Problems) > 0 {
		fmt.Fprintln(t.w, "problems with the record:")
		for _, p := range t.rep.Problems {
			fmt.Fprintf(t.w, "  %s\n", lineage.Printable(p.String()))
		}
		if t.rep.Dropped > 0 {
			fmt.Fprintf(t.w, "  and %d more\n", t.rep.Dropped)
		}
	}
	if len(t.rep.Unknowns) > 0 {
		fmt.Fprintln(t.w, "what the record can't tell:")
		for _, u := range t.rep.Unknowns {
			fmt.Fprintf(t.w, "  %s\n", u)
		}
	}
}

func leakStyle(n int) string {
	if n > 0 {
		return styleLeak
	}
	return ""
}
