package jobreport

import (
	"time"

	"github.com/lineage-dev/lineage/internal/lineage"
)

// DefaultGrace is how long members have to act on SIGTERM unless told
// otherwise (`lineage run --grace`, the reaper's Grace option).
const DefaultGrace = 5 * time.Second

// Result says how a member's story ended.
type Result string

const (
	// Exited: it ended without a signal from the reaper (during the linger,
	// before its turn came, or it was already a zombie).
	Exited Result = "exited"
	// Terminated: it ended after SIGTERM, before SIGKILL.
	Terminated Result = "terminated"
	// Killed: it ended after SIGKILL.
	Killed Result = "killed"
	// Kept: the reaper's Keep spared it; it was never signalled.
	Kept Result = "kept"
	// Vanished: it was gone when the reaper first looked: its pid was
	// free, or named another process, or it ended before its identity
	// could be checked. Nothing was sent.
	Vanished Result = "vanished"
	// Refused: it is protected (see the package documentation); nothing was
	// sent to it after the refusal. Reason says why.
	Refused Result = "refused"
	// Survived: the reaper meant to end it and could not confirm that it
	// did (no permission, the reap was cut short). Reason says why.
	Survived Result = "survived"
)

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
	Sent   []string `json:"sent,omitempty"`
	Result Result   `json:"result"`
	Reason string   `json:"reason,omitempty"`
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

// Reap is what a reap did. Every member the Source ever listed appears in
// Outcomes exactly once, in the order it was first seen.
type Reap struct {
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
	// Survivors are the members that ended as Survived. It must be empty.
	Survivors []lineage.Identity `json:"survivors,omitempty"`
	// Warnings say what went wrong without stopping the reap (a failed
	// the reaper's Contain option, say).
	Warnings []string `json:"warnings,omitempty"`
}

// Count returns how many outcomes ended as res.
func (r Reap) Count(res Result) int {
	n := 0
	for _, o := range r.Outcomes {
		if o.Result == res {
			n++
		}
	}
	return n
}
