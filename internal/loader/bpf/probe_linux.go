package bpf

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/features"
	"github.com/lineage-dev/lineage/internal/loader"
)

// ProbeFeatures asks the kernel which of the BPF features lineage's variants
// use it has. It loads the kernel's BTF and, for the helpers, a few tiny
// programs that are closed at once; it needs the privileges the bpf backend
// needs, and without them reports the kernel as lacking what it can't probe.
// The results of the helper probes are cached for the process's lifetime.
func ProbeFeatures() (loader.Features, error) {
	kernel, err := btf.LoadKernelSpec()
	if err != nil {
		return loader.Features{}, fmt.Errorf("load kernel btf: %w", err)
	}
	return probeFeatures(kernel), nil
}

func probeFeatures(kernel *btf.Spec) loader.Features {
	f := loader.Features{
		Tracing: hasTracepoints(kernel, "sched_process_fork", "sched_process_exec", "sched_process_exit"),
		Kfuncs: hasFuncs(kernel, "bpf_task_from_pid", "bpf_task_release", "bpf_send_signal_task",
			"bpf_task_acquire", "bpf_iter_task_new", "bpf_iter_task_next", "bpf_iter_task_destroy"),
		GroupDead: exitHasGroupDead(kernel),
	}
	// Only ErrNotSupported is conclusive; an EPERM says nothing about the
	// kernel, and the load itself will tell.
	if err := features.HaveMapType(ebpf.RingBuf); errors.Is(err, ebpf.ErrNotSupported) {
		f.RingBuf = err
	}
	// bpf_loop and bpf_for_each_map_elem are base helpers, the same for
	// every program type; the library probes them on kprobes.
	f.Loop = features.HaveProgramHelper(ebpf.Kprobe, asm.FnLoop) == nil
	f.ForEach = features.HaveProgramHelper(ebpf.Kprobe, asm.FnForEachMapElem) == nil
	return f
}

// hasTracepoints returns nil when the kernel's BTF types the named
// tracepoints for tp_btf programs (btf_trace_NAME), and otherwise which one
// it lacks. The library's own probe for tracing programs loads an fentry,
// which some kernels refuse where tp_btf loads.
func hasTracepoints(kernel *btf.Spec, names ...string) error {
	for _, name := range names {
		if _, err := kernel.AnyTypeByName("btf_trace_" + name); err != nil {
			return fmt.Errorf("tracepoint %s: %w", name, err)
		}
	}
	return nil
}

// exitHasGroupDead reports whether sched_process_exit passes group_dead
// (Linux 6.16+, where the tracepoint also moved before the task lets go of
// its memory). Without it the program tests signal->live instead.
func exitHasGroupDead(kernel *btf.Spec) bool {
	typ, err := kernel.AnyTypeByName("btf_trace_sched_process_exit")
	if err != nil {
		return false
	}
	td, ok := typ.(*btf.Typedef)
	if !ok {
		return false
	}
	ptr, ok := td.Type.(*btf.Pointer)
	if !ok {
		return false
	}
	proto, ok := ptr.Target.(*btf.FuncProto)
	// The first parameter is the tracepoint's private data pointer.
	return ok && len(proto.Params) >= 3
}

func hasFuncs(kernel *btf.Spec, names ...string) bool {
	for _, name := range names {
		var fn *btf.Func
		if err := kernel.TypeByName(name, &fn); err != nil {
			return false
		}
	}
	return true
}
