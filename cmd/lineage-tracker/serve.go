package main

import (
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"strconv"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/lineage-dev/lineage/api"
	"github.com/lineage-dev/lineage/client"
	"github.com/lineage-dev/lineage/internal/cli"
	"github.com/lineage-dev/lineage/internal/loader"
	"github.com/lineage-dev/lineage/internal/loader/bpf"
	"github.com/lineage-dev/lineage/internal/reap"
	"github.com/lineage-dev/lineage/internal/server"
	"github.com/lineage-dev/lineage/internal/tracker"
	"github.com/lineage-dev/lineage/lineage"
	"github.com/lineage-dev/lineage/policy"
)

// serveOptions are the flags of `lineage serve`.
type serveOptions struct {
	s           cli.Streams
	Socket      string
	StateDir    string
	SocketMode  string
	SocketGroup string
	Reaping     string
	Backend     string
	Grace       time.Duration
	Linger      time.Duration
	Verbose     bool
	// MetricsListen is a TCP address for /metrics, besides the socket.
	MetricsListen string
	MaxMembers    uint32
	RingBytes     cli.RingBytes
	RecordDir     string
	RecordKeep    int
	RecordMax     string
	Redact        string
	PinDir        string
	Uninstall     bool
	// Quotas are the limits per uid other than root.
	Quotas server.Quotas
}

// serveLong is serve's help.
const serveLong = `Run the daemon that agent hosts and 'lineage exec' talk to. It listens on a
Unix socket (curl --unix-socket SOCKET http://x/v1/...; see docs/api.md),
authorises callers by their uid, and keeps sessions, roots and keeps in
--state-dir so that a restarted daemon picks them up again.

GET /metrics answers Prometheus metrics (lineage_*; no pid or session
labels) to whoever reaches the socket, and with --metrics-listen over TCP.

With the bpf backend the tracker is pinned under --pin-dir: a directory
under /sys/fs/bpf (bpffs is mounted there if it is not yet), or on a bpffs
mounted elsewhere; any other is refused, --backend auto included. Its maps
and program links stay in the kernel when the daemon exits, however it
exits, so tracking never stops. A restarted daemon takes the pinned tracker
over: members forked while it was down are members, the event ring buffer
resumes where it stopped, and what overflowed meanwhile is counted as lost.
The pinned maps keep their sizes: --max-members and --ring-bytes apply only
when nothing is pinned. The daemon's death kills nothing. A daemon whose
layout version differs from the pinned set's (an upgrade) loads its own set
beside it, moves the members over, then unpins the old set. --pin-dir none
loads a tracker that ends with the daemon (members forked while it is down
are then lost; roots that still run are adopted again from /proc on
restart); the proc backend pins nothing.

--uninstall unpins every tracker under --pin-dir and exits. Stop the daemon
first (it refuses while one holds the tracker): once unpinned, nothing
tracks the lineages of open sessions. Their processes keep running,
untracked; a later 'lineage serve' loads a new tracker and adopts the roots
that still run, from /proc, as --pin-dir none would.

Callers other than root share the daemon within quotas per uid, each a
count of what the uid holds open at once (never a rate; 0: no limit); past
one, a request is answered 429 too_many naming the limit, and
lineage_refused_total{reason} counts it. Root is counted but never limited.
The defaults suit a host shared by agent hosts and CI runner users:
--max-streams 64, --max-sessions 1024, --max-keeps 4096,
--max-owner-watches 256, --max-connections 256, --max-records 256. The
daemon keeps --fd-reserve descriptors (default 1024) below its file limit
for root's connections and its own work: a connection of another uid that
would take one of them is answered 429.

The first line the daemon prints names its backend and why; the proc
backend, asked for or a fallback of --backend auto, is a warning that says
what it misses, and --backend bpf never falls back.

--state-dir and --record-dir must be the daemon's alone: owned by its uid
and writable by no one else (they are made 0700 when missing). State files
it didn't write (another owner, group or other write, a symbolic link) are
refused, and so is a second daemon on the same --state-dir (a lock names
the first's pid). --socket is made in a private directory beside it and
renamed into place; anything at that path but a dead daemon's socket is
left alone and refused.

LINEAGE_REAPING=off in the daemon's environment wins over --reaping.`

// pinNone is the --pin-dir value that turns pinning off.
const pinNone = "none"

func newCmdServe(s cli.Streams) *cobra.Command {
	o := &serveOptions{s: s}
	cmd := &cobra.Command{
		Use:   "serve [flags]",
		Short: cli.ServeShort,
		Long:  serveLong,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.Uninstall {
				return runUninstall(o)
			}
			return runServe(o)
		},
	}
	f := cmd.Flags()
	cli.AddSocket(f, &o.Socket, "where to listen (default $"+client.EnvSocket+", else "+api.DefaultSocket+")")
	f.StringVar(&o.StateDir, "state-dir", "/var/lib/lineage", "where sessions, roots and keeps are kept")
	f.StringVar(&o.SocketMode, "socket-mode", "0660", "the socket's permission bits, octal")
	f.StringVar(&o.SocketGroup, "socket-group", "", "the socket's group, by name or number")
	f.StringVar(&o.Reaping, "reaping", "", "on or off; off reports and kills nothing (LINEAGE_REAPING wins)")
	f.StringVar(&o.Backend, "backend", loader.BackendAuto, "auto, bpf or proc")
	f.DurationVar(&o.Grace, "grace", reap.DefaultGrace, "time between SIGTERM and SIGKILL")
	f.DurationVar(&o.Linger, "linger", 0, "time leftovers get to exit by themselves before a reap")
	f.BoolVarP(&o.Verbose, "verbose", "v", false, "say more")
	f.StringVar(&o.MetricsListen, "metrics-listen", "", "also serve /metrics over TCP on this address (host:port); it needs no authorisation")
	f.Uint32Var(&o.MaxMembers, "max-members", loader.DefaultMaxMembers, "bpf backend: how many processes can be tracked at once, across all sessions (a pinned tracker keeps its size)")
	cli.AddRingBytes(f, &o.RingBytes, fmt.Sprintf("default %s, %s with --record-dir (a pinned tracker keeps its size)",
		loader.FormatBytes(loader.DefaultRingBytes), loader.FormatBytes(loader.RecordRingBytes)))
	f.StringVar(&o.PinDir, "pin-dir", bpf.DefaultPinRoot, "where the bpf tracker is pinned, on bpffs; "+pinNone+" to not pin")
	f.BoolVar(&o.Uninstall, "uninstall", false, "unpin the tracker under --pin-dir, and exit")
	f.StringVar(&o.RecordDir, "record-dir", "", "write one record per session here (JSON Lines, docs/record.md; files 0600, the daemon's user's)")
	f.IntVar(&o.RecordKeep, "record-keep", server.DefaultRecordKeep, "with --record-dir: keep at most this many files per uid, removing that uid's oldest closed sessions' first")
	f.StringVar(&o.RecordMax, "record-max-bytes", loader.FormatBytes(server.DefaultRecordMaxBytes), "with --record-dir: bound each record file (`SIZE`: bytes, or K, M, G for KiB, MiB, GiB); past it a session's events are counted, not written, and the record says how many")
	f.StringVar(&o.Redact, "redact", "", "with --record-dir: mask argv words matching this regular expression in the records")
	o.quotaFlags(f)
	return cmd
}

// quotaFlags are serve's quotas per uid, with their defaults.
func (o *serveOptions) quotaFlags(f *pflag.FlagSet) {
	q := server.DefaultQuotas()
	f.IntVar(&o.Quotas.Streams, "max-streams", q.Streams, "per uid other than root: event streams open at once (0: no limit)")
	f.IntVar(&o.Quotas.Sessions, "max-sessions", q.Sessions, "per uid other than root: sessions open at once")
	f.IntVar(&o.Quotas.Keeps, "max-keeps", q.Keeps, "per uid other than root: live keep rules, across its sessions")
	f.IntVar(&o.Quotas.OwnerWatches, "max-owner-watches", q.OwnerWatches, "per uid other than root: open sessions with an owner process, and armed processes")
	f.IntVar(&o.Quotas.Connections, "max-connections", q.Connections, "per uid other than root: connections open to the socket at once")
	f.IntVar(&o.Quotas.Records, "max-records", q.Records, "per uid other than root, with --record-dir: records open at once (a closed session's for 10 s more)")
	f.IntVar(&o.Quotas.FDReserve, "fd-reserve", q.FDReserve, "file descriptors kept below the file limit for root's connections and the daemon's own work")
}

func (o *serveOptions) options() (server.Options, server.ListenOptions, error) {
	backend, err := loader.ParseBackend(o.Backend)
	if err != nil {
		return server.Options{}, server.ListenOptions{}, fmt.Errorf("--backend: %w", err)
	}
	flag, err := policy.ParseKillSwitch(o.Reaping)
	if err != nil {
		return server.Options{}, server.ListenOptions{}, fmt.Errorf("--reaping: %w", err)
	}
	env, err := policy.KillSwitchFromEnv(os.Getenv)
	if err != nil {
		return server.Options{}, server.ListenOptions{}, err
	}
	if err := loader.ValidateMaxMembers(o.MaxMembers); err != nil {
		return server.Options{}, server.ListenOptions{}, fmt.Errorf("--max-members: %w", err)
	}
	if o.Linger < 0 {
		return server.Options{}, server.ListenOptions{}, fmt.Errorf("%w option: --linger %v: must not be negative", lineage.ErrInvalid, o.Linger)
	}
	if o.Grace <= 0 {
		return server.Options{}, server.ListenOptions{}, fmt.Errorf("%w option: --grace %v: must be positive", lineage.ErrInvalid, o.Grace)
	}
	mode, err := strconv.ParseUint(o.SocketMode, 8, 32)
	if err != nil || mode > 0o777 {
		return server.Options{}, server.ListenOptions{}, fmt.Errorf("%w --socket-mode %q: want octal permission bits, at most 0777", lineage.ErrInvalid, o.SocketMode)
	}
	rec, err := o.recordOptions()
	if err != nil {
		return server.Options{}, server.ListenOptions{}, err
	}
	pin, err := o.pinRoot()
	if err != nil {
		return server.Options{}, server.ListenOptions{}, err
	}
	if backend != loader.BackendProc {
		// Before the state dir is made; the tracker checks again.
		if err := bpf.CheckPinRoot(pin); err != nil {
			return server.Options{}, server.ListenOptions{}, fmt.Errorf("--pin-dir: %w", err)
		}
	}
	opts := server.Options{
		Record: rec,
		Tracker: tracker.TrackerOptions{
			Backend: backend, MaxMembers: o.MaxMembers, RingBytes: o.ringBytes(), PinRoot: pin, Log: o.s.Err, Verbose: o.Verbose,
			SayBackend: true,
		},
		Quotas:   o.Quotas,
		StateDir: o.StateDir,
		Reaping:  policy.ResolveReaping(env, policy.Setting{Source: "--reaping", Switch: flag}),
		Grace:    o.Grace,
		Linger:   o.Linger,
		Log:      o.s.Err,
	}
	return opts, server.ListenOptions{Mode: os.FileMode(mode), Group: o.SocketGroup}, nil
}

// ringBytes is the event ring buffer's size: --ring-bytes, else the
// default for a daemon that writes records or for one that doesn't.
func (o *serveOptions) ringBytes() uint32 {
	if o.RecordDir != "" {
		return o.RingBytes.Or(loader.RecordRingBytes)
	}
	return o.RingBytes.Or(loader.DefaultRingBytes)
}

// recordOptions checks the record flags.
func (o *serveOptions) recordOptions() (server.RecordOptions, error) {
	if o.RecordKeep < 1 {
		return server.RecordOptions{}, fmt.Errorf("%w option: --record-keep %d: must be at least 1", lineage.ErrInvalid, o.RecordKeep)
	}
	if o.RecordDir == "" && o.Redact != "" {
		return server.RecordOptions{}, fmt.Errorf("%w option: --redact: needs --record-dir", lineage.ErrInvalid)
	}
	max, err := loader.ParseBytes(o.RecordMax)
	if err != nil {
		return server.RecordOptions{}, fmt.Errorf("--record-max-bytes: %w", err)
	}
	rec := server.RecordOptions{Dir: o.RecordDir, Keep: o.RecordKeep, MaxBytes: max}
	if o.Redact != "" {
		re, err := regexp.Compile(o.Redact)
		if err != nil {
			return server.RecordOptions{}, fmt.Errorf("%w option: --redact: %v", lineage.ErrInvalid, err)
		}
		rec.Redact = re
	}
	return rec, nil
}

func runServe(o *serveOptions) error {
	// A write to stderr once the host that holds its pipe has died fails
	// with EPIPE instead of ending the daemon, which has sessions to close
	// for that host. Caught, not ignored, so nothing started from here
	// inherits SIGPIPE ignored.
	pipe := make(chan os.Signal, 1)
	signal.Notify(pipe, syscall.SIGPIPE)
	defer signal.Stop(pipe)
	opts, lopts, err := o.options()
	if err != nil {
		return err
	}
	var mln net.Listener
	if o.MetricsListen != "" {
		if mln, err = net.Listen("tcp", o.MetricsListen); err != nil {
			return fmt.Errorf("--metrics-listen: %w", err)
		}
	}
	sock := client.Socket(o.Socket)
	ln, err := server.Listen(sock, lopts)
	if err != nil {
		if mln != nil {
			mln.Close()
		}
		return err
	}
	srv, err := server.Open(opts)
	if err != nil {
		ln.Close()
		if mln != nil {
			mln.Close()
		}
		return err
	}
	if mln != nil {
		go func() {
			if err := srv.ServeMetrics(mln); err != nil {
				fmt.Fprintf(o.s.Err, "lineage: metrics: %v\n", err)
			}
		}()
		fmt.Fprintf(o.s.Err, "lineage: metrics on http://%s/metrics\n", mln.Addr())
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)
	go func() {
		<-sigs
		srv.Close()
	}()
	fmt.Fprintf(o.s.Err, "lineage: serving on %s (reaping %s)\n", sock, opts.Reaping)
	err = srv.Serve(ln)
	srv.Close()
	return err
}

// pinRoot is --pin-dir: "" for none.
func (o *serveOptions) pinRoot() (string, error) {
	switch {
	case o.PinDir == pinNone:
		return "", nil
	case !filepath.IsAbs(o.PinDir):
		return "", fmt.Errorf("--pin-dir %q: %w: want an absolute path on bpffs, or %s", o.PinDir, lineage.ErrInvalid, pinNone)
	}
	return filepath.Clean(o.PinDir), nil
}

// runUninstall unpins the tracker; the loader refuses while a daemon holds it.
func runUninstall(o *serveOptions) error {
	pin, err := o.pinRoot()
	if err != nil {
		return err
	}
	if pin == "" {
		return fmt.Errorf("--uninstall: %w: --pin-dir %s names nothing to unpin", lineage.ErrInvalid, pinNone)
	}
	n, err := bpf.Unpin(pin)
	if err != nil {
		return err
	}
	if n == 0 {
		fmt.Fprintf(o.s.Err, "lineage: no tracker is pinned under %s: nothing to unpin\n", pin)
		return nil
	}
	fmt.Fprintf(o.s.Err, "lineage: unpinned the tracker under %s: nothing tracks the open sessions' processes now\n", pin)
	return nil
}
