package poll

import (
	"fmt"
	"slices"

	"github.com/lineage-dev/lineage/internal/loader"
	"github.com/lineage-dev/lineage/lineage"
)

// Orphans: a process reparented to a subreaper that no scan saw fork is
// claimed by the root it can only have come from: of this process's
// spawned roots (attribute), or the root whose declared orphanage it is a
// child of (adoptFromOrphanage).

// adoptFromOrphanage adopts st as an orphan of the root whose declared
// orphanage st is a child of: the only such root that started before it.
// It reports whether it is done with st.
func (t *procTracker) adoptFromOrphanage(st lineage.Stat, cur *procScan) bool {
	parent, ok := cur.procs[st.PPID]
	if !ok {
		return false
	}
	var claims []lineage.Identity
	for id, r := range t.roots {
		if r.orphanage == parent.Identity && id != st.Identity && id.StartTicks <= st.StartTicks {
			claims = append(claims, id)
		}
	}
	switch len(claims) {
	case 0:
		return false
	case 1:
		t.adopt(st, nil, claims[0], cur)
	default:
		t.unattributed++
		t.emit(lineage.Event{Kind: lineage.EventFork, Time: lineage.TicksToDuration(st.StartTicks), Process: st.Identity, Comm: st.Comm, Untracked: true})
	}
	return true
}

// declareOrphanage makes o the orphanage of root, if root is one.
func (t *procTracker) declareOrphanage(root, o lineage.Identity) error {
	r, ok := t.roots[root]
	if !ok {
		return fmt.Errorf("root %s: %w", root, loader.ErrNotRoot)
	}
	r.orphanage = o
	return nil
}

// attribute finds the spawned root an orphan reparented to us belongs to:
// the only registered spawned root that started before it, or else the only
// one whose members lead, or share (other than with us), the orphan's session
// or process group. It reports ambiguous when there were several candidates
// and none of them stood out.
func (t *procTracker) attribute(st lineage.Stat) (root lineage.Identity, ok, ambiguous bool) {
	var cands []lineage.Identity
	for id, r := range t.roots {
		if r.spawned && id.StartTicks <= st.StartTicks {
			cands = append(cands, id)
		}
	}
	switch len(cands) {
	case 0:
		return lineage.Identity{}, false, false
	case 1:
		return cands[0], true, false
	}
	match := make(map[lineage.Identity]bool)
	for _, m := range t.members {
		if slices.Contains(cands, m.Root) && t.groupedWith(m, st) {
			match[m.Root] = true
		}
	}
	for _, left := range []map[uint32]lineage.Identity{t.leftRecently, t.leftBefore} {
		for _, pid := range []int{st.Session, st.PGRP} {
			if root, ok := left[uint32(pid)]; ok && slices.Contains(cands, root) {
				match[root] = true
			}
		}
	}
	if len(match) == 1 {
		for root := range match {
			return root, true, false
		}
	}
	return lineage.Identity{}, false, true
}

// groupedWith reports whether member m leads st's session or process group,
// or shares one with it that this process is not in.
func (t *procTracker) groupedWith(m *procMember, st lineage.Stat) bool {
	return int(m.PID) == st.Session || int(m.PID) == st.PGRP ||
		(m.session == st.Session && st.Session != t.self.Session) ||
		(m.pgrp == st.PGRP && st.PGRP != t.self.PGRP)
}
