package tracker

import (
	"fmt"
	"time"

	"github.com/lineage-dev/lineage/internal/job"
	"github.com/lineage-dev/lineage/internal/loader"
	"github.com/lineage-dev/lineage/lineage"
)

// Spawn starts s as a new root, in a process group of its own (the
// tracker's own group is protected, so a job sharing it could not be
// reaped). Whatever it forks, however early, is tracked.
func (t *Tracker) Spawn(s job.Spec) (*Job, error) {
	cmd, term := job.Command(s, s.Path, s.Command[1:])
	cmd.Args[0] = s.Command[0]
	// The kernel ends the lineage if the tracker is killed where it can;
	// a guardian does elsewhere.
	dieWithUs := s.DieWithSupervisor && !s.Guardian.Always && t.backend.Name() == loader.BackendBPF
	g := t.startGuardian(s, true)
	started := time.Now()
	// A job that exits at once stays a zombie, and so visible, until the
	// backend has registered it.
	release := t.children.Hold()
	// The kernel keeps what the exe rules keep from the root's first exec.
	exes := newExeKeeps(s.Keep, t.proc.ExeFile)
	root, err := t.backend.Spawn(cmd, loader.RootOptions{DieWithSupervisor: dieWithUs, KeepExes: exes.files()})
	release()
	if err != nil {
		if g != nil {
			_ = g.Done()
		}
		return nil, &job.StartError{Code: lineage.ExitCannotRun, Err: fmt.Errorf("run %s: %w", s.Command[0], err)}
	}
	if g == nil {
		g = t.startGuardian(s, false)
	}
	t.guard(g, root)
	j := &Job{t: t, root: root, keep: s.Keep, started: started, exes: exes}
	notes := job.Notes{Log: t.log, Verbose: t.verbose}
	j.child = job.NewRoot(root, s.Command, started, t.children.Wait(int(root.PID)), term, notes)
	t.jobs.Store(root, j)
	j.markSpared(j.tally(), refuser(t.caller, root, t.proc))
	j.rep = job.Report{Command: s.Command, Root: root, Backend: t.choice, Started: started}
	return j, nil
}
