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
	fs procfs.FS
}

// OpenProcFS opens the /proc tree mounted at root ("/proc" on a real system,
// any directory in tests).
func OpenProcFS(root string) (ProcFS, error) {
	fs, err := procfs.NewFS(root)
	if err != nil {
		return ProcFS{}, fmt.Errorf("open proc at %s: %w", root, err)
	}
	return ProcFS{fs: fs}, nil
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
		Identity: Identity{PID: uint32(pid), StartTicks: st.Starttime},
		PPID:     st.PPID,
		PGRP:     st.PGRP,
		Session:  st.Session,
		State:    st.State,
		Comm:     st.Comm,
		Kernel:   st.Flags&pfKthread != 0,
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

// Check returns nil when id names a live process: its pid is alive and
// started exactly when id says. It wraps ErrNoProcess or ErrIdentityMismatch
// otherwise.
func (p ProcFS) Check(id Identity) error {
	got, err := p.Identity(int(id.PID))
	if err != nil {
		return err
	}
	if got.StartTicks != id.StartTicks {
		return fmt.Errorf("pid %d started at %d, not %d: %w", id.PID, got.StartTicks, id.StartTicks, ErrIdentityMismatch)
	}
	return nil
}

// Argv returns the command line of pid (empty for kernel threads and zombies).
func (p ProcFS) Argv(pid int) ([]string, error) {
	proc, err := p.fs.Proc(pid)
	if err != nil {
		return nil, procErr(pid, err)
	}
	argv, err := proc.CmdLine()
	if err != nil {
		return nil, procErr(pid, err)
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
