package tracker

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/lineage-dev/lineage/internal/buildinfo"
	"github.com/lineage-dev/lineage/internal/job"
	"github.com/lineage-dev/lineage/internal/reap"
	"github.com/lineage-dev/lineage/lineage"
	"github.com/lineage-dev/lineage/policy"
)

// Job is one root on a tracker and the lineage it starts. Take it through
// its steps in order: [Job.Wait] (for a root it spawned), [Job.Decide],
// [Job.Reap], then [Tracker.Drain] and [Job.Report]; Close it last.
type Job struct {
	t    *Tracker
	root lineage.Identity
	keep policy.KeepRules
	// child is the root as lineage's child, when the tracker spawned it
	// (nil for a registered root).
	child   *job.Root
	started time.Time
	rep     job.Report
	// spared holds the members marked spared in the kernel (spare.go);
	// exes what the kernel was told of its exe rules (keepexe.go).
	spared sync.Map
	exes   *exeKeeps
	// keeps applies the keep rules and remembers which ever matched; nil
	// without rules (see keeper).
	keeps    *keepTally
	keepOnce sync.Once
}

// keeper is the job's keep rules as the reaper's Keep, or nil without rules.
// Every use shares one tally, so a rule that spared a process anywhere
// counts as matched. Safe for concurrent use.
func (j *Job) keeper() func(lineage.Member) (bool, string) {
	if j.tally() == nil {
		return nil
	}
	return j.keeps.keep
}

// tally is the job's one keep tally, or nil without rules.
func (j *Job) tally() *keepTally {
	j.keepOnce.Do(func() {
		if len(j.keep) > 0 {
			j.keeps = newKeepTally(j.keep, j.t.tree, j.t.proc)
		}
	})
	return j.keeps
}

// Close stops tracking the job's lineage, and the tracker forgets what it
// knew of it. It signals nothing. A guardian, if the job has one, is told
// the job is done: it exits and touches nothing.
func (j *Job) Close() error {
	j.t.unguard()
	j.t.jobs.Delete(j.root)
	defer j.t.tree.Forget(j.root)
	return j.t.backend.Forget(j.root)
}

// Decide asks the policy what to do with the lineage for in.Event, with
// the job's keep rules, and records the decision for the report.
func (j *Job) Decide(in policy.Input) policy.Decision {
	in.Kept = in.Kept || j.keep.KeepsRoot(j.root)
	d := policy.Decide(in)
	j.t.detail("lineage: %s: %s\n", in.Event, d)
	j.rep.Decided(d, in.Reaping)
	j.rep.RootKept = in.Kept && d.Action != policy.Reap
	return d
}

// Reap carries out d: it reaps the lineage when d says so, sparing what
// the keep rules keep and what is protected, and otherwise only lists the
// live members as left behind, signalling nothing.
func (j *Job) Reap(ctx context.Context, d policy.Decision, opts job.ReapOptions) {
	t := j.t
	if d.Action != policy.Reap {
		ms, err := t.backend.Members(j.root)
		if err != nil {
			j.rep.Warnings = append(j.rep.Warnings, "list leftovers: "+err.Error())
		}
		j.rep.AddLeftovers(ms, t.tree, t.proc)
		return
	}
	// Before anything is contained: what the rules spare, the kernel
	// must spare too.
	listed, fresh := j.markSpared(j.tally(), refuser(t.caller, j.root, t.proc))
	// The report shows how each reaped member ended: keep their exits.
	t.tree.SetPruning(false)
	// The members that come back to lineage as orphans die as its
	// children: reap them after, not one by one as they die.
	resume := t.children.Pause()
	r, err := reap.Reap(ctx, j.source(listed, fresh), reap.Options{
		Linger:    opts.Linger,
		Grace:     opts.Grace,
		Timeout:   opts.Timeout,
		Contain:   func() (lineage.Containment, error) { return t.backend.Contain(j.root) },
		Keep:      j.keeper(),
		Refuse:    refuser(t.caller, j.root, t.proc),
		Inspect:   t.inspector(),
		ReapChild: t.children.ReapExited,
		Signaler:  t.kernelSignaler(),
	})
	resume()
	j.rep.Reap = &r
	if j.keeps != nil {
		j.rep.Warnings = append(j.rep.Warnings, j.keeps.unused()...)
	}
	if errors.Is(err, reap.ErrTimeout) {
		j.rep.ReapTimedOut = true
		t.note("lineage: the reap passed its timeout of %v: reporting what is left\n", opts.Timeout)
	}
	if err != nil {
		j.rep.Warnings = append(j.rep.Warnings, "reap: "+err.Error())
	}
	if j.child != nil {
		// The root may have been reaped with its lineage (deadline, or it
		// would not exit after a forwarded signal).
		j.child.AwaitExit(time.Second)
	}
}

// source lists the lineage's live members for the reaper, with the argv
// the event tree has from their exec: the reaper need not read /proc for
// it (a third of its cost per member), and a member that exits before the
// reaper reaches it is still named. With fresh set, listed is a listing
// of the lineage made just before the reap (markSpared's), which the
// reaper's first look takes rather than a pass over the map of its own (a
// few milliseconds for 1,000 members, before the first signal): that look
// only tells the reaper who is there before it contains the lineage, and
// every listing after the containment, the ones the reap's end rests on,
// is made afresh. A lineage listed empty stays empty: only a member forks
// a member.
func (j *Job) source(listed []lineage.Member, fresh bool) reap.Source {
	return j.t.sourceOf([]lineage.Identity{j.root}, map[lineage.Identity][]lineage.Member{j.root: listed}, fresh)
}

// Report completes the job's report, after Reap, with what the event tree
// knows by then and the backend's counters. A tracker drained first has
// every exit in the tree.
func (j *Job) Report() *job.Report {
	b := buildinfo.Get()
	j.rep.Build = &b
	if j.child != nil {
		j.child.Fill(&j.rep)
	}
	j.rep.Fill(j.t.tree)
	j.rep.Warnings = append(j.rep.Warnings, j.exes.changes()...)
	if st, err := j.t.backend.Stats(); err == nil {
		j.rep.Stats = st
		j.rep.WarnLosses(j.t.choice.Backend)
	}
	j.rep.Incomplete = j.rep.Incompleteness()
	return &j.rep
}

// End is how the root ended, as far as the job knows.
func (j *Job) End() job.End {
	if j.child == nil {
		return job.End{}
	}
	return j.child.End()
}

// Wait waits for a root the tracker spawned to exit, or for the deadline,
// passing signals on to it (see [job.Root.Wait]).
func (j *Job) Wait(opts job.WaitOptions) job.End { return j.child.Wait(opts) }
