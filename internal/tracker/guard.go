package tracker

import (
	"github.com/lineage-dev/lineage/internal/guardian"
	"github.com/lineage-dev/lineage/internal/job"
	"github.com/lineage-dev/lineage/internal/loader"
	"github.com/lineage-dev/lineage/internal/loader/bpf"
	"github.com/lineage-dev/lineage/lineage"
)

// wanted reports whether a job with spec s needs a guardian on backend b:
// the job asked to die with its supervisor, and the kernel won't do it.
func wanted(g job.GuardianSpec, s job.Spec, b loader.Backend) bool {
	if g.Path == "" || !s.DieWithSupervisor || g.Reaping.Off {
		return false
	}
	tracker, ok := b.(*bpf.Tracker)
	return g.Always || !ok || tracker.HardCancel() != loader.HardCancelKernel
}

// startGuardian starts the job's guardian. With the proc backend it runs
// before the job (beforeJob), so that the backend has seen it and never
// takes it for an orphan of the job; with bpf, after, beside the running
// job. It returns nil when no guardian is wanted at this point, or when it
// could not start, and then says why.
func (t *Tracker) startGuardian(s job.Spec, beforeJob bool) *guardian.Guardian {
	tracker, isBPF := t.backend.(*bpf.Tracker)
	if beforeJob == isBPF || !wanted(s.Guardian, s, t.backend) {
		return nil
	}
	cfg := guardian.Config{
		Path: s.Guardian.Path, Args: s.Guardian.Args, Stderr: s.Guardian.Stderr,
		Caller: t.caller, Keep: s.Keep, Reaping: s.Guardian.Reaping, Grace: s.Guardian.Grace,
	}
	var err error
	if isBPF {
		cfg.Containment = tracker.Containment()
		cfg.Handoff, err = tracker.HandoffFiles()
	}
	var g *guardian.Guardian
	start := func() (int, error) {
		var err error
		if g, err = guardian.Start(cfg); err != nil {
			return 0, err
		}
		return g.PID(), nil
	}
	switch {
	case err != nil:
	case isBPF:
		// Started as a helper: where the kernel skipped forks, the
		// tracker adopts this process's other children as the job's
		// orphans.
		err = tracker.StartHelper(start)
	default:
		_, err = start()
	}
	if err == nil && !isBPF {
		// A scan that sees the guardian now keeps the proc backend from
		// taking it for an orphan of the job.
		_, err = t.backend.Members(lineage.Identity{})
	}
	if err != nil {
		t.note("lineage: no guardian: a hard cancel would leave the job's lineage running: %v\n", err)
		if g != nil {
			_ = g.Done()
		}
		return nil
	}
	t.detail("lineage: guardian %d reaps the lineage if lineage is killed\n", g.PID())
	return g
}

// guard names the job's root to its guardian and, from then on, streams
// the tree's new members to it (the proc backend's guardian needs them).
func (t *Tracker) guard(g *guardian.Guardian, root lineage.Identity) {
	if g == nil {
		return
	}
	g.Root(root)
	// Every member is in the tree now, or will be applied after the
	// pointer is set and so be streamed.
	t.guardian.Store(g)
	for _, m := range t.tree.Live(root) {
		g.Member(m.Identity)
	}
}

// apply feeds an event to the tree and, for a new member, to the guardian.
func (t *Tracker) apply(ev lineage.Event) {
	t.tree.Apply(ev)
	if j, ok := t.jobs.Load(ev.Root); ok {
		j.(*Job).spareOnEvent(ev)
	}
	if t.onEvent != nil {
		t.onEvent(ev)
	}
	if r := t.recorder.Load(); r != nil { // forensic record (record.go)
		r.event(ev)
	}
	if ev.Kind != lineage.EventFork {
		return
	}
	if g := t.guardian.Load(); g != nil {
		g.Member(ev.Process)
	}
}

// unguard tells the guardian, if any, that the job ended under the
// tracker's own eyes: it exits and touches nothing.
func (t *Tracker) unguard() {
	if g := t.guardian.Swap(nil); g != nil {
		if err := g.Done(); err != nil {
			t.note("lineage: guardian: %v\n", err)
		}
	}
}
