package lineage

// Result says how a process's story ended, in every report lineage makes:
// a reap's outcomes, the daemon's answers, a forensic report. Each maker
// gives the results that it can know.
type Result string

const (
	// Exited: it ended without a signal from the reaper (during the linger,
	// before its turn came, or it was already a zombie).
	Exited Result = "exited"
	// Terminated: it ended after SIGTERM, before SIGKILL.
	Terminated Result = "terminated"
	// Killed: it ended after SIGKILL.
	Killed Result = "killed"
	// Kept: a keep rule spared it; it was never signalled.
	Kept Result = "kept"
	// Vanished: it was gone when the reaper first looked: its pid was
	// free, or named another process, or it ended before its identity
	// could be checked. Nothing was sent.
	Vanished Result = "vanished"
	// Refused: it is protected (lineage itself, its helpers, their
	// ancestors); nothing was sent to it after the refusal.
	Refused Result = "refused"
	// Survived: the reaper meant to end it and could not confirm that it
	// did (no permission, the reap was cut short).
	Survived Result = "survived"
	// Reported: the decision was to report it, not to reap it (an
	// interactive session's turn end); it was left running.
	Reported Result = "reported"
	// Leaked: it outlived its root and nobody ended it.
	Leaked Result = "leaked"
	// Unknown: no end was recorded (events lost, or the record stops).
	Unknown Result = "unknown"
)
