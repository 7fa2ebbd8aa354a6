package main

import "github.com/spf13/cobra"

func newCmdSession(s streams) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "session",
		Short: "Open, list, report on and close the daemon's sessions",
	}
	cmd.AddCommand(newCmdSessionOpen(s), newCmdSessionLs(s), newCmdSessionReport(s), newCmdSessionClose(s))
	return cmd
}
