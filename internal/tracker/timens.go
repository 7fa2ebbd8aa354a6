package tracker

import (
	"fmt"

	"github.com/lineage-dev/lineage/internal/loader"
	"github.com/lineage-dev/lineage/internal/proc"
)

// checkTimeNamespace refuses the bpf backend in a time namespace that
// shifts boot time: /proc shows this process start times shifted by the
// offset while the kernel side records them unshifted, so no identity
// would match and nothing would be reaped. The proc backend compares /proc
// with /proc, shifted alike, and is only told about.
func (t *Tracker) checkTimeNamespace(procRoot string) error {
	off, err := proc.BoottimeOffset(procRoot)
	if err != nil || off == 0 {
		return err
	}
	if t.choice.Backend == loader.BackendBPF {
		return fmt.Errorf("time namespace: lineage runs with a boottime offset of %v, so /proc start times don't match the kernel's and no process could be reaped by identity: run lineage outside the time namespace, or use --backend proc", off)
	}
	t.detail("lineage: time namespace with a boottime offset of %v: the proc backend sees every start time shifted alike\n", off)
	return nil
}
