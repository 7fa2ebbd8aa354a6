package job

import (
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/lineage-dev/lineage/internal/buildinfo"
	"github.com/lineage-dev/lineage/internal/loader"
	"github.com/lineage-dev/lineage/internal/proc"
	"github.com/lineage-dev/lineage/internal/reap"
	"github.com/lineage-dev/lineage/lineage"
	"github.com/lineage-dev/lineage/policy"
)

// ReportVersion is the version of the JSON report's schema.
const ReportVersion = 1

// Report is what a job's run says: how its root ended and what it left
// behind. Its JSON form is a documented interface: fields are added, never
// renamed.
type Report struct {
	Version  int              `json:"version"`
	Command  []string         `json:"command"`
	Root     lineage.Identity `json:"root"`
	Backend  loader.Choice    `json:"backend"`
	Started  time.Time        `json:"started"`
	JobTook  time.Duration    `json:"job_duration_ns"`
	Exit     *Exit            `json:"exit,omitempty"`
	Deadline bool             `json:"deadline_passed"`
	// Interrupted names the signal lineage received and passed on ("INT").
	Interrupted string `json:"interrupted,omitempty"`
	// Fatal names a signal lineage received and did not pass on: it
	// reaped at once and exited 128+N.
	Fatal    string `json:"fatal_signal,omitempty"`
	Decision string `json:"decision"`
	Reaping  string `json:"reaping"`
	// Reap is what the reaper did, when the decision was to reap.
	Reap *reap.Report `json:"reap,omitempty"`
	// Contained are the processes that members forked while being reaped,
	// killed at birth by the kernel's containment.
	Contained []lineage.Identity `json:"contained_at_birth,omitempty"`
	// Leftovers are the members alive after the job, when the decision was
	// only to report them.
	Leftovers []Leftover `json:"leftovers,omitempty"`
	// RootKept: the decision was to report because the root is kept on
	// purpose, so the leftovers are kept, not merely reported.
	RootKept bool         `json:"-"`
	Stats    loader.Stats `json:"stats"`
	// ReapTimedOut: the reap passed its timeout; what it could not end is
	// among the survivors.
	ReapTimedOut bool `json:"reap_timed_out,omitempty"`
	// Incomplete says why tracking or reaping was incomplete, if it was
	// (`lineage run --strict` fails a job that exited 0 then).
	Incomplete []string `json:"incomplete,omitempty"`
	Warnings   []string `json:"warnings,omitempty"`
	// Limits are what the backend in use can't see; printed with -v or
	// when something was left behind.
	Limits []string `json:"limits,omitempty"`
	// Build says which lineage wrote the report (see buildinfo.Info).
	Build *buildinfo.Info `json:"build,omitempty"`
	// Tracker says whose tracker the job ran under: [TrackerStandalone]
	// (lineage's own) or [TrackerDaemon] (`lineage serve`'s); empty in
	// reports of jobs the daemon registered for others.
	Tracker string `json:"tracker,omitempty"`
}

// Exit is how the job's root process ended.
type Exit struct {
	Code   *int   `json:"code,omitempty"`
	Signal string `json:"signal,omitempty"`
	Text   string `json:"text"`
}

// Leftover is a member that outlived the job and was only reported.
type Leftover struct {
	lineage.Member
	Argv []string      `json:"argv,omitempty"`
	Age  time.Duration `json:"age_ns"`
}

// SetStatus records how the root ended.
func (r *Report) SetStatus(st lineage.ExitStatus) {
	e := &Exit{Text: st.String()}
	if code, ok := st.Exited(); ok {
		e.Code = &code
	} else if sig, ok := st.Signaled(); ok {
		e.Signal = lineage.SignalName(sig)
	}
	r.Exit = e
}

// Fill completes the reap outcomes with what the event record knows (argv
// seen at exec, exit statuses).
func (r *Report) Fill(tree *lineage.Tree) {
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

// WarnLosses adds the warnings and limits that the backend's counters
// (r.Stats) and its name call for.
func (r *Report) WarnLosses(backendName string) {
	if r.Stats.EventsLost > 0 {
		r.Warnings = append(r.Warnings, fmt.Sprintf("%d %s lost: the record has gaps; membership stayed exact", r.Stats.EventsLost, lineage.Plural(r.Stats.EventsLost, "event", "events")))
	}
	if r.Stats.Undecodable > 0 {
		r.Warnings = append(r.Warnings, fmt.Sprintf("%d %s could not be decoded (is this binary the one that loaded the tracker?): the record has gaps; membership stayed exact", r.Stats.Undecodable, lineage.Plural(r.Stats.Undecodable, "event", "events")))
	}
	if r.Stats.MembersFull > 0 {
		r.Warnings = append(r.Warnings, untrackedWarning(r.Stats))
	}
	if r.Stats.Unattributed > 0 {
		r.Warnings = append(r.Warnings, fmt.Sprintf("%d %s could not be attributed to one job, and escaped", r.Stats.Unattributed, lineage.Plural(r.Stats.Unattributed, "orphan", "orphans")))
	}
	if r.Stats.HookMisses > 0 {
		r.Warnings = append(r.Warnings, hookMissWarning(r.Stats))
	}
	if backendName == loader.BackendProc {
		r.Limits = append(r.Limits, "proc backend: a process that lived and died between two scans is never seen, so no report or record names it")
	}
}

// hookMissWarning says which of the tracker's hooks the kernel skipped
// runs of, and what saw the forks the first fork hook missed: the second
// fork hook, or /proc adoption by parent pid.
func hookMissWarning(st loader.Stats) string {
	var parts []string
	if st.ForkMisses > 0 {
		adopted := fmt.Sprintf("/proc adoption %d more", st.AdoptedAfterMiss)
		if st.AdoptedOrphans > 0 {
			adopted += fmt.Sprintf(", %d of them %s reparented to lineage", st.AdoptedOrphans, lineage.Plural(st.AdoptedOrphans, "an orphan", "orphans"))
		}
		parts = append(parts, fmt.Sprintf("%d of the fork hook (the second fork hook added %d %s, %s)",
			st.ForkMisses, st.ForksCaught, lineage.Plural(st.ForksCaught, "process", "processes"), adopted))
	}
	if st.CatcherMisses > 0 {
		parts = append(parts, fmt.Sprintf("%d of the second fork hook", st.CatcherMisses))
	}
	if other := st.HookMisses - min(st.HookMisses, st.ForkMisses+st.CatcherMisses); other > 0 {
		parts = append(parts, fmt.Sprintf("%d of the exec and exit hooks (the record may lack those execs and exits)", other))
	}
	return "the kernel skipped runs of the tracker's hooks: " + strings.Join(parts, "; ")
}

// untrackedWarning says what became of the processes a full membership map
// could not track: killed (--on-full=kill) or escaped.
func untrackedWarning(st loader.Stats) string {
	killed := min(st.UntrackedKilled, st.MembersFull)
	escaped := st.MembersFull - killed
	switch {
	case escaped == 0:
		return fmt.Sprintf("%d %s could not be tracked, the membership map being full, and %s killed (--on-full=kill; raise --max-members)",
			killed, lineage.Plural(killed, "process", "processes"), lineage.Plural(killed, "was", "were"))
	case killed == 0:
		return fmt.Sprintf("%d %s not tracked, the membership map being full, and escaped (raise --max-members)", escaped, lineage.Plural(escaped, "process was", "processes were"))
	}
	return fmt.Sprintf("%d processes could not be tracked, the membership map being full: %d %s killed, %d escaped (raise --max-members)",
		st.MembersFull, killed, lineage.Plural(killed, "was", "were"), escaped)
}

// LeftBehind counts the job's processes that outlived its root, or, when
// the deadline or a signal cut the job short, its live processes besides
// the root.
func (r *Report) LeftBehind() int {
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

// Vanished counts the outcomes of members that ended before the reaper
// reached them (listed alive, gone by the time it looked).
func (r *Report) Vanished() int {
	if r.Reap == nil {
		return 0
	}
	return r.Reap.Count(lineage.Vanished)
}

// Decided records the policy's decision and the kill switch it saw.
func (r *Report) Decided(d policy.Decision, reaping policy.Reaping) {
	r.Decision = d.String()
	r.Reaping = reaping.String()
}

// Redact masks every match of re in the command lines the report holds:
// the job's, and each member's, leftover or reaped. A nil re masks nothing.
func (r *Report) Redact(re *regexp.Regexp) {
	if re == nil {
		return
	}
	mask := func(argv *[]string) { *argv, _ = lineage.RedactArgv(re, *argv) }
	mask(&r.Command)
	for i := range r.Leftovers {
		mask(&r.Leftovers[i].Argv)
		mask(&r.Leftovers[i].Member.Argv)
	}
	if r.Reap != nil {
		for i := range r.Reap.Outcomes {
			mask(&r.Reap.Outcomes[i].Argv)
			mask(&r.Reap.Outcomes[i].Member.Argv)
		}
	}
}

// AddLeftovers records members that were only reported, with what the tree
// and /proc know of them.
func (r *Report) AddLeftovers(ms []lineage.Member, tree *lineage.Tree, procFS proc.FS) {
	now := proc.BootTime()
	for _, m := range ms {
		l := Leftover{Member: m}
		if known, ok := tree.Get(m.Identity); ok {
			l.Argv = known.Argv
			l.Member.Comm = known.Comm
		}
		if len(l.Argv) == 0 {
			l.Argv, _ = procFS.Argv(int(m.PID))
		}
		// Timed from its start tick, as a reap's outcomes are: a member
		// younger than a tick is not 0 old.
		l.Age = max(now-lineage.TicksToDuration(m.StartTicks), 0)
		r.Leftovers = append(r.Leftovers, l)
	}
}
