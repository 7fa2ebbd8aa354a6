package job

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"time"

	"github.com/lineage-dev/lineage/internal/policy"
)

// StartError says that a job's command could not be started. Code is
// [ExitNotFound] or [ExitCannotRun].
type StartError struct {
	Code int
	Err  error
}

func (e *StartError) Error() string { return e.Err.Error() }

func (e *StartError) Unwrap() error { return e.Err }

// Config is a job as `lineage run` runs it.
type Config struct {
	Tracker TrackerOptions
	// Spec is the command; Spec.Path is looked up from Spec.Command[0].
	Spec Spec
	// Deadline, Linger and Grace are as in [WaitOptions] and [ReapOptions].
	Deadline time.Duration
	Linger   time.Duration
	Grace    time.Duration
	// ReapTimeout is as in [ReapOptions.Timeout].
	ReapTimeout time.Duration
	// Reaping is the kill switch, resolved.
	Reaping policy.Reaping
	// Record asks for a forensic record of the job (record.go).
	Record RecordSpec
}

// Run runs cfg.Spec as the one job of a tracker of its own: it spawns the
// command, passes SIGINT, SIGTERM, SIGHUP and SIGQUIT on to it, waits for
// it or its deadline, decides on its lineage as the root's exit or the
// deadline calls for, reaps or reports it, and returns the job's report and
// how it ended. A command that can't be started is a [*StartError].
func Run(ctx context.Context, cfg Config) (*Report, End, error) {
	path, err := exec.LookPath(cfg.Spec.Command[0])
	if err != nil {
		code := ExitCannotRun
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
			code = ExitNotFound
		}
		closeRecord(cfg.Record)
		return nil, End{}, &StartError{Code: code, Err: err}
	}
	cfg.Spec.Path = path
	t, err := OpenTracker(cfg.Tracker)
	if err != nil {
		closeRecord(cfg.Record)
		return nil, End{}, err
	}
	defer t.Close()
	rec, err := t.startRecord(cfg.Record, cfg.Spec.Command)
	if err != nil {
		return nil, End{}, err
	}

	// Signals for the job are caught before it starts, so none is lost.
	sigs := catchSignals()
	defer sigs.stop()

	j, err := t.Spawn(cfg.Spec)
	if err != nil {
		t.Drain()
		rec.finish(t, nil)
		return nil, End{}, err
	}
	defer j.Close()
	rec.rooted(j.root)
	end := j.Wait(WaitOptions{Deadline: cfg.Deadline, Signals: sigs.passed, Fatal: sigs.fatal, Grace: cfg.Grace})
	rec.leaks(j, end)
	d := j.Decide(policy.Input{Event: end.Event(), Reaping: cfg.Reaping})
	opts := ReapOptions{Linger: cfg.Linger, Grace: cfg.Grace, Timeout: cfg.ReapTimeout}
	if end.Fatal != nil {
		opts.Linger = 0 // lineage is ending: reap at once
	}
	reapCtx, cutShort := sigs.duringReap(ctx)
	j.Reap(reapCtx, d, opts)
	if sig := cutShort(); sig != nil && j.end.Fatal == nil {
		j.fatal(sig)
	}
	rec.reaped(j.rep.Reap, end)
	t.Drain()
	rep := j.Report()
	rep.Tracker = TrackerStandalone
	rec.finish(t, rep)
	return rep, j.End(), nil
}
