package lineage

import (
	"slices"
	"strings"
	"testing"
)

func argvBytes(argv []string) int {
	n := 0
	for _, a := range argv {
		n += len(a) + 1
	}
	return n
}

func TestCapArgv(t *testing.T) {
	big := strings.Repeat("x", 100*1024)
	for _, c := range []struct {
		name string
		in   []string
		cut  bool
	}{
		{"short", []string{"sleep", "1"}, false},
		{"exactly the cap", []string{strings.Repeat("a", MaxArgvBytes-1)}, false},
		{"one byte over", []string{strings.Repeat("a", MaxArgvBytes)}, true},
		{"one huge argument", []string{"sh", big}, true},
		{"many arguments", slices.Repeat([]string{"0123456789"}, 1000), true},
		{"utf-8 cut in a rune", []string{strings.Repeat("é", MaxArgvBytes)}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := CapArgv(c.in)
			if !c.cut {
				if !slices.Equal(got, c.in) {
					t.Errorf("changed an argv that fits")
				}
				return
			}
			if got[len(got)-1] != ArgvCut {
				t.Errorf("cut not marked: ends %q", got[len(got)-1])
			}
			if n := argvBytes(got[:len(got)-1]); n > MaxArgvBytes {
				t.Errorf("%d bytes kept, want at most %d", n, MaxArgvBytes)
			}
			if got[0] != c.in[0][:len(got[0])] && !strings.HasPrefix(c.in[0], got[0]) {
				t.Errorf("the start of the argv was not kept")
			}
			for _, a := range got {
				if !strings.ContainsRune(a, '\uFFFD') && !strings.HasPrefix(a, "…") && strings.ToValidUTF8(a, "") != a {
					t.Errorf("invalid UTF-8 kept: %q", a)
				}
			}
		})
	}
}

func TestArgvFromCmdline(t *testing.T) {
	for _, c := range []struct {
		name string
		raw  string
		want []string
	}{
		{"plain", "sleep\x001\x00", []string{"sleep", "1"}},
		{"empty", "", nil},
		{"only NULs", "\x00\x00\x00", nil},
		{"no final NUL", "sleep\x001", []string{"sleep", "1"}},
		{"empty words between others kept", "printf\x00\x00%s\x00\x00x\x00", []string{"printf", "", "%s", "", "x"}},
		// setproctitle leaves the rest of the old argv as NULs.
		{"rewritten title", "redis-server unixsocket:/tmp/x/r.sock" + strings.Repeat("\x00", 28), []string{"redis-server unixsocket:/tmp/x/r.sock"}},
		// prog "" can't be told from prog with a byte of padding: it
		// reads as prog.
		{"a trailing empty argument", "prog\x00\x00", []string{"prog"}},
		{"trailing empty arguments", "prog\x00a\x00\x00\x00", []string{"prog", "a"}},
	} {
		if got := ArgvFromCmdline([]byte(c.raw)); !slices.Equal(got, c.want) || (got == nil) != (c.want == nil) {
			t.Errorf("%s: ArgvFromCmdline(%q) = %q, want %q", c.name, c.raw, got, c.want)
		}
	}
	raw := []byte("sh\x00" + strings.Repeat("x", MaxArgvBytes))
	got := ArgvFromCmdline(raw)
	if got[0] != "sh" || got[len(got)-1] != ArgvCut || argvBytes(got[:len(got)-1]) > MaxArgvBytes+1 {
		t.Errorf("long cmdline: %d parts, ends %q", len(got), got[len(got)-1])
	}
	padded := []byte("title\x00" + strings.Repeat("\x00", MaxArgvBytes))
	if got := ArgvFromCmdline(padded); !slices.Equal(got, []string{"title", ArgvCut}) {
		t.Errorf("a title padded past the cap: %q", got)
	}
}

func TestPrintable(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"plain /usr/bin/sleep 1", "plain /usr/bin/sleep 1"},
		{"\x1b[2J\nlineage: nothing was left behind", `\x1b[2J\nlineage: nothing was left behind`},
		{"tab\there", `tab\there`},
		{"cr\rover", `cr\rover`},
		{"del\x7f", `del\x7f`},
		{"c1 \u009b31m", `c1 \u009b31m`},
		{"rlo \u202egnp.exe", `rlo \u202egnp.exe`},
		{"line sep \u2028", `line sep \u2028`},
		{"bad \xff utf8", `bad \xff utf8`},
		{"naïve ünïcode", "naïve ünïcode"},
		// A backslash is escaped, so that an escape on the page always
		// means one: a real "\\x1b" reads differently from ESC.
		{`C:\x1b`, `C:\\x1b`},
	} {
		if got := Printable(c.in); got != c.want {
			t.Errorf("Printable(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
