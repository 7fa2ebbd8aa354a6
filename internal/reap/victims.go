package reap

import (
	"errors"
	"fmt"
	"slices"
	"syscall"
	"time"

	"github.com/lineage-dev/lineage/lineage"
)

// victim is one member as the reaper follows it.
type victim struct {
	out Outcome
	id  lineage.Identity

	pin    Pin
	pinned bool
	// live: pinned, believed alive and to be ended. done: out.Result says
	// how it ended (a lineage.Survived victim may still turn out to have ended).
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
	termedAt       time.Duration // when SIGTERM was sent
	deafChecked    bool          // deafCheck looked at it
	why            string        // why it was killed without its grace
	stopped        bool          // a STOP from the reaper not yet followed by CONT
	stopRound      int           // the last stop round that stopped it
	endedAt        time.Duration
}

// list asks the Source for the members, admits those not seen before, and
// hands the new live victims to fresh (if set) once all are admitted.
func (r *reaper) list(fresh func([]*victim)) error {
	ms, err := r.src.Members()
	if err != nil {
		return fmt.Errorf("list members: %w", err)
	}
	r.see(ms)
	waiting := r.pending
	r.pending = nil
	// Admit the newcomers, then hand them to fresh, in two passes: every
	// pin and check comes before the first signal, so that no member
	// woken by a signal competes with the reaper for the CPU while it
	// checks the others. The check made at admission is the check at
	// the signal: the pidfd opened before it can't come to name another
	// process, so the batch's few milliseconds change nothing it saw.
	r.gen++
	pinned := waiting[:0:0]
	for _, v := range waiting {
		if !r.pin(v) {
			r.pending = append(r.pending, v)
			continue
		}
		if v.live {
			pinned = append(pinned, v)
		}
	}
	r.prefetch(pinned)
	admitted := pinned[:0]
	for _, v := range pinned {
		if r.judge(v); v.live {
			admitted = append(admitted, v)
		}
	}
	if fresh != nil && len(admitted) > 0 {
		fresh(admitted)
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

// admit takes in a member seen for the first time: it pins it, then judges
// it. It returns false when the member must wait for a later pass: out of
// file descriptors for pins, with pinned members still to end.
func (r *reaper) admit(v *victim) bool {
	if !r.pin(v) {
		return false
	}
	if v.live {
		r.judge(v)
	}
	return true
}

// pin is the first half of admit: unless the identity alone is refused, it
// pins the member and reads its command line when the Source had none. It
// returns false as admit does.
func (r *reaper) pin(v *victim) bool {
	m := v.out.Member
	if reason := r.guard.refuseIdentity(m.Identity); reason != "" {
		r.end(v, lineage.Refused, reason)
		return true
	}
	p, err := r.open(m.Identity)
	switch {
	case errors.Is(err, lineage.ErrNoProcess):
		r.end(v, lineage.Vanished, fmt.Sprintf("pid %d was free when the reaper came", m.PID))
		return true
	case errors.Is(err, ErrNotProcess):
		r.end(v, lineage.Refused, fmt.Sprintf("pid %d is not a process: %v", m.PID, err))
		return true
	case (errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE)) && r.live > 0:
		return false
	case err != nil:
		r.end(v, lineage.Survived, fmt.Sprintf("pin: %v", err))
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
	return true
}

// judge is the second half of admit, for a member just pinned: it checks
// its identity and the protected set, and asks Keep.
func (r *reaper) judge(v *victim) {
	if _, ok := r.check(v); !ok {
		return
	}
	if r.opts.Keep != nil {
		km := v.out.Member
		km.Argv = v.out.Argv
		if keep, why := r.opts.Keep(km); keep {
			if why == "" {
				why = "kept on request"
			}
			r.end(v, lineage.Kept, why)
		}
	}
}

// open pins id; when out of file descriptors it collects the exits so far,
// frees the pins of ended victims and tries once more.
func (r *reaper) open(id lineage.Identity) (Pin, error) {
	p, err := r.sig.Open(id)
	if errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) {
		_ = r.await(0)
		for _, v := range r.victims {
			if v.done && v.pinned && v.out.Result != lineage.Survived {
				r.release(v)
			}
		}
		p, err = r.sig.Open(id)
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
	st, err := r.readStat(pid)
	if err != nil {
		if errors.Is(r.sig.Send(v.pin, 0), lineage.ErrNoProcess) {
			r.ended(v) // gone
		} else if errors.Is(err, lineage.ErrNoProcess) {
			r.end(v, lineage.Refused, fmt.Sprintf("pid %d is alive but not visible in %s: its identity can't be checked", pid, r.opts.ProcRoot))
		} else {
			r.end(v, lineage.Survived, fmt.Sprintf("check identity: %v", err))
		}
		return lineage.Stat{}, false
	}
	if st.StartTicks != v.id.StartTicks {
		if v.confirmed {
			r.ended(v) // it ended, and its pid was reused
		} else {
			r.end(v, lineage.Vanished, fmt.Sprintf("identity mismatch: pid %d now names a process started at %d, not %d", pid, st.StartTicks, v.id.StartTicks))
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
		r.end(v, lineage.Refused, reason)
		return lineage.Stat{}, false
	}
	if r.opts.Refuse != nil {
		if reason, refuse := r.opts.Refuse(v.out.Member, st); refuse {
			r.end(v, lineage.Refused, reason)
			return lineage.Stat{}, false
		}
	}
	v.stat, v.statGen = st, r.gen
	return st, true
}

// prefetch reads, with one call of Options.Inspect, the stats that the
// checks of vs in this generation would read from /proc one by one. Each of
// vs is pinned already: a stat read after the pin tells whose the pin is.
// If Inspect fails, the reap reads /proc from then on, and says so.
func (r *reaper) prefetch(vs []*victim) {
	if r.opts.Inspect == nil {
		return
	}
	pids := make([]uint32, 0, len(vs))
	for _, v := range vs {
		if v.live && (v.statGen == 0 || v.statGen != r.gen) {
			pids = append(pids, v.id.PID)
		}
	}
	if len(pids) == 0 {
		return
	}
	out := make([]lineage.Stat, len(pids))
	if err := r.opts.Inspect(pids, out); err != nil {
		r.warn("inspect: %v; each member's stat is read from %s instead", err, r.opts.ProcRoot)
		r.opts.Inspect = nil
		return
	}
	clear(r.inspected)
	for i, pid := range pids {
		r.inspected[pid] = out[i]
	}
	r.inspectedGen = r.gen
}

// readStat is pid's stat as prefetch read it in this generation, or else
// as /proc shows it now.
func (r *reaper) readStat(pid int) (lineage.Stat, error) {
	if r.inspectedGen == r.gen {
		if st, ok := r.inspected[uint32(pid)]; ok {
			delete(r.inspected, uint32(pid))
			if st.PID == 0 {
				return st, fmt.Errorf("inspect pid %d: %w", pid, lineage.ErrNoProcess)
			}
			return st, nil
		}
	}
	return r.stats.Stat(pid)
}

// send signals v, which check has just passed.
func (r *reaper) send(v *victim, sig syscall.Signal) bool {
	return r.sent(v, sig, r.sig.Send(v.pin, sig))
}

// sendAll sends sig to each of vs, which check has just passed, in one call
// where the Signaler batches (BatchSignaler); it returns those it was sent
// to.
func (r *reaper) sendAll(vs []*victim, sig syscall.Signal) []*victim {
	var out []*victim
	bs, batches := r.sig.(BatchSignaler)
	if !batches || len(vs) < 2 {
		for _, v := range vs {
			if r.send(v, sig) {
				out = append(out, v)
			}
		}
		return out
	}
	pins, sigs, errs := make([]Pin, len(vs)), make([]syscall.Signal, len(vs)), make([]error, len(vs))
	for i, v := range vs {
		pins[i], sigs[i] = v.pin, sig
	}
	bs.SendAll(pins, sigs, errs)
	for i, v := range vs {
		if r.sent(v, sig, errs[i]) {
			out = append(out, v)
		}
	}
	return out
}

// sent records the outcome err of sending sig to v, and reports whether it
// was sent.
func (r *reaper) sent(v *victim, sig syscall.Signal, err error) bool {
	switch {
	case err == nil:
	case errors.Is(err, lineage.ErrNoProcess):
		r.ended(v)
		return false
	default:
		r.end(v, lineage.Survived, fmt.Sprintf("send %s: %v", lineage.SignalName(sig), err))
		return false
	}
	v.out.Sent = append(v.out.Sent, lineage.SignalName(sig))
	switch sig {
	case syscall.SIGTERM:
		v.termed, v.termedAt = true, r.now()
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
		r.end(v, lineage.Killed, v.why)
	case v.termed:
		v.out.Signal = "TERM"
		r.end(v, lineage.Terminated, "")
	case v.confirmed:
		r.end(v, lineage.Exited, "")
	default:
		r.end(v, lineage.Vanished, fmt.Sprintf("pid %d had no live process with that identity when the reaper came", v.id.PID))
	}
}

// end gives v its result; a victim already done only changes from lineage.Survived.
func (r *reaper) end(v *victim, res lineage.Result, reason string) {
	if v.done && v.out.Result != lineage.Survived {
		return
	}
	if v.live {
		v.live = false
		r.live--
	}
	v.done = true
	v.out.Result, v.out.Reason = res, reason
	v.endedAt = r.now()
	if res == lineage.Refused || res == lineage.Kept || res == lineage.Vanished {
		r.release(v)
	}
}

func (r *reaper) release(v *victim) {
	if !v.pinned {
		return
	}
	if v.stopped && (v.out.Result == lineage.Refused || v.out.Result == lineage.Kept || v.out.Result == lineage.Survived) {
		// Stopped by the reaper and not ended by it: never leave it stopped.
		if r.sig.Send(v.pin, syscall.SIGCONT) == nil {
			v.out.Sent = append(v.out.Sent, lineage.SignalName(syscall.SIGCONT))
			v.stopped = false
		}
	}
	if v.out.Status == nil && (v.out.Result == lineage.Exited || v.out.Result == lineage.Terminated || v.out.Result == lineage.Killed) {
		if st, ok := r.sig.Status(v.pin); ok {
			v.out.Status = &st
		}
	}
	r.sig.Release(v.pin)
	delete(r.byPin, v.pin)
	v.pinned = false
}
