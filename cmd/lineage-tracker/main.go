// Command lineage-tracker is lineage with a tracker of its own: `lineage
// serve`, `doctor`, `report`, a standalone `run` and the hard-cancel
// guardian. The front, lineage, execve(2)s it for those, with the same
// arguments and pid; it finds it beside its own executable.
package main

import (
	"os"

	"github.com/spf13/cobra"

	"github.com/lineage-dev/lineage/internal/cli"
)

func main() {
	cli.StartProfiles()
	s := cli.StdStreams()
	code := cli.Execute(newRootCmd(s), s, os.Args[1:])
	cli.StopProfiles()
	os.Exit(code)
}

// newRootCmd is the tracker's command tree.
func newRootCmd(s cli.Streams) *cobra.Command {
	root := cli.NewRoot(s)
	root.AddCommand(
		cli.NewCmdRun(s, runStandalone, nil),
		newCmdServe(s),
		newCmdDoctor(s, nil),
		newCmdReport(s, nil),
		newCmdGuardian(s),
		cli.NewCmdHeld(s),
		cli.NewCmdVersion(s),
	)
	return root
}
