package job

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/lineage-dev/lineage/internal/proc"
	"github.com/lineage-dev/lineage/internal/supervise"
	"github.com/lineage-dev/lineage/lineage"
	"github.com/lineage-dev/lineage/policy"
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

// RunRemote runs cfg.Spec as [job.Run] does, with the daemon's tracker in
// place of one of its own: the root is started held, registered, then
// released, so that its first instruction is tracked; lineage stays the
// root's parent (and a child subreaper), waits for it, passes signals on,
// and asks the daemon to end its lineage. It links no backend: the lean
// front binary runs it. It makes the calling process a child subreaper
// that waits for all its children while it runs.
func RunRemote(ctx context.Context, cfg Config, holder Holder, remote Remote) (*Report, End, error) {
	path, err := LookPath(cfg.Spec.Command[0])
	if err != nil {
		return nil, End{}, err
	}
	cfg.Spec.Path = path
	if err := supervise.BecomeSubreaper(); err != nil {
		return nil, End{}, err
	}
	children := supervise.WatchChildren()
	defer children.Close()
	sigs := CatchSignals()
	defer sigs.Stop()
	root, err := spawnHeld(ctx, cfg, children, holder, remote)
	if err != nil {
		return nil, End{}, err
	}
	end := root.Wait(sigs.WaitOptions(cfg.Deadline, cfg.Grace))
	reapCtx, cutShort := sigs.DuringReap(ctx)
	rep, err := remote.End(reapCtx, RemoteEnd{Root: root.ID(), Event: end.Event(), Reaping: cfg.Reaping, Reap: cfg.ReapOptions(end)})
	sig := cutShort()
	root.Fatal(sig)
	failed := err != nil
	if failed {
		if sig == nil {
			cfg.Notes.Note("lineage: the daemon could not end the job: %v\n", err)
		}
		rep = &Report{Decision: "unknown: the daemon could not end the job", Reaping: cfg.Reaping.String()}
		rep.Backend.Backend = "unknown"
		rep.Warnings = append(rep.Warnings, "daemon: "+err.Error())
	}
	root.AwaitExit(time.Second)
	// The daemon's report on the lineage, completed with what only the
	// client knows: how the root ended, and when.
	rep.Version = ReportVersion
	root.Fill(rep)
	rep.Tracker = TrackerDaemon
	rep.Incomplete = rep.Incompleteness()
	if failed {
		rep.Incomplete = append(rep.Incomplete, "the daemon could not end the job")
	}
	return rep, root.End(), nil
}

// spawnHeld starts cfg.Spec held by holder, in a process group of its own,
// registers it with remote, then lets it run. A root that can't be
// registered runs nothing.
func spawnHeld(ctx context.Context, cfg Config, children *supervise.Children, holder Holder, remote Remote) (*Root, error) {
	s := cfg.Spec
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("hold the job: %w", err)
	}
	defer w.Close()
	args := append(append(append([]string{}, holder.Args...), s.Path), s.Command...)
	cmd, term := Command(s, holder.Path, args)
	cmd.ExtraFiles = []*os.File{r}
	started := time.Now()
	release := children.Hold()
	err = cmd.Start()
	r.Close()
	if err != nil {
		release()
		return nil, &StartError{Code: lineage.ExitCannotRun, Err: fmt.Errorf("run %s: %w", s.Command[0], err)}
	}
	exit := children.Wait(cmd.Process.Pid)
	st, err := proc.ReadStat("/proc", cmd.Process.Pid)
	release()
	if err == nil {
		err = remote.Register(ctx, st.Identity, s.Command)
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
	return NewRoot(st.Identity, s.Command, started, exit, term, cfg.Notes), nil
}
