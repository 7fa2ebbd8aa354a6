package tracker

import (
	"context"
	"errors"
	"fmt"

	"github.com/lineage-dev/lineage/internal/buildinfo"
	"github.com/lineage-dev/lineage/internal/job"
	"github.com/lineage-dev/lineage/internal/loader"
	"github.com/lineage-dev/lineage/internal/reap"
	"github.com/lineage-dev/lineage/lineage"
	"github.com/lineage-dev/lineage/policy"
)

// settlement is one job's part in a settle: its decision and report, and,
// when it is to be reaped, what spares its members.
type settlement struct {
	j      *Job
	rep    *job.Report
	reap   bool
	keep   func(lineage.Member) (bool, string) // nil: no rules
	tally  *keepTally                          // keep's, nil with it
	refuse func(lineage.Member, lineage.Stat) (string, bool)
}

// SettleAll is [Job.Settle] for many jobs at once, with one report each,
// in the order of jobs. The jobs of one tracker that are to be reaped are
// reaped as one lineage: one listing of all their members per pass, one
// sweep of signals, one wait for the deaths, where a reap each would list
// the membership once per pass and root. Each member is still judged by
// its own job's keep rules and protected set (a member of no job being
// settled is never signalled), and the outcomes are reported per job; the
// reap's timings, passes and timeout are the shared reap's. Each job must
// be settled by one call at a time.
func SettleAll(ctx context.Context, jobs []*Job, opts SettleOptions) []*job.Report {
	reps := make([]*job.Report, len(jobs))
	var trackers []*Tracker
	byTracker := make(map[*Tracker][]*settlement)
	for i, j := range jobs {
		s := j.settlement(opts)
		reps[i] = s.rep
		if _, ok := byTracker[j.t]; !ok {
			trackers = append(trackers, j.t)
		}
		byTracker[j.t] = append(byTracker[j.t], s)
	}
	for _, t := range trackers {
		t.settle(ctx, byTracker[t], opts.Reap)
	}
	return reps
}

// settlement decides on j's lineage for opts.
func (j *Job) settlement(opts SettleOptions) *settlement {
	t := j.t
	keep := append(append(policy.KeepRules{}, j.keep...), opts.Keep...)
	in := opts.Input
	in.Kept = in.Kept || keep.KeepsRoot(j.root)
	d := policy.Decide(in)
	rep := &job.Report{Version: job.ReportVersion, Command: j.rep.Command, Root: j.root, Backend: t.choice, Started: j.started}
	rep.Decided(d, in.Reaping)
	rep.RootKept = in.Kept && d.Action != policy.Reap
	b := buildinfo.Get()
	rep.Build = &b
	s := &settlement{j: j, rep: rep, reap: d.Action == policy.Reap}
	if !s.reap {
		return s
	}
	base := refuser(t.caller, j.root, t.proc)
	s.refuse = func(m lineage.Member, st lineage.Stat) (string, bool) {
		if why, no := base(m, st); no {
			return why, no
		}
		if opts.Refuse != nil {
			return opts.Refuse(m, st)
		}
		return "", false
	}
	if len(keep) > 0 {
		s.tally = newKeepTally(keep, t.tree, t.proc)
		s.keep = s.tally.keep
	}
	return s
}

// eachLister is a backend that lists many roots' live members at once.
type eachLister interface {
	MembersOfEach(roots []lineage.Identity) (map[lineage.Identity][]lineage.Member, error)
}

// MembersOfEach returns the live members of each of roots, as
// [Job.Members] lists one root's: in one pass over the membership where
// the backend can make one (bpf: one read of the map; proc: one scan),
// else root by root. A root with no live member may have no entry.
func (t *Tracker) MembersOfEach(roots []lineage.Identity) (map[lineage.Identity][]lineage.Member, error) {
	return t.membersOfEach(roots)
}

// membersOfEach lists the live members of each of roots: in one pass
// where the backend can make one, else root by root.
func (t *Tracker) membersOfEach(roots []lineage.Identity) (map[lineage.Identity][]lineage.Member, error) {
	if l, ok := t.backend.(eachLister); ok {
		return l.MembersOfEach(roots)
	}
	out := make(map[lineage.Identity][]lineage.Member, len(roots))
	for _, r := range roots {
		ms, err := t.backend.Members(r)
		if err != nil {
			return out, fmt.Errorf("members of %s: %w", r, err)
		}
		out[r] = ms
	}
	return out, nil
}

// settle carries out the settlements of t's jobs: it lists the leftovers
// of those only reported, and reaps the others together.
func (t *Tracker) settle(ctx context.Context, ss []*settlement, opts job.ReapOptions) {
	var reported, reaped []lineage.Identity
	byRoot := make(map[lineage.Identity]*settlement, len(ss))
	for _, s := range ss {
		byRoot[s.j.root] = s
		if s.reap {
			reaped = append(reaped, s.j.root)
		} else {
			reported = append(reported, s.j.root)
		}
	}
	if len(reported) > 0 {
		all, err := t.membersOfEach(reported)
		for _, r := range reported {
			s := byRoot[r]
			if err != nil {
				s.rep.Warnings = append(s.rep.Warnings, "list leftovers: "+err.Error())
			}
			s.rep.AddLeftovers(all[r], t.tree, t.proc)
		}
	}
	if len(reaped) > 0 {
		t.reapAll(ctx, reaped, byRoot, opts)
	}
}

// reapAll reaps the lineages of roots as one, each member judged by its
// own root's settlement, and gives each settlement its share of the
// outcomes.
func (t *Tracker) reapAll(ctx context.Context, roots []lineage.Identity, byRoot map[lineage.Identity]*settlement, opts job.ReapOptions) {
	// Before anything is contained: what the rules spare, the kernel
	// must spare too.
	var (
		listed map[lineage.Identity][]lineage.Member
		fresh  bool
	)
	if _, ok := t.backend.(loader.Sparer); ok {
		all, err := t.membersOfEach(roots)
		if err != nil {
			t.note("lineage: spare in the kernel: %v\n", err)
		} else {
			listed, fresh = all, true
		}
		for _, r := range roots {
			s := byRoot[r]
			s.j.markSparedAmong(all[r], s.tally, s.refuse)
		}
	}
	r, err := reap.Reap(ctx, t.sourceOf(roots, listed, fresh), reap.Options{
		Linger:  opts.Linger,
		Grace:   opts.Grace,
		Timeout: opts.Timeout,
		Contain: func() (lineage.Containment, error) { return t.containAll(roots) },
		Keep: func(m lineage.Member) (bool, string) {
			if s := byRoot[m.Root]; s != nil && s.keep != nil {
				return s.keep(m)
			}
			return false, ""
		},
		Refuse: func(m lineage.Member, st lineage.Stat) (string, bool) {
			if s := byRoot[m.Root]; s != nil {
				return s.refuse(m, st)
			}
			return fmt.Sprintf("not of a root being settled (root %s)", m.Root), true
		},
		Inspect:   t.inspector(),
		ReapChild: t.children.ReapExited,
		Signaler:  t.kernelSignaler(),
	})
	parts := splitReap(r, roots)
	for _, root := range roots {
		s, part := byRoot[root], parts[root]
		s.rep.Reap = part
		s.rep.ReapTimedOut = errors.Is(err, reap.ErrTimeout)
		// Survivors of other roots are theirs to report.
		if err != nil && (len(part.Survivors) > 0 || !errors.Is(err, reap.ErrSurvivors)) {
			s.rep.Warnings = append(s.rep.Warnings, "reap: "+err.Error())
		}
		// What the reap spared lives on, and may fork again.
		if u, ok := t.backend.(interface{ Uncontain(lineage.Identity) error }); ok {
			if err := u.Uncontain(root); err != nil && !errors.Is(err, loader.ErrNotRoot) {
				s.rep.Warnings = append(s.rep.Warnings, "uncontain: "+err.Error())
			}
		}
		s.rep.Fill(t.tree)
	}
}

// sourceOf lists the live members of all of roots for one reaper, with
// the argv the event tree has from their exec (see Job.source, the same
// for one root). With fresh set, listed is a listing of them made just
// before the reap (the kernel's marks'), which the reaper's first look
// takes; every look after it lists afresh.
func (t *Tracker) sourceOf(roots []lineage.Identity, listed map[lineage.Identity][]lineage.Member, fresh bool) reap.Source {
	return reap.SourceFunc(func() ([]lineage.Member, error) {
		all, err := listed, error(nil)
		if !fresh {
			all, err = t.membersOfEach(roots)
		}
		fresh = false
		var ms []lineage.Member
		for _, r := range roots {
			ms = append(ms, all[r]...)
		}
		for i := range ms {
			if known, ok := t.tree.Get(ms[i].Identity); ok && len(ms[i].Argv) == 0 {
				ms[i].Argv = known.Argv
			}
		}
		return ms, err
	})
}

// containAll contains each of roots' lineages; the reaper stops them all
// instead when one can't be.
func (t *Tracker) containAll(roots []lineage.Identity) (lineage.Containment, error) {
	var how lineage.Containment
	for _, r := range roots {
		c, err := t.backend.Contain(r)
		if err != nil {
			return "", err
		}
		how = c
	}
	return how, nil
}

// splitReap shares r out among roots by each outcome's root: the
// outcomes and survivors are each root's own; the rest is the shared
// reap's.
func splitReap(r reap.Report, roots []lineage.Identity) map[lineage.Identity]*reap.Report {
	parts := make(map[lineage.Identity]*reap.Report, len(roots))
	for _, root := range roots {
		part := r
		part.Outcomes, part.Survivors = []reap.Outcome{}, nil
		part.Warnings = append([]string(nil), r.Warnings...)
		parts[root] = &part
	}
	for _, o := range r.Outcomes {
		part, ok := parts[o.Member.Root]
		if !ok {
			continue // listed under no root being settled: never signalled
		}
		part.Outcomes = append(part.Outcomes, o)
		if o.Result == lineage.Survived {
			part.Survivors = append(part.Survivors, o.Member.Identity)
		}
	}
	return parts
}
