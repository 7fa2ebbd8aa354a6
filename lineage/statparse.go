package lineage

import (
	"bytes"
	"errors"
	"fmt"
)

// PFKthread is PF_KTHREAD, the flag (stat field 9) of a kernel thread.
const PFKthread = 0x00200000

// PFExiting is PF_EXITING, the flag (stat field 9) of a thread in exit(2):
// set before the kernel's exit tracepoint runs, so before the tracker
// forgets the process, and before it shows as a zombie.
const PFExiting = 0x00000004

// ErrMalformedStat is wrapped when a stat record can't be parsed.
var ErrMalformedStat = errors.New("malformed stat")

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
// 22 (start time); later ones (28, the stack; 49, the arguments' end; 52,
// the exit code) are read when present, as on every kernel lineage runs
// on. A name equal to comm is returned as comm, without allocating.
func ParseStat(pid int, data []byte, comm string) (Stat, error) {
	l := bytes.IndexByte(data, '(')
	r := bytes.LastIndexByte(data, ')')
	if l < 0 || r < l || r+2 >= len(data) {
		return Stat{}, fmt.Errorf("pid %d: %w: %q", pid, ErrMalformedStat, data)
	}
	st := Stat{Comm: comm}
	if string(data[l+1:r]) != comm {
		st.Comm = string(data[l+1 : r])
	}
	st.PID = uint32(pid)
	rest := data[r+2:]
	field := 3 // the state is field 3
	for ; len(rest) > 0 && field <= 52; field++ {
		end := bytes.IndexByte(rest, ' ')
		if end < 0 {
			end = len(rest)
		}
		if err := setField(&st, field, bytes.TrimRight(rest[:end], "\n")); err != nil {
			return Stat{}, fmt.Errorf("pid %d: %w", pid, err)
		}
		rest = rest[end:]
		if len(rest) > 0 {
			rest = rest[1:]
		}
	}
	if field <= 22 {
		return Stat{}, fmt.Errorf("pid %d: %w: %d fields, want at least 22", pid, ErrMalformedStat, field-1)
	}
	return st, nil
}

// setField stores field number field (from 3, the state) of a stat record
// in st, if lineage uses it.
func setField(st *Stat, field int, tok []byte) error {
	if field == 3 {
		if len(tok) == 1 && states[tok[0]] != "" {
			st.State = states[tok[0]]
		} else {
			st.State = string(tok)
		}
		return nil
	}
	switch field {
	case 4, 5, 6, 9, 20, 22, 28, 33, 34, 49, 52:
	default:
		return nil
	}
	v, ok := parseDecimal(tok)
	if !ok {
		return fmt.Errorf("%w: field %d is %q", ErrMalformedStat, field, tok)
	}
	switch field {
	case 4:
		st.PPID = int(v)
	case 5:
		st.PGRP = int(v)
	case 6:
		st.Session = int(v)
	case 9:
		st.Kernel = v&PFKthread != 0
		st.Exiting = v&PFExiting != 0
	case 20:
		st.Threads = int(v)
	case 22:
		st.StartTicks = v
	case 28:
		st.StartStack = v
	case 33:
		st.SigIgnore = v
	case 34:
		st.SigCatch = v
	case 49:
		st.ArgEnd = v
	case 52:
		st.ExitCode = ExitStatus(int32(v))
	}
	return nil
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
