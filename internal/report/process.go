package report

import (
	"slices"
	"time"

	"github.com/lineage-dev/lineage/internal/record"
	"github.com/lineage-dev/lineage/lineage"
)

// Process is everything the record says about one process.
type Process struct {
	ID     lineage.Identity `json:"process"`
	Parent lineage.Identity `json:"parent"`
	Root   lineage.Identity `json:"root"`
	// Depth is the process's depth in the report's tree (0 for a top).
	Depth int    `json:"depth"`
	Comm  string `json:"comm,omitempty"`
	Exe   string `json:"exe,omitempty"`
	// Argv is from the process's last exec; Earlier are the execs before
	// it, oldest first (a shell that exec'd the program it ran).
	Argv          []string `json:"argv,omitempty"`
	ArgvTruncated bool     `json:"argv_truncated,omitempty"`
	Redacted      bool     `json:"redacted,omitempty"`
	Earlier       []Exec   `json:"earlier_execs,omitempty"`
	UID           *uint32  `json:"uid,omitempty"`
	EUID          *uint32  `json:"euid,omitempty"`
	// Start and End are times since boot. Start is the fork's when it was
	// recorded, else the identity's start tick; End is the exit's, or, when
	// no exit was seen (Ended false), the record's last moment, or the
	// process's last event when its exit was lost (Missing holds exit).
	Start time.Duration `json:"start_ns"`
	End   time.Duration `json:"end_ns"`
	Ended bool          `json:"ended"`
	// ForkSeen is set when the record has the process's fork.
	ForkSeen bool         `json:"fork_seen"`
	Exit     *record.Exit `json:"exit,omitempty"`
	// Signals are those the reaper sent, in order; Result its last word.
	Signals []string `json:"signals,omitempty"`
	Result  string   `json:"result,omitempty"`
	// Leaked is set when the process was alive as its root ended.
	Leaked bool `json:"leaked,omitempty"`
	IsRoot bool `json:"is_root,omitempty"`
	// UnderRoot is set when the record does not have the process's parent
	// (the proc backend never saw the fork of a double-forked daemon, or
	// the parent's events were lost): the tree places it under its root.
	UnderRoot bool           `json:"under_root,omitempty"`
	Untracked bool           `json:"untracked,omitempty"`
	Contained bool           `json:"contained,omitempty"`
	Reason    string         `json:"reason,omitempty"`
	Outcome   lineage.Result `json:"outcome"`
	// Track numbers the process's incarnation: 1 for the first process
	// the record mentions, and so on; a reused pid gets a new one.
	Track int `json:"track"`
	// Missing are the process's events that the record should hold but
	// lost in a gap (fork, exec, exit), as the report places them.
	Missing []record.Kind `json:"missing,omitempty"`

	kept     bool
	execAt   time.Duration // when the last exec was recorded; 0 for none
	children []*Process
	up       *Process // where the tree places it: its parent, or its root (UnderRoot)
	// lastSeen is the time of the last event about the process.
	lastSeen time.Duration
	// descendants and leaksBelow count the processes and the leaks of the
	// process's subtree (leaksBelow counts the process itself).
	descendants, leaksBelow int
	// outlived is set when the process was alive at its root's exit.
	outlived bool
}

// Exec is one of a process's execs before its last.
type Exec struct {
	At            time.Duration `json:"at_ns"`
	Exe           string        `json:"exe,omitempty"`
	Argv          []string      `json:"argv,omitempty"`
	ArgvTruncated bool          `json:"argv_truncated,omitempty"`
	Redacted      bool          `json:"redacted,omitempty"`
}

// commandLine renders e as [CommandLine] renders p's last exec.
func (e Exec) commandLine(p *Process) string {
	return CommandLine(&Process{Argv: e.Argv, Comm: p.Comm, ArgvTruncated: e.ArgvTruncated})
}

// Lifetime is how long the process lived, as far as the record knows.
func (p *Process) Lifetime() time.Duration {
	if p.End < p.Start {
		return 0
	}
	return p.End - p.Start
}

// apply folds one event into p.
func (p *Process) apply(ev record.Event) {
	p.lastSeen = max(p.lastSeen, ev.Boot)
	if p.Parent.IsZero() {
		p.Parent = ev.Parent
	}
	if p.Root.IsZero() {
		p.Root = ev.Root
	}
	// As in lineage.Tree: only an exec names the process anew; a fork's
	// comm is the parent's and an exit's its last thread's.
	if ev.Comm != "" && (p.Comm == "" || ev.Kind == record.KindExec) {
		p.Comm = ev.Comm
	}
	switch ev.Kind {
	case record.KindFork:
		p.ForkSeen, p.Start = true, ev.Boot
		p.IsRoot, p.Untracked, p.Contained = ev.IsRoot, ev.Untracked, ev.Contained
		if ev.Untracked && ev.Contained && !p.Ended {
			// The membership was full and --on-full=kill: killed at
			// birth, never a member, so no exit of it will come.
			p.Ended, p.End, p.Exit = true, ev.Boot, &record.Exit{Signal: "KILL"}
			if p.Reason == "" {
				p.Reason = untrackedKilled
			}
		}
	case record.KindExec:
		if p.execAt != 0 {
			p.Earlier = append(p.Earlier, Exec{At: p.execAt, Exe: p.Exe, Argv: p.Argv, ArgvTruncated: p.ArgvTruncated, Redacted: p.Redacted})
		}
		p.execAt = max(ev.Boot, 1)
		p.Exe, p.Argv, p.UID, p.EUID = ev.Exe, ev.Argv, ev.UID, ev.EUID
		p.ArgvTruncated, p.Redacted = ev.ArgvTruncated, ev.Redacted
	case record.KindExit:
		p.Ended, p.End, p.Exit = true, ev.Boot, ev.Exit
	case record.KindSignal:
		p.kept = false
		p.Signals = append(p.Signals, ev.Signal)
		p.setResult(ev)
		if len(p.Argv) == 0 && len(ev.Argv) > 0 {
			p.Argv, p.Redacted = ev.Argv, ev.Redacted
		}
	case record.KindKeep:
		p.kept = true
		p.setResult(ev)
	case record.KindUnkeep:
		// The last word on a process wins: a keep that ended spares
		// nothing, and neither does a keep the reaper's signal followed.
		p.kept, p.Result, p.Reason = false, "", ev.Reason
	case record.KindLeak:
		p.Leaked = true
		if p.Reason == "" {
			p.Reason = ev.Reason
		}
	}
	// A root registered while it ran (the sidecar's) has no fork in the
	// record: it is its own root.
	if ev.Process == ev.Root && !ev.Root.IsZero() {
		p.IsRoot = true
	}
}

func (p *Process) setResult(ev record.Event) {
	if ev.Result != "" {
		p.Result = ev.Result
	}
	if ev.Reason != "" {
		p.Reason = ev.Reason
	}
}

// untrackedKilled is the reason given for a process killed at birth
// because the membership could not hold it.
const untrackedKilled = "killed at birth: the membership map was full, --on-full=kill"

// settle decides the outcome once every event is in.
func (p *Process) settle() {
	switch {
	case p.kept:
		p.Outcome = lineage.Kept
	case len(p.Signals) > 0 && (p.Result == "killed" || p.Result != "terminated" && slices.Contains(p.Signals, "KILL")):
		p.Outcome = lineage.Killed
	case len(p.Signals) > 0:
		p.Outcome = lineage.Terminated
	case p.Leaked:
		p.Outcome = lineage.Leaked
	case p.Ended:
		p.Outcome = lineage.Exited
	default:
		p.Outcome = lineage.Unknown
	}
}
