package proc

import (
	"os"
	"path/filepath"
	"strconv"
)

// Exe returns the path of the executable pid runs, as the kernel resolved it
// (/proc/PID/exe). It is empty for kernel threads and zombies.
func (p FS) Exe(pid int) (string, error) {
	exe, err := os.Readlink(filepath.Join(p.root, strconv.Itoa(pid), "exe"))
	if err != nil {
		if _, serr := os.Stat(filepath.Join(p.root, strconv.Itoa(pid))); serr == nil {
			// A kernel thread or a zombie: the process is there, its
			// executable is not.
			return "", nil
		}
		return "", noProcess(pid, err)
	}
	return exe, nil
}
