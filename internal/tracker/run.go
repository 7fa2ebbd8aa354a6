package tracker

import (
	"context"

	"github.com/lineage-dev/lineage/internal/job"
	"github.com/lineage-dev/lineage/policy"
)

// Config is a job as `lineage run` runs it with a tracker of its own:
// the job, the tracker's options and the record to write.
type Config struct {
	job.Config
	Tracker TrackerOptions
	// Record asks for a forensic record of the job (record.go).
	Record RecordSpec
}

// Run runs cfg.Spec as the one job of a tracker of its own: it spawns the
// command, passes SIGINT, SIGTERM, SIGHUP and SIGQUIT on to it, waits for
// it or its deadline, decides on its lineage as the root's exit or the
// deadline calls for, reaps or reports it, and returns the job's report and
// how it ended. A command that can't be started is a [*job.StartError].
func Run(ctx context.Context, cfg Config) (*job.Report, job.End, error) {
	path, err := job.LookPath(cfg.Spec.Command[0])
	if err != nil {
		closeRecord(cfg.Record)
		return nil, job.End{}, err
	}
	cfg.Spec.Path = path
	if cfg.Tracker.Log == nil {
		cfg.Tracker.Log, cfg.Tracker.Verbose = cfg.Notes.Log, cfg.Notes.Verbose
	}
	t, err := OpenTracker(cfg.Tracker)
	if err != nil {
		closeRecord(cfg.Record)
		return nil, job.End{}, err
	}
	defer t.Close()
	rec, err := t.startRecord(cfg.Record, cfg.Spec.Command)
	if err != nil {
		return nil, job.End{}, err
	}

	// Signals for the job are caught before it starts, so none is lost.
	sigs := job.CatchSignals()
	defer sigs.Stop()

	j, err := t.Spawn(cfg.Spec)
	if err != nil {
		t.Drain()
		rec.finish(t, nil)
		return nil, job.End{}, err
	}
	defer j.Close()
	rec.rooted(j.root)
	release := releaseLoadMemory()
	end := j.Wait(sigs.WaitOptions(cfg.Deadline, cfg.Grace))
	release.Stop()
	rec.leaks(j, end)
	d := j.Decide(policy.Input{Event: end.Event(), Reaping: cfg.Reaping})
	reapCtx, cutShort := sigs.DuringReap(ctx)
	j.Reap(reapCtx, d, cfg.ReapOptions(end))
	j.child.Fatal(cutShort())
	rec.reaped(j.rep.Reap, end)
	t.Drain()
	rep := j.Report()
	rep.Tracker = job.TrackerStandalone
	rec.finish(t, rep)
	return rep, j.End(), nil
}
