package reap

import (
	"syscall"
	"time"
)

// A member that can't act on SIGTERM gains nothing from the grace: it is
// killed at once, and its outcome says why. Two kinds are known: a process
// that ignores SIGTERM (its stat, read at the check, shows it), and the init
// of a PID namespace of its own with no SIGTERM handler, to which the kernel
// drops a SIGTERM sent from outside (its status shows it; it is read only
// for members still alive a poll interval after their SIGTERM, so members
// that obey cost nothing more).

// deafSettle is how long after its SIGTERM a member still alive has its
// status read (or Options.Poll, if longer), once no exit has come in for a
// poll interval: while members are still dying, one alive is most likely
// waiting for a CPU to die on (a reap of thousands signals faster than they
// can exit), and reading each one's status would only slow the rest. Past
// deafPatience after its SIGTERM it is read regardless.
//
// The reads of a poll interval stop once they have taken 1/deafShare of it.
// A reap of thousands on a machine whose exits are slow has most members
// alive past deafPatience, each waiting for a CPU to exit on, and each
// status read there (100–240 µs beside the exits in progress) takes CPU
// they need: unbounded, 3,500–4,700 reads took 0.4–0.8 s of a 2 s reap of
// 5,000 on a 2-CPU VM. A deaf member is found a few intervals later, and
// the grace ends it in any case.
const (
	deafSettle   = 100 * time.Millisecond
	deafPatience = time.Second
	deafShare    = 8
)

// Reasons given with the outcome of a member killed without its grace.
const (
	whyIgnoresTerm = "ignores SIGTERM: killed at once, without the grace"
	whyDeafInit    = "init of its own PID namespace with no SIGTERM handler, which drops SIGTERM from outside: killed at once, without the grace"
)

// killNow sends SIGKILL to v, which check has just passed, because it can't
// act on SIGTERM; why becomes the reason of its outcome.
func (r *reaper) killNow(v *victim, why string) {
	if r.send(v, syscall.SIGKILL) {
		v.why = why
	}
}

// deafCheck kills the members, SIGTERMed at least deafSettle ago and still
// alive, that turn out to be deaf to it: a PID namespace's init
// without a SIGTERM handler, or a process that has come to ignore SIGTERM.
// Each member is looked at once.
func (r *reaper) deafCheck() {
	now, settle := r.now(), max(deafSettle, r.opts.Poll)
	quiet := now-r.exitAt >= r.opts.Poll
	if now-r.deafWindow >= r.opts.Poll {
		r.deafWindow, r.deafSpent = now, 0
	}
	for _, v := range r.victims {
		if r.deafSpent >= r.opts.Poll/deafShare {
			return // the rest in a later interval
		}
		if !v.live || !v.termed || v.killed || v.deafChecked || now-v.termedAt < settle {
			continue
		}
		if !quiet && now-v.termedAt < deafPatience {
			continue
		}
		v.deafChecked = true
		t := r.now()
		why := r.deafness(v)
		r.deafSpent += r.now() - t
		if why == "" {
			continue
		}
		// The status was read by pid: a fresh check confirms whose it was.
		r.gen++
		if _, ok := r.check(v); ok {
			r.killNow(v, why)
		}
	}
}

// deafness reads v's status and says why v can't act on SIGTERM, or "" if
// it can or its status can't be read (gone, or unreadable: the grace will
// tell).
func (r *reaper) deafness(v *victim) string {
	st, err := r.proc.Status(int(v.id.PID))
	switch {
	case err != nil:
		return ""
	case st.SigIgn&sigMask(syscall.SIGTERM) != 0:
		return whyIgnoresTerm
	case st.NamespaceInit() && st.SigCgt&sigMask(syscall.SIGTERM) == 0:
		return whyDeafInit
	}
	return ""
}

func sigMask(sig syscall.Signal) uint64 { return 1 << (sig - 1) }
