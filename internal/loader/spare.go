package loader

import (
	"fmt"

	"github.com/lineage-dev/lineage/internal/lineage"
)

// Sparer is a backend that kills in the kernel (bpf): when lineage's own
// process dies (HardCancelKernel) and, during a reap, by containment. Spare
// marks a member that user space spares — a keep rule keeps it, or it is in
// lineage's protected set — so that every kill in the kernel spares it too:
// it is not killed when lineage dies, and the children it forks are not
// killed at birth (compat: nor is it, for forking). Mark before anything is
// contained. A member that is not (or no longer) id is an error wrapping
// ErrNotMember.
type Sparer interface {
	Spare(id lineage.Identity) error
}

// ErrNotMember is wrapped when an identity names no live member.
var ErrNotMember = fmt.Errorf("not a member")

// OnFull says what happens to a new process that the full membership map
// can't hold.
type OnFull string

const (
	// OnFullKill, the default, fails closed: the process is killed at
	// birth (compat: at its first exec or fork), counted and reported.
	OnFullKill OnFull = "kill"
	// OnFullEscape lets it run untracked, counted and reported.
	OnFullEscape OnFull = "escape"
)

// ParseOnFull reads "kill" or "escape"; "" is OnFullKill. Errors wrap
// lineage.ErrInvalid.
func ParseOnFull(s string) (OnFull, error) {
	switch OnFull(s) {
	case "", OnFullKill:
		return OnFullKill, nil
	case OnFullEscape:
		return OnFullEscape, nil
	}
	return "", fmt.Errorf("%w option: on full %q: want kill or escape", lineage.ErrInvalid, s)
}
