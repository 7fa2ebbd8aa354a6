package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/lineage-dev/lineage/api"
	"github.com/lineage-dev/lineage/internal/cli"
	"github.com/lineage-dev/lineage/lineage"
)

func TestNewCmdWhy(t *testing.T) {
	var got *whyOptions
	var out bytes.Buffer
	cmd := newCmdWhy(cli.Streams{Out: &out, Err: &out}, func(o *whyOptions) error { got = o; return nil })
	cmd.SetArgs([]string{"--json", "--socket", "/tmp/s.sock", "4242@123"})
	if err := cmd.Execute(); err != nil || got == nil {
		t.Fatalf("execute: %v", err)
	}
	if got.Process != "4242@123" || !got.JSON || got.Socket != "/tmp/s.sock" {
		t.Errorf("options %+v", got)
	}
	cmd = newCmdWhy(cli.Streams{Out: &out, Err: &out}, func(*whyOptions) error { return nil })
	cmd.SetArgs([]string{})
	if err := cmd.Execute(); err == nil {
		t.Error("no argument accepted")
	}
}

// What a member controls (argv, comm, the root's label) can't forge a line
// or move the cursor.
func TestPrintWhyEscapesControlCharacters(t *testing.T) {
	hostile := "x\x1b[2J\nlineage: nothing was left behind"
	me, parent, root := lineage.Identity{PID: 30, StartTicks: 3}, lineage.Identity{PID: 20, StartTicks: 2}, lineage.Identity{PID: 10, StartTicks: 1}
	v := api.Why{Process: me, Session: "s", Root: root, Label: hostile, Complete: false, Chain: []api.WhyStep{
		{Process: me, Parent: parent, Argv: []string{"sleep", hostile}, Alive: true, PPID: 1},
		{Process: parent, Parent: root, Comm: hostile, Exit: "exit 0", Skipped: 2},
	}}
	var out bytes.Buffer
	printWhy(&out, v)
	text := out.String()
	if strings.ContainsRune(text, 0x1b) || strings.Count(text, "\n") != 5 || strings.Contains(text, "\nlineage:") {
		t.Errorf("hostile content got through:\n%q", text)
	}
	for _, want := range []string{`x\x1b[2J\nlineage`, "alive, ppid 1", "exited: exit 0", "2 exited ancestors", "stops short of the root"} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q:\n%s", want, text)
		}
	}
}
