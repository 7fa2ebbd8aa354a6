//go:build lean

package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/lineage-dev/lineage/internal/lineage"
	"github.com/spf13/cobra"
)

// leanFront: this is the lean front, not the complete binary.
const leanFront = true

// heavyCommands are, in the lean front, stand-ins that hand the command
// line to lineage-tracker: help included, since they parse no flags. `run`
// is the front's own: it runs a job through the daemon itself, and hands
// the rest to lineage-tracker (run_lean.go).
func heavyCommands(s streams) []*cobra.Command {
	return []*cobra.Command{
		newCmdRun(s, nil),
		newCmdTracker(s, "doctor", doctorShort, false),
		newCmdTracker(s, "report", reportShort, false),
		newCmdTracker(s, guardianCommand, guardianShort, true),
		newCmdTracker(s, "serve", serveShort, false),
	}
}

// newCmdTracker is a stand-in for the full binary's command name.
func newCmdTracker(s streams, name, short string, hidden bool) *cobra.Command {
	cmd := &cobra.Command{
		Use:                name,
		Short:              short,
		Hidden:             hidden,
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			return execTracker(s, append([]string{name}, args...))
		},
	}
	// `lineage help NAME` is the full binary's help too.
	cmd.SetHelpFunc(func(cmd *cobra.Command, _ []string) {
		_ = execTracker(s, []string{name, "--help"})
	})
	return cmd
}

// execTracker replaces this process with lineage-tracker, beside this
// executable, running args; it returns only when that fails. It takes no
// path from the environment: lineage runs as root.
func execTracker(s streams, args []string) error {
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintf(s.err, "lineage: %s: can't find lineage's own executable to find %s beside it: %v\n", args[0], trackerBinary, err)
		return exitError{lineage.ExitFailure}
	}
	path := filepath.Join(filepath.Dir(self), trackerBinary)
	err = syscall.Exec(path, append([]string{path}, args...), os.Environ())
	if errors.Is(err, syscall.ENOENT) {
		fmt.Fprintf(s.err, "lineage: %s needs the full binary %s, which is not installed (install both: make install)\n", args[0], path)
	} else {
		fmt.Fprintf(s.err, "lineage: %s: run %s: %v\n", args[0], path, err)
	}
	return exitError{lineage.ExitFailure}
}
