package main

import (
	"io"

	"github.com/spf13/cobra"

	"github.com/lineage-dev/lineage/api"
	"github.com/lineage-dev/lineage/client"
)

func newCmdRootsLs(s streams) *cobra.Command {
	o := &clientOptions{s: s}
	var session string
	cmd := &cobra.Command{
		Use:   "ls [--session S]",
		Short: "List the roots the caller may see",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var out []api.Root
			return o.call(cmd.Context(), "GET", client.Query("/v1/roots", "session", session), nil, &out, func(w io.Writer) {
				for _, r := range out {
					linef(w, "%s\t%s\t%s\t%s", r.Root, r.Session, shown(r.Label), shown(r.Command...))
				}
			})
		},
	}
	o.flags(cmd)
	cmd.Flags().StringVar(&session, "session", "", "only this session's roots")
	return cmd
}
