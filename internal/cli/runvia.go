package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/lineage-dev/lineage/client"
	"github.com/lineage-dev/lineage/internal/job"
	"github.com/lineage-dev/lineage/internal/loader"
	"github.com/lineage-dev/lineage/internal/proc"
	"github.com/lineage-dev/lineage/lineage"
)

// daemonWideFlags are run's flags that only a tracker of lineage's own
// honours: the daemon's backend, map and hard-cancel answer are its own, and
// a record is written from a tracker's own events. Giving one runs
// standalone.
var daemonWideFlags = []string{"max-members", "ring-bytes", "on-full", "interval", "hard-cancel", "record", "user"}

// daemonWideFlag names the first daemon-wide flag given, or "".
func (o *runOptions) daemonWideFlag(cmd *cobra.Command) string {
	for _, name := range daemonWideFlags {
		if cmd.Flags().Changed(name) {
			return "--" + name
		}
	}
	if o.backend == loader.BackendProc {
		return "--backend proc"
	}
	return ""
}

// runJob runs the job through the daemon when one may be used, in this
// process (the front or the tracker); else, or when the daemon did not
// take the job (nothing of it ran then), with a tracker of lineage's own
// (the Standalone given to NewCmdRun: in this process, or, from the front,
// in lineage-tracker).
func (o *runOptions) runJob(ctx context.Context) (*job.Report, job.End, error) {
	if runner := o.daemon(ctx); runner != nil {
		rep, end, err := job.RunRemote(ctx, o.jobConfig(), o.holder(), runner)
		closeRunner(o, runner)
		if !errors.Is(err, job.ErrNotRegistered) {
			return rep, end, err
		}
		o.detail("lineage: standalone: %v\n", err)
	}
	return o.standalone(ctx, o.standaloneJob())
}

// handedFlag marks a run the front handed to lineage-tracker.
const handedFlag = "handed"

// HandedArgs returns args, the front's command line from `run` on, marked
// as handed to lineage-tracker: the front has chosen a tracker of
// lineage's own and, with -v, said why, so the tracker asks no daemon
// again and says nothing of the choice.
func HandedArgs(args []string) []string {
	return append([]string{args[0], "--" + handedFlag}, args[1:]...)
}

// openTimeout bounds the questions to the daemon before the job starts.
const openTimeout = 5 * time.Second

// daemon returns a runner on the daemon for this job, or nil to run with a
// tracker of lineage's own; -v says which, and why. A root lineage trusts
// only a daemon that runs as root, whatever the socket's path.
func (o *runOptions) daemon(ctx context.Context) *job.Runner {
	switch {
	case o.Handed:
		return nil
	case o.Standalone:
		o.detail("lineage: standalone: --standalone\n")
		return nil
	case o.daemonWide != "":
		o.detail("lineage: standalone: %s is daemon-wide, so the job gets a tracker of its own\n", o.daemonWide)
		return nil
	}
	sock := client.Socket("")
	c := client.New(sock, client.TrustServer(client.RootServer(os.Geteuid())))
	self, err := ownIdentity()
	if err != nil {
		o.detail("lineage: standalone: %v\n", err)
		return nil
	}
	// Owned: the daemon reaps the job if lineage dies; it watches this
	// process from outside the job's process group.
	opts := job.RunnerOptions{Self: self, Owned: o.dieWithUs(), Keep: o.keep, Backend: o.backend}
	ctx, cancel := context.WithTimeout(ctx, openTimeout)
	defer cancel()
	r, err := job.OpenRunner(ctx, c, opts)
	if err != nil {
		c.Close()
		o.detail("lineage: standalone: no daemon to use at %s: %v\n", sock, err)
		return nil
	}
	o.detail("lineage: backend %s via the daemon at %s (session %s)\n", r.Backend(), sock, r.Session())
	return r
}

func ownIdentity() (lineage.Identity, error) { return proc.Self() }

// holder is lineage's own hidden held command: the front's, when this is
// lineage-tracker and the front is beside it (it starts faster and
// smaller, and the held root runs it before it becomes the command).
func (o *runOptions) holder() job.Holder {
	path, err := os.Executable()
	if err != nil {
		return job.Holder{Path: "/proc/self/exe", Args: []string{heldCommand}}
	}
	if filepath.Base(path) == TrackerBinary {
		front := filepath.Join(filepath.Dir(path), "lineage")
		if fi, err := os.Stat(front); err == nil && fi.Mode().IsRegular() {
			path = front
		}
	}
	return job.Holder{Path: path, Args: []string{heldCommand}}
}

// closeRunner closes the job's session on the daemon.
func closeRunner(o *runOptions, r *job.Runner) {
	ctx, cancel := context.WithTimeout(context.Background(), openTimeout)
	defer cancel()
	if err := r.Close(ctx); err != nil {
		fmt.Fprintf(o.s.Err, "lineage: close the session on the daemon: %v\n", err)
	}
}

// detail prints a note that only -v asks for.
func (o *runOptions) detail(format string, args ...any) {
	if o.Verbose {
		fmt.Fprintf(o.s.Err, format, args...)
	}
}
