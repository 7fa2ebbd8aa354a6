// Package cli is what the command lines of lineage's two binaries share:
// the front (cmd/lineage: the client commands, exec, and run through the
// daemon) and the tracker (cmd/lineage-tracker: serve, doctor, report, a
// standalone run and the guardian), which the front execve(2)s for those
// with the same arguments and pid. It holds the root command's shape, the
// streams commands write to and the exit status they return, `lineage
// run` (its flags, its run through the daemon, its report; a standalone
// run is the caller's, given to [NewCmdRun]), the hidden held command,
// `lineage version`, and the profiles. It links no backend, so the front
// links none.
package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/lineage-dev/lineage/internal/buildinfo"
	"github.com/lineage-dev/lineage/lineage"
)

// TrackerBinary is the tracker's file name, beside the front's.
const TrackerBinary = "lineage-tracker"

// FrontBinary is the front's file name, beside the tracker's.
const FrontBinary = "lineage"

// The tracker's commands' one-line help, shown by both binaries.
const (
	RunShort      = "Run a command and end everything it started when it is done"
	ServeShort    = "Run the sidecar: the host's one tracker behind an HTTP/JSON API on a Unix socket"
	DoctorShort   = "Check what this machine allows, and which backend lineage will use"
	ReportShort   = "Render a forensic record: who spawned what, how it ended, what leaked"
	GuardianShort = "Reap a job's lineage if the lineage run that started it dies (internal)"
)

// GuardianCommand is the hidden subcommand `lineage run` starts as its
// guardian (see internal/guardian).
const GuardianCommand = "guardian"

// ExitError carries a process exit status out of a command. Its message,
// if any, has already been printed.
type ExitError struct{ Code int }

func (e ExitError) Error() string { return fmt.Sprintf("exit status %d", e.Code) }

// Streams are where a command reads and writes; tests swap them.
type Streams struct {
	In       io.Reader
	Out, Err io.Writer
}

// StdStreams are the process's own.
func StdStreams() Streams { return Streams{In: os.Stdin, Out: os.Stdout, Err: os.Stderr} }

// NewRoot returns the root command both binaries share, writing to s;
// the caller adds the commands.
func NewRoot(s Streams) *cobra.Command {
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
	root.SetIn(s.In)
	root.SetOut(s.Out)
	root.SetErr(s.Err)
	return root
}

// Execute runs root with args and returns the process exit status: the
// command's [ExitError], 0, or [lineage.ExitFailure] after printing the
// error.
func Execute(root *cobra.Command, s Streams, args []string) int {
	root.SetArgs(args)
	// cobra's completion command holds subcommands only, as a group does.
	root.InitDefaultCompletionCmd()
	for _, c := range root.Commands() {
		if c.Name() == "completion" && !c.Runnable() {
			asGroup(c)
		}
	}
	err := root.Execute()
	if err == nil {
		return 0
	}
	var ee ExitError
	if errors.As(err, &ee) {
		return ee.Code
	}
	fmt.Fprintf(s.Err, "lineage: %v\n", err)
	return lineage.ExitFailure
}

// NewGroup returns a command that only holds subs. Alone it prints its
// help; with an argument that names none of subs it fails, naming the
// argument, as the root does for an unknown command: a mistyped
// subcommand must not pass for success in a script.
func NewGroup(use, short string, subs ...*cobra.Command) *cobra.Command {
	cmd := &cobra.Command{Use: use, Short: short}
	asGroup(cmd)
	cmd.AddCommand(subs...)
	return cmd
}

// asGroup makes cmd, which only holds subcommands, refuse an unknown one.
func asGroup(cmd *cobra.Command) {
	cmd.Args = cobra.ArbitraryArgs
	cmd.SuggestionsMinimumDistance = 2 // as close as cobra's own suggestions for the root
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if len(args) == 0 {
			return cmd.Help()
		}
		msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
		if near := cmd.SuggestionsFor(args[0]); len(near) > 0 {
			msg += fmt.Sprintf(" (did you mean %s?)", strings.Join(near, " or "))
		}
		return fmt.Errorf("%s; see '%s --help'", msg, cmd.CommandPath())
	}
}
