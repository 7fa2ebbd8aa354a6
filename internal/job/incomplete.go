package job

import (
	"fmt"

	"github.com/lineage-dev/lineage/lineage"
)

// Incompleteness lists, for people, why the report can't vouch that the whole
// lineage was tracked and ended: lost or untracked processes, members that
// outlived the reap (or its --reap-timeout), members the protected set
// refused to signal. Empty means complete.
func (r *Report) Incompleteness() []string {
	var why []string
	if n := r.Stats.MembersFull; n > 0 {
		why = append(why, fmt.Sprintf("%d %s not tracked (membership map full)", n, lineage.Plural(n, "process was", "processes were")))
	}
	if n := r.Stats.EventsLost + r.Stats.Undecodable; n > 0 {
		why = append(why, fmt.Sprintf("%d %s lost", n, lineage.Plural(n, "event", "events")))
	}
	if n := r.Stats.Unattributed; n > 0 {
		why = append(why, fmt.Sprintf("%d unattributed %s", n, lineage.Plural(n, "orphan", "orphans")))
	}
	if n := r.Stats.UIDSpared; n > 0 {
		why = append(why, fmt.Sprintf("%d %s skipped in the kernel: the user who ran lineage could not signal %s", n, lineage.Plural(n, "kill was", "kills were"), lineage.Plural(n, "that process", "those processes")))
	}
	if r.ReapTimedOut {
		why = append(why, "the reap passed its --reap-timeout")
	}
	if r.Reap != nil {
		if n := len(r.Reap.Survivors); n > 0 {
			why = append(why, fmt.Sprintf("%d %s survived the reap", n, lineage.Plural(n, "process", "processes")))
		}
		if n := r.Reap.Count(lineage.Refused); n > 0 {
			why = append(why, fmt.Sprintf("%d %s refused a signal (protected)", n, lineage.Plural(n, "process was", "processes were")))
		}
	}
	return why
}

// StrictExitCode is code, or [lineage.ExitIncomplete] when code is 0 and the
// report is incomplete: `lineage run --strict`.
func (r *Report) StrictExitCode(code int) int {
	if code == 0 && len(r.Incomplete) > 0 {
		return lineage.ExitIncomplete
	}
	return code
}
