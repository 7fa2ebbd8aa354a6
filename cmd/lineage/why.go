package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/lineage-dev/lineage/api"
	"github.com/lineage-dev/lineage/client"
	"github.com/lineage-dev/lineage/internal/cli"
	"github.com/lineage-dev/lineage/internal/proc"
	"github.com/lineage-dev/lineage/lineage"
)

// exitNotTracked is `lineage why`'s status when the daemon could not
// answer: no daemon, or a process it does not track.
const exitNotTracked = 1

// whyOptions are `lineage why`'s flags and argument.
type whyOptions struct {
	clientOptions
	Process string
	// id is Process read, checked before the daemon is asked; a bare pid
	// has no start time.
	id lineage.Identity
}

func newCmdWhy(s cli.Streams, runF func(*whyOptions) error) *cobra.Command {
	o := &whyOptions{clientOptions: clientOptions{s: s}}
	cmd := &cobra.Command{
		Use:   "why PID[@START]",
		Short: "Say who started a process: its chain of lineage parents, from the daemon",
		Long: `why asks the running daemon (lineage serve) for the process's chain of lineage
parents up to its root: each process that created the next, with the session,
the root's label and argv at each step, even where the process was reparented
(to init or a subreaper) or its creator has exited.

Without a daemon, or for a process the daemon does not track, it says so and
shows the /proc parent chain instead, marked as such: ppid changes at every
reparent, so that chain may not name who started the process. It then exits 1.
An argument that is neither PID nor PID@START, or names pid 0 or 1, is refused
before the daemon is asked, with exit status 125.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := lineage.ParseProcess(args[0])
			if err != nil {
				return err
			}
			o.Process, o.id = args[0], id
			if runF != nil {
				return runF(o)
			}
			return whyRun(cmd.Context(), o)
		},
	}
	o.flags(cmd)
	return cmd
}

func whyRun(ctx context.Context, o *whyOptions) error {
	if ctx == nil {
		ctx = context.Background()
	}
	c := client.New(client.Socket(o.Socket))
	defer c.Close()
	out, err := c.Why(ctx, o.Process)
	if err == nil {
		if o.JSON {
			return writeJSONTo(o.s.Out, out)
		}
		printWhy(o.s.Out, out)
		return nil
	}
	var ae *client.APIError
	untracked := errors.As(err, &ae) && ae.Status == http.StatusNotFound
	if !untracked && !errors.Is(err, client.ErrNoDaemon) {
		return err
	}
	return whyFromProc(o, err)
}

// whyProc is `lineage why --json`'s answer when the daemon could not give
// one: why not, and the /proc parent chain.
type whyProc struct {
	Tracked   bool       `json:"tracked"`
	Reason    string     `json:"reason"`
	ProcChain []procStep `json:"proc_chain"`
}

// procStep is one process of the /proc parent chain.
type procStep struct {
	Process lineage.Identity `json:"process"`
	PPID    int              `json:"ppid"`
	Comm    string           `json:"comm,omitempty"`
	Argv    []string         `json:"argv,omitempty"`
}

// whyFromProc says why the daemon gave no chain, and shows the /proc
// parent chain of the process, marked as such.
func whyFromProc(o *whyOptions, cause error) error {
	chain, perr := procChain(o.id)
	ans := whyProc{Reason: cause.Error(), ProcChain: chain}
	if o.JSON {
		if err := writeJSONTo(o.s.Out, ans); err != nil {
			return err
		}
		return cli.ExitError{Code: exitNotTracked}
	}
	fmt.Fprintf(o.s.Err, "lineage: why %s: no lineage chain: %s\n", lineage.Printable(o.Process), lineage.Printable(ans.Reason))
	if perr != nil {
		fmt.Fprintf(o.s.Err, "lineage: no /proc parent chain either: %v\n", perr)
		return cli.ExitError{Code: exitNotTracked}
	}
	linef(o.s.Out, "/proc parent chain (ppid, which every reparent changes: not lineage's answer):")
	for _, st := range chain {
		linef(o.s.Out, "  %-16s ppid %-7d %s", st.Process, st.PPID, lineage.CommandLine(st.Argv, st.Comm))
	}
	return cli.ExitError{Code: exitNotTracked}
}

// procChain reads the /proc parent chain of the process id names, up to
// pid 1: id itself when it has a start time, else whichever process has
// its pid.
func procChain(id lineage.Identity) ([]procStep, error) {
	pid := int(id.PID)
	if id.StartTicks != 0 {
		st, err := proc.ReadStat("/proc", pid)
		if err == nil {
			err = proc.CheckStat(st, id)
		}
		if err != nil {
			return nil, err
		}
	}
	var out []procStep
	for cur := pid; cur > 0 && len(out) < 4096; {
		st, err := proc.ReadStat("/proc", cur)
		if err != nil {
			if len(out) == 0 {
				return nil, err
			}
			break
		}
		argv, _ := proc.ReadArgv("/proc", cur)
		out = append(out, procStep{Process: st.Identity, PPID: st.PPID, Comm: st.Comm, Argv: argv})
		cur = st.PPID
	}
	return out, nil
}

// printWhy prints a chain, the process first, each step's creator below.
func printWhy(w io.Writer, v api.Why) {
	label := ""
	if v.Label != "" {
		label = " (" + lineage.Printable(v.Label) + ")"
	}
	linef(w, "%s: session %s, root %s%s; lineage parents, each the creator of the line above:",
		v.Process, lineage.Printable(v.Session), v.Root, label)
	for _, st := range v.Chain {
		linef(w, "  %-16s %-24s %s", st.Process, stepState(st), lineage.CommandLine(st.Argv, st.Comm))
		if st.Skipped > 0 {
			linef(w, "  %-16s %d exited %s the daemon no longer keeps (it keeps at most %d a root)", "…", st.Skipped, lineage.Plural(st.Skipped, "ancestor", "ancestors"), lineage.MaxExitedKept)
		}
	}
	if !v.Complete && len(v.Chain) > 0 {
		last := v.Chain[len(v.Chain)-1]
		linef(w, "  %-16s the daemon no longer knows this creator: the chain stops short of the root", last.Parent)
	}
}

// stepState says whether a step lives, how it ended, and whether it is the
// root.
func stepState(st api.WhyStep) string {
	var s string
	switch {
	case st.Alive && st.PPID != 0:
		s = "alive, ppid " + strconv.Itoa(st.PPID)
	case st.Alive:
		s = "alive"
	case st.Exit != "":
		s = "exited: " + st.Exit
	default:
		s = "exited"
	}
	if st.IsRoot {
		s = "root, " + s
	}
	return s
}

func writeJSONTo(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
