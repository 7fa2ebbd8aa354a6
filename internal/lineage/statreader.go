package lineage

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"syscall"
)

// StatReader reads /proc/PID/stat for a poller that reads it for every
// process, many times a second. It returns what [ProcFS.Stat] returns, and
// field 52 besides, at about half the cost: one open, one read into a buffer
// it keeps, one close, and a parser that looks only at the fields lineage
// uses (procfs runs fmt.Fscan over all of them, and stats the directory
// first).
//
// A StatReader is not safe for concurrent use: it reuses its buffers. Make
// one per goroutine with [ProcFS.StatReader].
type StatReader struct {
	dir   string
	buf   []byte
	names []string
}

// StatReader returns a reader of the same /proc tree.
func (p ProcFS) StatReader() *StatReader {
	return &StatReader{dir: p.root, buf: make([]byte, 1024)}
}

// Stat reads /proc/PID/stat. It wraps ErrNoProcess when pid is gone.
func (r *StatReader) Stat(pid int) (Stat, error) {
	path := r.dir + "/" + strconv.Itoa(pid) + "/stat"
	fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return Stat{}, procErr(pid, err)
	}
	// The kernel fills the whole record in one read when the buffer is big
	// enough; a short read is the end of the file, here as for a regular
	// file in a fake tree.
	var n int
	for {
		n, err = syscall.Pread(fd, r.buf, 0)
		if err == syscall.EINTR {
			continue
		}
		if err != nil || n < len(r.buf) {
			break
		}
		r.buf = make([]byte, 2*len(r.buf))
	}
	syscall.Close(fd)
	if err != nil {
		return Stat{}, procErr(pid, err)
	}
	return ParseStat(pid, r.buf[:n])
}

// PIDs lists the pids of all processes, as [ProcFS.PIDs] does, appending
// them to dst[:0].
func (r *StatReader) PIDs(dst []int) ([]int, error) {
	d, err := os.Open(r.dir)
	if err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	defer d.Close()
	dst = dst[:0]
	for {
		names, err := d.Readdirnames(512)
		for _, name := range names {
			if name == "" || name[0] < '0' || name[0] > '9' {
				continue
			}
			if pid, err := strconv.Atoi(name); err == nil {
				dst = append(dst, pid)
			}
		}
		if errors.Is(err, io.EOF) {
			return dst, nil
		}
		if err != nil {
			return nil, fmt.Errorf("list processes: %w", err)
		}
	}
}

// errMalformedStat is wrapped when a stat record can't be parsed.
var errMalformedStat = errors.New("malformed stat")

// states are the one-letter states /proc shows, shared so that parsing one
// allocates nothing.
var states = func() [256]string {
	var t [256]string
	for _, c := range "RSDZTtWXxKPI" {
		t[c] = string(c)
	}
	return t
}()

// ParseStat parses the contents of /proc/PID/stat. It needs the fields up to
// 22 (start time); later ones (28, the stack; 52, the exit code) are read
// when present, as on every kernel lineage runs on.
func ParseStat(pid int, data []byte) (Stat, error) {
	l := bytes.IndexByte(data, '(')
	r := bytes.LastIndexByte(data, ')')
	if l < 0 || r < l || r+2 >= len(data) {
		return Stat{}, fmt.Errorf("pid %d: %w: %q", pid, errMalformedStat, data)
	}
	st := Stat{Comm: string(data[l+1 : r])}
	st.PID = uint32(pid)
	rest := data[r+2:]
	field := 3 // the state is field 3
	for ; len(rest) > 0 && field <= 52; field++ {
		end := bytes.IndexByte(rest, ' ')
		if end < 0 {
			end = len(rest)
		}
		tok := bytes.TrimRight(rest[:end], "\n")
		switch field {
		case 3:
			if len(tok) == 1 && states[tok[0]] != "" {
				st.State = states[tok[0]]
			} else {
				st.State = string(tok)
			}
		case 4, 5, 6, 9, 20, 22, 28, 52:
			v, ok := parseDecimal(tok)
			if !ok {
				return Stat{}, fmt.Errorf("pid %d: %w: field %d is %q", pid, errMalformedStat, field, tok)
			}
			switch field {
			case 4:
				st.PPID = int(v)
			case 5:
				st.PGRP = int(v)
			case 6:
				st.Session = int(v)
			case 9:
				st.Kernel = v&pfKthread != 0
			case 20:
				st.Threads = int(v)
			case 22:
				st.StartTicks = v
			case 28:
				st.StartStack = v
			case 52:
				st.ExitCode = ExitStatus(int32(v))
			}
		}
		rest = rest[end:]
		if len(rest) > 0 {
			rest = rest[1:]
		}
	}
	if field <= 22 {
		return Stat{}, fmt.Errorf("pid %d: %w: %d fields, want at least 22", pid, errMalformedStat, field-1)
	}
	return st, nil
}

// parseDecimal parses an unsigned decimal, or a negative one as its two's
// complement (pgrp and session are -1 in rare cases, and are ints anyway).
func parseDecimal(b []byte) (uint64, bool) {
	neg := false
	if len(b) > 0 && b[0] == '-' {
		neg, b = true, b[1:]
	}
	if len(b) == 0 || len(b) > 20 {
		return 0, false
	}
	var v uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + uint64(c-'0')
	}
	if neg {
		v = -v
	}
	return v, true
}
