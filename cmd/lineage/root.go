package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/lineage-dev/lineage/internal/buildinfo"
	"github.com/lineage-dev/lineage/internal/lineage"
)

// exitError carries a process exit status out of a command. Its message, if
// any, has already been printed.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

// streams are where a command reads and writes; tests swap them.
type streams struct {
	in       io.Reader
	out, err io.Writer
}

func newRootCmd(s streams) *cobra.Command {
	root := &cobra.Command{
		Use:   "lineage",
		Short: "Track every process a command starts, and end them when its time is up",
		Long: `lineage keeps an exact, live family tree of every process a command starts
(setsid-ed workers, double-forked daemons, nohup-ed watchers included) and, when
the command ends or its deadline passes, ends that family and only that family,
each process named by its identity (pid, start time) so a recycled pid is never hit.

A small BPF program keeps the membership in the kernel; where BPF can't load,
lineage polls /proc instead.`,
		SilenceErrors: true,
		SilenceUsage:  true,
		Version:       buildinfo.Get().String(),
	}
	root.SetVersionTemplate("lineage {{.Version}}\n")
	// No -v shorthand: -v says "verbose" everywhere else.
	root.Flags().Bool("version", false, "print the version, as lineage version does")
	root.SetIn(s.in)
	root.SetOut(s.out)
	root.SetErr(s.err)
	// The heavy commands are the full binary's; the lean front hands them
	// to lineage-tracker (tracker.go).
	root.AddCommand(heavyCommands(s)...)
	root.AddCommand(
		newCmdHeld(s),
		newCmdExec(s),
		newCmdRoots(s),
		newCmdSession(s),
		newCmdTurn(s),
		newCmdKeep(s),
		newCmdEvents(s),
		newCmdVersion(s),
		newCmdWhy(s, nil),
		newCmdStatus(s),
	)
	return root
}

// execute runs the command line and returns the process exit status.
func execute(args []string) int {
	s := streams{in: os.Stdin, out: os.Stdout, err: os.Stderr}
	root := newRootCmd(s)
	root.SetArgs(args)
	err := root.Execute()
	if err == nil {
		return 0
	}
	var ee exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	fmt.Fprintf(s.err, "lineage: %v\n", err)
	return exitFailure
}

// exitFailure is lineage's exit status when it fails itself (bad flags or
// arguments, a backend that can't run); `lineage run` documents the rest.
const exitFailure = lineage.ExitFailure
