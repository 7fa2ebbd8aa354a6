package proc

import (
	"errors"
	"fmt"
	"io/fs"
	"syscall"

	"github.com/prometheus/procfs"

	"github.com/lineage-dev/lineage/internal/lineage"
	"github.com/lineage-dev/lineage/internal/procstat"
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

// Stat reads /proc/PID/stat with the lean parser ([procstat.Read]): a
// registration reads a few stat files, and procfs's parse cost four times
// the read (internal/proc's BenchmarkStat); the tests keep the two parsers
// in agreement.
func (p FS) Stat(pid int) (lineage.Stat, error) { return procstat.Read(p.root, pid) }

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
	return procstat.Check(st, id)
}

// Argv returns the command line of pid (see [procstat.Argv]).
func (p FS) Argv(pid int) ([]string, error) { return procstat.Argv(p.root, pid) }

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
