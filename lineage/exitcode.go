package lineage

// The exit statuses lineage gives besides a job's own, as timeout(1) uses
// them. A job that exits on its own passes its status through; a job ended
// by signal N gives 128+N.
const (
	// ExitIncomplete: with --strict, the job exited 0 but tracking or
	// reaping was incomplete.
	ExitIncomplete = 123
	// ExitDeadline: the deadline passed.
	ExitDeadline = 124
	// ExitFailure: lineage itself failed.
	ExitFailure = 125
	// ExitCannotRun: the command was found but could not be started.
	ExitCannotRun = 126
	// ExitNotFound: the command was not found.
	ExitNotFound = 127
)
