package main

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/lineage-dev/lineage/api"
	"github.com/lineage-dev/lineage/client"
	"github.com/lineage-dev/lineage/internal/cli"
)

func newCmdSessionClose(s cli.Streams) *cobra.Command {
	o := &clientOptions{s: s}
	cmd := &cobra.Command{
		Use:   "close S",
		Short: "Close a session (its child sessions first): policy reaps its roots, then they are untracked",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := api.CheckSessionID(args[0]); err != nil {
				return err
			}
			return answer(cmd.Context(), o, func(c *client.Client, ctx context.Context) (api.Ended, error) {
				return c.CloseSession(ctx, args[0])
			}, printEnded)
		},
	}
	o.flags(cmd)
	return cmd
}
