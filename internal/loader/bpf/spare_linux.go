package bpf

import (
	"fmt"

	"github.com/cilium/ebpf"

	"github.com/lineage-dev/lineage/internal/lineage"
	"github.com/lineage-dev/lineage/internal/loader"
)

var _ loader.Sparer = (*Tracker)(nil)

// Spare implements Sparer.
func (b *Tracker) Spare(id lineage.Identity) error {
	b.mapMu.Lock()
	defer b.mapMu.Unlock()
	var m lineageMember
	if err := b.objs.Members.Lookup(id.PID, &m); err != nil || m.Start != id.StartTicks {
		return fmt.Errorf("spare %s: %w", id, loader.ErrNotMember)
	}
	if m.Flags&lineageMemberFlagMEMBER_F_SPARED != 0 {
		return nil
	}
	m.Flags |= lineageMemberFlagMEMBER_F_SPARED
	// UpdateExist: if id exited meanwhile, its entry is gone and nothing is
	// written. The kernel writes a pid's entry only at its fork, and a pid
	// is not reused within the few microseconds between lookup and update.
	if err := b.objs.Members.Update(id.PID, &m, ebpf.UpdateExist); err != nil {
		return fmt.Errorf("spare %s: %w", id, err)
	}
	return nil
}

// Spare marks id as spared, as [(*Tracker).Spare]: the guardian marks what the
// keep rules and the protected set spare before it contains.
func (h *Handoff) Spare(id lineage.Identity) error { return h.bpf.Spare(id) }
