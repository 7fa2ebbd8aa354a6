package loader

import "fmt"

// Fill returns how many entries the membership map holds, across all
// roots, and how many it can hold: when it is full, new processes are
// counted as MembersFull. It walks the map's keys, so its cost grows with
// the number of members; it is safe for concurrent use.
func (b *BPF) Fill() (members, capacity int, err error) {
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
