package cli

import (
	"errors"
	"fmt"
	"os"
	"syscall"

	"github.com/lineage-dev/lineage/lineage"
	"github.com/spf13/cobra"
)

// heldCommand is the hidden subcommand `lineage run` starts as its job's
// root when the daemon tracks the job: it waits, holding the pid, until the
// root is registered, then becomes the command.
const heldCommand = "held"

// heldFD is the pipe `lineage run` releases the held root through.
const heldFD = 3

func NewCmdHeld(s Streams) *cobra.Command {
	return &cobra.Command{
		Use:                heldCommand + " PATH ARGV0 [ARGS...]",
		Short:              "Wait for one byte on fd 3, then exec PATH with ARGV (internal)",
		Hidden:             true,
		DisableFlagParsing: true,
		Args:               cobra.MinimumNArgs(2),
		RunE:               func(cmd *cobra.Command, args []string) error { return runHeld(s, args) },
	}
}

// runHeld reads the go-ahead, then execs args[0] with argv args[1:] in
// place (same pid, same start time). At end of file (lineage run gave up,
// or died) it runs nothing.
func runHeld(s Streams, args []string) error {
	pipe := os.NewFile(heldFD, "held")
	var b [1]byte
	if n, _ := pipe.Read(b[:]); n != 1 {
		return ExitError{Code: lineage.ExitFailure}
	}
	pipe.Close()
	StopProfiles() // its timer would outlive the exec
	err := syscall.Exec(args[0], args[1:], os.Environ())
	fmt.Fprintf(s.Err, "lineage: run %s: %v\n", args[1], err)
	if errors.Is(err, syscall.ENOENT) {
		return ExitError{Code: lineage.ExitNotFound}
	}
	return ExitError{Code: lineage.ExitCannotRun}
}
