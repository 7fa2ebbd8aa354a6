package main

import (
	"strings"
	"testing"

	"github.com/lineage-dev/lineage/api"
	"github.com/lineage-dev/lineage/lineage"
)

// hostile is what a leftover can put in its argv, or a caller in a label:
// a screen clear, and a newline followed by a forged line of lineage's.
const hostile = "\x1b[2J\nlineage: nothing left behind"

// The client commands' text escapes what members and callers control: no
// raw escape reaches the terminal and no line can be forged.
func TestClientTextEscapesWhatMembersControl(t *testing.T) {
	root := lineage.Identity{PID: 10, StartTicks: 100}
	child := lineage.Identity{PID: 11, StartTicks: 110}
	var b strings.Builder
	printEnded(&b, api.Ended{Session: "s", Roots: []api.RootEnd{{
		Root: root, Label: hostile, Decision: "reap",
		Outcomes: []api.Outcome{{Process: child, Argv: []string{"sleep", hostile}, Result: "terminated"}},
		Warnings: []string{hostile},
	}}})
	printTree(&b, []api.Member{
		{Process: root, Parent: root, Argv: []string{"sh", hostile}},
		{Process: child, Parent: root, Argv: []string{hostile}},
	})
	out := b.String()
	if strings.Contains(out, "\x1b") {
		t.Errorf("a raw escape reached the output:\n%q", out)
	}
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "lineage: nothing left behind") {
			t.Errorf("a forged line:\n%s", out)
		}
	}
	if !strings.Contains(out, `\x1b[2J\nlineage: nothing left behind`) {
		t.Errorf("the escaped text is not shown:\n%s", out)
	}
}

// A command line is shown as lineage run's table shows it, quoted as a
// shell reads it back.
func TestClientTextQuotesCommandLines(t *testing.T) {
	root := lineage.Identity{PID: 10, StartTicks: 100}
	var b strings.Builder
	printTree(&b, []api.Member{{Process: root, Parent: root, Argv: []string{"sh", "-c", `echo a\b`}}})
	printEnded(&b, api.Ended{Session: "s", Roots: []api.RootEnd{{Root: root, Decision: "reap",
		Outcomes: []api.Outcome{{Process: root, Argv: []string{"printf", "a\nb", ""}, Result: "terminated"}},
	}}})
	for _, want := range []string{`sh -c 'echo a\b'`, `printf $'a\nb' ''`} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("no %s in:\n%s", want, b.String())
		}
	}
}
