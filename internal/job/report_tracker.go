package job

// Whose tracker a report's job ran under ([Report.Tracker]).
const (
	TrackerStandalone = "standalone"
	TrackerDaemon     = "daemon"
)
