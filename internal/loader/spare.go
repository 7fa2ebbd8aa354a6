package loader

import (
	"fmt"

	"github.com/lineage-dev/lineage/lineage"
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
