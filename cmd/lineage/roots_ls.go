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

func newCmdRootsLs(s cli.Streams) *cobra.Command {
	o := &clientOptions{s: s}
	var session string
	cmd := &cobra.Command{
		Use:   "ls [--session S]",
		Short: "List the roots the caller may see",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkSessionIDs(session); err != nil {
				return err
			}
			return answer(cmd.Context(), o, func(c *client.Client, ctx context.Context) ([]api.Root, error) {
				return c.Roots(ctx, session)
			}, func(w io.Writer, out []api.Root) {
				for _, r := range out {
					linef(w, "%s\t%s\t%s\t%s", r.Root, r.Session, shown(r.Label), lineage.CommandLine(r.Command, ""))
				}
			})
		},
	}
	o.flags(cmd)
	cmd.Flags().StringVar(&session, "session", "", "only this session's roots")
	return cmd
}
