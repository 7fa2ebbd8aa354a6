// Package lineage is lineage's domain: the identity of a process, the events
// that change a lineage, and the tree that mirrors the kernel's membership.
//
// An [Identity] is a pid together with the kernel's start time of the process
// in clock ticks since boot, exactly field 22 of /proc/PID/stat. A pid alone
// names nothing, since pids are reused; everything lineage stores, compares or
// signals is an Identity.
//
// The package is pure Go apart from reading /proc (through prometheus/procfs,
// rooted anywhere so that tests can use a fake tree). It sends no signals and
// loads no BPF.
package lineage
