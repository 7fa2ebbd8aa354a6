package deploy

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The repository's top, from this package's directory.
const top = ".."

// docFiles are the markdown files whose commands are checked: every
// `lineage` command must parse against the command tree, every `make`
// target and variable must be the Makefile's, every `go test` package and
// pattern must name real code, and every lineage-bench flag must exist.
var docFiles = []string{
	"README.md",
	"CONTRIBUTING.md",
	"deploy/README.md",
	"docs/design.md",
	"docs/serve.md",
	"docs/benchmarks.md",
	"docs/record.md",
	"docs/api.md",
}

// A docBlock is one fenced code block of a markdown file.
type docBlock struct {
	lang  string // what follows the opening fence: sh, python, ...
	line  int    // the line of its first content line, from 1
	lines []string
}

// fencedBlocks returns the fenced code blocks of a markdown file, in order.
func fencedBlocks(t *testing.T, path string) []docBlock {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(top, path))
	if err != nil {
		t.Fatal(err)
	}
	var out []docBlock
	var cur *docBlock
	for i, line := range strings.Split(string(raw), "\n") {
		fence, isFence := strings.CutPrefix(strings.TrimSpace(line), "```")
		switch {
		case isFence && cur == nil:
			cur = &docBlock{lang: strings.TrimSpace(fence), line: i + 2}
		case isFence:
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			cur.lines = append(cur.lines, line)
		}
	}
	if cur != nil {
		t.Fatalf("%s: a code block opened at line %d is never closed", path, cur.line-1)
	}
	return out
}

// A docCommand is one simple command of a shell block: a pipeline or a
// list (`a && b`) gives one each.
type docCommand struct {
	where string // file:line
	text  string // the line as written, continuations joined
	env   []string
	words []string // the program and its arguments, sudo and env dropped
}

func (c docCommand) String() string { return c.where + ": " + c.text }

// shellCommands returns the commands of the file's ```sh blocks.
func shellCommands(t *testing.T, path string) []docCommand {
	t.Helper()
	var out []docCommand
	for _, b := range fencedBlocks(t, path) {
		if b.lang != "sh" {
			continue
		}
		for i := 0; i < len(b.lines); i++ {
			start := i
			text := b.lines[i]
			for strings.HasSuffix(text, `\`) && i+1 < len(b.lines) {
				i++
				text = strings.TrimSuffix(text, `\`) + " " + strings.TrimSpace(b.lines[i])
			}
			where := fmt.Sprintf("%s:%d", path, b.line+start)
			words, err := shellWords(text)
			if err != nil {
				t.Errorf("%s: %v", where, err)
				continue
			}
			for _, simple := range splitList(words) {
				c := docCommand{where: where, text: strings.TrimSpace(text)}
				c.env, c.words = dropPrefixes(simple)
				if len(c.words) > 0 {
					out = append(out, c)
				}
			}
		}
	}
	return out
}

// shellWords splits a line as sh would into words, quotes removed, up to
// an unquoted comment. It knows single and double quotes and backslashes:
// what the docs use.
func shellWords(line string) ([]string, error) {
	var words []string
	var w strings.Builder
	inWord := false
	var quote rune
	for i, r := range line {
		switch {
		case quote == '\'':
			if r == '\'' {
				quote = 0
			} else {
				w.WriteRune(r)
			}
		case quote == '"':
			if r == '"' {
				quote = 0
			} else {
				w.WriteRune(r)
			}
		case r == '\'' || r == '"':
			quote, inWord = r, true
		case r == ' ' || r == '\t':
			if inWord {
				words = append(words, w.String())
				w.Reset()
				inWord = false
			}
		case r == '#' && !inWord:
			return words, nil
		case r == '\\' && i+1 < len(line):
			// The next character is taken as is: handled by keeping the
			// backslash, since the docs' only use is inside regexps.
			w.WriteRune(r)
			inWord = true
		default:
			w.WriteRune(r)
			inWord = true
		}
	}
	if quote != 0 {
		return nil, fmt.Errorf("unclosed %c quote in %q", quote, line)
	}
	if inWord {
		words = append(words, w.String())
	}
	return words, nil
}

// splitList cuts words at the list and pipeline operators, and drops a
// trailing `&`.
func splitList(words []string) [][]string {
	var out [][]string
	var cur []string
	for _, w := range words {
		switch w {
		case "&&", "||", ";", "|", "&":
			out = append(out, cur)
			cur = nil
		default:
			cur = append(cur, w)
		}
	}
	return append(out, cur)
}

// dropPrefixes takes off what runs the command rather than being it:
// VAR=value assignments, sudo, and taskset's CPU list.
func dropPrefixes(words []string) (env, rest []string) {
	for len(words) > 0 {
		switch {
		case isAssignment(words[0]):
			env = append(env, words[0])
			words = words[1:]
		case words[0] == "sudo":
			words = words[1:]
		case words[0] == "taskset" && len(words) > 2 && words[1] == "-c":
			words = words[3:]
		default:
			return env, words
		}
	}
	return env, nil
}

// isAssignment: NAME=value, NAME a shell variable name.
func isAssignment(w string) bool {
	name, _, ok := strings.Cut(w, "=")
	if !ok || name == "" {
		return false
	}
	for i, r := range name {
		if !(r == '_' || r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || i > 0 && r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

func TestShellWords(t *testing.T) {
	for _, c := range []struct {
		line string
		want []string
	}{
		{`lineage run --deadline 30m -- ./ci.sh   # a comment`, []string{"lineage", "run", "--deadline", "30m", "--", "./ci.sh"}},
		{`lineage session open t --label "fix the build"`, []string{"lineage", "session", "open", "t", "--label", "fix the build"}},
		{`lineage run --redact 'token=\S+' -- x`, []string{"lineage", "run", "--redact", `token=\S+`, "--", "x"}},
		{`go test -run '^$' ./x`, []string{"go", "test", "-run", "^$", "./x"}},
		{`a#b c`, []string{"a#b", "c"}},
	} {
		got, err := shellWords(c.line)
		if err != nil || strings.Join(got, "\x00") != strings.Join(c.want, "\x00") {
			t.Errorf("shellWords(%q) = %q, %v; want %q", c.line, got, err, c.want)
		}
	}
	if _, err := shellWords(`echo "open`); err == nil {
		t.Error("an unclosed quote is not an error")
	}
	env, rest := dropPrefixes([]string{"KERNELS=6.1", "sudo", "taskset", "-c", "0", "make", "kmatrix"})
	if strings.Join(env, " ") != "KERNELS=6.1" || strings.Join(rest, " ") != "make kmatrix" {
		t.Errorf("dropPrefixes: %q %q", env, rest)
	}
	if got := splitList([]string{"make", "build", "&&", "go", "run", "x", "&"}); len(got) != 3 || len(got[2]) != 0 {
		t.Errorf("splitList: %q", got)
	}
}
