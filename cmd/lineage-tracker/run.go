package main

import (
	"context"
	"fmt"
	"os"

	"github.com/lineage-dev/lineage/internal/cli"
	"github.com/lineage-dev/lineage/internal/job"
	"github.com/lineage-dev/lineage/internal/tracker"
	"github.com/lineage-dev/lineage/internal/userfile"
)

// runStandalone runs the job with a tracker of lineage's own, in this
// process: it is `lineage run`'s standalone half.
func runStandalone(ctx context.Context, j cli.StandaloneJob) (*job.Report, job.End, error) {
	rec, err := openRecord(j)
	if err != nil {
		return nil, job.End{}, err
	}
	cfg := tracker.Config{
		Config: j.Job,
		Tracker: tracker.TrackerOptions{
			Backend:    j.Backend,
			MaxMembers: j.MaxMembers,
			RingBytes:  j.RingBytes,
			OnFull:     j.OnFull,
			Interval:   j.Interval,
			Log:        j.Log,
			Verbose:    j.Verbose,
		},
		Record: rec,
	}
	cfg.Spec.Guardian = guardianSpec(j)
	return tracker.Run(ctx, cfg)
}

// guardianSpec asks for the tracker's own hidden guardian command, when it
// can find its executable (else a hard cancel is answered by the kernel
// alone, where it can).
func guardianSpec(j cli.StandaloneJob) job.GuardianSpec {
	path, err := os.Executable()
	if err != nil {
		fmt.Fprintf(j.Log, "lineage: no guardian: %v\n", err)
		return job.GuardianSpec{}
	}
	g := job.GuardianSpec{
		Path: path, Args: []string{cli.GuardianCommand},
		Always:  j.HardCancelGuardian,
		Reaping: j.Job.Reaping, Grace: j.Job.Grace,
	}
	if f, ok := j.Log.(*os.File); ok {
		g.Stderr = f
	}
	return g
}

// openRecord creates the record file for the invoking user before the job
// starts; the job closes it. No --record: the zero spec.
func openRecord(j cli.StandaloneJob) (tracker.RecordSpec, error) {
	if j.RecordFile == "" {
		return tracker.RecordSpec{}, nil
	}
	owner, err := userfile.Invoker(os.Getenv)
	if err != nil {
		return tracker.RecordSpec{}, fmt.Errorf("--record: %w", err)
	}
	f, err := userfile.Create(j.RecordFile, owner)
	if err != nil {
		return tracker.RecordSpec{}, fmt.Errorf("--record: %w", err)
	}
	return tracker.RecordSpec{File: f, Redact: j.Redact}, nil
}
