package proc

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// UIDs are a process's user ids, from the Uid line of /proc/PID/status.
type UIDs struct {
	Real, Effective, Saved uint32
}

// UIDs reads the user ids of the live process pid. It wraps
// [lineage.ErrNoProcess] when pid names no process.
func (p FS) UIDs(pid int) (UIDs, error) {
	data, err := os.ReadFile(filepath.Join(p.root, strconv.Itoa(pid), "status"))
	if err != nil {
		return UIDs{}, procErr(pid, err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		rest, ok := strings.CutPrefix(line, "Uid:")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) < 3 {
			break
		}
		var ids [3]uint32
		for i := range ids {
			n, err := strconv.ParseUint(f[i], 10, 32)
			if err != nil {
				return UIDs{}, fmt.Errorf("read uids of %d: %w", pid, err)
			}
			ids[i] = uint32(n)
		}
		return UIDs{Real: ids[0], Effective: ids[1], Saved: ids[2]}, nil
	}
	return UIDs{}, fmt.Errorf("read uids of %d: no Uid line", pid)
}
