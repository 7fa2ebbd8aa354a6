package job

import (
	"os"
	"syscall"
	"time"

	"github.com/lineage-dev/lineage/internal/reap"
)

// WaitOptions say what, besides the root's exit, ends the wait for it.
type WaitOptions struct {
	// Deadline ends the wait this long after it began; zero means never.
	Deadline time.Duration
	// Signals are passed on to the root, by identity. The root then has
	// Grace to exit; a second signal ends the wait at once.
	Signals <-chan os.Signal
	Grace   time.Duration
	// Fatal signals end the wait at once: lineage reaps, then exits 128+N.
	Fatal <-chan os.Signal
}

// Wait waits for a root the tracker spawned to exit, or for the deadline,
// passing signals on to it. It gives the terminal back, and records how
// the wait ended for the report.
func (j *Job) Wait(opts WaitOptions) End {
	j.end = j.wait(opts)
	if j.term != nil {
		_ = j.term.Restore()
	}
	ended(&j.rep, j.end, time.Since(j.started))
	return j.end
}

func (j *Job) wait(opts WaitOptions) End {
	var deadline <-chan time.Time
	if opts.Deadline > 0 {
		timer := time.NewTimer(opts.Deadline)
		defer timer.Stop()
		deadline = timer.C
	}
	var end End
	var forwardedGrace <-chan time.Time
	for {
		select {
		case st := <-j.exit:
			end.Status, end.Exited = st, true
			return end
		case <-deadline:
			j.t.note("lineage: deadline of %v passed: ending the job\n", opts.Deadline)
			end.Deadline = true
			return end
		case sig := <-opts.Signals:
			if end.Interrupted != nil {
				// A second signal: stop waiting, reap now.
				return end
			}
			end.Interrupted = sig
			if err := reap.Signal(j.t.proc, j.root, sig.(syscall.Signal)); err != nil {
				j.t.detail("lineage: pass %v to the job: %v\n", sig, err)
			}
			// Give the job the grace to exit on its own.
			forwardedGrace = time.After(opts.Grace)
		case <-forwardedGrace:
			return end
		case sig := <-opts.Fatal:
			j.t.note("lineage: %v: reaping the job's lineage, then exiting\n", sig)
			end.Fatal = sig
			return end
		}
	}
}

// fatal records that sig cut the reap short: lineage exits 128+N.
func (j *Job) fatal(sig os.Signal) {
	j.t.note("lineage: %v: the reap was cut short\n", sig)
	j.end.Fatal = sig
	j.rep.Fatal = sig.String()
}

// ended records how the wait for the root ended, took after it started.
func ended(r *Report, end End, took time.Duration) {
	r.JobTook = took
	r.Deadline = end.Deadline
	if end.Exited {
		r.SetStatus(end.Status)
	}
	if end.Interrupted != nil {
		r.Interrupted = end.Interrupted.String()
	}
	if end.Fatal != nil {
		r.Fatal = end.Fatal.String()
	}
}
