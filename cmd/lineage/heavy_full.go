//go:build !lean

package main

import "github.com/spf13/cobra"

// leanFront: this is the lean front, not the complete binary.
const leanFront = false

// heavyCommands are the commands that load BPF, read /proc through procfs
// or serve metrics: in the complete binary, they run in-process.
func heavyCommands(s streams) []*cobra.Command {
	return []*cobra.Command{
		newCmdRun(s, nil),
		newCmdDoctor(s, nil),
		newCmdReport(s, nil),
		newCmdGuardian(s),
		newCmdServe(s),
	}
}
