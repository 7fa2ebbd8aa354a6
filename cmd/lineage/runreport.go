package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"text/tabwriter"
	"time"

	"github.com/lineage-dev/lineage/internal/lineage"
	"github.com/lineage-dev/lineage/internal/loader"
	"github.com/lineage-dev/lineage/internal/proc"
	"github.com/lineage-dev/lineage/internal/reap"
)

// reportVersion is the version of the JSON report's schema.
const reportVersion = 1

// jobReport is what `lineage run` says about a job: how it ended and what it
// left behind. It is printed for people on stderr and, with --report,
// written as JSON.
type jobReport struct {
	Version  int              `json:"version"`
	Command  []string         `json:"command"`
	Root     lineage.Identity `json:"root"`
	Backend  loader.Choice    `json:"backend"`
	Started  time.Time        `json:"started"`
	JobTook  time.Duration    `json:"job_duration_ns"`
	Exit     *exitInfo        `json:"exit,omitempty"`
	Deadline bool             `json:"deadline_passed"`
	// Interrupted names the signal lineage received and passed on.
	Interrupted string `json:"interrupted,omitempty"`
	Decision    string `json:"decision"`
	Reaping     string `json:"reaping"`
	// Reap is what the reaper did, when the decision was to reap.
	Reap *reap.Report `json:"reap,omitempty"`
	// Contained are the processes that members forked while being reaped,
	// killed at birth by the kernel's containment.
	Contained []lineage.Identity `json:"contained_at_birth,omitempty"`
	// Leftovers are the members alive after the job, when the decision was
	// only to report them.
	Leftovers []leftover   `json:"leftovers,omitempty"`
	Stats     loader.Stats `json:"stats"`
	Warnings  []string     `json:"warnings,omitempty"`
	// Limits are what the backend in use can't see; printed with -v or
	// when something was left behind.
	Limits []string `json:"limits,omitempty"`
}

// exitInfo is how the job's root process ended.
type exitInfo struct {
	Code   *int   `json:"code,omitempty"`
	Signal string `json:"signal,omitempty"`
	Text   string `json:"text"`
}

// leftover is a member that outlived the job and was only reported.
type leftover struct {
	lineage.Member
	Argv []string      `json:"argv,omitempty"`
	Age  time.Duration `json:"age_ns"`
}

func (r *jobReport) setStatus(st lineage.ExitStatus) {
	e := &exitInfo{Text: st.String()}
	if code, ok := st.Exited(); ok {
		e.Code = &code
	} else if sig, ok := st.Signaled(); ok {
		e.Signal = lineage.SignalName(sig)
	}
	r.Exit = e
}

// addLeftovers records members that were only reported, with what the tree
// and /proc know of them.
func (r *jobReport) addLeftovers(ms []lineage.Member, tree *lineage.Tree, procFS proc.FS) {
	now := lineage.DurationToTicks(proc.BootTime())
	for _, m := range ms {
		l := leftover{Member: m}
		if known, ok := tree.Get(m.Identity); ok {
			l.Argv = known.Argv
			l.Member.Comm = known.Comm
		}
		if len(l.Argv) == 0 {
			l.Argv, _ = procFS.Argv(int(m.PID))
		}
		if now > m.StartTicks {
			l.Age = lineage.TicksToDuration(now - m.StartTicks)
		}
		r.Leftovers = append(r.Leftovers, l)
	}
}

// fill completes the reap outcomes with what the event record knows (argv
// seen at exec, exit statuses).
func (r *jobReport) fill(tree *lineage.Tree) {
	if r.Reap == nil {
		return
	}
	for _, m := range tree.Lineage(r.Root) {
		if m.Contained {
			r.Contained = append(r.Contained, m.Identity)
		}
	}
	for i := range r.Reap.Outcomes {
		o := &r.Reap.Outcomes[i]
		known, ok := tree.Get(o.Member.Identity)
		if !ok {
			continue
		}
		if len(o.Argv) == 0 {
			o.Argv = known.Argv
		}
		if o.Member.Comm == "" {
			o.Member.Comm = known.Comm
		}
		if o.Status == nil && known.Exited && known.Status.Known() {
			st := known.Status
			o.Status = &st
		}
	}
}

func (r *jobReport) warnLosses(backend string) {
	if r.Stats.EventsLost > 0 {
		r.Warnings = append(r.Warnings, fmt.Sprintf("%d events lost: the record has gaps; membership stayed exact", r.Stats.EventsLost))
	}
	if r.Stats.MembersFull > 0 {
		r.Warnings = append(r.Warnings, fmt.Sprintf("%d processes were not tracked: the membership map was full (raise --max-members)", r.Stats.MembersFull))
	}
	if backend == loader.BackendProc {
		r.Limits = append(r.Limits, "proc backend: a process that lived and died between two scans is not in the record")
	}
}

// leftBehind counts the job's processes that outlived its root, or, when
// the deadline or a signal cut the job short, its live processes besides
// the root.
func (r *jobReport) leftBehind() int {
	if r.Reap == nil {
		n := 0
		for _, l := range r.Leftovers {
			if l.Identity != r.Root {
				n++
			}
		}
		return n
	}
	n := 0
	for _, o := range r.Reap.Outcomes {
		if o.Member.Identity != r.Root {
			n++
		}
	}
	return n
}

// vanished counts the outcomes of members that ended before the reaper
// reached them (listed alive, gone by the time it looked).
func (r *jobReport) vanished() int {
	if r.Reap == nil {
		return 0
	}
	return r.Reap.Count(reap.Vanished)
}

// exitCode is lineage's exit status for the job.
func (r *jobReport) exitCode(end jobEnd) int {
	if end.deadline {
		return exitDeadline
	}
	if !end.exited {
		return exitFailure
	}
	if code, ok := end.status.Exited(); ok {
		return code
	}
	if sig, ok := end.status.Signaled(); ok {
		return 128 + int(sig)
	}
	return exitFailure
}

// write prints the report for people and writes the JSON file if asked.
func (r *jobReport) write(o *runOptions) error {
	r.Version = reportVersion
	if o.ReportFile != "" {
		if err := writeJSONFile(o.ReportFile, r); err != nil {
			return fmt.Errorf("write report: %w", err)
		}
	}
	left := r.leftBehind()
	if o.Quiet && left == 0 && len(r.Warnings) == 0 {
		return nil
	}
	w := o.s.err
	how := "did not finish"
	switch {
	case r.Deadline:
		how = "passed its deadline"
	case r.Exit != nil:
		how = r.Exit.Text
	}
	fmt.Fprintf(w, "lineage: job %s: %s after %s (backend %s)\n", shellQuote(r.Command), how, round(r.JobTook), r.Backend.Backend)
	switch {
	case left == 0:
		fmt.Fprintln(w, "lineage: nothing left behind")
	case r.Reap != nil:
		fmt.Fprintf(w, "lineage: %d %s left behind; %s (containment %s, %s):\n", left, plural(left, "process", "processes"), r.Decision, orNone(string(r.Reap.Containment)), round(r.Reap.Took))
	default:
		fmt.Fprintf(w, "lineage: %d %s left behind, not killed: %s\n", left, plural(left, "process", "processes"), r.Decision)
	}
	if left > 0 || o.Verbose {
		tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
		fmt.Fprintln(tw, "  IDENTITY\tPARENT\tAGE\tSIGNAL\tRESULT\tCOMMAND")
		if r.Reap != nil {
			for _, oc := range r.Reap.Outcomes {
				if oc.Result == reap.Vanished && !o.Verbose {
					continue
				}
				result := string(oc.Result)
				if oc.Reason != "" && (oc.Result == reap.Refused || oc.Result == reap.Survived || oc.Result == reap.Kept) {
					result += " (" + oc.Reason + ")"
				}
				name := commandText(oc.Argv, oc.Member.Comm)
				if oc.Member.Identity == r.Root {
					name += "   [the job]"
				}
				fmt.Fprintf(tw, "  %s\t%d\t%s\t%s\t%s\t%s\n", oc.Member.Identity, oc.Member.Parent.PID, round(oc.Age), orDash(oc.Signal), result, name)
			}
		}
		for _, l := range r.Leftovers {
			fmt.Fprintf(tw, "  %s\t%d\t%s\t-\tleft running\t%s\n", l.Identity, l.Parent.PID, round(l.Age), commandText(l.Argv, l.Comm))
		}
		tw.Flush()
	}
	if n := r.vanished(); n > 0 && !o.Verbose {
		fmt.Fprintf(w, "lineage: %d of them ended before the reaper reached them (-v lists them)\n", n)
	}
	if n := len(r.Contained); n > 0 {
		fmt.Fprintf(w, "lineage: %d %s forked during the reap %s killed at birth\n", n, plural(n, "process", "processes"), plural(n, "was", "were"))
	}
	if r.Reap != nil && len(r.Reap.Survivors) > 0 {
		fmt.Fprintf(w, "lineage: WARNING: %d %s could not be ended: %v\n", len(r.Reap.Survivors), plural(len(r.Reap.Survivors), "process", "processes"), r.Reap.Survivors)
	}
	for _, warn := range r.Warnings {
		fmt.Fprintf(w, "lineage: warning: %s\n", warn)
	}
	if left > 0 || o.Verbose {
		for _, limit := range r.Limits {
			fmt.Fprintf(w, "lineage: note: %s\n", limit)
		}
	}
	return nil
}

func commandText(argv []string, comm string) string {
	if len(argv) > 0 {
		return shellQuote(argv)
	}
	if comm != "" {
		return "[" + comm + "]"
	}
	return "?"
}

// writeJSONFile writes v as indented JSON to path, atomically: a reader
// never sees half a report.
func writeJSONFile(path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(append(data, '\n')); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

func round(d time.Duration) time.Duration {
	switch {
	case d >= 10*time.Second:
		return d.Round(100 * time.Millisecond)
	case d >= time.Second:
		return d.Round(10 * time.Millisecond)
	case d >= time.Millisecond:
		return d.Round(100 * time.Microsecond)
	}
	return d
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func orNone(s string) string {
	if s == "" {
		return "none needed"
	}
	return s
}
