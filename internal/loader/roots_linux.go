package loader

import (
	"fmt"

	"github.com/lineage-dev/lineage/internal/lineage"
)

// Roots lists the roots registered in the kernel's map: with a pinned
// tracker, those an earlier holder registered too, exited ones included.
// It is a snapshot; safe for concurrent use.
func (b *BPF) Roots() ([]lineage.Identity, error) {
	var (
		pid uint32
		r   lineageRoot
		out []lineage.Identity
	)
	it := b.objs.Roots.Iterate()
	for it.Next(&pid, &r) {
		out = append(out, lineage.Identity{PID: pid, StartTicks: r.Start})
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("read roots: %w", err)
	}
	return out, nil
}
