package reap

import (
	"fmt"
	"os"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/lineage-dev/lineage/internal/lineage"
	"github.com/lineage-dev/lineage/internal/proc"
)

// Signal sends sig to the one process id names, and only if it is still that
// process: it pins the pid with a pidfd, checks the start time in proc, then
// signals the pidfd, so a recycled pid is never hit. It wraps
// lineage.ErrNoProcess or lineage.ErrIdentityMismatch when the process is
// gone, lineage.ErrInvalid for pid ≤ 1 or a missing start time, and
// refuses the caller itself. It is for a single signal outside a reap (a
// signal passed on to a job); Reap does its own.
func Signal(proc proc.FS, id lineage.Identity, sig syscall.Signal) error {
	if err := id.Validate(); err != nil {
		return err
	}
	if int(id.PID) == os.Getpid() {
		return fmt.Errorf("signal %s: refusing to signal lineage itself", id)
	}
	fd, err := openPidfd(int(id.PID))
	if err != nil {
		return fmt.Errorf("signal %s: %w", id, err)
	}
	defer unix.Close(fd)
	if err := proc.Check(id); err != nil {
		return fmt.Errorf("signal %s: %w", id, err)
	}
	if err := sendPidfd(fd, sig); err != nil {
		return fmt.Errorf("signal %s: %w", id, err)
	}
	return nil
}
