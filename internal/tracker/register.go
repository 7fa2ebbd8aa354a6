package tracker

import (
	"context"
	"fmt"
	"time"

	"github.com/lineage-dev/lineage/internal/job"
	"github.com/lineage-dev/lineage/internal/loader"
	"github.com/lineage-dev/lineage/lineage"
	"github.com/lineage-dev/lineage/policy"
)

// RegisterOptions describe a running process registered as a root.
type RegisterOptions struct {
	// Command is what the report names the job by; nil reads the root's
	// argv from /proc.
	Command []string
	// Orphanage is as in [loader.RootOptions]: the child subreaper, the
	// root's parent, that inherits the lineage's orphans. Zero: none.
	Orphanage lineage.Identity
}

// Register makes the running process id a root of the tracker and adopts
// its existing descendants from /proc, repeating until a pass finds none;
// from the moment the root is registered, every new fork is caught. The
// job has no exit channel: the tracker did not start it, so [Job.Wait]
// must not be called. The lineage does not die with the tracker's process.
// It wraps [loader.ErrAlreadyTracked] when id is a member already, and
// [lineage.ErrNoProcess] or [lineage.ErrIdentityMismatch] when id names no
// live process.
func (t *Tracker) Register(id lineage.Identity, opts RegisterOptions) (*Job, error) {
	// A root untracked and registered again is tracked again.
	t.tree.Remember(id)
	if err := t.backend.Register(id, loader.RootOptions{Orphanage: opts.Orphanage}); err != nil {
		return nil, err
	}
	return t.registered(id, opts), nil
}

// registered is the job of id, a registered root.
func (t *Tracker) registered(id lineage.Identity, opts RegisterOptions) *Job {
	cmd := opts.Command
	if cmd == nil {
		cmd, _ = t.proc.Argv(int(id.PID))
	}
	started := time.Now()
	j := &Job{t: t, root: id, started: started}
	j.rep = job.Report{Command: cmd, Root: id, Backend: t.choice, Started: started}
	return j
}

// Root is the job's root.
func (j *Job) Root() lineage.Identity { return j.root }

// Live returns the live members of the job's lineage, the root included
// while it lives, with the argv and command name the tracker saw at exec
// (or /proc's when it saw none).
func (j *Job) Live() ([]job.Leftover, error) {
	ms, err := j.t.backend.Members(j.root)
	if err != nil {
		return nil, fmt.Errorf("members of %s: %w", j.root, err)
	}
	var r job.Report
	r.AddLeftovers(ms, j.t.tree, j.t.proc)
	return r.Leftovers, nil
}

// SettleOptions say how to end a registered job's turn or session.
type SettleOptions struct {
	// Input is the policy's input; its Kept is set from Keep's root rules.
	Input policy.Input
	// Keep spares processes, on top of the job's own rules.
	Keep policy.KeepRules
	// Refuse, if set, names more processes that are never signalled
	// (those the caller could not signal itself), asked at every signal.
	Refuse func(lineage.Member, lineage.Stat) (string, bool)
	Reap   job.ReapOptions
}

// Settle decides on the lineage as opts.Input calls for and reaps it or
// only reports its live members, and returns a fresh report of that one
// decision: unlike [Job.Reap], it may be called many times (every turn end
// of a session). It is safe to call from one goroutine at a time per job.
func (j *Job) Settle(ctx context.Context, opts SettleOptions) *job.Report {
	return SettleAll(ctx, []*Job{j}, opts)[0]
}

// Members returns the live members of the job's lineage as the backend
// has them, the root included while it lives.
func (j *Job) Members() ([]lineage.Member, error) { return j.t.backend.Members(j.root) }

// SettleRun is [Job.Settle] for a `lineage run` client's job: the report
// also has the backend's counters and the warnings they call for, as a
// standalone run's has. The counters are the tracker's, shared by all its
// jobs.
func (j *Job) SettleRun(ctx context.Context, opts SettleOptions) *job.Report {
	rep := j.Settle(ctx, opts)
	if st, err := j.t.backend.Stats(); err == nil {
		rep.Stats = st
		rep.WarnLosses(j.t.choice.Backend)
	}
	return rep
}

// Backend is the tracker's backend and why it was chosen.
func (t *Tracker) Backend() loader.Choice { return t.choice }
