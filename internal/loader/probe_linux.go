package loader

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/features"
	"golang.org/x/sys/unix"
)

// ProbeHost reads this machine's pre-checks (see [Host]). It needs no
// privileges and changes nothing.
func ProbeHost() Host { return probeHostAt("/") }

// probeHostAt reads the files of a Host under root, for tests; the system
// calls are the real ones.
func probeHostAt(root string) Host {
	at := func(rel string) string { return filepath.Join(root, rel) }
	h := Host{Euid: os.Geteuid()}
	var u unix.Utsname
	if err := unix.Uname(&u); err == nil {
		h.Release = unix.ByteSliceToString(u.Release[:])
	}
	if _, err := os.Stat(at("sys/kernel/btf/vmlinux")); err != nil {
		h.BTF = err
	}
	h.Caps, h.CapsErr = effectiveCaps()
	h.Lockdown, h.LockdownFrom, h.LockdownErr = readLockdown(at)
	h.PIDNamespace, h.PIDNamespaceErr = os.Readlink(at("proc/self/ns/pid"))
	if raw, err := os.ReadFile(at("proc/self/status")); err == nil {
		h.NSpid = parseNSpid(string(raw))
	}
	return h
}

// readLockdown reads the lockdown mode from securityfs, or, where securityfs
// is not mounted, from the kernel command line.
func readLockdown(at func(string) string) (mode, from string, err error) {
	raw, err := os.ReadFile(at("sys/kernel/security/lockdown"))
	switch {
	case err == nil:
		return parseLockdown(string(raw)), LockdownFromSecurityfs, nil
	case !errors.Is(err, os.ErrNotExist):
		return "", "", err
	}
	if _, lerr := os.Stat(at("sys/kernel/security/lsm")); lerr == nil {
		return LockdownNone, LockdownFromNoLSM, nil
	}
	cmdline, cerr := os.ReadFile(at("proc/cmdline"))
	if cerr == nil {
		if mode := cmdlineLockdown(string(cmdline)); mode != "" {
			return mode, LockdownFromCmdline, nil
		}
	}
	return "", "", fmt.Errorf("securityfs is not mounted at /sys/kernel/security: %w", err)
}

// effectiveCaps returns this process's effective capability set.
func effectiveCaps() (uint64, error) {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return 0, fmt.Errorf("capget: %w", err)
	}
	return uint64(data[0].Effective) | uint64(data[1].Effective)<<32, nil
}

// ProbeFeatures asks the kernel which of the BPF features lineage's variants
// use it has. It loads the kernel's BTF and, for the helpers, a few tiny
// programs that are closed at once; it needs the privileges the bpf backend
// needs, and without them reports the kernel as lacking what it can't probe.
// The results of the helper probes are cached for the process's lifetime.
func ProbeFeatures() (Features, error) {
	kernel, err := btf.LoadKernelSpec()
	if err != nil {
		return Features{}, fmt.Errorf("load kernel btf: %w", err)
	}
	return probeFeatures(kernel), nil
}

func probeFeatures(kernel *btf.Spec) Features {
	f := Features{
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
