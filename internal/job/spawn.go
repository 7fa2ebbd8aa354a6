package job

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/lineage-dev/lineage/internal/loader"
	"github.com/lineage-dev/lineage/internal/policy"
	"github.com/lineage-dev/lineage/internal/supervise"
)

// Spec is a command to start as the root of a job.
type Spec struct {
	// Command is the argv as given; Path is the program that Command[0]
	// names, as exec.LookPath finds it.
	Command []string
	Path    string
	// Stdin, Stdout and Stderr are the job's; nil means the null device.
	// A Stdin that is the terminal makes the job its foreground.
	Stdin, Stdout, Stderr *os.File
	// Keep spares processes on purpose; a rule that keeps the root turns
	// a reap into a report.
	Keep policy.KeepRules
	// DieWithSupervisor asks that the lineage be killed if the tracker's
	// process dies before reaping it: by the kernel where it can, else by
	// the guardian Guardian asks for.
	DieWithSupervisor bool
	Guardian          GuardianSpec
	// Credential, if set, runs the command as another user and groups
	// (which takes privileges); the tracker keeps its own.
	Credential *syscall.Credential
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
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: s.Credential}
	var term *supervise.Terminal
	if s.Stdin != nil {
		term = supervise.ForegroundTerminal(int(s.Stdin.Fd()))
	}
	if term != nil {
		cmd.SysProcAttr.Foreground = true
		cmd.SysProcAttr.Ctty = term.FD()
	}
	// The kernel ends the lineage if the tracker is killed where it can;
	// a guardian does elsewhere.
	dieWithUs := s.DieWithSupervisor && !s.Guardian.Always && t.backend.Name() == loader.BackendBPF
	g := t.startGuardian(s, true)
	started := time.Now()
	// A job that exits at once stays a zombie, and so visible, until the
	// backend has registered it.
	release := t.children.Hold()
	root, err := t.backend.Spawn(cmd, loader.RootOptions{DieWithSupervisor: dieWithUs})
	release()
	if err != nil {
		if g != nil {
			_ = g.Done()
		}
		return nil, &StartError{Code: ExitCannotRun, Err: fmt.Errorf("run %s: %w", s.Command[0], err)}
	}
	if g == nil {
		g = t.startGuardian(s, false)
	}
	t.guard(g, root)
	j := &Job{t: t, root: root, keep: s.Keep, term: term, started: started}
	j.exit = t.children.Wait(int(root.PID))
	t.jobs.Store(root, j)
	j.markSpared(j.keeper(), refuser(t.caller, root, t.proc))
	j.rep = Report{Command: s.Command, Root: root, Backend: t.choice, Started: started}
	return j, nil
}
