package bpf

import "github.com/lineage-dev/lineage/lineage"

// Spare marks id as spared, as [(*Tracker).Spare]: the guardian marks what the
// keep rules and the protected set spare before it contains.
func (h *Handoff) Spare(id lineage.Identity) error { return h.bpf.Spare(id) }
