// Package lineage is lineage's domain: the identity of a process, the events
// that change a lineage, the tree that mirrors the kernel's membership, exit
// statuses, containment modes and the one clock-tick conversion.
//
// An [Identity] is a pid together with the kernel's start time of the process
// in clock ticks since boot, exactly field 22 of /proc/PID/stat. A pid alone
// names nothing, since pids are reused; everything lineage stores, compares or
// signals is an Identity.
//
// The package is pure: it reads nothing, sends no signals and loads no BPF
// (reading /proc is package proc's). [ErrInvalid] is the one sentinel for
// input lineage can't accept, wherever it is checked.
package lineage
