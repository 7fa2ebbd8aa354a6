package job

import (
	"github.com/lineage-dev/lineage/internal/jobreport"
	"github.com/lineage-dev/lineage/internal/lineage"
	"github.com/lineage-dev/lineage/internal/policy"
	"github.com/lineage-dev/lineage/internal/proc"
)

// A job's report is package jobreport's, which links no backend (the lean
// front prints it for a job run through the daemon).
type (
	// Report is [jobreport.Report].
	Report = jobreport.Report
	// Exit is [jobreport.Exit].
	Exit = jobreport.Exit
	// Leftover is [jobreport.Leftover].
	Leftover = jobreport.Leftover
	// TextOptions is [jobreport.TextOptions].
	TextOptions = jobreport.TextOptions
	// ReportFile is [jobreport.ReportFile].
	ReportFile = jobreport.ReportFile
)

const (
	// ReportVersion is [jobreport.ReportVersion].
	ReportVersion = jobreport.ReportVersion
	// Whose tracker a report's job ran under ([Report.Tracker]).
	TrackerStandalone = jobreport.TrackerStandalone
	TrackerDaemon     = jobreport.TrackerDaemon
)

// OpenReportFile is [jobreport.OpenReportFile].
var OpenReportFile = jobreport.OpenReportFile

// decided records the policy's decision and the kill switch it saw.
func decided(r *Report, d policy.Decision, reaping policy.Reaping) {
	r.Decision = d.String()
	r.Reaping = reaping.String()
}

// addLeftovers records members that were only reported, with what the tree
// and /proc know of them.
func addLeftovers(r *Report, ms []lineage.Member, tree *lineage.Tree, procFS proc.FS) {
	now := lineage.DurationToTicks(proc.BootTime())
	for _, m := range ms {
		l := Leftover{Member: m}
		if known, ok := tree.Get(m.Identity); ok {
			l.Argv = known.Argv
			l.Member.Comm = known.Comm
		}
		if len(l.Argv) == 0 {
			l.Argv, _ = procFS.Argv(int(m.PID))
		}
		if now > m.StartTicks {
			l.Age = lineage.TicksToDuration(now - m.StartTicks)
		}
		r.Leftovers = append(r.Leftovers, l)
	}
}
