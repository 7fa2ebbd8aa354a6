package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/lineage-dev/lineage/internal/cli"
	"github.com/lineage-dev/lineage/lineage"
)

// Every command that only holds subcommands (turn, session, roots,
// completion) fails on one it doesn't hold, naming it and what was meant,
// where a script would otherwise take the help it printed for success;
// alone, it prints its help and succeeds.
func TestGroupsRefuseAnUnknownSubcommand(t *testing.T) {
	var groups [][]string
	var walk func(c *cobra.Command, path []string)
	walk = func(c *cobra.Command, path []string) {
		if len(path) > 0 && c.HasSubCommands() {
			groups = append(groups, path)
		}
		for _, sub := range c.Commands() {
			walk(sub, append(path[:len(path):len(path)], sub.Name()))
		}
	}
	root := newRootCmd(cli.Streams{In: strings.NewReader("")})
	root.InitDefaultCompletionCmd()
	walk(root, nil)
	if len(groups) < 4 {
		t.Fatalf("groups %q, want turn, session, roots and completion at least", groups)
	}
	for _, g := range groups {
		var out, errs bytes.Buffer
		s := cli.Streams{In: strings.NewReader(""), Out: &out, Err: &errs}
		name := "lineage " + strings.Join(g, " ")
		if code := cli.Execute(newRootCmd(s), s, append(g[:len(g):len(g)], "bogus")); code != lineage.ExitFailure ||
			!strings.Contains(errs.String(), `unknown command "bogus" for "`+name+`"`) {
			t.Errorf("%s bogus: exit %d, %q; want %d naming the unknown command", name, code, errs.String(), lineage.ExitFailure)
		}
		out.Reset()
		errs.Reset()
		if code := cli.Execute(newRootCmd(s), s, g); code != 0 || !strings.Contains(out.String(), "Available Commands:") {
			t.Errorf("%s: exit %d, %q; want its help and 0", name, code, out.String())
		}
	}
	var errs bytes.Buffer
	s := cli.Streams{In: strings.NewReader(""), Out: &bytes.Buffer{}, Err: &errs}
	if code := cli.Execute(newRootCmd(s), s, []string{"turn", "ned", "s1"}); code != lineage.ExitFailure || !strings.Contains(errs.String(), "did you mean end?") {
		t.Errorf("turn ned: exit %d, %q; want a suggestion of end", code, errs.String())
	}
}
