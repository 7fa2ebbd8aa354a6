package lineage

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// CommandLine renders a process's command line for people, as one line
// that a POSIX shell with $'...' (bash, zsh, ksh) reads back as the same
// words:
//
//	make -j3 CC=gcc   letters, digits, -_./:,+@%= and non-ASCII but spaces: bare
//	sh -c 'a | b' ''  empty or with anything else: single-quoted, a backslash literal
//	echo 'it'\''s'    a single quote closed, escaped and reopened
//	echo $'a\nb\xff'  with a control, format or separator character or a byte that
//	                  is not UTF-8: $'...', such bytes escaped (\n, \t, \xNN), \ and ' as \\ and \'
//
// So, as with [Printable], nothing a member controls reaches the terminal
// raw. The first word is quoted too where a shell would not read it as a
// command: an assignment (with an =) or a reserved word (if, time...). A
// process with no argv shows its comm in brackets, as ps does ("[?]" when
// that is unknown too).
func CommandLine(argv []string, comm string) string {
	if len(argv) == 0 {
		if comm == "" {
			return "[?]"
		}
		return "[" + Printable(comm) + "]"
	}
	var b strings.Builder
	for i, a := range argv {
		if i > 0 {
			b.WriteByte(' ')
		}
		switch {
		case needsDollarQuote(a):
			dollarQuote(&b, a)
		case a != "" && bare(a) && (i > 0 || !strings.Contains(a, "=") && !reserved[a]):
			b.WriteString(a)
		default:
			b.WriteByte('\'')
			b.WriteString(strings.ReplaceAll(a, "'", `'\''`))
			b.WriteByte('\'')
		}
	}
	return b.String()
}

// reserved are the words a shell reads as its own in a command's place.
var reserved = map[string]bool{
	"case": true, "coproc": true, "do": true, "done": true, "elif": true, "else": true, "esac": true,
	"fi": true, "for": true, "function": true, "if": true, "in": true, "select": true, "then": true,
	"time": true, "until": true, "while": true,
}

// bare reports whether a means itself to a shell unquoted: nothing in it
// splits, expands, globs, redirects or comments.
func bare(a string) bool {
	for _, r := range a {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', strings.ContainsRune("-_./:,+@%=", r):
		case r >= utf8.RuneSelf && !unicode.IsSpace(r):
		default:
			return false
		}
	}
	return true
}

func needsDollarQuote(a string) bool {
	return !utf8.ValidString(a) || strings.IndexFunc(a, unsafeRune) >= 0
}

// dollarQuote writes a as $'...'. A \xNN escape followed by a hex digit
// ends the quote and opens another, since POSIX leaves \x with more than
// two digits unspecified.
func dollarQuote(b *strings.Builder, a string) {
	const controls, letters = "\a\b\t\n\v\f\r", "abtnvfr"
	b.WriteString("$'")
	hex := false // the last thing written is a \xNN
	for i := 0; i < len(a); {
		r, size := utf8.DecodeRuneInString(a[i:])
		escaped := r == utf8.RuneError && size == 1 || unsafeRune(r)
		if !escaped && hex && strings.ContainsRune("0123456789abcdefABCDEF", r) {
			b.WriteString(`'$'`)
		}
		hex = false
		switch {
		case escaped:
			for _, c := range []byte(a[i : i+size]) {
				if k := strings.IndexByte(controls, c); k >= 0 {
					b.WriteByte('\\')
					b.WriteByte(letters[k])
					hex = false
					continue
				}
				fmt.Fprintf(b, `\x%02x`, c)
				hex = true
			}
		case r == '\\' || r == '\'':
			b.WriteByte('\\')
			b.WriteRune(r)
		default:
			b.WriteString(a[i : i+size])
		}
		i += size
	}
	b.WriteByte('\'')
}
