package proc

import (
	"fmt"
	"os"

	"github.com/lineage-dev/lineage/lineage"
)

// FS reads processes from a /proc tree. The zero value is unusable; use
// [Open]. An FS is safe for concurrent use.
type FS struct {
	root string
}

// Open opens the /proc tree mounted at root ("/proc" on a real system,
// any directory in tests).
func Open(root string) (FS, error) {
	info, err := os.Stat(root)
	if err != nil {
		return FS{}, fmt.Errorf("open proc at %s: %w", root, err)
	}
	if !info.IsDir() {
		return FS{}, fmt.Errorf("open proc at %s: not a directory", root)
	}
	return FS{root: root}, nil
}

// Stat reads and parses /proc/PID/stat ([ReadStat]).
func (p FS) Stat(pid int) (lineage.Stat, error) { return ReadStat(p.root, pid) }

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
	return CheckStat(st, id)
}

// Argv returns the command line of pid (see [ReadArgv]).
func (p FS) Argv(pid int) ([]string, error) { return ReadArgv(p.root, pid) }

// PIDs lists the pids of all processes (thread-group leaders).
func (p FS) PIDs() ([]int, error) {
	entries, err := os.ReadDir(p.root)
	if err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	pids := make([]int, 0, len(entries))
	for _, e := range entries {
		if pid, ok := parsePID([]byte(e.Name())); ok && e.IsDir() {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}

// parsePID reads a NUL-terminated directory name that is all digits.
func parsePID(name []byte) (int, bool) {
	pid := 0
	for i, c := range name {
		if c == 0 {
			return pid, i > 0
		}
		if c < '0' || c > '9' || pid > 1<<31 {
			return 0, false
		}
		pid = pid*10 + int(c-'0')
	}
	return pid, len(name) > 0
}
