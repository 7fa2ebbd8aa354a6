package main

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/lineage-dev/lineage/api"
	"github.com/lineage-dev/lineage/client"
	"github.com/lineage-dev/lineage/internal/cli"
)

func newCmdTurn(s cli.Streams) *cobra.Command {
	return cli.NewGroup("turn", "End an agent's turn", newCmdTurnEnd(s))
}

func newCmdTurnEnd(s cli.Streams) *cobra.Command {
	o := &clientOptions{s: s}
	cmd := &cobra.Command{
		Use:   "end S",
		Short: "End a turn: an autonomous session's processes are reaped, an interactive one's reported",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := api.CheckSessionID(args[0]); err != nil {
				return err
			}
			return answer(cmd.Context(), o, func(c *client.Client, ctx context.Context) (api.Ended, error) {
				return c.TurnEnd(ctx, args[0])
			}, printEnded)
		},
	}
	o.flags(cmd)
	return cmd
}
