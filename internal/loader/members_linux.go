package loader

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf"
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
func (b *BPF) memberEntries() ([]memberEntry, error) {
	return b.sweeps.share(b.readMembers)
}

// readMembers is one pass of memberEntries.
func (b *BPF) readMembers() ([]memberEntry, error) {
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

func (b *BPF) memberBatches() ([]memberEntry, error) {
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
