package job

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/lineage-dev/lineage/internal/reap"
	"github.com/lineage-dev/lineage/internal/supervise"
	"github.com/lineage-dev/lineage/lineage"
	"github.com/lineage-dev/lineage/policy"
)

// Notes are where a job's notes for people go ("lineage: ..." lines): Log,
// nil discarding them; Verbose adds those that only -v asks for.
type Notes struct {
	Log     io.Writer
	Verbose bool
}

// Note prints a note for people.
func (n Notes) Note(format string, args ...any) {
	if n.Log != nil {
		fmt.Fprintf(n.Log, format, args...)
	}
}

// Detail prints a note that only -v asks for.
func (n Notes) Detail(format string, args ...any) {
	if n.Verbose {
		n.Note(format, args...)
	}
}

// Command is the exec.Cmd that starts a job's root: path with args, s's
// standard files and credential, in a process group of its own (lineage's
// own group is protected, so a job sharing it could not be reaped) and,
// when s.Stdin is a terminal, in its foreground; the terminal is returned
// then, for [Root] to give back.
func Command(s Spec, path string, args []string) (*exec.Cmd, *supervise.Terminal) {
	cmd := exec.Command(path, args...)
	if s.Stdin != nil {
		cmd.Stdin = s.Stdin
	}
	if s.Stdout != nil {
		cmd.Stdout = s.Stdout
	}
	if s.Stderr != nil {
		cmd.Stderr = s.Stderr
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: s.Credential}
	var term *supervise.Terminal
	if s.Stdin != nil {
		term = supervise.ForegroundTerminal(int(s.Stdin.Fd()))
	}
	if term != nil {
		cmd.SysProcAttr.Foreground = true
		cmd.SysProcAttr.Ctty = term.FD()
	}
	return cmd, term
}

// Root is a job's root as lineage's child: waited for, the signals
// lineage gets passed on to it, its deadline kept, its terminal given back
// when it is done, and how it ended recorded for the report. One goroutine
// takes it through [Root.Wait], then [Root.AwaitExit] if it was reaped
// with its lineage.
type Root struct {
	id      lineage.Identity
	command []string
	started time.Time
	// exit receives the root's exit status (supervise.Children.Wait).
	exit  <-chan lineage.ExitStatus
	term  *supervise.Terminal
	notes Notes
	end   End
	took  time.Duration
}

// NewRoot is the root id, started at started to run command, whose exit
// status comes on exit, holding term (nil: none) in its foreground.
func NewRoot(id lineage.Identity, command []string, started time.Time, exit <-chan lineage.ExitStatus, term *supervise.Terminal, notes Notes) *Root {
	return &Root{id: id, command: command, started: started, exit: exit, term: term, notes: notes}
}

// ID is the root's identity.
func (r *Root) ID() lineage.Identity { return r.id }

// WaitOptions say what, besides the root's exit, ends the wait for it.
type WaitOptions struct {
	// Deadline ends the wait this long after it began; zero means never.
	Deadline time.Duration
	// Signals are passed on to the root's process group (the job's, as a
	// terminal's Ctrl-C), the root checked by identity first
	// ([reap.SignalGroup]). The root then has Grace to exit; a second
	// signal ends the wait at once.
	Signals <-chan os.Signal
	Grace   time.Duration
	// Fatal signals end the wait at once: lineage reaps, then exits 128+N.
	Fatal <-chan os.Signal
}

// Wait waits for the root to exit, or for the deadline, passing signals on
// to it. It gives the terminal back, and records how the wait ended for
// the report.
func (r *Root) Wait(opts WaitOptions) End {
	r.end = r.wait(opts)
	if r.term != nil {
		_ = r.term.Restore()
	}
	r.took = time.Since(r.started)
	return r.end
}

func (r *Root) wait(opts WaitOptions) End {
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
		case st := <-r.exit:
			end.Status, end.Exited = st, true
			return end
		case <-deadline:
			r.notes.Note("lineage: deadline of %v passed: ending the job\n", opts.Deadline)
			end.Deadline = true
			return end
		case sig := <-opts.Signals:
			if end.Interrupted != nil {
				// A second signal: stop waiting, reap now.
				end.Outlived = true
				return end
			}
			end.Interrupted = sig
			if err := reap.SignalGroup(r.id, sig.(syscall.Signal)); err != nil {
				r.notes.Detail("lineage: pass %v to the job: %v\n", sig, err)
			}
			// Give the job the grace to exit on its own.
			forwardedGrace = time.After(opts.Grace)
		case <-forwardedGrace:
			end.Outlived = true
			return end
		case sig := <-opts.Fatal:
			r.notes.Note("lineage: %v: reaping the job's lineage, then exiting\n", sig)
			end.Fatal = sig
			return end
		}
	}
}

// Fatal records that sig cut the reap short (unless a fatal signal ended
// the wait already): lineage exits 128+N.
func (r *Root) Fatal(sig os.Signal) {
	if sig == nil || r.end.Fatal != nil {
		return
	}
	r.notes.Note("lineage: %v: the reap was cut short\n", sig)
	r.end.Fatal = sig
}

// AwaitExit waits up to limit for the exit status of a root that the wait
// did not see exit: one reaped with its lineage (deadline, or it would not
// exit after a forwarded signal).
func (r *Root) AwaitExit(limit time.Duration) {
	if r.end.Exited {
		return
	}
	select {
	case st := <-r.exit:
		r.end.Status, r.end.Exited = st, true
	case <-time.After(limit):
	}
}

// End is how the root ended, as far as lineage knows.
func (r *Root) End() End { return r.end }

// Fill writes what only lineage, the root's parent, knows into rep: the
// command, the root, when it started, how long it ran and how it ended.
func (r *Root) Fill(rep *Report) {
	rep.Command, rep.Root, rep.Started = r.command, r.id, r.started
	rep.JobTook = r.took
	rep.Deadline = r.end.Deadline
	rep.Exit = nil
	if r.end.Exited {
		rep.SetStatus(r.end.Status)
	}
	rep.Interrupted, rep.Fatal = "", ""
	if r.end.Interrupted != nil {
		rep.Interrupted = signalName(r.end.Interrupted)
		if r.end.Outlived && rep.Decision == (policy.Decision{Action: policy.Reap, Reason: policy.RootExited}).String() {
			// The root did not exit: the reap ended it.
			rep.Decision = policy.Decision{Action: policy.Reap, Reason: "the root had not exited within the grace after SIG" + rep.Interrupted + " was passed on"}.String()
		}
	}
	if r.end.Fatal != nil {
		rep.Fatal = signalName(r.end.Fatal)
	}
}

// signalName names sig as the report names signals ("INT", "TERM").
func signalName(sig os.Signal) string {
	if s, ok := sig.(syscall.Signal); ok {
		return lineage.SignalName(s)
	}
	return sig.String()
}
