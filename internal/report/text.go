package report

import (
	"bufio"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/lineage-dev/lineage/lineage"
)

// TextOptions tune [Report.WriteText].
type TextOptions struct {
	// Color adds ANSI colours: leaks in bold red, reaped processes in
	// yellow, kept ones in cyan. Set it only for a terminal.
	Color bool
	// LeaksOnly draws only the paths to leaks: each leak and its
	// ancestors.
	LeaksOnly bool
	// Levels, when positive, is how many levels of the tree are drawn (1:
	// the tops alone); each subtree cut off is summarised in one line
	// ("… 37 more processes").
	Levels int
}

// textListLimit is how many processes each list of the text's summary
// shows.
const textListLimit = 5

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
	opts  TextOptions
	drawn int
}

// WriteText writes the report: its header, a summary that leads with what
// matters (leaks, kept, reaped, the longest-lived, those that outlived their
// root, the top spawners, the losses), then a tree by lineage parent, like
// pstree: one line per process with its command line, pid, start (from the
// record's first event), lifetime and end; leaks marked LEAK, events lost
// in a gap marked "fork not recorded" and the like; then the counts and what
// the record could not tell. Everything a process controls is escaped.
func (rep *Report) WriteText(w io.Writer, opts TextOptions) error {
	t := &textWriter{w: bufio.NewWriterSize(w, 64<<10), rep: rep, color: opts.Color, opts: opts}
	t.header()
	t.summary()
	fmt.Fprintln(t.w)
	tops := rep.tops
	if opts.LeaksOnly {
		tops = onLeakPaths(tops)
		if len(tops) == 0 {
			fmt.Fprintf(t.w, "no leaks: no process of the %d in the record was alive when its root ended\n", rep.Summary.Processes)
		}
	}
	for _, p := range tops {
		t.node(p, "", "", 0)
	}
	if opts.LeaksOnly && len(tops) > 0 {
		fmt.Fprintf(t.w, "(leaks only: %d of %d %s drawn, those on the %s to the %d %s)\n", t.drawn, rep.Summary.Processes, lineage.Plural(rep.Summary.Processes, "process", "processes"),
			lineage.Plural(rep.Summary.Leaks, "path", "paths"), rep.Summary.Leaks, lineage.Plural(rep.Summary.Leaks, "leak", "leaks"))
	}
	t.footer()
	return t.w.Flush()
}

// onLeakPaths returns the processes of ps with a leak in their subtree.
func onLeakPaths(ps []*Process) []*Process {
	var out []*Process
	for _, p := range ps {
		if p.leaksBelow > 0 {
			out = append(out, p)
		}
	}
	return out
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
	t.drawn++
	kids := p.children
	if t.opts.LeaksOnly {
		kids = onLeakPaths(kids)
	}
	if len(kids) > 0 && t.opts.Levels > 0 && depth+1 >= t.opts.Levels {
		t.w.WriteString(t.style(styleDim, t.childLead(indent, depth, true)+cutOff(p)))
		t.w.WriteByte('\n')
		return
	}
	for i, c := range kids {
		last := i == len(kids)-1
		t.node(c, t.childLead(indent, depth, last), t.childIndent(indent, depth, last), depth+1)
	}
}

// childLead and childIndent are what prefix the line of a child of a
// process at depth, and its own children's lines.
func (t *textWriter) childLead(indent string, depth int, last bool) string {
	switch {
	case depth >= maxIndent:
		return indent
	case last:
		return indent + "└─ "
	}
	return indent + "├─ "
}

func (t *textWriter) childIndent(indent string, depth int, last bool) string {
	switch {
	case depth >= maxIndent:
		return indent
	case last:
		return indent + "   "
	}
	return indent + "│  "
}

// cutOff summarises p's subtree below p, which the depth limit cuts off.
func cutOff(p *Process) string {
	s := fmt.Sprintf("… %d more %s", p.descendants, lineage.Plural(p.descendants, "process", "processes"))
	if n := p.leaksBelow - b2i(p.Leaked); n > 0 {
		s += fmt.Sprintf(", %d %s among them", n, lineage.Plural(n, "leak", "leaks"))
	}
	return s
}

func (t *textWriter) line(p *Process) {
	if p.Leaked {
		t.w.WriteString(t.style(styleLeak, "LEAK") + " ")
	}
	t.w.WriteString(shorten(CommandLine(p), maxLabel))
	fmt.Fprintf(t.w, "  %s", t.style(styleDim, fmt.Sprintf("pid %d +%s %s", p.ID.PID, seconds(p.Start-t.rep.First), lifetime(p))))
	end, style := t.end(p)
	fmt.Fprintf(t.w, "  %s", t.style(style, end))
	if missing := notRecorded(p); missing != "" {
		fmt.Fprintf(t.w, "  %s", t.style(styleReap, "["+missing+"]"))
	}
	if p.UnderRoot {
		fmt.Fprintf(t.w, "  %s", t.style(styleDim, parentUnknown(p)))
	}
	if was := earlierExecs(p); was != "" {
		fmt.Fprintf(t.w, "  %s", t.style(styleDim, was))
	}
	t.w.WriteByte('\n')
}

// maxEarlierLabel is how many runes of each earlier exec's command line
// the tree shows.
const maxEarlierLabel = 50

// earlierExecs names what p ran before its last exec, oldest first:
// "[was: sh -c 'exec redis-server']"; "" when it exec'd once or never.
func earlierExecs(p *Process) string {
	if len(p.Earlier) == 0 {
		return ""
	}
	words := make([]string, len(p.Earlier))
	for i, e := range p.Earlier {
		words[i] = shorten(e.commandLine(p), maxEarlierLabel)
	}
	return "[was: " + strings.Join(words, ", then ") + "]"
}

// parentUnknown says why p, placed under its root, is not under its parent.
func parentUnknown(p *Process) string {
	if p.Parent.IsZero() {
		return "[parent unknown]"
	}
	return fmt.Sprintf("[parent %s not in the record]", p.Parent)
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
		if p.Untracked && p.Contained {
			return p.Exit.String() + reason, styleReap
		}
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
