//go:build !lean

package main

import (
	"context"
	"fmt"
	"os"

	"github.com/lineage-dev/lineage/internal/job"
	"github.com/lineage-dev/lineage/internal/loader"
	"github.com/lineage-dev/lineage/internal/tracker"
	"github.com/lineage-dev/lineage/internal/userfile"
)

// runStandalone runs the job with a tracker of lineage's own, in this
// process.
func (o *runOptions) runStandalone(ctx context.Context) (*job.Report, job.End, error) {
	rec, err := o.record.open()
	if err != nil {
		return nil, job.End{}, err
	}
	return tracker.Run(ctx, o.config(rec))
}

// config is the job as the flags describe it, with a tracker of its own
// and rec, the record to write.
func (o *runOptions) config(rec tracker.RecordSpec) tracker.Config {
	cfg := tracker.Config{
		Config: o.jobConfig(),
		Tracker: tracker.TrackerOptions{
			Backend:    o.backend,
			MaxMembers: o.MaxMembers,
			OnFull:     loader.OnFull(o.OnFull),
			Interval:   o.interval,
			Log:        o.s.err,
			Verbose:    o.Verbose,
		},
		Record: rec,
	}
	cfg.Spec.Guardian = o.guardian()
	return cfg
}

// guardian asks for lineage's own hidden guardian command, when lineage
// can find its executable (else a hard cancel is answered by the kernel
// alone, where it can).
func (o *runOptions) guardian() job.GuardianSpec {
	path, err := os.Executable()
	if err != nil {
		fmt.Fprintf(o.s.err, "lineage: no guardian: %v\n", err)
		return job.GuardianSpec{}
	}
	g := job.GuardianSpec{
		Path: path, Args: []string{guardianCommand},
		Always:  o.HardCancel == hardCancelGuardian,
		Reaping: o.reaping, Grace: o.Grace,
	}
	if f, ok := o.s.err.(*os.File); ok {
		g.Stderr = f
	}
	return g
}

// open creates the record file for the invoking user before the job
// starts; the job closes it. No --record: the zero spec.
func (r *recordFlags) open() (tracker.RecordSpec, error) {
	if r.File == "" {
		return tracker.RecordSpec{}, nil
	}
	owner, err := userfile.Invoker(os.Getenv)
	if err != nil {
		return tracker.RecordSpec{}, fmt.Errorf("--record: %w", err)
	}
	f, err := userfile.Create(r.File, owner)
	if err != nil {
		return tracker.RecordSpec{}, fmt.Errorf("--record: %w", err)
	}
	return tracker.RecordSpec{File: f, Redact: r.redact}, nil
}
