package main

import (
	"github.com/spf13/cobra"

	"github.com/lineage-dev/lineage/internal/cli"
)

// newRootCmd is the front's command tree: the client commands, `lineage
// exec`, `lineage run` (through the daemon, or handed to lineage-tracker),
// and stand-ins for the tracker's commands.
func newRootCmd(s cli.Streams) *cobra.Command {
	root := cli.NewRoot(s)
	root.AddCommand(trackerCommands(s)...)
	root.AddCommand(
		cli.NewCmdHeld(s),
		newCmdExec(s),
		newCmdRoots(s),
		newCmdSession(s),
		newCmdTurn(s),
		newCmdKeep(s),
		newCmdEvents(s),
		cli.NewCmdVersion(s),
		newCmdWhy(s, nil),
		newCmdStatus(s),
	)
	return root
}

// execute runs the front's command line and returns the process exit status.
func execute(args []string) int {
	s := cli.StdStreams()
	return cli.Execute(newRootCmd(s), s, args)
}
