package main

import (
	"io"

	"github.com/spf13/cobra"

	"github.com/lineage-dev/lineage/api"
	"github.com/lineage-dev/lineage/client"
	"github.com/lineage-dev/lineage/internal/cli"
	"github.com/lineage-dev/lineage/lineage"
)

// newCmdStatus asks the daemon whether it answers: exit 0 when it does,
// lineage.ExitFailure when it doesn't (a readiness probe's question).
func newCmdStatus(s cli.Streams) *cobra.Command {
	o := &clientOptions{s: s}
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Ask the daemon on its socket whether it answers (exit 0), and how it is set",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return answer(cmd.Context(), o, (*client.Client).Status, func(w io.Writer, out api.Status) {
				linef(w, "api %d\treaping %s\t%d %s\tbackend %s (%s)", out.API, out.Reaping, out.Sessions, lineage.Plural(out.Sessions, "session", "sessions"), out.Backend, out.BackendReason)
			})
		},
	}
	o.flags(cmd)
	return cmd
}
