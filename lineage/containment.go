package lineage

// Containment says how a lineage is kept from growing while it is reaped.
type Containment string

const (
	// ContainKernel: the fork hook kills each new child of a reaping
	// member at birth (bpf_task_from_pid + bpf_send_signal_task).
	ContainKernel Containment = "kernel"
	// ContainKernelForker: older kernels; the fork hook kills the member
	// that forks (bpf_send_signal can only signal the current task).
	ContainKernelForker Containment = "kernel-forker"
	// ContainStop: no BPF; the reaper stops the whole set with SIGSTOP
	// before killing, and needs two empty passes to call it empty.
	ContainStop Containment = "stop"
)
