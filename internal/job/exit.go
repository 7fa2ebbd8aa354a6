package job

import (
	"errors"
	"os"
	"os/exec"
	"syscall"

	"github.com/lineage-dev/lineage/lineage"
	"github.com/lineage-dev/lineage/policy"
)

// End is how a job's root ended, and why the wait for it stopped.
type End struct {
	// Status is valid when Exited is set.
	Status lineage.ExitStatus
	// Exited: the root exited.
	Exited bool
	// Deadline: the deadline passed first.
	Deadline bool
	// Interrupted is the signal passed on to the job, if any.
	Interrupted os.Signal
	// Outlived: the root had not exited when the wait after Interrupted
	// ended (its grace ran out, or a second signal came).
	Outlived bool
	// Fatal is a signal lineage was sent and does not pass on, that ended
	// the wait or the reap: lineage reaps and exits 128+N.
	Fatal os.Signal
}

// Event is the policy event the end calls for: the deadline, or the root's
// exit (which includes a wait cut short by signals).
func (e End) Event() policy.Event {
	if e.Deadline {
		return policy.Deadline
	}
	return policy.RootExit
}

// ExitCode is the exit status for a job that ended so: [lineage.ExitDeadline] once
// the deadline passed, the root's own exit code, 128+N when signal N ended
// it, and [lineage.ExitFailure] when its end is not known.
func (e End) ExitCode() int {
	if sig, ok := e.Fatal.(syscall.Signal); ok {
		return 128 + int(sig)
	}
	if e.Deadline {
		return lineage.ExitDeadline
	}
	if !e.Exited {
		return lineage.ExitFailure
	}
	if code, ok := e.Status.Exited(); ok {
		return code
	}
	if sig, ok := e.Status.Signaled(); ok {
		return 128 + int(sig)
	}
	return lineage.ExitFailure
}

// StartError says that a job's command could not be started. Code is
// [lineage.ExitNotFound] or [lineage.ExitCannotRun].
type StartError struct {
	Code int
	Err  error
}

func (e *StartError) Error() string { return e.Err.Error() }

func (e *StartError) Unwrap() error { return e.Err }

// LookPath finds the program that a job's command names, as exec.LookPath
// does; a command that can't be run is a [*StartError].
func LookPath(name string) (string, error) {
	path, err := exec.LookPath(name)
	if err != nil {
		code := lineage.ExitCannotRun
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
			code = lineage.ExitNotFound
		}
		return "", &StartError{Code: code, Err: err}
	}
	return path, nil
}
