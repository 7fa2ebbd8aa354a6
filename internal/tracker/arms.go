package tracker

import (
	"errors"
	"fmt"

	"github.com/lineage-dev/lineage/lineage"
)

// ErrCantArm is wrapped when the tracker's backend can't arm a process:
// the proc backend learns of a fork only after it happened, at its next
// scan, so what it could make a root of a test would be chosen by time, not
// by lineage; it refuses rather than guess.
var ErrCantArm = errors.New("the proc backend can't arm a process: it sees a fork only at its next scan, after the child has run (and may have forked); arms need the bpf backend")

// armer is a backend with per-process arms (the bpf backend).
type armer interface {
	Arm(id lineage.Identity, cookie uint32) error
	Disarm(id lineage.Identity) error
	ClearArms() error
	ArmedRoots() (map[lineage.Identity]uint32, error)
}

func (t *Tracker) armer() (armer, error) {
	a, ok := t.backend.(armer)
	if !ok {
		return nil, fmt.Errorf("%w (backend %s)", ErrCantArm, t.backend.Name())
	}
	return a, nil
}

// Arm arms the live process id with cookie: whatever it forks, from any
// thread, while it is not a member, is a new root carrying cookie before
// its first instruction (see [bpf.Tracker.Arm]). It wraps ErrCantArm on the
// proc backend.
func (t *Tracker) Arm(id lineage.Identity, cookie uint32) error {
	a, err := t.armer()
	if err != nil {
		return err
	}
	return a.Arm(id, cookie)
}

// Disarm disarms id; nothing to do on the proc backend.
func (t *Tracker) Disarm(id lineage.Identity) error {
	a, err := t.armer()
	if err != nil {
		return nil
	}
	return a.Disarm(id)
}

// ClearArms disarms every process; nothing to do on the proc backend.
func (t *Tracker) ClearArms() error {
	a, err := t.armer()
	if err != nil {
		return nil
	}
	return a.ClearArms()
}

// ArmedRoots lists the roots armed processes forked, with their cookies;
// none on the proc backend.
func (t *Tracker) ArmedRoots() (map[lineage.Identity]uint32, error) {
	a, err := t.armer()
	if err != nil {
		return nil, nil
	}
	return a.ArmedRoots()
}
