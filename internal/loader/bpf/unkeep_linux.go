package bpf

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf"

	"github.com/lineage-dev/lineage/internal/loader"
	"github.com/lineage-dev/lineage/lineage"
)

var _ loader.KernelUnkeeper = (*Tracker)(nil)

// UnkeepExe implements KernelUnkeeper.
func (b *Tracker) UnkeepExe(root lineage.Identity, file lineage.FileID) error {
	b.mapMu.Lock()
	defer b.mapMu.Unlock()
	if !b.isRootLocked(root) {
		return fmt.Errorf("unkeep %s: root %s: %w", file, root, loader.ErrNotRoot)
	}
	k := keepExeKey(root.PID, file)
	if err := b.objs.KeepExes.Delete(&k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return fmt.Errorf("unkeep %s for root %s: %w", file, root, err)
	}
	return nil
}

// UnkeepLineage implements KernelUnkeeper.
func (b *Tracker) UnkeepLineage(root lineage.Identity) error {
	return b.setRootFlag(root, lineageRootFlagROOT_F_KEPT, false)
}
