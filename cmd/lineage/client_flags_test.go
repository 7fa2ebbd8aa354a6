package main

import (
	"io"
	"strings"
	"testing"

	"github.com/lineage-dev/lineage/internal/cli"
	"github.com/spf13/cobra"
)

// notClients are the commands that talk to no daemon, or only as `run`
// does (its own flags).
var notClients = map[string]bool{
	"lineage run": true, "lineage doctor": true, "lineage report": true, "lineage serve": true,
	"lineage version": true, "lineage held": true, "lineage " + cli.GuardianCommand: true,
}

// Every client command takes --json and --socket, as `run` does: a
// command added without them fails here.
func TestEveryClientCommandTakesJSONAndSocket(t *testing.T) {
	root := newRootCmd(cli.Streams{In: strings.NewReader(""), Out: io.Discard, Err: io.Discard})
	var clients []string
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.HasSubCommands() {
			for _, sub := range c.Commands() {
				walk(sub)
			}
			return
		}
		name := c.CommandPath()
		if notClients[name] || c.Name() == "help" || strings.HasPrefix(name, "lineage completion") {
			return
		}
		clients = append(clients, name)
		for _, flag := range []string{"json", "socket"} {
			if c.Flags().Lookup(flag) == nil {
				t.Errorf("%s has no --%s", name, flag)
			}
		}
	}
	walk(root)
	t.Logf("client commands: %q", clients)
	if len(clients) < 14 {
		t.Errorf("%d client commands found, want at least 14: %q", len(clients), clients)
	}
}
