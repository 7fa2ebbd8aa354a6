package main

import (
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/lineage-dev/lineage/internal/lineage"
	"github.com/lineage-dev/lineage/internal/server"
)

func newCmdRootsShow(s streams) *cobra.Command {
	o := &clientOptions{s: s}
	cmd := &cobra.Command{
		Use:   "show PID@START",
		Short: "Show a root's live tree",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := lineage.ParseIdentity(args[0])
			if err != nil {
				return err
			}
			var out server.Root
			return o.call(cmd.Context(), "GET", "/v1/roots/"+id.String(), nil, &out, func(w io.Writer) {
				linef(w, "root %s (session %s) %s", out.Root, out.Session, out.Label)
				for _, m := range out.Members {
					linef(w, "  %s\tparent %s\t%s", m.Process, m.Parent, strings.Join(m.Argv, " "))
				}
			})
		},
	}
	o.flags(cmd)
	return cmd
}
