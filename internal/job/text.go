package job

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/lineage-dev/lineage/internal/reap"
	"github.com/lineage-dev/lineage/lineage"
)

// TextOptions say how much [Report.WriteText] prints.
type TextOptions struct {
	// Verbose lists every member, including those that ended before the
	// reaper reached them, and the backend's limits.
	Verbose bool
	// Quiet prints nothing when nothing was left behind and nothing went
	// wrong.
	Quiet bool
}

// WriteText prints the report for people.
func (r *Report) WriteText(w io.Writer, opts TextOptions) {
	left := r.LeftBehind()
	if opts.Quiet && left == 0 && len(r.Warnings) == 0 {
		return
	}
	// One write for the whole report: tabwriter writes cell by cell, and
	// the report of a big reap has thousands of lines.
	bw := bufio.NewWriter(w)
	defer bw.Flush()
	w = bw
	how := "did not finish"
	switch {
	case r.Deadline:
		how = "passed its deadline"
	case r.Exit != nil:
		how = r.Exit.Text
	}
	fmt.Fprintf(w, "lineage: job %s: %s after %s (backend %s)\n", lineage.CommandLine(r.Command, ""), how, round(r.JobTook), r.backendText())
	if opts.Verbose && r.Build != nil {
		fmt.Fprintf(w, "lineage: version %s\n", r.Build)
	}
	job := ""
	if r.rootListed() {
		job = ", and the job itself"
	}
	switch {
	case left == 0 && job == "":
		fmt.Fprintln(w, "lineage: nothing left behind")
	case r.Reap != nil:
		fmt.Fprintf(w, "lineage: %d %s left behind%s; %s (containment %s, %s):\n", left, lineage.Plural(left, "process", "processes"), job, r.decisionText(), orNone(string(r.Reap.Containment)), round(r.Reap.Took))
	default:
		fmt.Fprintf(w, "lineage: %d %s left behind%s, not killed: %s\n", left, lineage.Plural(left, "process", "processes"), job, r.decisionText())
	}
	if left > 0 || job != "" || opts.Verbose {
		r.writeTable(w, opts.Verbose)
	}
	r.writeNotes(w, opts.Verbose, left)
}

// rootListed reports whether the job's root itself is among the members
// the reaper met or left running: it outlived the wait (a deadline, a
// signal lineage did not pass on), and the table lists it as [the job].
func (r *Report) rootListed() bool {
	if r.Reap != nil {
		for _, o := range r.Reap.Outcomes {
			if o.Member.Identity == r.Root {
				return true
			}
		}
		return false
	}
	for _, l := range r.Leftovers {
		if l.Identity == r.Root {
			return true
		}
	}
	return false
}

// decisionText is the decision, naming the signal that ended the job's
// wait when one did: the root exited because lineage passed a signal on,
// or lineage got a signal it does not pass on.
func (r *Report) decisionText() string {
	switch {
	case r.Fatal != "":
		return r.Decision + ", after lineage got SIG" + r.Fatal
	case r.Interrupted != "" && !strings.HasSuffix(r.Decision, " was passed on"):
		return r.Decision + ", after SIG" + r.Interrupted + " was passed on to it"
	}
	return r.Decision
}

// backendText names the backend, and the daemon when the job ran under
// its tracker: "bpf via daemon".
func (r *Report) backendText() string {
	if r.Tracker == TrackerDaemon {
		return r.Backend.Backend + " via daemon"
	}
	return r.Backend.Backend
}

// maxRows is how many members the table lists without -v; a summary line
// counts the rest (--report has them all).
const maxRows = 50

// writeTable lists the members: what the reaper did to each, or that they
// were left running; without verbose, at most maxRows of them.
func (r *Report) writeTable(w io.Writer, verbose bool) {
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
	rows, more := 0, 0
	room := func() bool {
		if verbose || rows < maxRows {
			if rows == 0 {
				fmt.Fprintln(tw, "  IDENTITY\tPARENT\tAGE\tSIGNALS\tRESULT\tCOMMAND")
			}
			rows++
			return true
		}
		more++
		return false
	}
	if r.Reap != nil {
		for _, oc := range r.Reap.Outcomes {
			if oc.Result == lineage.Vanished && !verbose || !room() {
				continue
			}
			result := string(oc.Result)
			if oc.Reason != "" && (oc.Result == lineage.Refused || oc.Result == lineage.Survived || oc.Result == lineage.Kept || oc.Result == lineage.Killed) {
				result += " (" + lineage.Printable(oc.Reason) + ")"
			}
			name := lineage.CommandLine(oc.Argv, oc.Member.Comm)
			if oc.Member.Identity == r.Root {
				name += "   [the job]"
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\n", oc.Member.Identity, r.parentText(oc.Member), round(oc.Age), signalsText(oc), result, name)
		}
	}
	for _, l := range r.Leftovers {
		if !room() {
			continue
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t-\tleft running\t%s\n", l.Identity, r.parentText(l.Member), round(l.Age), lineage.CommandLine(l.Argv, l.Comm))
	}
	tw.Flush()
	if more > 0 {
		fmt.Fprintf(w, "lineage: ... and %d more (-v or --report lists every one)\n", more)
	}
}

// parentText is m's parent's pid for the table: "-" for the job, whose
// parent is lineage, and "?" for a member whose parent the tracker never
// knew (an orphan the proc backend adopted after its parent had gone).
func (r *Report) parentText(m lineage.Member) string {
	switch {
	case m.Identity == r.Root:
		return "-"
	case m.Parent.PID != 0:
		return strconv.FormatUint(uint64(m.Parent.PID), 10)
	default:
		return "?"
	}
}

// writeNotes prints what the table doesn't say: vanished members,
// containment, survivors, warnings and the backend's limits.
func (r *Report) writeNotes(w io.Writer, verbose bool, left int) {
	if n := r.Vanished(); n > 0 && !verbose {
		fmt.Fprintf(w, "lineage: %d of them ended before the reaper reached them (-v lists them)\n", n)
	}
	if n := len(r.Contained); n > 0 {
		fmt.Fprintf(w, "lineage: %d %s forked during the reap %s killed at birth\n", n, lineage.Plural(n, "process", "processes"), lineage.Plural(n, "was", "were"))
	}
	if r.Reap != nil && len(r.Reap.Survivors) > 0 {
		fmt.Fprintf(w, "lineage: WARNING: %d %s could not be ended: %v\n", len(r.Reap.Survivors), lineage.Plural(len(r.Reap.Survivors), "process", "processes"), r.Reap.Survivors)
	}
	if len(r.Incomplete) > 0 {
		fmt.Fprintf(w, "lineage: incomplete: %s\n", strings.Join(r.Incomplete, "; "))
	}
	for _, warn := range r.Warnings {
		fmt.Fprintf(w, "lineage: warning: %s\n", lineage.Printable(warn))
	}
	if left > 0 || verbose {
		for _, limit := range r.Limits {
			fmt.Fprintf(w, "lineage: note: %s\n", limit)
		}
	}
}

// WriteJSONFile writes the report as indented JSON to path, as
// [ReportFile] does: atomically, never through a symlink, for the invoking
// user. A caller that runs a job first pins the file with
// [OpenReportFile] before the job starts instead.
func (r *Report) WriteJSONFile(path string) error {
	f, err := OpenReportFile(path, os.Getenv)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Write(r)
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

// signalsText is every signal the reaper sent oc's member, in order, as
// lineage report shows them from the record (STOP→TERM→CONT where the reap
// stopped the lineage first); "-" for none.
func signalsText(oc reap.Outcome) string {
	if len(oc.Sent) == 0 {
		return orDash(oc.Signal)
	}
	return strings.Join(oc.Sent, "→")
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
