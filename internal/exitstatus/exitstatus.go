// Package exitstatus names the exit statuses lineage gives besides a
// job's own, as timeout(1) uses them. It imports nothing, so that the lean
// front binary and the full one agree without linking each other's
// packages.
package exitstatus

const (
	// Incomplete: with --strict, the job exited 0 but tracking or reaping
	// was incomplete.
	Incomplete = 123
	// Deadline: the deadline passed.
	Deadline = 124
	// Failure: lineage itself failed.
	Failure = 125
	// CannotRun: the command was found but could not be started.
	CannotRun = 126
	// NotFound: the command was not found.
	NotFound = 127
)
