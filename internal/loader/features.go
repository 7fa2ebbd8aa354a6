package loader

import (
	"errors"
	"fmt"
	"strings"

	"github.com/lineage-dev/lineage/lineage"
)

// Variant names a build of the BPF program. Every kernel from 5.8 with BTF
// accepts one of them; [OpenBPF] picks it by probing the kernel's BTF and
// helpers, never from its version string.
type Variant string

const (
	// VariantAuto lets OpenBPF choose (the zero value).
	VariantAuto Variant = ""
	// VariantFull needs the kfuncs bpf_task_from_pid, bpf_task_release
	// and bpf_send_signal_task (Linux 6.13+; with them bpf_task_acquire
	// and the task iterator, 6.7+) and the helpers bpf_loop
	// (5.17+) and bpf_for_each_map_elem (5.13+). Containment kills a
	// reaping member's new child at birth, and a lineage can die with its
	// supervisor where the exit hook may signal (see [HardCancelMode]).
	VariantFull Variant = "full"
	// VariantCompat needs only the BPF ring buffer and tp_btf programs
	// (Linux 5.8+). Containment kills the forking member, and nothing in
	// the kernel kills a lineage when its supervisor dies.
	VariantCompat Variant = "compat"
)

// VariantEnv is the environment variable that forces a variant wherever
// BPFOptions leave it to auto: the escape suite and the benchmarks run each
// variant on one kernel with it, through the lineage binary.
const VariantEnv = "LINEAGE_BPF_VARIANT"

// ErrVariantUnsupported is wrapped, beside ErrUnavailable, when a forced
// variant needs a kernel feature this kernel lacks.
var ErrVariantUnsupported = errors.New("variant unsupported")

// ParseVariant reads a variant's name: "", "auto", "full" or "compat".
// Others wrap lineage.ErrInvalid.
func ParseVariant(s string) (Variant, error) {
	switch v := Variant(strings.ToLower(strings.TrimSpace(s))); v {
	case VariantAuto, "auto":
		return VariantAuto, nil
	case VariantFull, VariantCompat:
		return v, nil
	}
	return "", fmt.Errorf("%w option: bpf variant %q: want auto, full or compat", lineage.ErrInvalid, s)
}

// HardCancelMode says what ends a lineage registered with DieWithSupervisor
// when the process that registered it is SIGKILLed.
type HardCancelMode string

const (
	// HardCancelKernel: the exit hook of the dying supervisor SIGKILLs
	// the lineage, identity-checked. It needs VariantFull and a kernel
	// whose sched_process_exit runs before the task lets go of its memory
	// (it passes group_dead: Linux 6.16+); earlier, the kernel refuses to
	// signal from that hook.
	HardCancelKernel HardCancelMode = "kernel"
	// HardCancelNone: nothing does; the lineage outlives its supervisor.
	HardCancelNone HardCancelMode = "none"
)

// Features are the kernel's BPF features that decide which variant loads
// and what it can do. [ProbeFeatures] finds them; the zero value is a kernel
// that has none.
type Features struct {
	// RingBuf is nil when the kernel has BPF ring buffers (5.8+), else why not.
	RingBuf error
	// Tracing is nil when the kernel's BTF types the three sched_process
	// tracepoints for tp_btf programs, else why not.
	Tracing error
	// Kfuncs: bpf_task_from_pid, bpf_task_release and
	// bpf_send_signal_task (and the task iterator and bpf_task_acquire,
	// which a kill through a live thread needs) are in the kernel's BTF.
	Kfuncs bool
	// Loop and ForEach: bpf_loop and bpf_for_each_map_elem are helpers.
	Loop    bool
	ForEach bool
	// GroupDead: the sched_process_exit tracepoint passes group_dead, and
	// fires before the exiting task lets go of its memory.
	GroupDead bool
}

// Baseline returns nil when the kernel has what every variant needs, and
// otherwise why the bpf backend can't load, wrapping ErrUnavailable.
func (f Features) Baseline() error {
	switch {
	case f.RingBuf != nil:
		return fmt.Errorf("%w: the kernel has no BPF ring buffer (Linux 5.8+): %w", ErrUnavailable, f.RingBuf)
	case f.Tracing != nil:
		return fmt.Errorf("%w: the kernel's BTF lacks the tracepoints lineage attaches to (tp_btf): %w", ErrUnavailable, f.Tracing)
	}
	return nil
}

// Variant returns the variant this kernel accepts.
func (f Features) Variant() Variant {
	if f.Kfuncs && f.Loop && f.ForEach {
		return VariantFull
	}
	return VariantCompat
}

// Missing names what variant v needs and this kernel lacks; empty when it
// has everything.
func (f Features) Missing(v Variant) []string {
	var out []string
	if err := f.Baseline(); err != nil {
		out = append(out, "the BPF ring buffer and tp_btf")
	}
	if v != VariantFull {
		return out
	}
	if !f.Kfuncs {
		out = append(out, "the kfuncs bpf_task_from_pid and bpf_send_signal_task")
	}
	if !f.Loop {
		out = append(out, "bpf_loop")
	}
	if !f.ForEach {
		out = append(out, "bpf_for_each_map_elem")
	}
	return out
}

// Containment returns how variant v keeps a reaping lineage from growing.
func (f Features) Containment(v Variant) lineage.Containment {
	if v == VariantFull {
		return lineage.ContainKernel
	}
	return lineage.ContainKernelForker
}

// HardCancel returns what variant v does when the supervisor is SIGKILLed.
func (f Features) HardCancel(v Variant) HardCancelMode {
	if v == VariantFull && f.GroupDead {
		return HardCancelKernel
	}
	return HardCancelNone
}

// Loaded says which variant the kernel accepted and what it does.
type Loaded struct {
	Variant     Variant             `json:"variant"`
	Containment lineage.Containment `json:"containment"`
	HardCancel  HardCancelMode      `json:"hard_cancel"`
	// GroupDead: the exit hook reads group_dead rather than the thread
	// group's live count; both tell the same.
	GroupDead bool `json:"group_dead"`
	// Batch says what the batch programs beside the tracker do here. A
	// load's Resolve leaves it zero: the tracker fills it once they have
	// loaded or been refused.
	Batch Batch `json:"batch"`
}

// Batch says whether a reap checks its members, and signals them, many in
// one system call (the bpf backend's batch programs), and if not, why.
// Without them a reap reads each member's /proc/PID/stat and signals it
// through its pidfd: the same checks, one system call or more a member.
type Batch struct {
	Check     bool   `json:"check"`
	CheckOff  string `json:"check_off,omitempty"`
	Signal    bool   `json:"signal"`
	SignalOff string `json:"signal_off,omitempty"`
}

// resolve decides what a load with the forced variant (VariantAuto to
// choose) does on a kernel with features f, or says why it can't.
func (f Features) Resolve(forced Variant) (Loaded, error) {
	if err := f.Baseline(); err != nil {
		return Loaded{}, err
	}
	v := forced
	if v == VariantAuto {
		v = f.Variant()
	}
	if missing := f.Missing(v); len(missing) > 0 {
		return Loaded{}, fmt.Errorf("%w: %w: the %s program needs %s, which this kernel lacks",
			ErrUnavailable, ErrVariantUnsupported, v, strings.Join(missing, ", "))
	}
	return Loaded{
		Variant:     v,
		Containment: f.Containment(v),
		HardCancel:  f.HardCancel(v),
		// The compat build always counts live threads: forcing it on a
		// new kernel exercises the older kernels' exit path.
		GroupDead: v == VariantFull && f.GroupDead,
	}, nil
}
