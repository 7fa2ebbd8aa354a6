package lineage

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxArgvBytes bounds the command line kept of one process, in memory and
// in reports, counting a separator after each argument as /proc does.
const MaxArgvBytes = 4096

// ArgvCut is the last element of a command line that was cut at
// [MaxArgvBytes].
const ArgvCut = "…[cut]"

// ArgvMask replaces each part of an argv word that a redaction pattern
// matches.
const ArgvMask = "***"

// RedactArgv returns argv with every match of re in each word replaced by
// [ArgvMask], and whether anything was; argv itself is never changed. A
// nil re masks nothing.
func RedactArgv(re *regexp.Regexp, argv []string) ([]string, bool) {
	if re == nil || len(argv) == 0 {
		return argv, false
	}
	out := make([]string, len(argv))
	masked := false
	for i, a := range argv {
		out[i] = re.ReplaceAllLiteralString(a, ArgvMask)
		masked = masked || out[i] != a
	}
	return out, masked
}

// CapArgv returns argv within [MaxArgvBytes], cut and marked with
// [ArgvCut] when it was longer; argv itself when it fits.
func CapArgv(argv []string) []string {
	n := 0
	for i, a := range argv {
		if n+len(a)+1 <= MaxArgvBytes {
			n += len(a) + 1
			continue
		}
		out := make([]string, 0, i+2)
		out = append(out, argv[:i]...)
		if room := MaxArgvBytes - n; room > 1 {
			out = append(out, strings.Clone(strings.ToValidUTF8(a[:room-1], "")))
		}
		return append(out, ArgvCut)
	}
	return argv
}

// ArgvFromCmdline splits a raw /proc/PID/cmdline read of at most
// [MaxArgvBytes]+1 bytes into arguments, marking it cut when it was longer.
//
// A trailing run of empty arguments is dropped. A process that rewrites its
// title in place (setproctitle: redis-server, postgres, sshd) leaves the
// rest of its old argv as NUL bytes, which read as tens of empty arguments,
// and /proc can't tell that padding from a real trailing empty argument:
// "prog\x00\x00" is both prog with one byte of padding and prog "". So
// prog "" reads as prog, as the BPF backend's exec events read it too.
// Empty arguments between others are kept.
func ArgvFromCmdline(raw []byte) []string {
	cut := len(raw) > MaxArgvBytes
	if cut {
		raw = raw[:MaxArgvBytes]
	}
	s := strings.TrimRight(string(raw), "\x00")
	if s == "" && !cut {
		return nil
	}
	argv := strings.Split(s, "\x00")
	if cut {
		argv[len(argv)-1] = strings.ToValidUTF8(argv[len(argv)-1], "")
		argv = append(argv, ArgvCut)
	}
	return argv
}

// Printable returns s safe to print on a terminal, with what a member
// controls (its argv, comm, executable path) unable to move the cursor,
// clear the screen, reorder text or forge a line of lineage's output: a
// byte that is not UTF-8 is written \xNN; control characters (C0, DEL,
// C1), format characters (the bidi overrides among them) and the line and
// paragraph separators as Go escapes them (\n, \x1b, \u202e...); and a
// backslash as \\, so that an escape on the page always means one.
func Printable(s string) string {
	if !needsEscape(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size <= 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\\':
			b.WriteString(`\\`)
		case unsafeRune(r):
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

func needsEscape(s string) bool {
	for _, r := range s {
		if r == utf8.RuneError || r == '\\' || unsafeRune(r) {
			return true
		}
	}
	return false
}

func unsafeRune(r rune) bool {
	return unicode.IsControl(r) || r == '\u2028' || r == '\u2029' || unicode.Is(unicode.Cf, r)
}
