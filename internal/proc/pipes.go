package proc

import (
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// PipeFD is one descriptor of a process that is a pipe, by the pipe's inode.
type PipeFD struct {
	FD   int
	Pipe uint64
}

// Pipes returns the descriptors of pid that are one of want's pipes (both
// ends of a pipe share its inode), in descriptor order, reading at most max
// of pid's descriptors; truncated is set when it had more. A descriptor
// closed while it reads is skipped. It reads links only: nothing of the
// pipes' contents. The caller checks pid's identity after the read, since
// the pid may have been reused meanwhile.
func (p FS) Pipes(pid int, want map[uint64]bool, max int) (fds []PipeFD, truncated bool, err error) {
	dir := filepath.Join(p.root, strconv.Itoa(pid), "fd")
	d, err := os.Open(dir)
	if err != nil {
		return nil, false, procErr(pid, err)
	}
	defer d.Close()
	names, err := d.Readdirnames(max + 1)
	if err != nil && err != io.EOF {
		return nil, false, procErr(pid, err)
	}
	if len(names) > max {
		names, truncated = names[:max], true
	}
	for _, name := range names {
		fd, err := strconv.Atoi(name)
		if err != nil {
			continue
		}
		link, err := os.Readlink(filepath.Join(dir, name))
		if err != nil {
			continue
		}
		if ino, ok := pipeInode(link); ok && want[ino] {
			fds = append(fds, PipeFD{FD: fd, Pipe: ino})
		}
	}
	slices.SortFunc(fds, func(a, b PipeFD) int { return a.FD - b.FD })
	return fds, truncated, nil
}

// pipeInode reads the inode of a /proc/PID/fd link to a pipe, "pipe:[N]".
func pipeInode(link string) (uint64, bool) {
	rest, ok := strings.CutPrefix(link, "pipe:[")
	if !ok {
		return 0, false
	}
	num, ok := strings.CutSuffix(rest, "]")
	if !ok {
		return 0, false
	}
	ino, err := strconv.ParseUint(num, 10, 64)
	return ino, err == nil
}
