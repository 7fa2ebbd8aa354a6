package doctor

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/lineage-dev/lineage/internal/loader"
)

// The checks in this file only word what the loader's own pre-checks
// (loader.Host) and probes (loader.Features) found; they decide nothing
// the loader does not.

// release names the kernel for a detail.
func (r *run) release() string {
	if r.host == nil || r.host.Release == "" {
		return "kernel"
	}
	return r.host.Release
}

// reason strips the loader's sentinel from an error's text.
func reason(err error) string {
	return strings.TrimPrefix(err.Error(), loader.ErrUnavailable.Error()+": ")
}

func (r *run) checkKernel() Check {
	c := Check{Name: CheckKernel, RequiredForBPF: true}
	switch {
	case r.features == nil:
		return notChecked(CheckKernel, true)
	case r.featErr != nil:
		c.Status = Warn
		c.Detail = fmt.Sprintf("%s: can't probe its BPF features (%v): the bpf load below is the answer", r.release(), r.featErr)
	case r.features.Baseline() != nil:
		c.Status = Fail
		c.Detail = fmt.Sprintf("%s: %s", r.release(), reason(r.features.Baseline()))
	default:
		c.Status = OK
		c.Detail = fmt.Sprintf("%s: the BPF ring buffer and the sched_process tracepoints for tp_btf are there (the bpf backend's baseline)", r.release())
	}
	return c
}

func (r *run) checkBTF() Check {
	if r.host == nil {
		return notChecked(CheckBTF, true)
	}
	c := Check{Name: CheckBTF, RequiredForBPF: true}
	switch err := r.host.BTF; {
	case err == nil:
		c.Status = OK
		c.Detail = "/sys/kernel/btf/vmlinux is there: the tracker's CO-RE reads are relocated against this kernel"
	case errors.Is(err, os.ErrNotExist):
		c.Status = Fail
		c.Detail = "the kernel has no BTF: /sys/kernel/btf/vmlinux is missing (the kernel needs CONFIG_DEBUG_INFO_BTF=y)"
	default:
		c.Status = Fail
		c.Detail = fmt.Sprintf("can't read the kernel's BTF: %v", err)
	}
	return c
}

func (r *run) checkPrivileges() Check {
	if r.host == nil {
		return notChecked(CheckPrivileges, true)
	}
	h := r.host
	c := Check{Name: CheckPrivileges, RequiredForBPF: true}
	if h.CapsErr != nil {
		c.Status = Fail
		c.Detail = fmt.Sprintf("can't read this process's capabilities (euid %d): %v", h.Euid, h.CapsErr)
		return c
	}
	var names []string
	for _, k := range []struct {
		n    int
		name string
	}{{loader.CapBPF, "CAP_BPF"}, {loader.CapPerfmon, "CAP_PERFMON"}, {loader.CapSysAdmin, "CAP_SYS_ADMIN"}, {loader.CapSysResource, "CAP_SYS_RESOURCE"}} {
		if h.HasCap(k.n) {
			names = append(names, k.name)
		}
	}
	held := "none of CAP_BPF, CAP_PERFMON, CAP_SYS_ADMIN, CAP_SYS_RESOURCE"
	if len(names) > 0 {
		held = strings.Join(names, ", ")
	}
	if !h.Privileged() {
		c.Status = Fail
		c.Detail = fmt.Sprintf("not privileged: euid %d, effective capabilities: %s; the bpf backend needs root, or CAP_BPF and CAP_PERFMON (run with sudo, or use --backend proc)", h.Euid, held)
		return c
	}
	c.Status = OK
	c.Detail = fmt.Sprintf("euid %d, effective capabilities: %s", h.Euid, held)
	if !h.HasCap(loader.CapSysResource) {
		c.Detail += "; without CAP_SYS_RESOURCE the memlock limit can't be lifted, which only kernels that charge BPF memory to it (before 5.11) need: the bpf load below tells"
	}
	return c
}

func (r *run) checkLockdown() Check {
	if r.host == nil {
		return notChecked(CheckLockdown, true)
	}
	h := r.host
	c := Check{Name: CheckLockdown, RequiredForBPF: true, Status: Info}
	switch {
	case h.LockdownErr != nil:
		c.Detail = fmt.Sprintf("unknown (%v); lockdown=confidentiality would refuse BPF tracing, and the bpf load below tells", h.LockdownErr)
	case h.LockdownFrom == loader.LockdownFromNoLSM:
		c.Status = OK
		c.Detail = "no lockdown LSM: lockdown restricts nothing"
	case h.LockdownRefuses():
		c.Status = Fail
		c.Detail = "kernel lockdown is confidentiality, which refuses BPF programs that read kernel memory: the tracker can't load"
		if h.LockdownFrom == loader.LockdownFromCmdline {
			c.Detail = "kernel lockdown is confidentiality (lockdown= on the kernel command line), which refuses BPF programs that read kernel memory: the tracker can't load"
		}
	case h.LockdownFrom == loader.LockdownFromCmdline:
		c.Detail = fmt.Sprintf("%s at boot (lockdown= on the kernel command line; securityfs is not mounted to show the current mode); only confidentiality refuses BPF tracing", h.Lockdown)
	case h.Lockdown == loader.LockdownNone:
		c.Status = OK
		c.Detail = "none: lockdown restricts nothing"
	case h.Lockdown == loader.LockdownIntegrity:
		c.Status = OK
		c.Detail = "integrity: BPF tracing is allowed (only confidentiality refuses it)"
	default:
		c.Detail = fmt.Sprintf("unknown mode %q in /sys/kernel/security/lockdown", h.Lockdown)
	}
	return c
}

func (r *run) checkPIDNamespace() Check {
	if r.host == nil {
		return notChecked(CheckPIDNamespace, true)
	}
	h := r.host
	c := Check{Name: CheckPIDNamespace, RequiredForBPF: true}
	global, known := h.GlobalPIDs()
	switch {
	case !known && h.PIDNamespaceErr != nil:
		c.Status = Warn
		c.Detail = fmt.Sprintf("can't tell whether /proc shows the kernel's global pids: %v", h.PIDNamespaceErr)
	case !known:
		c.Status = Warn
		c.Detail = fmt.Sprintf("can't tell whether /proc shows the kernel's global pids: /proc/self/ns/pid reads %q", h.PIDNamespace)
	case global:
		c.Status = OK
		c.Detail = "initial PID namespace: /proc shows the global pids that the BPF side sees"
	default:
		c.Status = Fail
		c.Detail = fmt.Sprintf("lineage runs in a nested PID namespace (%s), so the pids it knows are not the global pids the BPF side sees", h.PIDNamespace)
		if n := len(h.NSpid); n > 1 {
			c.Detail += fmt.Sprintf(" (this process is pid %s here, %s outside)", h.NSpid[n-1], h.NSpid[0])
		}
		c.Detail += ": run lineage in the host's PID namespace (hostPID in Kubernetes, --pid=host in Docker)"
	}
	return c
}
