package reap

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"syscall"
	"time"

	"github.com/lineage-dev/lineage/internal/lineage"
	"github.com/lineage-dev/lineage/internal/proc"
)

// reaper is the state of one Reap call. It is used from one goroutine.
type reaper struct {
	src   Source
	opts  Options
	proc  proc.FS
	stats *proc.StatReader // the check's reader of /proc/PID/stat
	guard *guard
	sig   Signaler

	victims []*victim // every member seen, in order of first sight
	pending []*victim // seen, not yet admitted
	byID    map[lineage.Identity]*victim
	byPin   map[Pin]*victim
	live    int // victims pinned, believed alive, to be ended

	// gen moves on before every admission and every wait: a stat read in
	// an earlier generation is stale and must be read again at the signal.
	gen uint64
	// round numbers the stop passes of the stop containment.
	round    int
	stopMode bool
	rep      Report
}

// victim is one member as the reaper follows it.
type victim struct {
	out Outcome
	id  lineage.Identity

	pin    Pin
	pinned bool
	// live: pinned, believed alive and to be ended. done: out.Result says
	// how it ended (a Survived victim may still turn out to have ended).
	live, done bool
	// confirmed: /proc showed its identity alive after it was pinned.
	confirmed bool
	argv      []string // read from /proc, not yet confirmed
	procArgv  bool     // out.Argv comes from /proc, not from the Source
	comm      string   // the comm and start of stack when out.Argv was
	stack     uint64   // confirmed: when either changes, it exec'd

	stat    lineage.Stat
	statGen uint64 // gen in which stat was read; 0: none

	termed, killed bool
	stopped        bool // a STOP from the reaper not yet followed by CONT
	stopRound      int  // the last stop round that stopped it
	endedAt        time.Duration
}

func (r *reaper) now() time.Duration { return r.opts.Now() }

func (r *reaper) run(ctx context.Context) (Report, error) {
	start := r.now()
	err := r.reap(ctx, start)
	if err != nil && (r.live > 0 || len(r.pending) > 0) {
		// Cut short: never leave the known set stopped or half-signalled.
		r.abort(err)
	}
	r.finish(start)
	if err == nil && len(r.rep.Survivors) > 0 {
		err = fmt.Errorf("%d of %d: %w", len(r.rep.Survivors), len(r.rep.Outcomes), ErrSurvivors)
	}
	return r.rep, err
}

func (r *reaper) reap(ctx context.Context, start time.Duration) error {
	// 1. Linger.
	if r.opts.Linger > 0 {
		if err := r.watch(ctx, start+r.opts.Linger, nil); err != nil {
			return err
		}
		if r.live == 0 {
			r.rep.Phases.Linger = r.now() - start
			return nil
		}
	} else {
		// Only look: members are admitted just before their first signal,
		// so that one read of /proc serves both.
		ms, err := r.src.Members()
		if err != nil {
			return fmt.Errorf("list members: %w", err)
		}
		if len(ms) == 0 {
			return nil
		}
		r.see(ms)
	}
	t := r.now()
	r.rep.Phases.Linger = t - start

	// 2. Contain.
	r.contain()
	if r.stopMode {
		if err := r.stopSet(ctx); err != nil {
			return err
		}
	}
	t2 := r.now()
	r.rep.Phases.Contain = t2 - t

	// 3. Terminate.
	r.gen++
	for _, v := range r.liveVictims() {
		r.terminate(v)
	}
	if err := r.watch(ctx, r.now()+r.opts.Grace, r.terminate); err != nil {
		return err
	}
	t3 := r.now()
	r.rep.Phases.Terminate = t3 - t2

	// 4. Kill.
	err := r.kill(ctx)
	r.rep.Phases.Kill = r.now() - t3
	return err
}

// contain calls Options.Contain, or chooses the stop containment.
func (r *reaper) contain() {
	r.rep.Containment = lineage.ContainStop
	r.stopMode = true
	if r.opts.Contain == nil {
		return
	}
	name, err := r.opts.Contain()
	switch {
	case err != nil:
		r.warn("contain: %v; stopping the lineage instead", err)
	case name == "":
		r.warn("contain: no containment named; stopping the lineage instead")
	case name != lineage.ContainStop:
		r.rep.Containment = name
		r.stopMode = false
	}
}

// stopSet stops every live victim not stopped in this round, listing the
// Source again until two passes in a row find nothing new to stop.
func (r *reaper) stopSet(ctx context.Context) error {
	r.round++
	for quiet := 0; quiet < 2; {
		if err := ctx.Err(); err != nil {
			return err
		}
		stopped := 0
		stop := func(v *victim) {
			if v.stopRound == r.round {
				return
			}
			if _, ok := r.check(v); ok && r.send(v, syscall.SIGSTOP) {
				v.stopRound = r.round
				stopped++
			}
		}
		if err := r.list(stop); err != nil {
			return err
		}
		if err := r.await(0); err != nil {
			return err
		}
		for _, v := range r.liveVictims() {
			stop(v)
		}
		if stopped == 0 {
			quiet++
		} else {
			quiet = 0
		}
	}
	return nil
}

// terminate sends SIGTERM to v, then SIGCONT if it is stopped.
func (r *reaper) terminate(v *victim) {
	st, ok := r.check(v)
	if !ok || !r.send(v, syscall.SIGTERM) {
		return
	}
	if v.stopped || st.State == "T" {
		r.send(v, syscall.SIGCONT)
	}
}

// kill runs kill passes until the Source lists no live member: once with a
// kernel containment, twice in a row with the stop containment.
func (r *reaper) kill(ctx context.Context) error {
	need := 1
	if r.stopMode {
		need = 2
	}
	for empty := 0; empty < need; {
		if err := ctx.Err(); err != nil {
			return err
		}
		r.rep.Passes++
		if r.stopMode {
			if err := r.stopSet(ctx); err != nil {
				return err
			}
		} else if err := r.list(nil); err != nil {
			return err
		}
		if err := r.await(0); err != nil {
			return err
		}
		targets := r.liveVictims()
		if len(targets) == 0 && len(r.pending) == 0 {
			empty++
			continue
		}
		empty = 0
		r.gen++
		for _, v := range targets {
			if _, ok := r.check(v); ok {
				r.send(v, syscall.SIGKILL)
			}
		}
		for r.live > 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
			if err := r.await(r.opts.Poll); err != nil {
				return err
			}
		}
	}
	return nil
}

// watch waits until no victim is alive or deadline has passed, listing the
// Source at least every Poll and whenever the known victims are all gone, and
// hands each newcomer to fresh (if set) right after admitting it.
func (r *reaper) watch(ctx context.Context, deadline time.Duration, fresh func(*victim)) error {
	listed := time.Duration(0)
	for first := true; ; first = false {
		now := r.now()
		if first || r.live == 0 || now-listed >= r.opts.Poll {
			if err := r.list(fresh); err != nil {
				return err
			}
			listed = now
			if r.live == 0 {
				return nil
			}
		}
		if now >= deadline {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := r.await(min(r.opts.Poll-(now-listed), deadline-now)); err != nil {
			return err
		}
	}
}

// await waits up to timeout for pinned processes to exit and records them.
func (r *reaper) await(timeout time.Duration) error {
	pins, err := r.sig.Wait(max(timeout, 0))
	r.gen++
	if err != nil {
		return fmt.Errorf("wait for exits: %w", err)
	}
	for _, p := range pins {
		if v, ok := r.byPin[p]; ok && (v.live || v.out.Result == Survived) {
			r.ended(v)
		}
	}
	return nil
}

// list asks the Source for the members, admits those not seen before, and
// hands each new live victim to fresh (if set) right after admitting it.
func (r *reaper) list(fresh func(*victim)) error {
	ms, err := r.src.Members()
	if err != nil {
		return fmt.Errorf("list members: %w", err)
	}
	r.see(ms)
	waiting := r.pending
	r.pending = nil
	for _, v := range waiting {
		r.gen++
		if !r.admit(v) {
			r.pending = append(r.pending, v)
			continue
		}
		if v.live && fresh != nil {
			fresh(v)
		}
	}
	return nil
}

// see records the members not seen before; they wait in r.pending for
// admission. From here on each one is in the report.
func (r *reaper) see(ms []lineage.Member) {
	for _, m := range ms {
		if v, seen := r.byID[m.Identity]; seen {
			if len(m.Argv) > 0 && !slices.Equal(m.Argv, v.out.Member.Argv) {
				// The Source saw an exec since: it knows better.
				v.out.Member, v.out.Argv, v.procArgv = m, m.Argv, false
			}
			continue
		}
		v := &victim{id: m.Identity, out: Outcome{Member: m, Argv: m.Argv}}
		r.victims = append(r.victims, v)
		r.byID[m.Identity] = v
		r.pending = append(r.pending, v)
	}
}

func (r *reaper) liveVictims() []*victim {
	var out []*victim
	for _, v := range r.victims {
		if v.live {
			out = append(out, v)
		}
	}
	return out
}

// admit takes in a member seen for the first time: it pins it, reads its
// command line, checks its identity and the protected set, and asks Keep. It
// returns false when the member must wait for a later pass: out of file
// descriptors for pins, with pinned members still to end.
func (r *reaper) admit(v *victim) bool {
	m := v.out.Member
	if reason := r.guard.refuseIdentity(m.Identity); reason != "" {
		r.end(v, Refused, reason)
		return true
	}
	p, err := r.open(int(m.PID))
	switch {
	case errors.Is(err, lineage.ErrNoProcess):
		r.end(v, Vanished, fmt.Sprintf("pid %d was free when the reaper came", m.PID))
		return true
	case errors.Is(err, ErrNotProcess):
		r.end(v, Refused, fmt.Sprintf("pid %d is not a process: %v", m.PID, err))
		return true
	case (errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE)) && r.live > 0:
		return false
	case err != nil:
		r.end(v, Survived, fmt.Sprintf("pin: %v", err))
		return true
	}
	v.pin, v.pinned, v.live = p, true, true
	r.byPin[p] = v
	r.live++
	if len(m.Argv) == 0 {
		// Read before the check, so that the check confirms whose it is.
		v.argv, _ = r.proc.Argv(int(m.PID))
		v.procArgv = true
	}
	if _, ok := r.check(v); !ok {
		return true
	}
	if r.opts.Keep != nil {
		km := m
		km.Argv = v.out.Argv
		if keep, why := r.opts.Keep(km); keep {
			if why == "" {
				why = "kept on request"
			}
			r.end(v, Kept, why)
		}
	}
	return true
}

// open pins pid; when out of file descriptors it collects the exits so far,
// frees the pins of ended victims and tries once more.
func (r *reaper) open(pid int) (Pin, error) {
	p, err := r.sig.Open(pid)
	if errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) {
		_ = r.await(0)
		for _, v := range r.victims {
			if v.done && v.pinned && v.out.Result != Survived {
				r.release(v)
			}
		}
		p, err = r.sig.Open(pid)
	}
	return p, err
}

// check is the check at the signal: it reads /proc/PID/stat (unless it was
// read in this generation) and returns it when v is still the member, alive,
// and not protected. Otherwise it records why and returns false.
func (r *reaper) check(v *victim) (lineage.Stat, bool) {
	if !v.live {
		return lineage.Stat{}, false
	}
	if v.statGen != 0 && v.statGen == r.gen {
		return v.stat, true
	}
	pid := int(v.id.PID)
	st, err := r.stats.Stat(pid)
	if err != nil {
		if errors.Is(r.sig.Send(v.pin, 0), lineage.ErrNoProcess) {
			r.ended(v) // gone
		} else if errors.Is(err, lineage.ErrNoProcess) {
			r.end(v, Refused, fmt.Sprintf("pid %d is alive but not visible in %s: its identity can't be checked", pid, r.opts.ProcRoot))
		} else {
			r.end(v, Survived, fmt.Sprintf("check identity: %v", err))
		}
		return lineage.Stat{}, false
	}
	if st.StartTicks != v.id.StartTicks {
		if v.confirmed {
			r.ended(v) // it ended, and its pid was reused
		} else {
			r.end(v, Vanished, fmt.Sprintf("identity mismatch: pid %d now names a process started at %d, not %d", pid, st.StartTicks, v.id.StartTicks))
		}
		return lineage.Stat{}, false
	}
	if !v.confirmed {
		v.confirmed = true
		if v.procArgv {
			v.out.Argv = v.argv
		}
		v.argv, v.comm, v.stack = nil, st.Comm, st.StartStack
	} else if v.procArgv && (st.Comm != v.comm || st.StartStack != v.stack) && !st.Zombie() {
		// It ran a new program since its argv was read: read it again,
		// and keep it if the identity still holds after the read.
		if argv, err := r.proc.Argv(pid); err == nil {
			if again, err := r.stats.Stat(pid); err == nil && again.StartTicks == v.id.StartTicks {
				v.out.Argv, v.comm, v.stack, st = argv, again.Comm, again.StartStack, again
			}
		}
	}
	if st.Zombie() {
		if st.ExitCode != 0 {
			code := st.ExitCode
			v.out.Status = &code
		}
		r.ended(v)
		return lineage.Stat{}, false
	}
	if reason := r.guard.refuse(st); reason != "" {
		r.end(v, Refused, reason)
		return lineage.Stat{}, false
	}
	if r.opts.Refuse != nil {
		if reason, refuse := r.opts.Refuse(v.out.Member, st); refuse {
			r.end(v, Refused, reason)
			return lineage.Stat{}, false
		}
	}
	v.stat, v.statGen = st, r.gen
	return st, true
}

// send signals v, which check has just passed.
func (r *reaper) send(v *victim, sig syscall.Signal) bool {
	err := r.sig.Send(v.pin, sig)
	switch {
	case err == nil:
	case errors.Is(err, lineage.ErrNoProcess):
		r.ended(v)
		return false
	default:
		r.end(v, Survived, fmt.Sprintf("send %s: %v", lineage.SignalName(sig), err))
		return false
	}
	v.out.Sent = append(v.out.Sent, lineage.SignalName(sig))
	switch sig {
	case syscall.SIGTERM:
		v.termed = true
	case syscall.SIGKILL:
		v.killed = true
	case syscall.SIGSTOP:
		v.stopped = true
	case syscall.SIGCONT:
		v.stopped = false
	}
	return true
}

// ended records that v's process is gone, classed by what was sent to it.
func (r *reaper) ended(v *victim) {
	switch {
	case v.killed:
		v.out.Signal = "KILL"
		r.end(v, Killed, "")
	case v.termed:
		v.out.Signal = "TERM"
		r.end(v, Terminated, "")
	case v.confirmed:
		r.end(v, Exited, "")
	default:
		r.end(v, Vanished, fmt.Sprintf("pid %d had no live process with that identity when the reaper came", v.id.PID))
	}
}

// end gives v its result; a victim already done only changes from Survived.
func (r *reaper) end(v *victim, res Result, reason string) {
	if v.done && v.out.Result != Survived {
		return
	}
	if v.live {
		v.live = false
		r.live--
	}
	v.done = true
	v.out.Result, v.out.Reason = res, reason
	v.endedAt = r.now()
	if res == Refused || res == Kept || res == Vanished {
		r.release(v)
	}
}

func (r *reaper) release(v *victim) {
	if !v.pinned {
		return
	}
	if v.out.Status == nil && (v.out.Result == Exited || v.out.Result == Terminated || v.out.Result == Killed) {
		if st, ok := r.sig.Status(v.pin); ok {
			v.out.Status = &st
		}
	}
	r.sig.Release(v.pin)
	delete(r.byPin, v.pin)
	v.pinned = false
}

// abort kills every live victim without waiting: the reap was cut short.
func (r *reaper) abort(cause error) {
	for _, v := range r.pending {
		r.gen++
		if !r.admit(v) {
			r.end(v, Survived, "reap cut short before it could be pinned")
		}
	}
	r.pending = nil
	r.gen++
	for _, v := range r.liveVictims() {
		if _, ok := r.check(v); ok {
			r.send(v, syscall.SIGKILL)
		}
	}
	_ = r.await(0)
	for _, v := range r.liveVictims() {
		r.end(v, Survived, fmt.Sprintf("reap cut short (%v): exit not confirmed", cause))
	}
}

// finish fills in the report.
func (r *reaper) finish(start time.Duration) {
	now := r.now()
	r.rep.Took = now - start
	r.rep.Outcomes = make([]Outcome, 0, len(r.victims))
	for _, v := range r.victims {
		if !v.done { // only when Reap returned early without abort
			r.end(v, Survived, "not ended")
		}
		r.release(v)
		end := now
		if v.out.Result == Exited || v.out.Result == Terminated || v.out.Result == Killed {
			end = v.endedAt
		}
		if v.out.Result != Vanished {
			v.out.Age = max(end-lineage.TicksToDuration(v.id.StartTicks), 0)
		}
		if v.out.Result == Survived {
			r.rep.Survivors = append(r.rep.Survivors, v.id)
		}
		r.rep.Outcomes = append(r.rep.Outcomes, v.out)
	}
}

func (r *reaper) warn(format string, args ...any) {
	r.rep.Warnings = append(r.rep.Warnings, fmt.Sprintf(format, args...))
}
