package bpf

import (
	"fmt"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/link"
)

// The second fork hook (catch_fork in bpf/lineage.c) runs beside the first
// on every fork and inserts what the first did not: the kernel skips a
// tp_btf program's run on a CPU where a preempted task is inside it, and a
// classic tracepoint program runs with preemption disabled, under another
// guard. It is the full program's only, loaded on its own so that a kernel
// that refuses it (or has no tracefs, which classic tracepoints attach
// through) still runs the rest, and it is never pinned: each tracker
// attaches its own, so while no daemon runs only the first fork hook does.

// attachCatcher loads and attaches the second fork hook beside b's
// programs, sharing their maps. It records in b.catcherOff why it does not
// run; it fails nothing.
func (b *Tracker) attachCatcher(spec *ebpf.CollectionSpec, kernel *btf.Spec) {
	if _, ok := spec.Programs[lineageProgCatchFork]; !ok {
		b.catcherOff = "the " + string(b.loaded.Variant) + " program has none: the kernels it is for skip no fork"
		return
	}
	var objs struct {
		CatchFork *ebpf.Program `ebpf:"catch_fork"`
	}
	err := spec.LoadAndAssign(&objs, &ebpf.CollectionOptions{
		MapReplacements: b.sharedMaps(),
		Programs:        ebpf.ProgramOptions{KernelTypes: kernel},
	})
	if err != nil {
		b.catcherOff = fmt.Sprintf("load: %v", err)
		return
	}
	l, err := link.Tracepoint("sched", "sched_process_fork", objs.CatchFork, nil)
	if err != nil {
		_ = objs.CatchFork.Close()
		b.catcherOff = fmt.Sprintf("attach (classic tracepoints need tracefs): %v", err)
		return
	}
	b.objs.CatchFork, b.catcher, b.catcherOff = objs.CatchFork, l, ""
}

// ForkCatcher reports whether the second fork hook runs beside the first,
// inserting the forks the kernel skipped the first for, and if not, why.
func (b *Tracker) ForkCatcher() (bool, string) { return b.catcher != nil, b.catcherOff }

// sharedMaps names b's maps as the collection spec does, for a program
// loaded apart that must see the same ones.
func (b *Tracker) sharedMaps() map[string]*ebpf.Map {
	return map[string]*ebpf.Map{
		lineageMapMembers:  b.objs.Members,
		lineageMapRoots:    b.objs.Roots,
		lineageMapDoomed:   b.objs.Doomed,
		lineageMapEvents:   b.objs.Events,
		lineageMapStats:    b.objs.Stats,
		lineageMapArms:     b.objs.Arms,
		lineageMapKeepExes: b.objs.KeepExes,
		".bss":             b.bss,
	}
}

// catcherMisses is how many runs of the second fork hook the kernel
// skipped; zero when it does not run.
func (b *Tracker) catcherMisses() (uint64, error) {
	if b.objs.CatchFork == nil {
		return 0, nil
	}
	st, err := b.objs.CatchFork.Stats()
	if err != nil {
		return 0, fmt.Errorf("read second fork hook stats: %w", err)
	}
	return st.RecursionMisses, nil
}
