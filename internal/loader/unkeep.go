package loader

import "github.com/lineage-dev/lineage/lineage"

// KernelUnkeeper is a [KernelKeeper] whose rules can be taken back while
// the root is tracked (a daemon's session drops a keep): UnkeepExe ends
// KeepExe's rule for file, UnkeepLineage ends KeepLineage's. Marks the
// members have already stay. Errors for a root that is not registered
// wrap ErrNotRoot.
type KernelUnkeeper interface {
	UnkeepExe(root lineage.Identity, file lineage.FileID) error
	UnkeepLineage(root lineage.Identity) error
}
