package bpf

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf"
	"github.com/lineage-dev/lineage/lineage"
)

// memberBatch is how many entries one batch lookup of the members map
// reads.
const memberBatch = 1024

// memberEntry is one entry of the members map.
type memberEntry struct {
	pid uint32
	m   lineageMember
}

// memberEntries reads every entry of the members map, in a pass shared
// with concurrent callers (see sweeps): the result must not be modified.
// It reads in batches, one system call for up to memberBatch entries,
// where the kernel can (5.6+); else, or if a batch fails, it starts again
// by iteration, two system calls an entry. Listing 5,000 members one by
// one cost a reap about as much as signalling them. The map changes under
// the read: an entry added or removed meanwhile may or may not be in the
// result, and none is in it twice.
func (b *Tracker) memberEntries() ([]memberEntry, error) {
	return b.sweeps.share(b.readMembers)
}

// readMembers is one pass of memberEntries.
func (b *Tracker) readMembers() ([]memberEntry, error) {
	out, err := b.memberBatches()
	if err == nil {
		return out, nil
	}
	out = out[:0]
	var e memberEntry
	it := b.objs.Members.Iterate()
	for it.Next(&e.pid, &e.m) {
		out = append(out, e)
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("iterate members: %w", err)
	}
	return out, nil
}

func (b *Tracker) memberBatches() ([]memberEntry, error) {
	keys := make([]uint32, memberBatch)
	vals := make([]lineageMember, memberBatch)
	var (
		out    []memberEntry
		cursor ebpf.MapBatchCursor
	)
	for {
		n, err := b.objs.Members.BatchLookup(&cursor, keys, vals, nil)
		for i := range n {
			out = append(out, memberEntry{pid: keys[i], m: vals[i]})
		}
		switch {
		case errors.Is(err, ebpf.ErrKeyNotExist):
			return out, nil
		case err != nil:
			return out, err
		}
	}
}

// MembersOfRoots returns the members of each of roots from one pass over
// the membership map, where [BPF.Members] takes a pass per root: a
// snapshot for the sidecar's state file, which lists every root's members
// at every change. Entries written from user space are checked against
// /proc and left out if their process is gone (Members deletes them);
// forks the kernel skipped are not adopted here (Members does that).
func (b *Tracker) MembersOfRoots(roots []lineage.Identity) (map[lineage.Identity][]lineage.Member, error) {
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

// Fill returns how many entries the membership map holds, across all
// roots, and how many it can hold: when it is full, new processes are
// counted as MembersFull. It walks the map's keys, so its cost grows with
// the number of members; it is safe for concurrent use.
func (b *Tracker) Fill() (members, capacity int, err error) {
	var (
		pid uint32
		m   lineageMember
	)
	it := b.objs.Members.Iterate()
	for it.Next(&pid, &m) {
		members++
	}
	if err := it.Err(); err != nil {
		return 0, 0, fmt.Errorf("count members: %w", err)
	}
	return members, int(b.objs.Members.MaxEntries()), nil
}
