package lineage_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/lineage-dev/lineage/internal/testutil"
	"github.com/lineage-dev/lineage/lineage"
)

func TestCommandLine(t *testing.T) {
	for _, c := range []struct {
		argv []string
		comm string
		want string
	}{
		{[]string{"sleep", "90"}, "", "sleep 90"},
		{[]string{"make", "-j3", "CC=gcc", "--dir=./b", "a,b:c+d@e%f"}, "", "make -j3 CC=gcc --dir=./b a,b:c+d@e%f"},
		{[]string{"sh", "-c", "make -j3"}, "", "sh -c 'make -j3'"},
		{[]string{"echo", "it's"}, "", `echo 'it'\''s'`},
		{[]string{"printf", ""}, "", "printf ''"},
		{[]string{"a;b"}, "", "'a;b'"},
		// A backslash is literal in single quotes: not doubled.
		{[]string{"/bin/echo", `a\b`}, "", `/bin/echo 'a\b'`},
		{[]string{"echo", "$HOME", "*.go", "~", "#x", "a{b,c}", "!1", "x>y", "`id`", `"q"`}, "",
			`echo '$HOME' '*.go' '~' '#x' 'a{b,c}' '!1' 'x>y' '` + "`id`" + `' '"q"'`},
		{[]string{"echo", "naïve", "日本"}, "", "echo naïve 日本"},
		{[]string{"echo", "no\u00a0break"}, "", "echo 'no\u00a0break'"},
		// Controls, format characters and bytes not UTF-8 are escaped in
		// $'...', where \ and ' are escaped too.
		{[]string{"/bin/echo", "a\nb"}, "", `/bin/echo $'a\nb'`},
		{[]string{"echo", "\x1b[2J\n"}, "", `echo $'\x1b[2J\n'`},
		{[]string{"echo", "tab\t'q'\\"}, "", `echo $'tab\t\'q\'\\'`},
		{[]string{"echo", "bad \xff utf8"}, "", `echo $'bad \xff utf8'`},
		{[]string{"echo", "rlo \u202egnp.exe"}, "", `echo $'rlo \xe2\x80\xaegnp.exe'`},
		{[]string{"echo", "c1 \u009b31m"}, "", `echo $'c1 \xc2\x9b'$'31m'`},
		// \x with more than two hex digits is unspecified: the quote is
		// split before a hex digit.
		{[]string{"echo", "\x1bcafe\x1b"}, "", `echo $'\x1b'$'cafe\x1b'`},
		// The first word is read as a command, not an assignment or a
		// reserved word.
		{[]string{"A=b", "c=d"}, "", "'A=b' c=d"},
		{[]string{"time", "if"}, "", "'time' if"},
		{nil, "kworker/0:1", "[kworker/0:1]"},
		{nil, "\x1b]0;x", `[\x1b]0;x]`},
		{nil, "", "[?]"},
	} {
		if got := lineage.CommandLine(c.argv, c.comm); got != c.want {
			t.Errorf("CommandLine(%q, %q) = %s, want %s", c.argv, c.comm, got, c.want)
		}
	}
}

// What CommandLine writes, bash reads back as the same words.
func TestCommandLineReadsBackInBash(t *testing.T) {
	bash := testutil.LookTool(t, "bash")
	argv := []string{"printf", "%s\\0", "", "a b", `a\b`, "a\nb", "it's", `$'x'`, "\x1bcafe", "\xff\xfe", "\u202e", "tab\t'\\", "~", "naïve", "A=b", "x\x7f"}
	line := lineage.CommandLine(argv, "")
	out, err := exec.Command(bash, "--norc", "--noprofile", "-c", line).Output()
	if err != nil {
		t.Fatalf("bash -c %s: %v", line, err)
	}
	got := strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
	if want := argv[2:]; !slices.Equal(got, want) {
		t.Errorf("bash read %s as %q, want %q", line, got, want)
	}
}
