// Package job runs jobs under lineage: it starts a root (or, later, takes
// one registered from outside), waits for it, asks the policy what to do,
// reaps or reports what the root left behind, and says so in a [Report].
// [Run] is what `lineage run` does with it.
//
// A [Tracker] owns the one backend and the event tree that its jobs share:
// it outlives them, and closing it stops tracking for all of them. A
// Tracker is safe for concurrent use by multiple goroutines; a [Job] is
// not: one goroutine takes it through its steps, in order.
//
// A job signals only what its backend tracks, by identity, and never the
// tracker's own process, its process group or its ancestors.
package job
