package proc

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
)

// Status is the part of /proc/PID/status that the stat file lacks.
type Status struct {
	// SigIgn and SigCgt are the signals ignored and caught, bit sig-1 for
	// signal sig.
	SigIgn, SigCgt uint64
	// NSpid is the process's pid in each PID namespace it is in, from the
	// reader's outward to its own; nil on kernels without the line.
	NSpid []int
	// UIDs are the real, effective and saved user ids.
	UIDs UIDs
	// Tgid is the process the task belongs to: the pid itself for a
	// process, another for a thread of it.
	Tgid int
}

// NamespaceInit reports whether the process is the init (pid 1) of a PID
// namespace of its own: from outside that namespace, a signal it has no
// handler for is dropped unless it is SIGKILL or SIGSTOP.
func (s Status) NamespaceInit() bool { return len(s.NSpid) > 1 && s.NSpid[len(s.NSpid)-1] == 1 }

// Status reads /proc/PID/status. It wraps ErrNoProcess when pid is gone.
func (p FS) Status(pid int) (Status, error) {
	b, err := os.ReadFile(filepath.Join(p.root, strconv.Itoa(pid), "status"))
	if err != nil {
		return Status{}, noProcess(pid, err)
	}
	return ParseStatus(pid, b)
}

// ParseStatus parses the contents of /proc/PID/status.
func ParseStatus(pid int, data []byte) (Status, error) {
	var s Status
	for line := range bytes.Lines(data) {
		key, val, ok := bytes.Cut(bytes.TrimRight(line, "\n"), []byte(":"))
		if !ok {
			continue
		}
		val = bytes.TrimSpace(val)
		var err error
		switch string(key) {
		case "SigIgn":
			s.SigIgn, err = strconv.ParseUint(string(val), 16, 64)
		case "SigCgt":
			s.SigCgt, err = strconv.ParseUint(string(val), 16, 64)
		case "Uid":
			f := bytes.Fields(val)
			if len(f) < 3 {
				err = fmt.Errorf("want 4 ids, got %d", len(f))
				break
			}
			var ids [3]uint64
			for i := range ids {
				if ids[i], err = strconv.ParseUint(string(f[i]), 10, 32); err != nil {
					break
				}
			}
			s.UIDs = UIDs{Real: uint32(ids[0]), Effective: uint32(ids[1]), Saved: uint32(ids[2])}
		case "Tgid":
			s.Tgid, err = strconv.Atoi(string(val))
		case "NSpid":
			for _, f := range bytes.Fields(val) {
				n, perr := strconv.Atoi(string(f))
				if perr != nil {
					err = perr
					break
				}
				s.NSpid = append(s.NSpid, n)
			}
		}
		if err != nil {
			return Status{}, fmt.Errorf("pid %d: status line %s: %w", pid, key, err)
		}
	}
	return s, nil
}
