package doctor

import (
	"strings"

	"github.com/lineage-dev/lineage/internal/loader"
	"github.com/lineage-dev/lineage/lineage"
)

// The checks in this file say what the tracker that loaded (loader.Loaded)
// does here, feature by feature, or what the /proc fallback does instead.

func (r *run) checkBPFLoad() Check {
	c := Check{Name: CheckBPFLoad, RequiredForBPF: true}
	if r.loaded == nil {
		c.Status = Fail
		c.Detail = "the tracker did not load: " + reason(r.loadErr)
		if r.sys.OpenBPF == nil {
			c.Detail = reason(r.loadErr)
		}
		return c
	}
	c.Status = OK
	c.Detail = "loaded and attached the " + string(r.loaded.Variant) + " BPF program, then closed it"
	return c
}

func (r *run) checkTracking() Check {
	c := Check{Name: CheckTracking}
	if r.loaded == nil {
		c.Status = Warn
		c.Detail = "proc: lineage polls /proc, so a process that lives and dies between two scans is missed, and a double fork inside one scan outside a subreaper escapes"
		return c
	}
	c.Status = OK
	switch r.loaded.Variant {
	case loader.VariantFull:
		c.Detail = "bpf, full program: membership is kept in the kernel at every fork and exit"
	default:
		c.Detail = "bpf, compat program: membership is kept in the kernel at every fork and exit, exactly as with the full program"
		if r.features != nil {
			if missing := r.features.Missing(loader.VariantFull); len(missing) > 0 {
				c.Detail += " (the full one needs " + strings.Join(missing, ", ") + ")"
			}
		}
	}
	if r.loaded.GroupDead {
		c.Detail += "; exits are seen through sched_process_exit's group_dead"
	} else {
		c.Detail += "; exits are seen through the thread group's live count"
	}
	return c
}

func (r *run) checkContainment() Check {
	c := Check{Name: CheckContainment}
	switch {
	case r.loaded == nil:
		c.Status = Info
		c.Detail = "stop: the proc backend stops the whole lineage with SIGSTOP before killing it, and needs two empty passes"
	case r.loaded.Containment == lineage.ContainKernel:
		c.Status = OK
		c.Detail = "kernel: during a reap, a member's new child is killed at birth (bpf_task_from_pid, bpf_send_signal_task)"
	default:
		c.Status = Warn
		c.Detail = "kernel-forker: during a reap, a member that forks is killed itself (bpf_send_signal can only signal the current task); its new child lives until the reaper's next pass"
	}
	return c
}

// checkHardCancel says what ends a job's lineage when lineage run is
// SIGKILLed: the kernel's exit hook where the program may signal from it,
// else the guardian lineage run starts beside the job (package guardian).
func (r *run) checkHardCancel() Check {
	c := Check{Name: CheckHardCancel, Status: OK}
	switch {
	case r.loaded == nil:
		c.Detail = "guardian: if lineage is SIGKILLed, its guardian process reaps what the proc backend had seen and their descendants by parent pid; an orphan born in the last scan interval can escape"
		c.Status = Warn
	case r.loaded.HardCancel == loader.HardCancelKernel:
		c.Detail = "kernel: if lineage is SIGKILLed, its exit hook kills the lineage, identity-checked (--keep-on-abort opts out)"
	case r.loaded.Variant != loader.VariantFull:
		c.Detail = "guardian: if lineage is SIGKILLed, its guardian process holds the membership maps and reaps the lineage (--keep-on-abort opts out); the kernel can't: the compat program can't signal other processes"
	default:
		c.Detail = "guardian: if lineage is SIGKILLed, its guardian process holds the membership maps and reaps the lineage (--keep-on-abort opts out); the kernel can't: this kernel's sched_process_exit has no group_dead, so it runs after the task has let go of its memory, where the kernel refuses to signal"
	}
	return c
}

func (r *run) checkExecArgv() Check {
	c := Check{Name: CheckExecArgv}
	if r.loaded == nil {
		c.Status = Warn
		c.Detail = "proc: argv is read from /proc when a scan sees the process; one that execs and exits between two scans has none"
		return c
	}
	c.Status = OK
	c.Detail = "read in the kernel at every member's exec (up to 1 KiB, a longer one cut and marked), so even a process that lives a millisecond has its argv in the record"
	return c
}

// checkBatchReap says whether a reap checks and signals its members many in
// one system call. Without, it does the same one member at a time: slower
// for a wide reap, as exact.
func (r *run) checkBatchReap() Check {
	c := Check{Name: CheckBatchReap, Status: Info}
	switch b := r.loaded; {
	case b == nil:
		c.Detail = "proc: a reap reads each member's /proc/PID/stat and signals it through its pidfd"
	case b.Batch.Check && b.Batch.Signal:
		c.Status = OK
		c.Detail = "kernel: a reap checks and signals its members many in one system call, each identity checked while the kernel holds its task"
	case b.Batch.Check:
		c.Detail = "a reap checks its members many in one system call and signals each through its pidfd: " + b.Batch.SignalOff
	default:
		c.Detail = "a reap reads each member's /proc/PID/stat and signals it through its pidfd: " + b.Batch.CheckOff
	}
	return c
}
