package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/lineage-dev/lineage/api"
	"github.com/lineage-dev/lineage/client"
	"github.com/lineage-dev/lineage/internal/cli"
	"github.com/lineage-dev/lineage/lineage"

	// In a cgo build, a constructor runs the plain `lineage exec` before
	// the Go runtime starts: see the package's doc.
	_ "github.com/lineage-dev/lineage/internal/fastexec"
	"github.com/lineage-dev/lineage/internal/proc"
)

// execOptions are the flags of `lineage exec`.
type execOptions struct {
	clientOptions
	Session string
	Kind    string
	Label   string
	Join    bool
}

func newCmdExec(s cli.Streams) *cobra.Command {
	o := &execOptions{clientOptions: clientOptions{s: s}}
	cmd := &cobra.Command{
		Use:   "exec --session S [flags] -- COMMAND [ARGS...]",
		Short: "Register this process as a root of a session, then become COMMAND",
		Long: `Ask the daemon to register lineage's own process as a root of session S
(opened with --kind and --label if it doesn't exist; a --kind that is not an
existing session's kind is refused), then execve COMMAND in
place: the same pid and start time, so the root is tracked before COMMAND runs
its first instruction. With no daemon reachable, or a refusal, it runs nothing
and fails with the daemon's message.

A session belongs to the uid that opened it: no other uid adds roots to it.
Root too is refused another uid's session unless it gives --join, which joins
a session that exists (and never opens one).`,
		Example: `  lineage exec --session turn-7 --kind autonomous -- make test`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return errors.New("exec: no command given: lineage exec --session S -- COMMAND [ARGS...]")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error { return runExec(o, args) },
	}
	o.flags(cmd)
	f := cmd.Flags()
	f.SetInterspersed(false)
	f.StringVar(&o.Session, "session", "", "the session to join (required)")
	f.StringVar(&o.Kind, "kind", "", "the session's runtime if it is opened now: interactive or autonomous")
	f.StringVar(&o.Label, "label", "", "a label for the root")
	f.BoolVar(&o.Join, "join", false, "root only: join the session though another uid opened it (it must exist)")
	_ = cmd.MarkFlagRequired("session")
	return cmd
}

func runExec(o *execOptions, args []string) error {
	if err := api.CheckSessionID(o.Session); err != nil {
		return fmt.Errorf("exec: %w", err)
	}
	path, err := exec.LookPath(args[0])
	if err != nil {
		// LookPath's error says its own context (exec: "NAME": ...), as
		// lineage run prints it.
		fmt.Fprintf(o.s.Err, "lineage: %v\n", err)
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
			return cli.ExitError{Code: lineage.ExitNotFound}
		}
		return cli.ExitError{Code: lineage.ExitCannotRun}
	}
	self, err := proc.Self()
	if err != nil {
		return err
	}
	req := api.AddRoot{PID: int64(self.PID), Start: self.StartTicks, Session: o.Session, Kind: o.Kind, Label: o.Label, Command: args, Join: o.Join}
	// One call on a connection of its own, before the process becomes
	// COMMAND: no HTTP transport, so no goroutine or thread is started.
	root, err := client.AddRootOnce(client.Socket(o.Socket), req)
	if err != nil {
		return fmt.Errorf("exec: register: %w", err)
	}
	if o.JSON {
		if err := o.print(&root); err != nil {
			return err
		}
	}
	cli.StopProfiles() // its timer would outlive the exec
	err = syscall.Exec(path, args, os.Environ())
	fmt.Fprintf(o.s.Err, "lineage: exec %s: %v\n", args[0], err)
	return cli.ExitError{Code: lineage.ExitCannotRun}
}
