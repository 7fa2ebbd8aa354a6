package main

import (
	"io"

	"github.com/spf13/cobra"

	"github.com/lineage-dev/lineage/api"
	"github.com/lineage-dev/lineage/internal/lineage"
)

func newCmdRoots(s streams) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "roots",
		Short: "Register, list, show and untrack the daemon's roots",
	}
	cmd.AddCommand(newCmdRootsAdd(s), newCmdRootsLs(s), newCmdRootsShow(s), newCmdRootsRm(s))
	return cmd
}

// newCmdOnRoot is a client command that sends method to one root's
// resource, /v1/roots/PID@START, and prints the root it gets back.
func newCmdOnRoot(s streams, use, short, method string, print func(io.Writer, api.Root)) *cobra.Command {
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
			var out api.Root
			return o.call(cmd.Context(), method, "/v1/roots/"+id.String(), nil, &out, func(w io.Writer) { print(w, out) })
		},
	}
	o.flags(cmd)
	return cmd
}
