package main

import (
	"io"

	"github.com/spf13/cobra"

	"github.com/lineage-dev/lineage/api"
)

// newCmdStatus asks the daemon whether it answers: exit 0 when it does,
// exitFailure when it doesn't (a readiness probe's question).
func newCmdStatus(s streams) *cobra.Command {
	o := &clientOptions{s: s}
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Ask the daemon on its socket whether it answers (exit 0), and how it is set",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var out api.Status
			return o.call(cmd.Context(), "GET", "/v1/status", nil, &out, func(w io.Writer) {
				linef(w, "api %d\treaping %s\t%d sessions", out.API, out.Reaping, out.Sessions)
			})
		},
	}
	o.flags(cmd)
	return cmd
}
