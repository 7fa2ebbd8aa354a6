// Package jobreport is what a job's run says: the [Report] of `lineage
// run` (and of the daemon's ends of a root), the reaper's [Reap] and each
// member's [reap.Outcome], the report's text for people, its JSON file, and the
// exit status --strict gives an incomplete one. It is plain data and its
// rendering: it imports no backend and no /proc library, so the lean front
// binary prints the report of a job run through the daemon without linking
// them; packages reap, loader and job use its types. A Report is not safe
// for concurrent use; once complete, it may be shared for reading.
package jobreport

// Whose tracker a report's job ran under ([Report.Tracker]).
const (
	TrackerStandalone = "standalone"
	TrackerDaemon     = "daemon"
)
