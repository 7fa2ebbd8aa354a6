package proc

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"syscall"

	"github.com/prometheus/procfs"

	"github.com/lineage-dev/lineage/internal/lineage"
)

// FS reads processes from a /proc tree. The zero value is unusable; use
// [Open]. An FS is safe for concurrent use.
type FS struct {
	fs   procfs.FS
	root string
}

// Open opens the /proc tree mounted at root ("/proc" on a real system,
// any directory in tests).
func Open(root string) (FS, error) {
	fs, err := procfs.NewFS(root)
	if err != nil {
		return FS{}, fmt.Errorf("open proc at %s: %w", root, err)
	}
	return FS{fs: fs, root: root}, nil
}

const pfKthread = lineage.PFKthread

// Stat reads /proc/PID/stat.
func (p FS) Stat(pid int) (lineage.Stat, error) {
	proc, err := p.fs.Proc(pid)
	if err != nil {
		return lineage.Stat{}, procErr(pid, err)
	}
	st, err := proc.Stat()
	if err != nil {
		return lineage.Stat{}, procErr(pid, err)
	}
	return lineage.Stat{
		Identity:   lineage.Identity{PID: uint32(pid), StartTicks: st.Starttime},
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
func (p FS) Identity(pid int) (lineage.Identity, error) {
	st, err := p.Stat(pid)
	if err != nil {
		return lineage.Identity{}, err
	}
	return st.Identity, nil
}

// Check returns nil when id names a live process: its pid is alive, not a
// zombie, and started exactly when id says. It wraps ErrNoProcess or
// ErrIdentityMismatch otherwise.
func (p FS) Check(id lineage.Identity) error {
	st, err := p.Stat(int(id.PID))
	if err != nil {
		return err
	}
	if st.StartTicks != id.StartTicks {
		return fmt.Errorf("pid %d started at %d, not %d: %w", id.PID, st.StartTicks, id.StartTicks, lineage.ErrIdentityMismatch)
	}
	if st.Zombie() {
		return fmt.Errorf("pid %d has exited (zombie): %w", id.PID, lineage.ErrNoProcess)
	}
	return nil
}

// Argv returns the command line of pid (empty for kernel threads and
// zombies), at most lineage.MaxArgvBytes of it: a longer one is cut and
// marked (lineage.ArgvFromCmdline), and never read whole. For a process
// whose leader thread has exited while others run on, it is read through
// one of the live threads.
func (p FS) Argv(pid int) ([]string, error) {
	dir := filepath.Join(p.root, strconv.Itoa(pid))
	raw, err := readCapped(filepath.Join(dir, "cmdline"), lineage.MaxArgvBytes+1)
	if err != nil {
		return nil, procErr(pid, err)
	}
	if len(raw) == 0 {
		tasks, _ := os.ReadDir(filepath.Join(dir, "task"))
		for _, t := range tasks {
			if r, err := readCapped(filepath.Join(dir, "task", t.Name(), "cmdline"), lineage.MaxArgvBytes+1); err == nil && len(r) > 0 {
				return lineage.ArgvFromCmdline(r), nil
			}
		}
	}
	return lineage.ArgvFromCmdline(raw), nil
}

// readCapped reads at most limit bytes of the file at path.
func readCapped(path string, limit int) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, int64(limit)))
}

// PIDs lists the pids of all processes (thread-group leaders).
func (p FS) PIDs() ([]int, error) {
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
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("pid %d: %w", pid, lineage.ErrNoProcess)
	}
	return fmt.Errorf("pid %d: %w", pid, err)
}
