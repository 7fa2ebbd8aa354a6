package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"time"

	"github.com/spf13/cobra"

	"github.com/lineage-dev/lineage/internal/job"
	"github.com/lineage-dev/lineage/internal/loader"
	"github.com/lineage-dev/lineage/internal/proc"
	"github.com/lineage-dev/lineage/internal/reap"
	"github.com/lineage-dev/lineage/internal/userfile"
	"github.com/lineage-dev/lineage/lineage"
	"github.com/lineage-dev/lineage/policy"
)

// runOptions are the flags and arguments of `lineage run`.
type runOptions struct {
	s Streams
	// standalone runs the job with a tracker of lineage's own.
	standalone Standalone

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
	RingBytes   RingBytes
	OnFull      string
	Interval    string
	Verbose     bool
	Quiet       bool
	Standalone  bool
	// Handed is set on a run the front handed to lineage-tracker, having
	// chosen a tracker of lineage's own and said why (HandedArgs).
	Handed bool

	Command []string

	// safety are issue 9's flags (runflags.go).
	safety safetyFlags
	// record: --record and --redact (runrecord.go).
	record recordFlags

	// Parsed from the above by newCmdRun before runF runs.
	backend  string
	keep     policy.KeepRules
	reaping  policy.Reaping
	interval time.Duration
	// daemonWide names a flag given that only a tracker of lineage's own
	// honours (runvia.go), or is "".
	daemonWide string
}

// runLong is `lineage run --help`'s text.
const runLong = `Run COMMAND as the root of a new lineage. Every process it starts is tracked,
however it leaves: background jobs, nohup, setsid, double-forked daemons,
processes that change their process group, session or parent.

When COMMAND exits (or --deadline passes, which kills COMMAND too), lineage
waits up to --linger for what is left to exit by itself, then sends SIGTERM,
waits up to --grace, and sends SIGKILL to the rest, until the lineage is
empty. Each process is signalled by identity (pid and start time, through a
pidfd), never by bare pid, name or process group. Then a report on stderr says
what was left behind and what happened to each; --report writes it as JSON.

SIGINT, SIGTERM, SIGHUP and SIGQUIT sent to lineage are passed on to
COMMAND's process group, as Ctrl-C is (Linux 6.9+; COMMAND alone before);
once COMMAND has exited, or --grace has passed without its exit, the lineage
is reaped as usual. Any other signal
that would end lineage (SIGUSR1, SIGUSR2, SIGALRM, SIGVTALRM, SIGPROF,
SIGXCPU, SIGXFSZ, SIGPWR, SIGSTKFLT, SIGIO) reaps the lineage at once and makes
lineage exit 128+N. SIGPIPE is ignored. A reap gives up after --reap-timeout
and reports what survived.

--report FILE is written through its directory as opened before COMMAND
starts, replacing FILE atomically (never following a symlink), owned by the
invoking user (SUDO_UID/SUDO_GID when set) with mode 0644. A FILE that is
--record's too is refused before anything runs.

The BPF backend (root, or CAP_BPF and CAP_PERFMON, on a kernel with BTF)
tracks forks in the kernel: nothing escapes. The proc backend polls /proc
instead; see 'lineage doctor' for what this machine allows.

When 'lineage serve' answers on $LINEAGE_SOCKET (default
/run/lineage/lineage.sock), the job runs under the daemon's tracker instead
of one of lineage's own; it behaves the same, and the daemon reaps it if
lineage is killed. A root lineage uses only a daemon that runs as root.
--standalone, --backend proc, --max-members, --ring-bytes, --on-full,
--interval, --record and --user load lineage's own tracker; -v says which is
used and why.

Exit status: COMMAND's own; 128+N when signal N killed it (or killed
lineage, for signals not passed on); 123 with --strict when COMMAND exited 0
but tracking or reaping was incomplete; 124 when the deadline passed; 125
when lineage itself failed (--user without root, or CAP_SETUID and
CAP_SETGID, included, and --user naming another user under a setcap
install); 126 when COMMAND could not be run; 127 when it was not found.`

// Standalone runs a job with a tracker of lineage's own, as j says: the
// tracker binary's runs it in-process, the front's hands the command line
// to lineage-tracker (execve: same argv, same pid) and returns only if that
// fails. Nothing of the job has run when it is called.
type Standalone func(ctx context.Context, j StandaloneJob) (*job.Report, job.End, error)

// StandaloneJob is a job as `lineage run`'s flags describe it, for a
// tracker of lineage's own.
type StandaloneJob struct {
	Job job.Config
	// Backend is "auto", "bpf" or "proc"; MaxMembers, RingBytes, OnFull
	// and Interval tune it (Interval 0: adaptive).
	Backend    string
	MaxMembers uint32
	RingBytes  uint32
	OnFull     loader.OnFull
	Interval   time.Duration
	// HardCancelGuardian answers a hard cancel with a guardian always,
	// never the kernel alone.
	HardCancelGuardian bool
	// RecordFile, when set, receives the forensic record, argv words
	// matching Redact masked.
	RecordFile string
	Redact     *regexp.Regexp
	// Log is where notes go; Verbose asks for the -v ones.
	Log     io.Writer
	Verbose bool
}

// NewCmdRun returns `lineage run`, which runs a job through the daemon
// when one may be used, and else with standalone. runF, when set, is run
// instead once the flags are parsed (tests).
func NewCmdRun(s Streams, standalone Standalone, runF func(*runOptions) error) *cobra.Command {
	opts := &runOptions{s: s, standalone: standalone}
	cmd := &cobra.Command{
		Use:   "run [flags] -- COMMAND [ARGS...]",
		Short: RunShort,
		Long:  runLong,
		Example: `  lineage run -- ./ci.sh
  lineage run --deadline 30m --report leaks.json -- make test
  lineage run --record trace.jsonl --redact 'token=\S+' -- make -j8 test
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
	f.StringArrayVar(&opts.Keep, "keep", nil, "spare processes on purpose: `RULE` is exe:/abs/path (as named or resolved), PID@START or root:PID@START (repeatable)")
	f.StringVar(&opts.Reaping, "reaping", "", "on or off (also 1/0, true/false, yes/no, enabled/disabled, any case); off reports leftovers and kills nothing (LINEAGE_REAPING in the environment wins)")
	f.BoolVar(&opts.KeepOnAbort, "keep-on-abort", false, "if lineage itself is killed (SIGKILL), leave the lineage running for inspection instead of killing it in the kernel")
	f.StringVar(&opts.HardCancel, "hard-cancel", hardCancelAuto, "who reaps the lineage if lineage is killed: auto (the kernel where it can, else a guardian) or guardian")
	_ = f.MarkHidden("hard-cancel")
	f.Uint32Var(&opts.MaxMembers, "max-members", loader.DefaultMaxMembers, "bpf backend: how many processes can be tracked at once (capped at pid_max)")
	AddRingBytes(f, &opts.RingBytes, fmt.Sprintf("default %s, %s with --record", loader.FormatBytes(loader.DefaultRingBytes), loader.FormatBytes(loader.RecordRingBytes)))
	f.StringVar(&opts.OnFull, "on-full", string(loader.OnFullKill), "bpf backend: a process the full membership map can't track is killed (kill) or let go (escape); either way, counted and reported")
	f.StringVar(&opts.Interval, "interval", "", "proc backend: time between two /proc scans (default: adapts to the machine)")
	f.BoolVarP(&opts.Verbose, "verbose", "v", false, "say which backend is used and why, and report every member")
	f.BoolVarP(&opts.Quiet, "quiet", "q", false, "print nothing when nothing was left behind")
	f.BoolVar(&opts.Standalone, "standalone", false, "load a tracker of lineage's own even when a daemon ('lineage serve') is reachable")
	f.BoolVar(&opts.Handed, handedFlag, false, "the front chose a tracker of lineage's own for this run, and said why (internal)")
	_ = f.MarkHidden(handedFlag)
	opts.safety.add(f)
	opts.record.add(f)
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
	if _, err := loader.ParseOnFull(o.OnFull); err != nil {
		return fmt.Errorf("--on-full: %w", err)
	}
	if err := o.safety.parse(&o.MaxMembers, "/proc"); err != nil {
		return err
	}
	if cmd.Flags().Changed("interval") {
		if o.interval, err = loader.ParseInterval(o.Interval); err != nil {
			return fmt.Errorf("--interval: %w", err)
		}
	}
	if o.keep, err = policy.ParseKeeps(o.Keep); err != nil {
		return fmt.Errorf("--keep: %w", err)
	}
	// exe rules name their program as resolved, once, now: a path that
	// names no executable file is refused.
	procFS, err := proc.Open("/proc")
	if err != nil {
		return err
	}
	if o.keep, err = o.keep.ResolveExe(procFS.ExeFile); err != nil {
		return fmt.Errorf("--keep: %w", err)
	}
	flagSwitch := policy.ReapingUnset
	if cmd.Flags().Changed("reaping") {
		if flagSwitch, err = policy.ParseKillSwitch(o.Reaping); err != nil || flagSwitch == policy.ReapingUnset {
			return fmt.Errorf("--reaping %q: want on or off (or 1, true, yes, enabled; 0, false, no, disabled)", o.Reaping)
		}
	}
	env, err := policy.KillSwitchFromEnv(getenv)
	if err != nil {
		return err
	}
	o.reaping = policy.ResolveReaping(env, policy.Setting{Source: "--reaping", Switch: flagSwitch})
	o.daemonWide = o.daemonWideFlag(cmd)
	if err := o.record.parse(); err != nil {
		return err
	}
	// The report replaces its file once the job is done: over the record,
	// it would destroy it.
	if o.ReportFile != "" && o.record.File != "" && userfile.Same(o.ReportFile, o.record.File) {
		return fmt.Errorf("%w flags: --record %s and --report %s name the same file: the report would replace the record", lineage.ErrInvalid, o.record.File, o.ReportFile)
	}
	return nil
}

// runRun runs the job, through the daemon's tracker when one is reachable
// and may be used (runvia.go), else with a tracker of its own, prints its
// report and returns the exit status that the command's help documents.
func runRun(ctx context.Context, o *runOptions) error {
	if ctx == nil {
		ctx = context.Background()
	}
	var reportFile *job.ReportFile
	if o.ReportFile != "" {
		// Pinned before the job starts: the job can't redirect it.
		var err error
		if reportFile, err = job.OpenReportFile(o.ReportFile, os.Getenv); err != nil {
			return fmt.Errorf("--report: %w", err)
		}
		defer reportFile.Close()
	}
	rep, end, err := o.runJob(ctx)
	var start *job.StartError
	if errors.As(err, &start) {
		if refused := o.safety.userRefused(start, loader.ProbeHost); refused != nil {
			return refused // lineage's own failure: exit 125
		}
		fmt.Fprintf(o.s.Err, "lineage: %v\n", err)
		return ExitError{Code: start.Code}
	}
	if err != nil {
		return err
	}
	if err := o.writeReport(rep, reportFile); err != nil {
		fmt.Fprintf(o.s.Err, "lineage: %v\n", err)
	}
	return ExitError{Code: o.safety.exitCode(rep, end)}
}

// jobConfig is the job as the flags describe it, whoever's tracker
// tracks it.
func (o *runOptions) jobConfig() job.Config {
	return job.Config{
		Spec: job.Spec{
			Command:           o.Command,
			Stdin:             os.Stdin,
			Stdout:            os.Stdout,
			Stderr:            os.Stderr,
			Keep:              o.keep,
			DieWithSupervisor: o.dieWithUs(),
			Credential:        o.safety.credential,
		},
		ReapTimeout: o.safety.ReapTimeout,
		Deadline:    o.Deadline,
		Linger:      o.Linger,
		Grace:       o.Grace,
		Reaping:     o.reaping,
		Notes:       job.Notes{Log: o.s.Err, Verbose: o.Verbose},
	}
}

// standaloneJob is the job as the flags describe it, for a tracker of
// lineage's own.
func (o *runOptions) standaloneJob() StandaloneJob {
	onFull, _ := loader.ParseOnFull(o.OnFull) // checked by parse
	return StandaloneJob{
		Job:     o.jobConfig(),
		Backend: o.backend, MaxMembers: o.MaxMembers, RingBytes: o.ringBytes(), OnFull: onFull, Interval: o.interval,
		HardCancelGuardian: o.HardCancel == hardCancelGuardian,
		RecordFile:         o.record.File, Redact: o.record.redact,
		Log: o.s.Err, Verbose: o.Verbose,
	}
}

// ringBytes is the event ring buffer's size: --ring-bytes, else the
// default for a job with a record or without.
func (o *runOptions) ringBytes() uint32 {
	if o.record.File != "" {
		return o.RingBytes.Or(loader.RecordRingBytes)
	}
	return o.RingBytes.Or(loader.DefaultRingBytes)
}

// dieWithUs says whether a hard cancel of lineage reaps the job: unless
// --keep-on-abort, or the kill switch is off (it covers a hard cancel too).
func (o *runOptions) dieWithUs() bool { return !o.KeepOnAbort && !o.reaping.Off }

// How a hard cancel (lineage SIGKILLed with its process group) is answered:
// the hidden --hard-cancel flag.
const (
	// hardCancelAuto: the kernel's exit hook where it can kill, a guardian
	// otherwise.
	hardCancelAuto = "auto"
	// hardCancelGuardian: a guardian, never the kernel (tests; it is how
	// an older kernel behaves).
	hardCancelGuardian = "guardian"
)

// writeReport writes the JSON report if asked, then prints the report for
// people.
func (o *runOptions) writeReport(rep *job.Report, file *job.ReportFile) error {
	rep.Redact(o.record.redact)
	if file != nil {
		if err := file.Write(rep); err != nil {
			return fmt.Errorf("write report: %w", err)
		}
	}
	rep.WriteText(o.s.Err, job.TextOptions{Verbose: o.Verbose, Quiet: o.Quiet})
	return nil
}
