// Package procstat reads /proc/PID/stat and nothing else: one open, one
// read, parsed by [lineage.ParseStat]. It imports no /proc
// library, so the lean front binary (`lineage exec`, `lineage run` through
// the daemon) can name its own identity without linking one. Its functions
// are safe for concurrent use.
package procstat

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"syscall"

	"github.com/lineage-dev/lineage/internal/lineage"
)

// Read reads and parses root/PID/stat (root is "/proc" on a real system).
// It wraps [lineage.ErrNoProcess] when the process does not exist.
func Read(root string, pid int) (lineage.Stat, error) {
	data, err := os.ReadFile(root + "/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ESRCH) {
			return lineage.Stat{}, fmt.Errorf("pid %d: %w", pid, lineage.ErrNoProcess)
		}
		return lineage.Stat{}, fmt.Errorf("pid %d: %w", pid, err)
	}
	return lineage.ParseStat(pid, data, "")
}

// Self returns the calling process's identity, from /proc.
func Self() (lineage.Identity, error) {
	st, err := Read("/proc", os.Getpid())
	if err != nil {
		return lineage.Identity{}, err
	}
	return st.Identity, nil
}
