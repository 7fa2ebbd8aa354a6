package main

import "github.com/spf13/cobra"

func newCmdRoots(s streams) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "roots",
		Short: "Register, list, show and untrack the daemon's roots",
	}
	cmd.AddCommand(newCmdRootsAdd(s), newCmdRootsLs(s), newCmdRootsShow(s), newCmdRootsRm(s))
	return cmd
}
