package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/lineage-dev/lineage/api"
	"github.com/lineage-dev/lineage/client"
	"github.com/lineage-dev/lineage/internal/cli"
	"github.com/lineage-dev/lineage/lineage"
)

// clientOptions are the flags every client command shares.
type clientOptions struct {
	s      cli.Streams
	Socket string
	JSON   bool
}

func (o *clientOptions) flags(cmd *cobra.Command) {
	cli.AddSocket(cmd.Flags(), &o.Socket, "the daemon's socket (default $"+client.EnvSocket+", else /run/lineage/lineage.sock)")
	cmd.Flags().BoolVar(&o.JSON, "json", false, "print the daemon's answer as JSON")
}

// answer makes one call of the Go client on the daemon o names and prints
// its answer: as JSON with --json, else through text.
func answer[T any](ctx context.Context, o *clientOptions, call func(*client.Client, context.Context) (T, error), text func(io.Writer, T)) error {
	c := client.New(client.Socket(o.Socket))
	defer c.Close()
	if ctx == nil {
		ctx = context.Background()
	}
	out, err := call(c, ctx)
	if err != nil {
		return err
	}
	if o.JSON {
		return o.print(out)
	}
	if text != nil {
		text(o.s.Out, out)
	}
	return nil
}

// print writes the daemon's answer as indented JSON.
func (o *clientOptions) print(out any) error {
	enc := json.NewEncoder(o.s.Out)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

// checkSessionIDs checks the session ids a command was given (an empty one
// was not given) before the daemon is asked: a bad one is the caller's
// mistake, whether or not a daemon answers.
func checkSessionIDs(ids ...string) error {
	for _, id := range ids {
		if id == "" {
			continue
		}
		if err := api.CheckSessionID(id); err != nil {
			return err
		}
	}
	return nil
}

func linef(w io.Writer, format string, args ...any) { fmt.Fprintf(w, format+"\n", args...) }

// shown returns text a member or a caller controls (a label, a warning)
// ready to print: every control character escaped, so that it can't move
// the cursor or forge a line. A command line is [lineage.CommandLine]'s.
func shown(s string) string { return lineage.Printable(s) }
