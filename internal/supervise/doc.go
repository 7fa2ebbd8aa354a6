// Package supervise holds what running a job under lineage needs from the
// process that supervises it: becoming a child subreaper, so that orphans of
// the job are re-parented to the supervisor and stay findable; reaping every
// child that comes back that way, and handing over the job's own exit
// status (and every reaped child's, for the proc backend, which never waits
// for a child itself); and handing the terminal to the job and back.
//
// It is Linux-only and imports nothing of lineage but its domain types.
package supervise
