package lineage

import (
	"cmp"
	"fmt"
	"strconv"
	"strings"
)

// Identity names one process for its whole life: its pid and its start time
// in clock ticks since boot (field 22 of /proc/PID/stat). Two processes that
// share a pid at different times have different identities.
type Identity struct {
	PID        uint32 `json:"pid"`
	StartTicks uint64 `json:"start"`
}

// IsZero reports whether id names no process.
func (id Identity) IsZero() bool { return id == Identity{} }

// String formats id as "PID@START", the form [ParseIdentity] reads.
func (id Identity) String() string {
	return strconv.FormatUint(uint64(id.PID), 10) + "@" + strconv.FormatUint(id.StartTicks, 10)
}

// Validate reports whether id could name a process lineage may track: pid 0
// is the idle task and pid 1 is init; neither can ever be a member.
func (id Identity) Validate() error {
	if id.PID <= 1 {
		return fmt.Errorf("%w identity: pid %d: pid 0 and 1 can never be tracked", ErrInvalid, id.PID)
	}
	if id.StartTicks == 0 {
		return fmt.Errorf("%w identity: pid %d: missing start time", ErrInvalid, id.PID)
	}
	return nil
}

// ParseIdentity reads "PID@START" as written by [Identity.String].
func ParseIdentity(s string) (Identity, error) {
	pidText, startText, ok := strings.Cut(s, "@")
	if !ok {
		return Identity{}, fmt.Errorf("%w identity %q: want PID@START", ErrInvalid, s)
	}
	pid, err := strconv.ParseUint(pidText, 10, 32)
	if err != nil {
		return Identity{}, fmt.Errorf("%w identity %q: bad pid", ErrInvalid, s)
	}
	start, err := strconv.ParseUint(startText, 10, 64)
	if err != nil {
		return Identity{}, fmt.Errorf("%w identity %q: bad start time", ErrInvalid, s)
	}
	id := Identity{PID: uint32(pid), StartTicks: start}
	if err := id.Validate(); err != nil {
		return Identity{}, err
	}
	return id, nil
}

// ParseProcess reads a process as a person names one: PID@START, as
// [ParseIdentity] reads it, or a bare PID, returned with no start time for
// the caller to read from /proc. Pid 0 and 1 are refused either way:
// neither can ever be tracked.
func ParseProcess(s string) (Identity, error) {
	if strings.Contains(s, "@") {
		return ParseIdentity(s)
	}
	pid, err := strconv.ParseUint(s, 10, 32)
	if err != nil {
		return Identity{}, fmt.Errorf("%w process %q: want PID or PID@START", ErrInvalid, s)
	}
	if pid <= 1 {
		return Identity{}, fmt.Errorf("%w process %q: pid 0 and 1 are never tracked", ErrInvalid, s)
	}
	return Identity{PID: uint32(pid)}, nil
}

// Compare orders identities by start time, then pid: the order in which the
// processes were created, as far as clock ticks can tell.
func Compare(a, b Identity) int {
	return cmp.Or(cmp.Compare(a.StartTicks, b.StartTicks), cmp.Compare(a.PID, b.PID))
}
