package main

import (
	"github.com/lineage-dev/lineage/internal/cli"
	"github.com/spf13/cobra"
)

func newCmdSession(s cli.Streams) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "session",
		Short: "Open, list, report on and close the daemon's sessions",
	}
	cmd.AddCommand(newCmdSessionOpen(s), newCmdSessionLs(s), newCmdSessionReport(s), newCmdSessionClose(s))
	return cmd
}
