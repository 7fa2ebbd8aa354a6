package report

import (
	"fmt"
	"strings"
	"time"

	"github.com/lineage-dev/lineage/lineage"
)

// summaryLabel is how many runes of a command line the summary shows.
const summaryLabel = 100

// summary writes what the text report leads with: the counts, then each
// list of the highlights, then the losses.
func (t *textWriter) summary() {
	s, h := t.rep.Summary, t.rep.Highlights
	parts := []string{
		fmt.Sprintf("%d processes (%d %s)", s.Processes, s.Roots, lineage.Plural(s.Roots, "root", "roots")),
		t.style(leakStyle(s.Leaks), fmt.Sprintf("%d %s", s.Leaks, lineage.Plural(s.Leaks, "leak", "leaks"))),
		fmt.Sprintf("%d kept", s.Kept),
		fmt.Sprintf("%d reaped (%d killed)", s.Reaped, s.Killed),
		fmt.Sprintf("%d outlived their root", s.OutlivedRoot),
		fmt.Sprintf("%d end unknown", s.Unended),
		fmt.Sprintf("%d %s lost", s.Lost, lineage.Plural(s.Lost, "event", "events")),
	}
	fmt.Fprintf(t.w, "\nsummary: %s\n", strings.Join(parts, ", "))
	t.list("leaks", s.Leaks, h.Leaks, "--leaks-only draws their paths", func(e Entry) string { return t.endOf(e.p) })
	t.list("kept", s.Kept, h.Kept, "", func(e Entry) string { return t.endOf(e.p) })
	t.list("reaped", s.Reaped, h.Reaped, "", func(e Entry) string { return t.endOf(e.p) })
	t.list("longest-lived", -1, h.LongestLived, "", func(e Entry) string { return lifetime(e.p) })
	t.list("outlived their root", s.OutlivedRoot, h.OutlivedRoot, "", func(e Entry) string {
		return fmt.Sprintf("%s after its root's exit, %s", seconds(time.Duration(e.Count)), t.endOf(e.p))
	})
	t.list("top spawners by children", -1, h.TopByChildren, "", func(e Entry) string {
		return fmt.Sprintf("%d %s", e.Count, lineage.Plural(e.Count, "child", "children"))
	})
	t.list("top spawners by subtree", -1, h.TopBySubtree, "", func(e Entry) string {
		return fmt.Sprintf("%d %s", e.Count, lineage.Plural(e.Count, "descendant", "descendants"))
	})
	fmt.Fprintf(t.w, "  top spawners by CPU time: %s\n", h.CPUTime)
	t.losses()
}

// list writes one list of the highlights: its title and count (n, or the
// list's length when n < 0), then one line per process; how it says what
// the list is about for each.
func (t *textWriter) list(title string, n int, entries []Entry, hint string, how func(Entry) string) {
	count := ""
	if n >= 0 {
		count = fmt.Sprintf(" %d", n)
	} else {
		n = len(entries)
	}
	if n == 0 {
		fmt.Fprintf(t.w, "  %s: none\n", title)
		return
	}
	if hint != "" {
		hint = " (" + hint + ")"
	}
	fmt.Fprintf(t.w, "  %s:%s%s\n", title, count, hint)
	for i, e := range entries {
		if i == textListLimit {
			break
		}
		fmt.Fprintf(t.w, "    %s  %s  %s\n", shorten(e.Command, summaryLabel), t.style(styleDim, fmt.Sprintf("pid %d", e.Process.PID)), how(e))
	}
	if more := n - min(len(entries), textListLimit); more > 0 && count != "" {
		fmt.Fprintf(t.w, "    … and %d more\n", more)
	}
}

// endOf says how p ended, styled.
func (t *textWriter) endOf(p *Process) string {
	end, style := t.end(p)
	return t.style(style, end)
}

// losses writes the record's gaps: how many events each lost, when (if
// the record says), and how many processes the report marks for it.
func (t *textWriter) losses() {
	rep := t.rep
	if len(rep.Gaps) == 0 {
		fmt.Fprintln(t.w, "  losses: none")
		return
	}
	fmt.Fprintf(t.w, "  losses: %d %s in %d %s, %d %s marked\n", rep.Summary.Lost, lineage.Plural(rep.Summary.Lost, "event", "events"),
		len(rep.Gaps), lineage.Plural(len(rep.Gaps), "loss", "losses"), rep.Summary.Missing, lineage.Plural(rep.Summary.Missing, "process", "processes"))
	for _, g := range rep.Gaps {
		fmt.Fprintf(t.w, "    %s\n", t.style(styleReap, t.gapLine(g)))
	}
	for i, m := range rep.Missing {
		if i == textListLimit {
			fmt.Fprintf(t.w, "    … and %d more marked in the tree\n", len(rep.Missing)-i)
			break
		}
		fmt.Fprintf(t.w, "    %s  %s  %s\n", shorten(m.Command, summaryLabel), t.style(styleDim, fmt.Sprintf("pid %d", m.Process.PID)), eventsNotRecorded(m.Events))
	}
}

// gapLine says what one gap lost, when, and whom it touched.
func (t *textWriter) gapLine(g Gap) string {
	s := fmt.Sprintf("%s: %d", lineage.Printable(g.what()), g.Count)
	if g.Escapes {
		return s + " (processes the full membership map could not hold, killed at birth or let run untracked as --on-full said: no event of the record's is missing)"
	}
	if g.Placed {
		s += fmt.Sprintf(", between +%s and +%s", seconds(g.From-t.rep.First), seconds(g.To-t.rep.First))
	} else {
		s += fmt.Sprintf(", not placed in time (the loss was written at +%s)", seconds(g.At-t.rep.First))
	}
	if g.Named > 0 {
		s += fmt.Sprintf(", naming %d %s", g.Named, lineage.Plural(g.Named, "process", "processes"))
	}
	return s + fmt.Sprintf(": %d %s touched", g.Touched, lineage.Plural(g.Touched, "process", "processes"))
}
