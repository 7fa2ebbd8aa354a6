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

func newCmdSessionOpen(s cli.Streams) *cobra.Command {
	o := &clientOptions{s: s}
	var req api.OpenSession
	var owner string
	cmd := &cobra.Command{
		Use:   "open [ID] [--kind K] [--label L] [--parent P] [--owner PID@START] [--self-close]",
		Short: "Open a session",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				req.ID = args[0]
			}
			if err := checkSessionIDs(req.ID, req.Parent); err != nil {
				return err
			}
			if owner != "" {
				id, err := lineage.ParseIdentity(owner)
				if err != nil {
					return err
				}
				req.Owner = &id
			}
			return answer(cmd.Context(), o, func(c *client.Client, ctx context.Context) (api.Session, error) {
				return c.OpenSession(ctx, req)
			}, func(w io.Writer, out api.Session) { linef(w, "%s", out.ID) })
		},
	}
	o.flags(cmd)
	f := cmd.Flags()
	f.StringVar(&req.Kind, "kind", "", "interactive or autonomous (default interactive)")
	f.StringVar(&req.Label, "label", "", "a label")
	f.StringVar(&req.Parent, "parent", "", "the session this one was delegated from")
	f.StringVar(&owner, "owner", "", "close the session when this process (PID@START) exits")
	f.BoolVar(&req.SelfClose, "self-close", false, "let a member close the session, sparing its own chain up to its root (CI runner hooks)")
	return cmd
}
