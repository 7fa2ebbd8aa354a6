package reap

import (
	"context"
	"fmt"
	"syscall"
	"time"

	"github.com/lineage-dev/lineage/internal/proc"
	"github.com/lineage-dev/lineage/lineage"
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
	// inspected holds the stats prefetch read in generation inspectedGen,
	// each until a check takes it.
	inspected    map[uint32]lineage.Stat
	inspectedGen uint64
	// round numbers the stop passes of the stop containment.
	round    int
	stopMode bool
	// deadline is when Options.Timeout passes, on the reaper's clock.
	deadline time.Duration
	// exitAt is when an exit last came in, on the reaper's clock.
	exitAt time.Duration
	// deafSpent is how long deafCheck's reads have taken in the poll
	// interval that began at deafWindow.
	deafWindow time.Duration
	deafSpent  time.Duration
	rep        Report
}

func (r *reaper) now() time.Duration { return r.opts.Now() }

func (r *reaper) run(ctx context.Context) (Report, error) {
	start := r.now()
	r.deadline = start + r.opts.Timeout
	err := r.reap(ctx, start)
	if err != nil && (r.live > 0 || len(r.pending) > 0) {
		// Cut short: never leave the known set stopped or half-signalled.
		r.abort(err)
	}
	r.finish(start)
	if len(r.rep.Survivors) > 0 {
		survivors := fmt.Errorf("%d of %d: %w", len(r.rep.Survivors), len(r.rep.Outcomes), ErrSurvivors)
		if err == nil {
			err = survivors
		} else {
			err = fmt.Errorf("%w; %w", err, survivors)
		}
	}
	return r.rep, err
}

// halt says whether the reap must stop: ctx is done, or the timeout passed.
func (r *reaper) halt(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if r.now() >= r.deadline {
		return fmt.Errorf("%w after %v", ErrTimeout, r.opts.Timeout)
	}
	return nil
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
	live := r.liveVictims()
	r.prefetch(live)
	r.terminateAll(live)
	if err := r.watch(ctx, r.now()+r.opts.Grace, r.terminateAll); err != nil {
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
		if err := r.halt(ctx); err != nil {
			return err
		}
		stopped := 0
		stop := func(vs []*victim) {
			var checked []*victim
			for _, v := range vs {
				if v.stopRound == r.round {
					continue
				}
				if _, ok := r.check(v); ok {
					checked = append(checked, v)
				}
			}
			for _, v := range r.sendAll(checked, syscall.SIGSTOP) {
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
		var unstopped []*victim
		for _, v := range r.liveVictims() {
			if v.stopRound != r.round {
				unstopped = append(unstopped, v)
			}
		}
		r.prefetch(unstopped)
		stop(unstopped)
		if stopped == 0 {
			quiet++
		} else {
			quiet = 0
		}
	}
	return nil
}

// terminateAll sends SIGTERM to each of vs that passes its check, then
// SIGCONT to those of them that are stopped; a member that ignores SIGTERM
// gets SIGKILL instead.
func (r *reaper) terminateAll(vs []*victim) {
	var deaf, term []*victim
	stopped := make(map[*victim]bool)
	for _, v := range vs {
		st, ok := r.check(v)
		switch {
		case !ok:
		case st.Ignores(syscall.SIGTERM):
			deaf = append(deaf, v)
		default:
			term = append(term, v)
			if v.stopped || st.State == "T" {
				stopped[v] = true
			}
		}
	}
	for _, v := range r.sendAll(deaf, syscall.SIGKILL) {
		v.why = whyIgnoresTerm
	}
	var cont []*victim
	for _, v := range r.sendAll(term, syscall.SIGTERM) {
		if stopped[v] {
			cont = append(cont, v)
		}
	}
	r.sendAll(cont, syscall.SIGCONT)
}

// kill runs kill passes until the Source lists no live member: once with a
// kernel containment, twice in a row with the stop containment.
func (r *reaper) kill(ctx context.Context) error {
	need := 1
	if r.stopMode {
		need = 2
	}
	for empty := 0; empty < need; {
		if err := r.halt(ctx); err != nil {
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
		r.prefetch(targets)
		var checked []*victim
		for _, v := range targets {
			if _, ok := r.check(v); ok {
				checked = append(checked, v)
			}
		}
		r.sendAll(checked, syscall.SIGKILL)
		for r.live > 0 {
			if err := r.halt(ctx); err != nil {
				return err
			}
			if err := r.await(min(r.opts.Poll, r.deadline-r.now())); err != nil {
				return err
			}
		}
	}
	return nil
}

// watch waits until no victim is alive or deadline has passed, listing the
// Source at least every Poll and whenever the known victims are all gone, and
// hands the newcomers of each listing to fresh (if set) once admitted.
func (r *reaper) watch(ctx context.Context, deadline time.Duration, fresh func([]*victim)) error {
	deadline = min(deadline, r.deadline)
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
		if fresh != nil {
			// Collect the exits so far first: a member gone needs no look.
			if err := r.await(0); err != nil {
				return err
			}
			r.deafCheck()
		}
		if now >= deadline {
			return nil
		}
		if err := r.halt(ctx); err != nil {
			return err
		}
		if r.live == 0 {
			continue // the last ones just went: list again now, not after a poll
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
	if len(pins) > 0 {
		r.exitAt = r.now()
	}
	for _, p := range pins {
		if v, ok := r.byPin[p]; ok && (v.live || v.out.Result == lineage.Survived) {
			r.ended(v)
			r.reapChild(v)
		}
	}
	return nil
}

// reapChild reaps v, just seen to exit, with Options.ReapChild, and keeps
// the status it gets. Only a member that was the reaper's child when last
// checked is asked about: its pid can't have been reused before the reaper
// reaps it, so the status is its own.
func (r *reaper) reapChild(v *victim) {
	if r.opts.ReapChild == nil || v.statGen == 0 || v.stat.PPID != r.guard.self {
		return
	}
	if st, ok := r.opts.ReapChild(int(v.id.PID)); ok && v.out.Status == nil {
		v.out.Status = &st
	}
}

// abort kills every live victim without waiting: the reap was cut short.
func (r *reaper) abort(cause error) {
	for _, v := range r.pending {
		r.gen++
		if !r.admit(v) {
			r.end(v, lineage.Survived, "reap cut short before it could be pinned")
		}
	}
	r.pending = nil
	r.gen++
	live := r.liveVictims()
	r.prefetch(live)
	var checked []*victim
	for _, v := range live {
		if _, ok := r.check(v); ok {
			checked = append(checked, v)
		}
	}
	r.sendAll(checked, syscall.SIGKILL)
	_ = r.await(0)
	for _, v := range r.liveVictims() {
		last := ""
		if v.statGen != 0 {
			last = fmt.Sprintf(", last seen in state %s", v.stat.State)
		}
		r.end(v, lineage.Survived, fmt.Sprintf("reap cut short (%v): exit not confirmed%s", cause, last))
	}
}

// finish fills in the report.
func (r *reaper) finish(start time.Duration) {
	now := r.now()
	r.rep.Took = now - start
	r.rep.Outcomes = make([]Outcome, 0, len(r.victims))
	for _, v := range r.victims {
		if !v.done { // only when Reap returned early without abort
			r.end(v, lineage.Survived, "not ended")
		}
		r.release(v)
		end := now
		if v.out.Result == lineage.Exited || v.out.Result == lineage.Terminated || v.out.Result == lineage.Killed {
			end = v.endedAt
			v.out.Member.Exited = true // the listing saw it alive
			if v.out.Status != nil {
				v.out.Member.Status = *v.out.Status
			}
		}
		if v.out.Result != lineage.Vanished {
			v.out.Age = max(end-lineage.TicksToDuration(v.id.StartTicks), 0)
		}
		if v.out.Result == lineage.Survived {
			r.rep.Survivors = append(r.rep.Survivors, v.id)
		}
		r.rep.Outcomes = append(r.rep.Outcomes, v.out)
	}
}

func (r *reaper) warn(format string, args ...any) {
	r.rep.Warnings = append(r.rep.Warnings, fmt.Sprintf(format, args...))
}
