package loader

import (
	"fmt"

	"github.com/lineage-dev/lineage/internal/lineage"
)

// MembersOfRoots returns the members of each of roots from one pass over
// the membership map, where [BPF.Members] takes a pass per root: a
// snapshot for the sidecar's state file, which lists every root's members
// at every change. Entries written from user space are checked against
// /proc and left out if their process is gone (Members deletes them);
// forks the kernel skipped are not adopted here (Members does that).
func (b *BPF) MembersOfRoots(roots []lineage.Identity) (map[lineage.Identity][]lineage.Member, error) {
	want := make(map[lineage.Identity]bool, len(roots))
	for _, r := range roots {
		want[r] = true
	}
	entries, err := b.memberEntries()
	if err != nil {
		return nil, fmt.Errorf("read members: %w", err)
	}
	out := make(map[lineage.Identity][]lineage.Member, len(roots))
	for _, e := range entries {
		m := &e.m
		root := lineage.Identity{PID: m.RootPid, StartTicks: m.RootStart}
		if !want[root] {
			continue
		}
		id := lineage.Identity{PID: e.pid, StartTicks: m.Start}
		if m.Flags&lineageMemberFlagMEMBER_F_ADOPTED != 0 && b.proc.Check(id) != nil {
			continue
		}
		out[root] = append(out[root], lineage.Member{
			Identity:  id,
			Parent:    lineage.Identity{PID: m.ParentPid, StartTicks: m.ParentStart},
			Root:      root,
			Contained: m.Flags&lineageMemberFlagMEMBER_F_CONTAINED != 0,
		})
	}
	return out, nil
}
