package loader

import (
	"fmt"
	"strings"
	"time"

	"github.com/lineage-dev/lineage/lineage"
)

// The backends a user can choose with --backend.
const (
	// BackendAuto uses BPF when it loads, and the proc backend otherwise.
	BackendAuto = "auto"
	// BackendBPF uses BPF or fails, saying why.
	BackendBPF = "bpf"
	// BackendProc polls /proc, whatever BPF could do.
	BackendProc = "proc"
)

// ParseBackend checks a --backend value: "auto", "bpf" or "proc" (any case,
// surrounding spaces ignored; empty means "auto"). Other values wrap
// lineage.ErrInvalid.
func ParseBackend(s string) (string, error) {
	switch v := strings.ToLower(strings.TrimSpace(s)); v {
	case "":
		return BackendAuto, nil
	case BackendAuto, BackendBPF, BackendProc:
		return v, nil
	}
	return "", fmt.Errorf("%w option: backend %q: want auto, bpf or proc", lineage.ErrInvalid, s)
}

// Choice says which backend was chosen and why, in words fit for a report
// and for -v.
type Choice struct {
	// Backend is "bpf" or "proc".
	Backend string `json:"backend"`
	// Asked is what the user asked for: "auto", "bpf" or "proc".
	Asked string `json:"asked"`
	// Reason says why this backend, for example "bpf: not privileged: ...;
	// using proc".
	Reason string `json:"reason"`
}

func (c Choice) String() string { return c.Backend + " (" + c.Reason + ")" }

// Stats are a backend's counters since it started. Losses are never hidden:
// events lost in the kernel (EventsLost) and records that could not be
// decoded (Undecodable) are both counted, and a report shows them.
type Stats struct {
	// EventsLost counts events dropped because the ring buffer was full.
	// Membership stays exact; only the record has gaps.
	EventsLost uint64 `json:"events_lost"`
	// MembersFull counts new processes that could not be tracked because
	// the membership map was full. Those not counted in UntrackedKilled
	// escaped.
	MembersFull uint64 `json:"members_full"`
	// UntrackedKilled counts processes killed because they could not be
	// tracked (fail closed, [OnFullKill]).
	UntrackedKilled uint64 `json:"untracked_killed,omitempty"`
	Forks           uint64 `json:"forks"`
	Execs           uint64 `json:"execs"`
	Exits           uint64 `json:"exits"`
	// Contained counts children killed at birth during a reap.
	Contained uint64 `json:"contained"`
	// SupervisorKills counts members killed in the kernel because their
	// supervisor died.
	SupervisorKills uint64 `json:"supervisor_kills"`
	// SignalFailed counts kills the kernel side asked for and was refused.
	SignalFailed uint64 `json:"signal_failed"`
	// UIDSpared counts kills the kernel side skipped because the user
	// lineage runs for could not send them by kill(2) (a setcap install;
	// see BPFOptions.KillUser): a sudo-started member, say.
	UIDSpared uint64 `json:"uid_spared,omitempty"`
	// Undecodable counts events the kernel delivered that could not be
	// decoded, and so were dropped: like EventsLost, a gap in the record.
	Undecodable uint64 `json:"undecodable,omitempty"`
	// Stale counts membership entries found to name a process that was
	// gone, and dropped.
	Stale uint64 `json:"stale"`
	// HookMisses counts runs of the tracker's programs the kernel skipped
	// (its recursion_misses: a hook fired on a CPU where the same program
	// was already running). A missed fork is a process that escaped
	// tracking, a missed exit a member that stays listed until checked.
	HookMisses uint64 `json:"hook_misses,omitempty"`
	// ForkMisses counts, of HookMisses, the first fork hook's: forks the
	// second fork hook had to insert (ForksCaught), or, where it missed
	// them too (CatcherMisses) or does not run, /proc adoption
	// (AdoptedAfterMiss). A fork that all three missed escaped unseen.
	ForkMisses uint64 `json:"fork_misses,omitempty"`
	// ForksCaught counts members the second fork hook inserted, the
	// kernel having skipped the first for their fork.
	ForksCaught uint64 `json:"forks_caught,omitempty"`
	// CatcherMisses counts runs of the second fork hook the kernel
	// skipped (included in HookMisses).
	CatcherMisses uint64 `json:"catcher_misses,omitempty"`
	// AdoptedAfterMiss counts members adopted from /proc by parent pid
	// because the fork hooks had skipped runs: processes no hook saw.
	AdoptedAfterMiss uint64 `json:"adopted_after_miss,omitempty"`
	// AdoptedOrphans counts, of AdoptedAfterMiss, the orphans this
	// process, the child subreaper of a lineage it spawned, inherited:
	// processes no hook saw whose parent died before a listing.
	AdoptedOrphans uint64 `json:"adopted_orphans,omitempty"`
	// KeptAtExec counts members the kernel spared at their exec of a
	// program an exe keep rule keeps.
	KeptAtExec uint64 `json:"kept_at_exec,omitempty"`
	// Unattributed counts orphans reparented to this process that could
	// not be attributed to one spawned root: they escaped (see
	// PollStats.Unattributed; the bpf backend judges only the orphans no
	// fork hook saw).
	Unattributed uint64 `json:"unattributed,omitempty"`
}

// DefaultMaxMembers is how many processes the bpf backend can track at once,
// across all roots, unless told otherwise.
const DefaultMaxMembers = 65536

// ValidateMaxMembers checks a size for the bpf backend's membership map: a
// root and at least one descendant must fit. Errors wrap lineage.ErrInvalid.
func ValidateMaxMembers(n uint32) error {
	if n < 2 {
		return fmt.Errorf("%w option: max members %d: must be at least 2", lineage.ErrInvalid, n)
	}
	return nil
}

// OnFull says what happens to a new process that the full membership map
// can't hold.
type OnFull string

const (
	// OnFullKill, the default, fails closed: the process is killed at
	// birth (compat: at its first exec or fork), counted and reported.
	OnFullKill OnFull = "kill"
	// OnFullEscape lets it run untracked, counted and reported.
	OnFullEscape OnFull = "escape"
)

// ParseOnFull reads "kill" or "escape"; "" is OnFullKill. Errors wrap
// lineage.ErrInvalid.
func ParseOnFull(s string) (OnFull, error) {
	switch OnFull(s) {
	case "", OnFullKill:
		return OnFullKill, nil
	case OnFullEscape:
		return OnFullEscape, nil
	}
	return "", fmt.Errorf("%w option: on full %q: want kill or escape", lineage.ErrInvalid, s)
}

// ParseInterval reads an --interval value for the proc backend: "auto" (or
// empty) adapts the interval to the cost of a scan and returns 0; anything
// else is a Go duration ("250ms", "2s") that must be positive. Errors wrap
// lineage.ErrInvalid.
func ParseInterval(s string) (time.Duration, error) {
	v := strings.TrimSpace(s)
	if v == "" || strings.EqualFold(v, "auto") {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, fmt.Errorf("%w option: poll interval %q: want a duration such as 250ms or 2s, or auto", lineage.ErrInvalid, s)
	}
	if d <= 0 {
		return 0, fmt.Errorf("%w option: poll interval %q: must be positive (or auto)", lineage.ErrInvalid, s)
	}
	return d, nil
}
