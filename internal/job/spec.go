package job

import (
	"os"
	"syscall"
	"time"

	"github.com/lineage-dev/lineage/policy"
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

// GuardianSpec asks for a guardian: a process that reaps the job's lineage if
// the tracker's process is killed where the kernel would not (see package
// guardian). The zero value asks for none.
type GuardianSpec struct {
	// Path and Args start it: lineage's own executable and its hidden
	// guardian command.
	Path string
	Args []string
	// Stderr receives what it says when it acts; nil means /dev/null.
	Stderr *os.File
	// Always starts one even where the kernel would end the lineage itself
	// (tests use it to behave as an older kernel does).
	Always bool
	// Reaping and Grace are the kill switch and the grace it reaps with.
	Reaping policy.Reaping
	Grace   time.Duration
}

// ReapOptions tune a reap.
type ReapOptions struct {
	// Linger is how long members may take to exit on their own.
	Linger time.Duration
	// Grace is the time between SIGTERM and SIGKILL.
	Grace time.Duration
	// Timeout bounds the whole reap (zero: the reaper's default); past it,
	// the members not yet gone are reported as survivors.
	Timeout time.Duration
}

// Config is a job as `lineage run` runs it, whoever's tracker tracks it.
type Config struct {
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
	// Notes say where the job's notes for people go.
	Notes Notes
}

// ReapOptions are the reap options cfg asks for once the wait ended so: a
// fatal signal reaps at once, without the linger.
func (c Config) ReapOptions(end End) ReapOptions {
	opts := ReapOptions{Linger: c.Linger, Grace: c.Grace, Timeout: c.ReapTimeout}
	if end.Fatal != nil {
		opts.Linger = 0 // lineage is ending: reap at once
	}
	return opts
}
