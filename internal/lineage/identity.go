package lineage

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ErrInvalidIdentity is wrapped by every error about a malformed or
// unacceptable identity.
var ErrInvalidIdentity = errors.New("invalid identity")

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
		return fmt.Errorf("%w: pid %d: pid 0 and 1 can never be tracked", ErrInvalidIdentity, id.PID)
	}
	if id.StartTicks == 0 {
		return fmt.Errorf("%w: pid %d: missing start time", ErrInvalidIdentity, id.PID)
	}
	return nil
}

// ParseIdentity reads "PID@START" as written by [Identity.String].
func ParseIdentity(s string) (Identity, error) {
	pidText, startText, ok := strings.Cut(s, "@")
	if !ok {
		return Identity{}, fmt.Errorf("%w: %q: want PID@START", ErrInvalidIdentity, s)
	}
	pid, err := strconv.ParseUint(pidText, 10, 32)
	if err != nil {
		return Identity{}, fmt.Errorf("%w: %q: bad pid", ErrInvalidIdentity, s)
	}
	start, err := strconv.ParseUint(startText, 10, 64)
	if err != nil {
		return Identity{}, fmt.Errorf("%w: %q: bad start time", ErrInvalidIdentity, s)
	}
	id := Identity{PID: uint32(pid), StartTicks: start}
	if err := id.Validate(); err != nil {
		return Identity{}, err
	}
	return id, nil
}
