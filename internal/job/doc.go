// Package job runs jobs under lineage: it starts a job's root, waits for it,
// asks the policy what to do with its lineage, reaps or only reports what
// the root left behind, and says so in a [Report]. [Run] is `lineage run`
// with a tracker of its own. The root's wait, the signals passed on to it
// and a run through the daemon are package jobrun's, and the report
// package jobreport's: they link no backend, for the lean front binary.
//
// A [Tracker] owns the backend and the event tree that its jobs share: it
// outlives them, and once it is closed nothing is tracked. A Tracker is safe
// for concurrent use by multiple goroutines; a [Job] is not: one goroutine
// takes it through its steps, in order.
//
// A job signals only members of its own lineage, by identity, and never the
// tracker's own process, its process group or its ancestors.
package job
