//go:build lean

package main

import (
	"context"
	"os"

	"github.com/lineage-dev/lineage/internal/job"
)

// runStandalone hands the job to lineage-tracker, beside the front, with
// the same arguments (execve: the pid stays the same), for it to run with
// a tracker of its own; it returns only when that fails. Nothing of the
// job has run yet.
func (o *runOptions) runStandalone(context.Context) (*job.Report, job.End, error) {
	return nil, job.End{}, execTracker(o.s, os.Args[1:])
}
