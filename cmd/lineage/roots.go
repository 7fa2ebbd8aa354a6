package main

import (
	"context"
	"io"

	"github.com/spf13/cobra"

	"github.com/lineage-dev/lineage/api"
	"github.com/lineage-dev/lineage/client"
	"github.com/lineage-dev/lineage/internal/cli"
	"github.com/lineage-dev/lineage/lineage"
)

func newCmdRoots(s cli.Streams) *cobra.Command {
	return cli.NewGroup("roots", "Register, list, show and untrack the daemon's roots",
		newCmdRootsAdd(s), newCmdRootsLs(s), newCmdRootsShow(s), newCmdRootsRm(s))
}

// newCmdOnRoot is a client command that makes a call on one root,
// PID@START, and prints the root it gets back.
func newCmdOnRoot(s cli.Streams, use, short string, call func(*client.Client, context.Context, lineage.Identity) (api.Root, error), print func(io.Writer, api.Root)) *cobra.Command {
	o := &clientOptions{s: s}
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := lineage.ParseIdentity(args[0])
			if err != nil {
				return err
			}
			return answer(cmd.Context(), o, func(c *client.Client, ctx context.Context) (api.Root, error) {
				return call(c, ctx, id)
			}, print)
		},
	}
	o.flags(cmd)
	return cmd
}
