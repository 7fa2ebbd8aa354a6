package main

import (
	"io"

	"github.com/spf13/cobra"

	"github.com/lineage-dev/lineage/internal/lineage"
	"github.com/lineage-dev/lineage/internal/server"
)

func newCmdRootsRm(s streams) *cobra.Command {
	o := &clientOptions{s: s}
	cmd := &cobra.Command{
		Use:   "rm PID@START",
		Short: "Stop tracking a root's lineage; nothing is signalled",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := lineage.ParseIdentity(args[0])
			if err != nil {
				return err
			}
			var out server.Root
			return o.call(cmd.Context(), "DELETE", "/v1/roots/"+id.String(), nil, &out, func(w io.Writer) {
				linef(w, "untracked %s", out.Root)
			})
		},
	}
	o.flags(cmd)
	return cmd
}
