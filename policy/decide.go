package policy

import (
	"fmt"

	"github.com/lineage-dev/lineage/lineage"
)

// Kind is the runtime that registered a lineage's root. The zero Kind means
// none was given, as for a `lineage run` job; only [TurnEnd] needs one.
type Kind uint8

const (
	// Interactive: a user works alongside the agent. What a turn starts (a
	// dev server, a watcher) is the user's until the session closes.
	Interactive Kind = iota + 1
	// Autonomous: the agent runs unattended; a turn's processes end with it.
	Autonomous
)

var kindNames = map[Kind]string{
	Interactive: "interactive",
	Autonomous:  "autonomous",
}

// String returns the kind's name, "none" for the zero Kind.
func (k Kind) String() string {
	if k == 0 {
		return "none"
	}
	if s, ok := kindNames[k]; ok {
		return s
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

func (k Kind) valid() bool { return k == 0 || kindNames[k] != "" }

// Event is what happened to a lineage that calls for a decision.
type Event uint8

const (
	// TurnEnd: an agent's turn ended.
	TurnEnd Event = iota + 1
	// SessionClose: the session that registered the root closed.
	SessionClose
	// Deadline: the lineage's deadline passed.
	Deadline
	// RootExit: the root exited (a `lineage run` job ended).
	RootExit
)

var eventNames = map[Event]string{
	TurnEnd:      "turn-end",
	SessionClose: "session-close",
	Deadline:     "deadline",
	RootExit:     "root-exit",
}

// String returns the event's name.
func (e Event) String() string {
	if s, ok := eventNames[e]; ok {
		return s
	}
	return fmt.Sprintf("Event(%d)", uint8(e))
}

// RootExited is the reason to reap at a [RootExit].
const RootExited = "the root exited"

// Action is what to do with a lineage. The zero Action is [Skip], so a zero
// [Decision] never harms anything.
type Action uint8

const (
	// Skip: nothing to do, not even a report.
	Skip Action = iota
	// Report: list the live members as left behind; signal nothing.
	Report
	// Reap: end the lineage (linger, contain, terminate, kill), sparing what
	// the keep rules and [Protect] spare, and report the outcomes.
	Reap
)

// String returns "skip", "report" or "reap".
func (a Action) String() string {
	switch a {
	case Skip:
		return "skip"
	case Report:
		return "report"
	case Reap:
		return "reap"
	}
	return fmt.Sprintf("Action(%d)", uint8(a))
}

// Input is everything [Decide] looks at.
type Input struct {
	Kind  Kind
	Event Event
	// Reaping is the kill switch after [ResolveReaping]. The zero value is
	// "on, by default".
	Reaping Reaping
	// Kept is set when the root is kept on purpose (see [KeepRules.KeepsRoot]).
	Kept bool
}

// Validate returns an error wrapping [lineage.ErrInvalid] when in asks nothing
// [Decide] can answer: no event, an unknown event or kind, or a turn end
// without a runtime kind.
func (in Input) Validate() error {
	switch {
	case in.Event == 0:
		return fmt.Errorf("%w input: no event", lineage.ErrInvalid)
	case eventNames[in.Event] == "":
		return fmt.Errorf("%w input: unknown %v", lineage.ErrInvalid, in.Event)
	case !in.Kind.valid():
		return fmt.Errorf("%w input: unknown %v", lineage.ErrInvalid, in.Kind)
	case in.Event == TurnEnd && in.Kind == 0:
		return fmt.Errorf("%w input: turn-end needs a runtime kind", lineage.ErrInvalid)
	}
	return nil
}

// Decision is what [Decide] answers: an action and, for people, why.
type Decision struct {
	Action Action
	Reason string
}

// String reads like "report: the root is kept on purpose (...)".
func (d Decision) String() string { return d.Action.String() + ": " + d.Reason }

// Decide says what to do with a lineage when in.Event happens. It is total and
// never guesses towards killing:
//
//   - an input that fails [Input.Validate] gives [Skip] (nothing to decide);
//   - an interactive turn's processes are reported, not killed, and so are
//     an interactive root's leftovers when it exits (root-exit), since they
//     belong to the user until the session closes;
//   - session close, every autonomous turn end, the deadline and the exit of
//     a root with no interactive runtime (a `lineage run` job) reap;
//   - a would-be reap becomes a report when reaping is off (the kill switch
//     wins over everything, and its reason says who turned it off) or when
//     the root is kept on purpose.
func Decide(in Input) Decision {
	if err := in.Validate(); err != nil {
		return Decision{Skip, "nothing to decide: " + err.Error()}
	}
	d := rule(in.Kind, in.Event)
	if d.Action != Reap {
		return d
	}
	if in.Reaping.Off {
		why := "reaping is off"
		if in.Reaping.By != "" {
			why += ": " + in.Reaping.By
		}
		return Decision{Report, why + " (would reap: " + d.Reason + ")"}
	}
	if in.Kept {
		return Decision{Report, "the root is kept on purpose (would reap: " + d.Reason + ")"}
	}
	return d
}

// rule is the decision before the kill switch and keep requests.
func rule(k Kind, ev Event) Decision {
	switch ev {
	case TurnEnd:
		if k == Interactive {
			return Decision{Report, "an interactive turn's processes are reported, not killed, until the session closes"}
		}
		return Decision{Reap, "an autonomous turn ended"}
	case SessionClose:
		return Decision{Reap, "the session closed"}
	case Deadline:
		return Decision{Reap, "the deadline passed"}
	case RootExit:
		if k == Interactive {
			return Decision{Report, "an interactive root's leftovers are reported, not killed, until the session closes"}
		}
		return Decision{Reap, RootExited}
	}
	return Decision{Skip, "nothing to decide: unknown " + ev.String()}
}
