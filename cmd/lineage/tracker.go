package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/lineage-dev/lineage/internal/cli"
	"github.com/lineage-dev/lineage/internal/job"
	"github.com/lineage-dev/lineage/lineage"
)

// trackerCommands are the tracker's commands, as the front shows them:
// stand-ins that hand the command line to lineage-tracker, help included,
// since they parse no flags. `run` is the front's own: it runs a job
// through the daemon itself, and hands a standalone one to lineage-tracker.
func trackerCommands(s cli.Streams) []*cobra.Command {
	return []*cobra.Command{
		cli.NewCmdRun(s, handStandalone(s), nil),
		newCmdTracker(s, "doctor", cli.DoctorShort, false),
		newCmdTracker(s, "report", cli.ReportShort, false),
		newCmdTracker(s, cli.GuardianCommand, cli.GuardianShort, true),
		newCmdTracker(s, "serve", cli.ServeShort, false),
	}
}

// handStandalone is the front's standalone run: it hands the job to
// lineage-tracker, beside the front, with the same arguments marked as
// handed (execve: the pid stays the same), for it to run with a tracker of
// its own; it returns only when that fails. Nothing of the job has run yet.
func handStandalone(s cli.Streams) cli.Standalone {
	return func(context.Context, cli.StandaloneJob) (*job.Report, job.End, error) {
		return nil, job.End{}, execTracker(s, cli.HandedArgs(os.Args[1:]))
	}
}

// newCmdTracker is a stand-in for the tracker's command name.
func newCmdTracker(s cli.Streams, name, short string, hidden bool) *cobra.Command {
	cmd := &cobra.Command{
		Use:                name,
		Short:              short,
		Hidden:             hidden,
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			return execTracker(s, append([]string{name}, args...))
		},
	}
	// `lineage help NAME` is the tracker's help too.
	cmd.SetHelpFunc(func(cmd *cobra.Command, _ []string) {
		_ = execTracker(s, []string{name, "--help"})
	})
	return cmd
}

// execTracker replaces this process with lineage-tracker, beside this
// executable, running args; it returns only when that fails. It takes no
// path from the environment: lineage runs as root.
func execTracker(s cli.Streams, args []string) error {
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintf(s.Err, "lineage: %s: can't find lineage's own executable to find %s beside it: %v\n", args[0], cli.TrackerBinary, err)
		return cli.ExitError{Code: lineage.ExitFailure}
	}
	path := filepath.Join(filepath.Dir(self), cli.TrackerBinary)
	cli.StopProfiles() // its timer would outlive the exec
	err = syscall.Exec(path, append([]string{path}, args...), os.Environ())
	if errors.Is(err, syscall.ENOENT) {
		fmt.Fprintf(s.Err, "lineage: %s needs %s beside lineage, which is not installed (install both: make install)\n", args[0], path)
	} else {
		fmt.Fprintf(s.Err, "lineage: %s: run %s: %v\n", args[0], path, err)
	}
	return cli.ExitError{Code: lineage.ExitFailure}
}
