package job

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/lineage-dev/lineage/internal/lineage"
	"github.com/lineage-dev/lineage/internal/policy"
	"github.com/lineage-dev/lineage/internal/supervise"
)

// Remote is the host's one tracker, in `lineage serve`, as a `lineage run`
// client reaches it: [RunRemote] registers its job's root there and has
// the daemon end the job's lineage. Its methods are called from one
// goroutine.
type Remote interface {
	// Register makes root a root of the run's session: from then on,
	// every fork of its lineage is tracked.
	Register(ctx context.Context, root lineage.Identity, command []string) error
	// End decides on the lineage as end.Event calls for, reaps or reports
	// it, and forgets the root; a cancelled ctx hurries the reap (what is
	// left is killed without waiting).
	End(ctx context.Context, end RemoteEnd) (*Report, error)
}

// RemoteEnd is how a remote job's lineage is to be ended.
type RemoteEnd struct {
	Root    lineage.Identity
	Event   policy.Event
	Reaping policy.Reaping
	Reap    ReapOptions
}

// Holder is the program that holds a job's root until the daemon has
// registered it (`lineage run`'s hidden held command): started with Args
// then the command's path and argv, it reads one byte from fd 3 and then
// execs the command in place, keeping its pid and start time; at end of
// file it exits without running anything.
type Holder struct {
	Path string
	Args []string
}

// ErrNotRegistered is wrapped when [RunRemote] could not register the
// job's root with the daemon: nothing of the job ran, and it may be run
// again another way.
var ErrNotRegistered = errors.New("the daemon did not register the job")

// RunRemote runs cfg.Spec as [Run] does, with the daemon's tracker in place
// of one of its own: the root is started held, registered, then released,
// so that its first instruction is tracked; lineage stays the root's
// parent (and a child subreaper), waits for it, passes signals on, and
// asks the daemon to end its lineage. cfg.Tracker's Log and Verbose apply;
// the daemon's backend options are its own. cfg.Record is not supported.
func RunRemote(ctx context.Context, cfg Config, holder Holder, remote Remote) (*Report, End, error) {
	path, err := exec.LookPath(cfg.Spec.Command[0])
	if err != nil {
		code := ExitCannotRun
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
			code = ExitNotFound
		}
		return nil, End{}, &StartError{Code: code, Err: err}
	}
	cfg.Spec.Path = path
	t, err := openClientSide(cfg.Tracker)
	if err != nil {
		return nil, End{}, err
	}
	defer t.children.Close()
	sigs := catchSignals()
	defer sigs.stop()
	j, err := t.spawnHeld(ctx, cfg.Spec, holder, remote)
	if err != nil {
		return nil, End{}, err
	}
	end := j.Wait(WaitOptions{Deadline: cfg.Deadline, Signals: sigs.passed, Fatal: sigs.fatal, Grace: cfg.Grace})
	opts := ReapOptions{Linger: cfg.Linger, Grace: cfg.Grace, Timeout: cfg.ReapTimeout}
	if end.Fatal != nil {
		opts.Linger = 0 // lineage is ending: reap at once
	}
	reapCtx, cutShort := sigs.duringReap(ctx)
	rep, err := remote.End(reapCtx, RemoteEnd{Root: j.root, Event: end.Event(), Reaping: cfg.Reaping, Reap: opts})
	sig := cutShort()
	if sig != nil && j.end.Fatal == nil {
		j.fatal(sig)
	}
	failed := err != nil
	if failed {
		if sig == nil {
			t.note("lineage: the daemon could not end the job: %v\n", err)
		}
		rep = &Report{Decision: "unknown: the daemon could not end the job", Reaping: cfg.Reaping.String()}
		rep.Backend.Backend = "unknown"
		rep.Warnings = append(rep.Warnings, "daemon: "+err.Error())
	}
	j.awaitRoot()
	rep = j.remoteReport(rep)
	if failed {
		rep.Incomplete = append(rep.Incomplete, "the daemon could not end the job")
	}
	return rep, j.End(), nil
}

// openClientSide is the part of a tracker that a remote job needs: the
// /proc reader, the protected set, the notes, and the child subreaper that
// reaps the job's root and its orphans. It has no backend: only spawnHeld,
// Wait and fatal may be used on its jobs.
func openClientSide(opts TrackerOptions) (*Tracker, error) {
	t, err := newTrackerBase(opts)
	if err != nil {
		return nil, err
	}
	if err := supervise.BecomeSubreaper(); err != nil {
		return nil, err
	}
	t.children = supervise.WatchChildren()
	return t, nil
}

// spawnHeld starts s held by holder, in a process group of its own,
// registers it with remote, then lets it run. A root that can't be
// registered runs nothing.
func (t *Tracker) spawnHeld(ctx context.Context, s Spec, holder Holder, remote Remote) (*Job, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("hold the job: %w", err)
	}
	defer w.Close()
	args := append(append(append([]string{}, holder.Args...), s.Path), s.Command...)
	cmd := exec.Command(holder.Path, args...)
	if s.Stdin != nil {
		cmd.Stdin = s.Stdin
	}
	if s.Stdout != nil {
		cmd.Stdout = s.Stdout
	}
	if s.Stderr != nil {
		cmd.Stderr = s.Stderr
	}
	cmd.ExtraFiles = []*os.File{r}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: s.Credential}
	var term *supervise.Terminal
	if s.Stdin != nil {
		term = supervise.ForegroundTerminal(int(s.Stdin.Fd()))
	}
	if term != nil {
		cmd.SysProcAttr.Foreground = true
		cmd.SysProcAttr.Ctty = term.FD()
	}
	started := time.Now()
	release := t.children.Hold()
	err = cmd.Start()
	r.Close()
	if err != nil {
		release()
		return nil, &StartError{Code: ExitCannotRun, Err: fmt.Errorf("run %s: %w", s.Command[0], err)}
	}
	exit := t.children.Wait(cmd.Process.Pid)
	root, err := t.proc.Identity(cmd.Process.Pid)
	release()
	if err == nil {
		err = remote.Register(ctx, root, s.Command)
	}
	if err != nil {
		w.Close() // the holder exits, having run nothing
		select {
		case <-exit:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill() // our child, not yet reaped: its pid is its own
			<-exit
		}
		if term != nil {
			_ = term.Restore()
		}
		return nil, fmt.Errorf("%w: %w", ErrNotRegistered, err)
	}
	if _, err := w.Write([]byte{1}); err != nil {
		return nil, fmt.Errorf("release the job: %w", err)
	}
	j := &Job{t: t, root: root, keep: s.Keep, term: term, started: started, exit: exit}
	j.rep = Report{Command: s.Command, Root: root, Started: started}
	return j, nil
}

// awaitRoot waits a little for the exit status of a root that was reaped
// with its lineage (deadline, or it would not exit after a forwarded
// signal).
func (j *Job) awaitRoot() {
	if j.end.Exited {
		return
	}
	select {
	case st := <-j.exit:
		j.rep.SetStatus(st)
		j.end.Status, j.end.Exited = st, true
	case <-time.After(time.Second):
	}
}

// remoteReport is the daemon's report on the lineage, completed with what
// only the client knows: how the root ended, and when.
func (j *Job) remoteReport(rep *Report) *Report {
	rep.Version = ReportVersion
	rep.Command, rep.Root, rep.Started = j.rep.Command, j.root, j.rep.Started
	rep.JobTook, rep.Exit, rep.Deadline = j.rep.JobTook, j.rep.Exit, j.rep.Deadline
	rep.Interrupted, rep.Fatal = j.rep.Interrupted, j.rep.Fatal
	rep.Tracker = TrackerDaemon
	rep.Incomplete = rep.Incompleteness()
	return rep
}
