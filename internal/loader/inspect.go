package loader

import (
	"syscall"

	"github.com/lineage-dev/lineage/lineage"
)

// Inspector is a [Backend] that reads, in one call, what /proc/PID/stat
// shows of many processes: the reaper's check of a wide lineage then costs
// one system call rather than a file per member (reap.Options.Inspect).
type Inspector interface {
	// Inspect fills out[i] (out as long as pids) with what /proc/PID/stat
	// shows of pids[i] at the call, PGRP and Session excepted; a pid that
	// no process has gets a zero Stat. Pids are those of the initial pid
	// namespace. It is safe for concurrent use.
	Inspect(pids []uint32, out []lineage.Stat) error
	// Inspects reports whether Inspect works here, and if not, why.
	Inspects() (bool, string)
}

// KernelSignaler is a [Backend] that signals many identities in one call,
// each checked and signalled while the kernel holds its task: a pid that
// came to name another process is never signalled.
type KernelSignaler interface {
	// SignalBatch sends sigs[i] to ids[i] if the pid still names that
	// process, filling before[i] with what /proc/PID/stat showed of it just
	// before (as [Inspector.Inspect] does) and errs[i] with nil when the
	// signal was sent, or an error wrapping lineage.ErrNoProcess (no
	// process, or no live thread to take it), lineage.ErrIdentityMismatch
	// (another process has the pid) or the kernel's refusal (a kernel
	// thread; a process the invoking user could not signal by kill(2)).
	// The signal comes from the kernel, not from this process's pid. The
	// slices are as long as ids. It is safe for concurrent use.
	SignalBatch(ids []lineage.Identity, sigs []syscall.Signal, before []lineage.Stat, errs []error) error
	// Signals reports whether SignalBatch works here, and if not, why.
	Signals() (bool, string)
}
