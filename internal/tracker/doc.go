// Package tracker is a tracker owned by this process, for a standalone
// `lineage run` and for `lineage serve`: a [Tracker] opens the backend (BPF,
// or the /proc poller where BPF can't load), keeps the event tree its
// roots share, registers roots, and settles their lineages: it asks the
// policy what to do, reaps or only reports what a root left behind, marks
// what is kept, writes the forensic record, and starts the hard-cancel
// guardian. [Run] is `lineage run` with a tracker of its own; the job's
// root, signals and report are package job's.
//
// A Tracker outlives its jobs, and once it is closed nothing is tracked. A
// Tracker is safe for concurrent use by multiple goroutines; a [Job] is
// not: one goroutine takes it through its steps, in order.
//
// A job signals only members of its own lineage, by identity, and never the
// tracker's own process or its ancestors.
package tracker
