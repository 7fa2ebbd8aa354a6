package loader

import "github.com/lineage-dev/lineage/internal/lineage"

// Uncontain ends what Contain started, for a lineage that lives on after
// a reap that spared some of its members (a session's kept dev server):
// its members may fork again.
func (b *BPF) Uncontain(root lineage.Identity) error {
	return b.setRootFlag(root, lineageRootFlagROOT_F_REAPING, false)
}
