package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/lineage-dev/lineage/internal/guardian"
	"github.com/lineage-dev/lineage/internal/lineage"
	"github.com/lineage-dev/lineage/internal/loader"
	"github.com/lineage-dev/lineage/internal/policy"
	"github.com/lineage-dev/lineage/internal/proc"
	"github.com/lineage-dev/lineage/internal/reap"
	"github.com/lineage-dev/lineage/internal/supervise"
)

// runOptions are the flags and arguments of `lineage run`.
type runOptions struct {
	s streams

	Backend     string
	Deadline    time.Duration
	Linger      time.Duration
	Grace       time.Duration
	ReportFile  string
	Keep        []string
	Reaping     string
	KeepOnAbort bool
	HardCancel  string
	MaxMembers  uint32
	Interval    string
	Verbose     bool
	Quiet       bool

	Command []string

	// Parsed from the above by newCmdRun before runF runs.
	backend  string
	keep     policy.KeepRules
	reaping  policy.Reaping
	interval time.Duration
}

func newCmdRun(s streams, runF func(*runOptions) error) *cobra.Command {
	opts := &runOptions{s: s}
	cmd := &cobra.Command{
		Use:   "run [flags] -- COMMAND [ARGS...]",
		Short: "Run a command and end everything it started when it is done",
		Long: `Run COMMAND as the root of a new lineage. Every process it starts is tracked,
however it leaves: background jobs, nohup, setsid, double-forked daemons,
processes that change their process group, session or parent.

When COMMAND exits (or --deadline passes, which kills COMMAND too), lineage
waits up to --linger for what is left to exit by itself, then sends SIGTERM,
waits up to --grace, and sends SIGKILL to the rest, until the lineage is
empty. Each process is signalled by identity (pid and start time, through a
pidfd), never by bare pid, name or process group. Then a report on stderr says
what was left behind and what happened to each; --report writes it as JSON.

SIGINT, SIGTERM, SIGHUP and SIGQUIT sent to lineage are passed on to COMMAND;
once COMMAND has exited, the lineage is reaped as usual.

The BPF backend (root, or CAP_BPF and CAP_PERFMON, on a kernel with BTF)
tracks forks in the kernel: nothing escapes. The proc backend polls /proc
instead; see 'lineage doctor' for what this machine allows.

Exit status: COMMAND's own; 128+N when signal N killed it; 124 when the
deadline passed; 125 when lineage itself failed; 126 when COMMAND could not
be run; 127 when it was not found.`,
		Example: `  lineage run -- ./ci.sh
  lineage run --deadline 30m --report leaks.json -- make test
  lineage run --keep exe:/usr/bin/redis-server -- ./start-services.sh
  LINEAGE_REAPING=off lineage run -- ./job.sh   # report leftovers, kill nothing`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return errors.New("run: no command given: lineage run [flags] -- COMMAND [ARGS...]")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Command = args
			if err := opts.parse(cmd, os.Getenv); err != nil {
				return err
			}
			if runF != nil {
				return runF(opts)
			}
			return runRun(cmd.Context(), opts)
		},
	}
	f := cmd.Flags()
	f.SetInterspersed(false)
	f.StringVar(&opts.Backend, "backend", loader.BackendAuto, "where fork/exit knowledge comes from: auto, bpf or proc")
	f.DurationVar(&opts.Deadline, "deadline", 0, "kill the command and its lineage after this long (0: no deadline)")
	f.DurationVar(&opts.Linger, "linger", 0, "after the command exits, wait this long for its leftovers to exit by themselves")
	f.DurationVar(&opts.Grace, "grace", reap.DefaultGrace, "time between SIGTERM and SIGKILL")
	f.StringVar(&opts.ReportFile, "report", "", "also write the report as JSON to `FILE`")
	f.StringArrayVar(&opts.Keep, "keep", nil, "spare processes on purpose: `RULE` is exe:/abs/path, PID@START or root:PID@START (repeatable)")
	f.StringVar(&opts.Reaping, "reaping", "", "on or off; off reports leftovers and kills nothing (LINEAGE_REAPING in the environment wins)")
	f.BoolVar(&opts.KeepOnAbort, "keep-on-abort", false, "if lineage itself is killed (SIGKILL), leave the lineage running for inspection instead of killing it in the kernel")
	f.StringVar(&opts.HardCancel, "hard-cancel", hardCancelAuto, "who reaps the lineage if lineage is killed: auto (the kernel where it can, else a guardian) or guardian")
	_ = f.MarkHidden("hard-cancel")
	f.Uint32Var(&opts.MaxMembers, "max-members", loader.DefaultMaxMembers, "bpf backend: how many processes can be tracked at once")
	f.StringVar(&opts.Interval, "interval", "", "proc backend: time between two /proc scans (default: adapts to the machine)")
	f.BoolVarP(&opts.Verbose, "verbose", "v", false, "say which backend is used and why, and report every member")
	f.BoolVarP(&opts.Quiet, "quiet", "q", false, "print nothing when nothing was left behind")
	return cmd
}

// parse checks every flag before anything is started or changed.
func (o *runOptions) parse(cmd *cobra.Command, getenv func(string) string) error {
	var err error
	if o.backend, err = loader.ParseBackend(o.Backend); err != nil {
		return fmt.Errorf("--backend: %w", err)
	}
	if o.Deadline < 0 {
		return fmt.Errorf("--deadline %v: must not be negative", o.Deadline)
	}
	if o.HardCancel != hardCancelAuto && o.HardCancel != hardCancelGuardian {
		return fmt.Errorf("--hard-cancel %q: want auto or guardian", o.HardCancel)
	}
	if o.Linger < 0 {
		return fmt.Errorf("--linger %v: must not be negative", o.Linger)
	}
	if o.Grace <= 0 {
		return fmt.Errorf("--grace %v: must be positive", o.Grace)
	}
	if err := loader.ValidateMaxMembers(o.MaxMembers); err != nil {
		return fmt.Errorf("--max-members: %w", err)
	}
	if cmd.Flags().Changed("interval") {
		if o.interval, err = loader.ParseInterval(o.Interval); err != nil {
			return fmt.Errorf("--interval: %w", err)
		}
	}
	if o.keep, err = policy.ParseKeeps(o.Keep); err != nil {
		return fmt.Errorf("--keep: %w", err)
	}
	flagSwitch := policy.ReapingUnset
	if cmd.Flags().Changed("reaping") {
		if flagSwitch, err = policy.ParseKillSwitch(o.Reaping); err != nil || flagSwitch == policy.ReapingUnset {
			return fmt.Errorf("--reaping %q: want on or off", o.Reaping)
		}
	}
	env, err := policy.KillSwitchFromEnv(getenv)
	if err != nil {
		return err
	}
	o.reaping = policy.ResolveReaping(env, policy.Setting{Source: "--reaping", Switch: flagSwitch})
	return nil
}

// jobEnd is how the job's root ended, and why lineage stopped waiting.
type jobEnd struct {
	status      lineage.ExitStatus
	exited      bool // the root exited (status is valid)
	deadline    bool // the deadline passed first
	interrupted os.Signal
}

func runRun(ctx context.Context, o *runOptions) error {
	if ctx == nil {
		ctx = context.Background()
	}
	path, err := exec.LookPath(o.Command[0])
	if err != nil {
		fmt.Fprintf(o.s.err, "lineage: %v\n", err)
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
			return exitError{exitNotFound}
		}
		return exitError{exitCannotRun}
	}
	procFS, err := proc.Open("/proc")
	if err != nil {
		return err
	}
	caller, err := callerFacts(procFS)
	if err != nil {
		return err
	}

	// Orphans of the job come back to lineage rather than to init, and
	// lineage reaps them: with the proc backend this is what keeps a
	// double-forked daemon findable.
	if err := supervise.BecomeSubreaper(); err != nil {
		return err
	}
	children := supervise.WatchChildren()
	defer children.Close()

	backend, choice, err := loader.Open(o.backend, loader.Options{
		BPF:  &loader.BPFOptions{MaxMembers: o.MaxMembers},
		Proc: &loader.ProcOptions{Interval: o.interval, NoSubreaper: true},
	})
	if err != nil {
		return err
	}
	defer backend.Close()
	if o.Verbose {
		fmt.Fprintf(o.s.err, "lineage: backend %s\n", choice)
	}

	tree := lineage.NewTree()
	runCtx, stopEvents := context.WithCancel(context.Background())
	eventsDone := make(chan error, 1)
	var toGuardian atomic.Pointer[guardian.Guardian]
	go func() {
		eventsDone <- backend.Run(runCtx, func(ev lineage.Event) { tree.Apply(ev); streamForks(&toGuardian, ev) })
	}()
	stopRecording := func() {
		stopEvents()
		if err := <-eventsDone; err != nil {
			fmt.Fprintf(o.s.err, "lineage: events: %v\n", err)
		}
	}

	cmd := exec.Command(path, o.Command[1:]...)
	cmd.Args[0] = o.Command[0]
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	// The job gets a process group of its own: lineage's own group is
	// protected, and a job sharing it could not be reaped.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	term := supervise.ForegroundTerminal(int(os.Stdin.Fd()))
	if term != nil {
		cmd.SysProcAttr.Foreground = true
		cmd.SysProcAttr.Ctty = term.FD()
	}

	// Signals for the job are caught before it starts, so none is lost.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT)
	defer signal.Stop(sigs)

	// If lineage itself is killed, the kernel ends the lineage where it
	// can; a guardian does elsewhere.
	dieWithUs := !o.KeepOnAbort && backend.Name() == loader.BackendBPF && o.HardCancel != hardCancelGuardian
	g := startGuardian(o, backend, caller, true)
	defer func() {
		if g != nil {
			_ = g.Done()
		}
	}()
	started := time.Now()
	// A job that exits at once stays a zombie, and so visible, until the
	// backend has registered it.
	release := children.Hold()
	root, err := backend.Spawn(cmd, loader.RootOptions{DieWithSupervisor: dieWithUs})
	release()
	if err != nil {
		stopRecording()
		fmt.Fprintf(o.s.err, "lineage: run %s: %v\n", o.Command[0], err)
		return exitError{exitCannotRun}
	}
	defer backend.Forget(root)
	if g == nil {
		g = startGuardian(o, backend, caller, false)
	}
	guardJob(g, root, tree, &toGuardian)
	rootExit := children.Wait(int(root.PID))

	end := waitJob(o, procFS, root, rootExit, sigs)
	if term != nil {
		_ = term.Restore()
	}
	jobTook := time.Since(started)

	event := policy.RootExit
	if end.deadline {
		event = policy.Deadline
	}
	decision := policy.Decide(policy.Input{Event: event, Reaping: o.reaping, Kept: o.keep.KeepsRoot(root)})
	if o.Verbose {
		fmt.Fprintf(o.s.err, "lineage: %s: %s\n", event, decision)
	}

	rep := &jobReport{
		Command:  o.Command,
		Root:     root,
		Backend:  choice,
		Started:  started,
		JobTook:  jobTook,
		Deadline: end.deadline,
		Decision: decision.String(),
		Reaping:  o.reaping.String(),
	}
	if end.exited {
		rep.setStatus(end.status)
	}
	if end.interrupted != nil {
		rep.Interrupted = end.interrupted.String()
	}

	src := reap.SourceFunc(func() ([]lineage.Member, error) { return backend.Members(root) })
	switch decision.Action {
	case policy.Reap:
		r, err := reap.Reap(ctx, src, reap.Options{
			Linger:  o.Linger,
			Grace:   o.Grace,
			Contain: func() (lineage.Containment, error) { return backend.Contain(root) },
			Keep:    keeper(o.keep, tree, procFS),
			Refuse:  refuser(caller, root),
		})
		rep.Reap = &r
		if err != nil {
			rep.Warnings = append(rep.Warnings, "reap: "+err.Error())
		}
		if !end.exited {
			// The root was reaped with its lineage (deadline, or it
			// would not exit after a forwarded signal).
			select {
			case st := <-rootExit:
				rep.setStatus(st)
				end.status, end.exited = st, true
			case <-time.After(time.Second):
			}
		}
	default:
		ms, err := backend.Members(root)
		if err != nil {
			rep.Warnings = append(rep.Warnings, "list leftovers: "+err.Error())
		}
		rep.addLeftovers(ms, tree, procFS)
	}

	stopRecording()
	rep.fill(tree)
	if st, err := backend.Stats(); err == nil {
		rep.Stats = st
		rep.warnLosses(choice.Backend)
	}
	if err := rep.write(o); err != nil {
		fmt.Fprintf(o.s.err, "lineage: %v\n", err)
	}
	return exitError{rep.exitCode(end)}
}

// waitJob waits for the root to exit, passing on signals sent to lineage,
// and enforces the deadline by returning early.
func waitJob(o *runOptions, procFS proc.FS, root lineage.Identity, rootExit <-chan lineage.ExitStatus, sigs <-chan os.Signal) jobEnd {
	var deadline <-chan time.Time
	if o.Deadline > 0 {
		timer := time.NewTimer(o.Deadline)
		defer timer.Stop()
		deadline = timer.C
	}
	var end jobEnd
	var forwardedGrace <-chan time.Time
	for {
		select {
		case st := <-rootExit:
			end.status, end.exited = st, true
			return end
		case <-deadline:
			fmt.Fprintf(o.s.err, "lineage: deadline of %v passed: ending the job\n", o.Deadline)
			end.deadline = true
			return end
		case sig := <-sigs:
			if end.interrupted != nil {
				// A second signal: stop waiting, reap now.
				return end
			}
			end.interrupted = sig
			if err := reap.Signal(procFS, root, sig.(syscall.Signal)); err != nil && o.Verbose {
				fmt.Fprintf(o.s.err, "lineage: pass %v to the job: %v\n", sig, err)
			}
			// Give the job the grace to exit on its own.
			forwardedGrace = time.After(o.Grace)
		case <-forwardedGrace:
			return end
		}
	}
}

// callerFacts gathers what the protected set needs to know of lineage itself.
func callerFacts(procFS proc.FS) (policy.Caller, error) {
	c := policy.Caller{PID: os.Getpid(), PGID: syscall.Getpgrp()}
	if c.PGID <= 0 {
		// Our process group lives outside our PID namespace: no process
		// we can see is in it. Protect the group we would lead instead.
		c.PGID = c.PID
	}
	for pid := os.Getppid(); pid > 1; {
		c.Ancestors = append(c.Ancestors, pid)
		st, err := procFS.Stat(pid)
		if err != nil {
			break
		}
		if st.PPID == pid {
			break
		}
		pid = st.PPID
	}
	if err := c.Validate(); err != nil {
		return c, fmt.Errorf("protected set: %w", err)
	}
	return c, nil
}

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

// shellQuote renders argv for a human, quoting what needs it.
func shellQuote(argv []string) string {
	out := make([]string, len(argv))
	for i, a := range argv {
		if a != "" && !strings.ContainsAny(a, " \t\n'\"\\$`;&|<>()*?[]{}!#~") {
			out[i] = a
			continue
		}
		out[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return strings.Join(out, " ")
}
