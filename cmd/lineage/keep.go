package main

import (
	"io"

	"github.com/spf13/cobra"

	"github.com/lineage-dev/lineage/internal/server"
)

func newCmdKeep(s streams) *cobra.Command {
	o := &clientOptions{s: s}
	var req server.AddKeep
	cmd := &cobra.Command{
		Use:   "keep PID@START [--root] [--ttl D]",
		Short: "Spare a process (or, with --root, a root's whole lineage) from its session's reaps",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			req.Process = args[0]
			var out server.Keep
			return o.call(cmd.Context(), "POST", "/v1/keeps", req, &out, func(w io.Writer) { linef(w, "kept %s", out.Rule) })
		},
	}
	o.flags(cmd)
	cmd.Flags().BoolVar(&req.Root, "root", false, "keep the whole lineage of the root PID@START")
	cmd.Flags().StringVar(&req.TTL, "ttl", "", "how long the keep lasts (default: until the session closes)")
	return cmd
}
