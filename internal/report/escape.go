package report

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// maxLabel is how many runes of a command line the text tree shows.
const maxLabel = 200

// Clean returns s safe to print on a terminal: control characters (C0, DEL,
// C1, and the Unicode format characters that reorder text) and invalid
// UTF-8 are written as Go escapes, so that a process can't move the cursor,
// recolour the screen or hide text with its argv.
func Clean(s string) string {
	if isClean(s) {
		return s
	}
	var b strings.Builder
	for i, w := 0, 0; i < len(s); i += w {
		r, size := utf8.DecodeRuneInString(s[i:])
		w = size
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\\':
			b.WriteString(`\\`)
		case unsafeRune(r):
			b.WriteString(strings.Trim(strconv.QuoteRune(r), "'"))
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

func isClean(s string) bool {
	for _, r := range s {
		if r == utf8.RuneError || r == '\\' || unsafeRune(r) {
			return false
		}
	}
	return true
}

func unsafeRune(r rune) bool {
	return unicode.IsControl(r) || unicode.Is(unicode.Cf, r)
}

// CommandLine renders argv as one line of cleaned words, quoting those that
// are empty or hold spaces; a process with no argv shows its comm in
// brackets, as ps does.
func CommandLine(p *Process) string {
	if len(p.Argv) == 0 {
		if p.Comm == "" {
			return "[?]"
		}
		return "[" + Clean(p.Comm) + "]"
	}
	words := make([]string, len(p.Argv))
	for i, a := range p.Argv {
		if a == "" || strings.ContainsAny(a, " \t'\"") {
			words[i] = strconv.Quote(a)
		} else {
			words[i] = Clean(a)
		}
	}
	line := strings.Join(words, " ")
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
