package report

import (
	"unicode/utf8"

	"github.com/lineage-dev/lineage/lineage"
)

// maxLabel is how many runes of a command line the text tree shows.
const maxLabel = 200

// CommandLine renders p's command line as one line ([lineage.CommandLine]),
// marked when the record cut it.
func CommandLine(p *Process) string {
	line := lineage.CommandLine(p.Argv, p.Comm)
	if p.ArgvTruncated {
		line += " …"
	}
	return line
}

// shorten cuts s to n runes, marking the cut.
func shorten(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}
