package reap

import (
	"time"

	"github.com/lineage-dev/lineage/lineage"
)

// DefaultGrace is how long members have to act on SIGTERM unless told
// otherwise (`lineage run --grace`, [Options.Grace]).
const DefaultGrace = 5 * time.Second

// Outcome is what happened to one member.
type Outcome struct {
	Member lineage.Member `json:"member"`
	// Argv is the member's command line: the Source's, or else read from
	// /proc (and only kept when its identity was confirmed after reading).
	Argv []string `json:"argv,omitempty"`
	// Age is how long it lived: from its start to when its end was seen,
	// or to the end of the reap for those still alive.
	Age time.Duration `json:"age"`
	// Signal is the signal that ended it: "", "TERM" or "KILL".
	Signal string `json:"signal,omitempty"`
	// Sent lists every signal sent to it, in order ("STOP", "TERM", "CONT",
	// "KILL").
	Sent   []string       `json:"sent,omitempty"`
	Result lineage.Result `json:"result"`
	Reason string         `json:"reason,omitempty"`
	// Status is how it ended, when the kernel told: through its pidfd once
	// its parent has reaped it (PIDFD_INFO_EXIT, Linux 6.15+), or in its
	// stat while it was a zombie.
	Status *lineage.ExitStatus `json:"status,omitempty"`
}

// Phases are how long each step of a reap took.
type Phases struct {
	Linger    time.Duration `json:"linger"`
	Contain   time.Duration `json:"contain"`
	Terminate time.Duration `json:"terminate"`
	Kill      time.Duration `json:"kill"`
}

// Report is what a reap did. Every member the Source ever listed appears in
// Outcomes exactly once, in the order it was first seen.
type Report struct {
	Outcomes []Outcome `json:"outcomes"`
	// Containment is how the lineage was kept from growing: the name
	// returned by the reaper's Contain option, or lineage.ContainStop; ""
	// when the lineage
	// was empty after the linger.
	Containment lineage.Containment `json:"containment,omitempty"`
	// Passes counts the kill passes: list, kill, wait for the deaths.
	Passes int           `json:"passes"`
	Took   time.Duration `json:"took"`
	Phases Phases        `json:"phases"`
	// Survivors are the members that ended as lineage.Survived. It must be empty.
	Survivors []lineage.Identity `json:"survivors,omitempty"`
	// Warnings say what went wrong without stopping the reap (a failed
	// the reaper's Contain option, say).
	Warnings []string `json:"warnings,omitempty"`
}

// Count returns how many outcomes ended as res.
func (r Report) Count(res lineage.Result) int {
	n := 0
	for _, o := range r.Outcomes {
		if o.Result == res {
			n++
		}
	}
	return n
}
