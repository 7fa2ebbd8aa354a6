package main

import (
	"github.com/lineage-dev/lineage/internal/cli"
	"github.com/spf13/cobra"
)

func newCmdSession(s cli.Streams) *cobra.Command {
	return cli.NewGroup("session", "Open, list, report on and close the daemon's sessions",
		newCmdSessionOpen(s), newCmdSessionLs(s), newCmdSessionReport(s), newCmdSessionClose(s))
}
