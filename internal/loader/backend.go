package loader

import (
	"context"
	"errors"
	"os/exec"

	"github.com/lineage-dev/lineage/lineage"
)

// ErrUnavailable is wrapped by errors that say a backend can't run on this
// machine; the rest of the message says why, in words a user can act on.
var ErrUnavailable = errors.New("backend unavailable")

// ErrNotRoot is wrapped when an operation names a root that is not registered.
var ErrNotRoot = errors.New("not a registered root")

// ErrAlreadyTracked is wrapped when a process to register is already a member
// of a lineage.
var ErrAlreadyTracked = errors.New("already tracked")

// ErrMembersFull is wrapped when the membership has no room for a process to
// register (the bpf backend's --max-members, across every lineage).
var ErrMembersFull = errors.New("the membership map is full")

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
	// KeepExes are the programs the root's exe keep rules keep, as the
	// kernel knows them; KeepLineage says a rule keeps the root's whole
	// lineage. A [KernelKeeper] applies them from the root's first
	// instruction on: its exec of a kept program, or any fork of a kept
	// lineage, is spared in the hook run itself. Others ignore them (their
	// user space applies the rules).
	KeepExes    []lineage.FileID
	KeepLineage bool
	// Orphanage is a child subreaper the root is a child of (a `lineage
	// run` front registering its job with the daemon), which inherits the
	// lineage's orphans: its live children other than the root, born after
	// the root, can only be the root's. Such a child no one saw fork (the
	// BPF backend, where its fork hooks skipped runs; the proc backend,
	// whose scans missed a double fork's middle process) is adopted as an
	// orphan of the root, as the orphans this process inherits of a root
	// it spawned are. Register refuses an orphanage that is not the root's
	// parent. Zero names none. An orphan two roots of one orphanage could
	// claim is adopted by neither.
	Orphanage lineage.Identity
}
