package reap

import (
	"errors"
	"fmt"
	"os"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/lineage-dev/lineage/internal/proc"
	"github.com/lineage-dev/lineage/lineage"
)

// openPidfd pins the process pid with a close-on-exec pidfd, which the
// caller closes. It wraps lineage.ErrNoProcess when no process has that pid
// and ErrNotProcess when pid is a thread.
func openPidfd(pid int) (int, error) {
	fd, err := unix.PidfdOpen(pid, 0)
	switch {
	case errors.Is(err, unix.ESRCH):
		return -1, fmt.Errorf("pidfd_open %d: %w", pid, lineage.ErrNoProcess)
	case errors.Is(err, unix.EINVAL), errors.Is(err, unix.ENOENT):
		// A thread, not a thread-group leader (ENOENT since Linux 6.9).
		return -1, fmt.Errorf("pidfd_open %d: %w (%w)", pid, ErrNotProcess, err)
	case err != nil:
		return -1, fmt.Errorf("pidfd_open %d: %w", pid, err)
	}
	return fd, nil
}

// sendPidfd signals the process fd pins; it wraps lineage.ErrNoProcess
// when the process is gone.
func sendPidfd(fd int, sig syscall.Signal) error {
	err := unix.PidfdSendSignal(fd, sig, nil, 0)
	if errors.Is(err, unix.ESRCH) {
		return fmt.Errorf("pidfd_send_signal: %w", lineage.ErrNoProcess)
	}
	if err != nil {
		return fmt.Errorf("pidfd_send_signal: %w", err)
	}
	return nil
}

// Signal sends sig to the one process id names, and only if it is still that
// process: it pins the pid with a pidfd, checks the start time in /proc,
// then signals the pidfd, so a recycled pid is never hit. It wraps
// lineage.ErrNoProcess or lineage.ErrIdentityMismatch when the process is
// gone, lineage.ErrInvalid for pid ≤ 1 or a missing start time, and
// refuses the caller itself. It is for a single signal outside a reap (a
// signal passed on to a job); the reaper does its own.
func Signal(id lineage.Identity, sig syscall.Signal) error {
	return signalPinned(id, sig, false)
}

// SignalGroup sends sig to the process group whose id is id's pid, as a
// terminal sends Ctrl-C to its foreground group, and only while id is
// still that process, checked as [Signal] checks it. The group is named
// through the pidfd, not by number: once id's process is gone, its
// number can name another group, and that group is never hit. A job's
// root leads the group lineage made for it, so this reaches the job's
// processes that stayed in it (a pipeline, a shell's foreground child),
// never lineage, which is in another group. Where the kernel can't
// signal a group through a pidfd (before Linux 6.9) it signals id's
// process alone, as Signal does. Errors are Signal's.
func SignalGroup(id lineage.Identity, sig syscall.Signal) error {
	return signalPinned(id, sig, true)
}

func signalPinned(id lineage.Identity, sig syscall.Signal, group bool) error {
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
	st, err := proc.ReadStat("/proc", int(id.PID))
	if err == nil {
		err = proc.CheckStat(st, id)
	}
	if err != nil {
		return fmt.Errorf("signal %s: %w", id, err)
	}
	if group {
		err := unix.PidfdSendSignal(fd, sig, nil, unix.PIDFD_SIGNAL_PROCESS_GROUP)
		if !errors.Is(err, unix.EINVAL) {
			if errors.Is(err, unix.ESRCH) {
				err = fmt.Errorf("pidfd_send_signal: %w", lineage.ErrNoProcess)
			} else if err != nil {
				err = fmt.Errorf("pidfd_send_signal to its group: %w", err)
			}
			if err != nil {
				return fmt.Errorf("signal %s: %w", id, err)
			}
			return nil
		}
		// EINVAL: a kernel without the flag; the process alone, then.
	}
	if err := sendPidfd(fd, sig); err != nil {
		return fmt.Errorf("signal %s: %w", id, err)
	}
	return nil
}
