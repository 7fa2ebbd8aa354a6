package lineage

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/prometheus/procfs"
)

// ErrNoProcess is wrapped when a pid names no live process.
var ErrNoProcess = errors.New("no such process")

// ErrIdentityMismatch is wrapped when a pid is alive but its start time is not
// the one expected: the pid has been reused by a stranger.
var ErrIdentityMismatch = errors.New("identity mismatch: pid reused")

// ProcFS reads processes from a /proc tree. The zero value is unusable; use
// [OpenProcFS]. A ProcFS is safe for concurrent use.
type ProcFS struct {
	fs   procfs.FS
	root string
}

// OpenProcFS opens the /proc tree mounted at root ("/proc" on a real system,
// any directory in tests).
func OpenProcFS(root string) (ProcFS, error) {
	fs, err := procfs.NewFS(root)
	if err != nil {
		return ProcFS{}, fmt.Errorf("open proc at %s: %w", root, err)
	}
	return ProcFS{fs: fs, root: root}, nil
}

// Stat is the part of /proc/PID/stat lineage uses.
type Stat struct {
	Identity
	PPID    int
	PGRP    int
	Session int
	State   string
	Comm    string
	// Kernel is set for kernel threads (PF_KTHREAD).
	Kernel bool
	// Threads is field 20, the number of threads. A process whose leader
	// thread has exited shows state Z while its other threads run on; it
	// is alive, and counts more than one thread.
	Threads int
	// StartStack is field 28, the address of the bottom of the stack. A
	// new program gets a new stack, at a new random address where address
	// space layout randomisation is on, so a change means an exec. It is
	// 0 for zombies, kernel threads, and processes the reader may not
	// inspect (another user's, without privileges).
	StartStack uint64
	// ExitCode is field 52: a zombie's wait status ((code << 8) | signal),
	// 0 while the process lives or when the reader may not inspect it.
	// Only [StatReader] reads it; [ProcFS.Stat] leaves it 0, as procfs does
	// not parse that field.
	ExitCode ExitStatus
}

const pfKthread = 0x00200000

// Stat reads /proc/PID/stat.
func (p ProcFS) Stat(pid int) (Stat, error) {
	proc, err := p.fs.Proc(pid)
	if err != nil {
		return Stat{}, procErr(pid, err)
	}
	st, err := proc.Stat()
	if err != nil {
		return Stat{}, procErr(pid, err)
	}
	return Stat{
		Identity:   Identity{PID: uint32(pid), StartTicks: st.Starttime},
		PPID:       st.PPID,
		PGRP:       st.PGRP,
		Session:    st.Session,
		State:      st.State,
		Comm:       st.Comm,
		Kernel:     st.Flags&pfKthread != 0,
		Threads:    st.NumThreads,
		StartStack: st.StartStack,
	}, nil
}

// Identity returns the identity of the live process pid.
func (p ProcFS) Identity(pid int) (Identity, error) {
	st, err := p.Stat(pid)
	if err != nil {
		return Identity{}, err
	}
	return st.Identity, nil
}

// Check returns nil when id names a live process: its pid is alive, not a
// zombie, and started exactly when id says. It wraps ErrNoProcess or
// ErrIdentityMismatch otherwise.
func (p ProcFS) Check(id Identity) error {
	st, err := p.Stat(int(id.PID))
	if err != nil {
		return err
	}
	if st.StartTicks != id.StartTicks {
		return fmt.Errorf("pid %d started at %d, not %d: %w", id.PID, st.StartTicks, id.StartTicks, ErrIdentityMismatch)
	}
	if st.Zombie() {
		return fmt.Errorf("pid %d has exited (zombie): %w", id.PID, ErrNoProcess)
	}
	return nil
}

// Zombie reports whether the process has exited and only waits to be
// reaped. A zombie leader whose other threads still run is not one.
func (s Stat) Zombie() bool { return (s.State == "Z" || s.State == "X") && s.Threads <= 1 }

// Argv returns the command line of pid (empty for kernel threads and
// zombies). For a process whose leader thread has exited while others run
// on, it is read through one of the live threads.
func (p ProcFS) Argv(pid int) ([]string, error) {
	proc, err := p.fs.Proc(pid)
	if err != nil {
		return nil, procErr(pid, err)
	}
	argv, err := proc.CmdLine()
	if err != nil {
		return nil, procErr(pid, err)
	}
	if len(argv) == 0 {
		if threads, err := p.fs.AllThreads(pid); err == nil {
			for _, t := range threads {
				if a, err := t.CmdLine(); err == nil && len(a) > 0 {
					return a, nil
				}
			}
		}
	}
	return argv, nil
}

// PIDs lists the pids of all processes (thread-group leaders).
func (p ProcFS) PIDs() ([]int, error) {
	procs, err := p.fs.AllProcs()
	if err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	pids := make([]int, len(procs))
	for i, pr := range procs {
		pids[i] = pr.PID
	}
	return pids, nil
}

func procErr(pid int, err error) error {
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, os.ErrNotExist) || isESRCH(err) {
		return fmt.Errorf("pid %d: %w", pid, ErrNoProcess)
	}
	return fmt.Errorf("pid %d: %w", pid, err)
}

func isESRCH(err error) bool {
	return err != nil && strings.Contains(err.Error(), "no such process")
}
