package loader

import (
	"context"
	"errors"
	"fmt"
	"os/exec"

	"github.com/lineage-dev/lineage/internal/lineage"
)

// ErrUnavailable is wrapped by errors that say a backend can't run on this
// machine; the rest of the message says why, in words a user can act on.
var ErrUnavailable = errors.New("backend unavailable")

// ErrNotRoot is wrapped when an operation names a root that is not registered.
var ErrNotRoot = errors.New("not a registered root")

// ErrAlreadyTracked is wrapped when a process to register is already a member
// of a lineage.
var ErrAlreadyTracked = errors.New("already tracked")

// DefaultMaxMembers is how many processes the bpf backend can track at once,
// across all roots, unless told otherwise.
const DefaultMaxMembers = 65536

// DefaultRingBytes is the size of the bpf backend's event ring buffer
// unless told otherwise.
const DefaultRingBytes = 1 << 20

// ValidateMaxMembers checks a size for the bpf backend's membership map: a
// root and at least one descendant must fit. Errors wrap lineage.ErrInvalid.
func ValidateMaxMembers(n uint32) error {
	if n < 2 {
		return fmt.Errorf("%w option: max members %d: must be at least 2", lineage.ErrInvalid, n)
	}
	return nil
}

// Backend tells which processes belong to which root, and keeps telling as
// they fork, exec and exit. Implementations are safe for concurrent use by
// multiple goroutines, except that Run may be called only once.
type Backend interface {
	// Name is "bpf" or "proc".
	Name() string

	// Spawn starts cmd as a new root. The root is a member before it runs
	// its first instruction: whatever it forks, however early, is caught.
	Spawn(cmd *exec.Cmd, opts RootOptions) (lineage.Identity, error)

	// Register adds the live process id as a root, then adopts its current
	// descendants from /proc, repeating until a pass adds nothing. From the
	// moment the root is registered, every new fork is caught.
	Register(id lineage.Identity, opts RootOptions) error

	// Members returns the live members of root's lineage, root included
	// while it lives.
	Members(root lineage.Identity) ([]lineage.Member, error)

	// Contain marks root's lineage as being reaped, so that its members
	// can't outrun the reaper by forking, and says how.
	Contain(root lineage.Identity) (lineage.Containment, error)

	// Forget drops root and whatever remains of its membership. It signals
	// nothing.
	Forget(root lineage.Identity) error

	// Run delivers lineage events to fn, in the order the backend sees
	// them, until ctx is done; then it delivers what is still pending and
	// returns nil.
	Run(ctx context.Context, fn func(lineage.Event)) error

	// Stats returns the backend's counters.
	Stats() (Stats, error)

	// Close releases the backend. Members are no longer tracked once it
	// returns; roots registered with DieWithSupervisor are not killed by a
	// clean Close.
	Close() error
}

// RootOptions are the per-root settings.
type RootOptions struct {
	// DieWithSupervisor asks that the lineage be killed if the process
	// that registered it dies before reaping it (a CI runner's SIGKILL to
	// the process group, say). BPF backend, kernel 6.13 or later.
	DieWithSupervisor bool
}

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
	// Unattributed counts orphans the proc backend could not attribute to
	// one spawned root: they escaped (see PollStats.Unattributed).
	Unattributed uint64 `json:"unattributed,omitempty"`
}
