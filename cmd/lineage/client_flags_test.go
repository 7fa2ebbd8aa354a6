package main

import (
	"io"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/spf13/cobra"

	"github.com/lineage-dev/lineage/internal/cli"
	"github.com/lineage-dev/lineage/lineage"
)

// notClients are the commands that talk to no daemon, or only as `run`
// does (its own flags).
var notClients = map[string]bool{
	"lineage run": true, "lineage doctor": true, "lineage report": true, "lineage serve": true,
	"lineage version": true, "lineage held": true, "lineage " + cli.GuardianCommand: true,
}

// Every client command takes --json and --socket, as `run` does, and
// refuses an empty --socket: a command added without them fails here.
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
		// An empty --socket names no socket: refused, not the default.
		if f := c.Flags().Lookup("socket"); f != nil && f.Value.Set("") == nil {
			t.Errorf("%s takes an empty --socket", name)
		}
	}
	walk(root)
	t.Logf("client commands: %q", clients)
	if len(clients) < 14 {
		t.Errorf("%d client commands found, want at least 14: %q", len(clients), clients)
	}
}

// A client command given a bad identity or session id says so in one
// line, with the status of a usage error, and asks no daemon: the answer
// is the same whether or not one runs.
func TestClientCommandsCheckInputBeforeAskingTheDaemon(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "lineage.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var asked atomic.Int32
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			asked.Add(1)
			c.Close()
		}
	}()
	for _, args := range [][]string{
		{"why", "abc"}, {"why", "0"}, {"why", "1"}, {"why", "5@0"}, {"why", "5@x"},
		{"keep", "1@0"}, {"keep", "abc"}, {"keep", "--rm", "1@0"}, {"keep", "--rm", "exe:rel"}, {"keep", "--rm", "--root", "abc"},
		{"roots", "show", "abc"}, {"roots", "rm", "0@5"},
		{"roots", "add", "abc", "--session", "s"}, {"roots", "add", "1", "--session", "s"}, {"roots", "add", "5", "--session", "a b"},
		{"roots", "ls", "--session", "a b"}, {"events", "--session", "a/b"},
		{"session", "close", ""}, {"session", "report", "--", "-x"}, {"session", "open", "a b"}, {"session", "open", "--parent", "/"},
		{"turn", "end", "a b"}, {"exec", "--session", "a b", "--", "true"},
	} {
		var stderr strings.Builder
		s := cli.Streams{In: strings.NewReader(""), Out: io.Discard, Err: &stderr}
		// --socket goes before a -- (or last).
		at := slices.Index(args, "--")
		if at < 0 {
			at = len(args)
		}
		args = slices.Insert(args, at, "--socket="+sock)
		code := cli.Execute(newRootCmd(s), s, args)
		if code != lineage.ExitFailure || strings.Count(stderr.String(), "\n") != 1 || !strings.Contains(stderr.String(), "invalid") {
			t.Errorf("lineage %q: exit %d, stderr %q; want %d and one line saying what is invalid", args, code, stderr.String(), lineage.ExitFailure)
		}
	}
	if n := asked.Load(); n != 0 {
		t.Errorf("the daemon was asked %d times", n)
	}
	// The check is not blind: a good id is asked about.
	s := cli.Streams{In: strings.NewReader(""), Out: io.Discard, Err: io.Discard}
	cli.Execute(newRootCmd(s), s, []string{"turn", "end", "--socket=" + sock, "x"})
	if asked.Load() == 0 {
		t.Error("a good session id was not asked about: the listener sees no dial")
	}
}
