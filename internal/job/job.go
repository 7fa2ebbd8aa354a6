package job

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/lineage-dev/lineage/internal/lineage"
	"github.com/lineage-dev/lineage/internal/loader"
	"github.com/lineage-dev/lineage/internal/policy"
	"github.com/lineage-dev/lineage/internal/proc"
	"github.com/lineage-dev/lineage/internal/reap"
	"github.com/lineage-dev/lineage/internal/supervise"
)

// Spec is a command to start as the root of a job.
type Spec struct {
	// Command is the argv as given; Path is the program that Command[0]
	// names.
	Command []string
	Path    string
	// Stdin, Stdout and Stderr are the job's; nil means the null device.
	// A Stdin that is the terminal makes the job its foreground.
	Stdin, Stdout, Stderr *os.File
	// Keep spares processes on purpose; a rule that keeps the root turns
	// a reap into a report.
	Keep policy.KeepRules
	// DieWithSupervisor asks the kernel to kill the lineage if the tracker's
	// process dies before reaping it (bpf backend only).
	DieWithSupervisor bool
}

// Job is one root on a tracker and the lineage it starts. Take it through
// its steps in order: [Job.Wait] (for a root it spawned), [Job.Decide],
// [Job.Reap], then [Tracker.Drain] and [Job.Report]; Close it last.
type Job struct {
	t    *Tracker
	root lineage.Identity
	keep policy.KeepRules
	// exit receives the root's exit status when the tracker spawned it.
	exit    <-chan lineage.ExitStatus
	term    *supervise.Terminal
	started time.Time
	end     End
	rep     Report
}

// Spawn starts s as a new root, in a process group of its own (the
// tracker's own group is protected, so a job sharing it could not be
// reaped). Whatever it forks, however early, is tracked.
func (t *Tracker) Spawn(s Spec) (*Job, error) {
	cmd := exec.Command(s.Path, s.Command[1:]...)
	cmd.Args[0] = s.Command[0]
	if s.Stdin != nil {
		cmd.Stdin = s.Stdin
	}
	if s.Stdout != nil {
		cmd.Stdout = s.Stdout
	}
	if s.Stderr != nil {
		cmd.Stderr = s.Stderr
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var term *supervise.Terminal
	if s.Stdin != nil {
		term = supervise.ForegroundTerminal(int(s.Stdin.Fd()))
	}
	if term != nil {
		cmd.SysProcAttr.Foreground = true
		cmd.SysProcAttr.Ctty = term.FD()
	}
	// Only the kernel can end the lineage if the tracker is killed.
	dieWithUs := s.DieWithSupervisor && t.backend.Name() == loader.BackendBPF
	started := time.Now()
	// A job that exits at once stays a zombie, and so visible, until the
	// backend has registered it.
	release := t.children.Hold()
	root, err := t.backend.Spawn(cmd, loader.RootOptions{DieWithSupervisor: dieWithUs})
	release()
	if err != nil {
		return nil, &StartError{Code: ExitCannotRun, Err: fmt.Errorf("run %s: %w", s.Command[0], err)}
	}
	j := &Job{t: t, root: root, keep: s.Keep, term: term, started: started}
	j.exit = t.children.Wait(int(root.PID))
	j.rep = Report{Command: s.Command, Root: root, Backend: t.choice, Started: started}
	return j, nil
}

// Root is the job's root.
func (j *Job) Root() lineage.Identity { return j.root }

// Close stops tracking the job's lineage. It signals nothing.
func (j *Job) Close() error { return j.t.backend.Forget(j.root) }

// Decide asks the policy what to do with the lineage for in.Event, with
// the job's keep rules, and records the decision for the report.
func (j *Job) Decide(in policy.Input) policy.Decision {
	in.Kept = in.Kept || j.keep.KeepsRoot(j.root)
	d := policy.Decide(in)
	j.t.detail("lineage: %s: %s\n", in.Event, d)
	j.rep.decided(d, in.Reaping)
	return d
}

// ReapOptions tune a reap.
type ReapOptions struct {
	// Linger is how long members may take to exit on their own.
	Linger time.Duration
	// Grace is the time between SIGTERM and SIGKILL.
	Grace time.Duration
}

// Reap carries out d: it reaps the lineage when d says so, sparing what
// the keep rules keep and what is protected, and otherwise only lists the
// live members as left behind, signalling nothing.
func (j *Job) Reap(ctx context.Context, d policy.Decision, opts ReapOptions) {
	t := j.t
	if d.Action != policy.Reap {
		ms, err := t.backend.Members(j.root)
		if err != nil {
			j.rep.Warnings = append(j.rep.Warnings, "list leftovers: "+err.Error())
		}
		j.rep.addLeftovers(ms, t.tree, t.proc)
		return
	}
	src := reap.SourceFunc(func() ([]lineage.Member, error) { return t.backend.Members(j.root) })
	r, err := reap.Reap(ctx, src, reap.Options{
		Linger:  opts.Linger,
		Grace:   opts.Grace,
		Contain: func() (lineage.Containment, error) { return t.backend.Contain(j.root) },
		Keep:    keeper(j.keep, t.tree, t.proc),
		Refuse:  refuser(t.caller, j.root),
	})
	j.rep.Reap = &r
	if err != nil {
		j.rep.Warnings = append(j.rep.Warnings, "reap: "+err.Error())
	}
	if j.exit != nil && !j.end.Exited {
		// The root was reaped with its lineage (deadline, or it would
		// not exit after a forwarded signal).
		select {
		case st := <-j.exit:
			j.rep.setStatus(st)
			j.end.Status, j.end.Exited = st, true
		case <-time.After(time.Second):
		}
	}
}

// Report completes the job's report with what the event record knows and
// the backend's counters. Drain the tracker first, so that the record is
// complete.
func (j *Job) Report() *Report {
	j.rep.fill(j.t.tree)
	if st, err := j.t.backend.Stats(); err == nil {
		j.rep.Stats = st
		j.rep.warnLosses(j.t.choice.Backend)
	}
	return &j.rep
}

// End is how the root ended, as far as the job knows.
func (j *Job) End() End { return j.end }

// keeper turns keep rules into the reaper's Keep: an exe rule matches the
// executable the kernel shows for the process, or else the file its last
// exec named.
func keeper(rules policy.KeepRules, tree *lineage.Tree, procFS proc.FS) func(lineage.Member) (bool, string) {
	if len(rules) == 0 {
		return nil
	}
	return func(m lineage.Member) (bool, string) {
		if known, ok := tree.Get(m.Identity); ok && m.Filename == "" {
			m.Filename = known.Filename
		}
		if exe, err := procFS.Exe(int(m.PID)); err == nil && exe != "" {
			m.Filename = exe
		}
		rule, ok := rules.Spares(m)
		if !ok {
			return false, ""
		}
		return true, "kept by --keep " + rule.String()
	}
}

// refuser is the policy's protected set, asked again at every signal.
func refuser(caller policy.Caller, root lineage.Identity) func(lineage.Member, lineage.Stat) (string, bool) {
	return func(m lineage.Member, st lineage.Stat) (string, bool) {
		return policy.Protect(caller, root, policy.Candidate{Member: m, Stat: st})
	}
}
