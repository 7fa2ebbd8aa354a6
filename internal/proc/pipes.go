package proc

import (
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
)

// FDLink is one descriptor of a process and what its /proc/PID/fd link
// names ("pipe:[7]", "socket:[9]").
type FDLink struct {
	FD   int
	Link string
}

// PipeLink is the /proc/PID/fd link of a descriptor of the pipe with inode
// ino (either end: both share it).
func PipeLink(ino uint64) string { return "pipe:[" + strconv.FormatUint(ino, 10) + "]" }

// SocketLink is the /proc/PID/fd link of a descriptor of the socket with
// inode ino.
func SocketLink(ino uint64) string { return "socket:[" + strconv.FormatUint(ino, 10) + "]" }

// FDLinks returns the descriptors of pid whose link is one of want, in
// descriptor order, reading at most max of pid's descriptors; truncated is
// set when it had more. A descriptor closed while it reads is skipped. It
// reads links only, nothing through them. The caller checks pid's identity
// after the read, since the pid may have been reused meanwhile.
func (p FS) FDLinks(pid int, want map[string]bool, max int) (fds []FDLink, truncated bool, err error) {
	dir := filepath.Join(p.root, strconv.Itoa(pid), "fd")
	d, err := os.Open(dir)
	if err != nil {
		return nil, false, noProcess(pid, err)
	}
	defer d.Close()
	names, err := d.Readdirnames(max + 1)
	if err != nil && err != io.EOF {
		return nil, false, noProcess(pid, err)
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
		if err == nil && want[link] {
			fds = append(fds, FDLink{FD: fd, Link: link})
		}
	}
	slices.SortFunc(fds, func(a, b FDLink) int { return a.FD - b.FD })
	return fds, truncated, nil
}
