package tracker

import (
	"errors"
	"fmt"
	"syscall"
	"time"

	"github.com/lineage-dev/lineage/internal/loader"
	"github.com/lineage-dev/lineage/internal/proc"
	"github.com/lineage-dev/lineage/internal/reap"
	"github.com/lineage-dev/lineage/lineage"
)

// kernelSignaler is the reaper's Signaler over the bpf backend's batch
// programs. A pin is the member's identity: each signal is checked against
// it in the kernel while the kernel holds the task, so a pid that came to
// name another process is never signalled, as with a pidfd. Many members
// are signalled in one system call ([reap.BatchSignaler]), and deaths are
// seen by looking at every watched identity at once at short, growing
// intervals, rather than through a pidfd each: a wide reap saves the
// open, watch, signal, status and close of a pidfd per member, and the
// reaper's wakeup at every death. It is used from one goroutine.
type kernelSignaler struct {
	ks      loader.KernelSignaler
	in      loader.Inspector
	next    reap.Pin
	ids     map[reap.Pin]lineage.Identity
	watched map[reap.Pin]bool
	status  map[reap.Pin]lineage.ExitStatus
	// gone holds the pins a send found gone, for the next Wait.
	gone []reap.Pin
	// nextLook is the soonest the next look may begin (see Wait).
	nextLook time.Time
}

var _ reap.BatchSignaler = (*kernelSignaler)(nil)

// Looks between deaths start this far apart and grow to at most
// maxLookEvery while none comes.
const (
	minLookEvery = 250 * time.Microsecond
	maxLookEvery = 4 * time.Millisecond
	// lookPace paces the looks by their cost (see Wait).
	lookPace = 4
)

// kernelSignaler returns the reaper's Signaler for t's backend: the kernel's
// batch programs where the backend has both, else nil (pidfds).
func (t *Tracker) kernelSignaler() reap.Signaler {
	ks, signals := t.backend.(loader.KernelSignaler)
	in, inspects := t.backend.(loader.Inspector)
	if !signals || !inspects {
		return nil
	}
	if ok, _ := ks.Signals(); !ok {
		return nil
	}
	if ok, _ := in.Inspects(); !ok {
		return nil
	}
	return &kernelSignaler{
		ks: ks, in: in,
		ids:     make(map[reap.Pin]lineage.Identity),
		watched: make(map[reap.Pin]bool),
		status:  make(map[reap.Pin]lineage.ExitStatus),
	}
}

// Open implements reap.Signaler: it only remembers id; the reaper's check
// and every signal look at the process.
func (k *kernelSignaler) Open(id lineage.Identity) (reap.Pin, error) {
	k.next++
	k.ids[k.next], k.watched[k.next] = id, true
	return k.next, nil
}

// Send implements reap.Signaler.
func (k *kernelSignaler) Send(p reap.Pin, sig syscall.Signal) error {
	if sig == 0 {
		gone, err := k.look([]reap.Pin{p})
		if err != nil {
			return err
		}
		if len(gone) > 0 {
			k.gone = append(k.gone, gone...) // for the next Wait
			return fmt.Errorf("%s: %w", k.ids[p], lineage.ErrNoProcess)
		}
		return nil
	}
	errs := make([]error, 1)
	k.SendAll([]reap.Pin{p}, []syscall.Signal{sig}, errs)
	return errs[0]
}

// SendAll implements reap.BatchSignaler. A member found gone (no process,
// or its pid another's now) is an error wrapping lineage.ErrNoProcess, and
// is reported by the next Wait.
func (k *kernelSignaler) SendAll(pins []reap.Pin, sigs []syscall.Signal, errs []error) {
	ids := make([]lineage.Identity, len(pins))
	for i, p := range pins {
		ids[i] = k.ids[p]
	}
	before := make([]lineage.Stat, len(pins))
	if err := k.ks.SignalBatch(ids, sigs, before, errs); err != nil {
		// The batch failed whole: signal each through a pidfd instead
		// (pidfd, check, signal), so the reap goes on.
		for i, id := range ids {
			errs[i] = reap.Signal(id, sigs[i])
			if errors.Is(errs[i], lineage.ErrNoProcess) || errors.Is(errs[i], lineage.ErrIdentityMismatch) {
				errs[i] = fmt.Errorf("%w: %w", lineage.ErrNoProcess, errs[i])
				k.unwatch(pins[i])
			}
		}
		return
	}
	for i, p := range pins {
		st := before[i]
		if st.Identity == ids[i] && st.Zombie() {
			k.status[p] = st.ExitCode
		}
		if errors.Is(errs[i], lineage.ErrIdentityMismatch) || errors.Is(errs[i], lineage.ErrNoProcess) {
			errs[i] = fmt.Errorf("%w: %w", lineage.ErrNoProcess, errs[i])
			k.unwatch(p)
		}
	}
}

// unwatch stops watching p, found gone by a send, and keeps it for the next
// Wait to report.
func (k *kernelSignaler) unwatch(p reap.Pin) {
	if k.watched[p] {
		delete(k.watched, p)
		k.gone = append(k.gone, p)
	}
}

// Wait implements reap.Signaler: it looks at every watched identity, again
// and again until one is gone (no process, its pid another's, or a zombie)
// or timeout passes. Looks are paced by their own cost, across calls: one
// begins no sooner than lookPace times the last one's duration (at most
// maxLookEvery) after it ended, so that however fast deaths come, and
// however often the reaper asks, looking at a lineage of a few thousand
// takes at most about a fifth of a CPU from its dying members. A wait too
// short for the next look returns what sends found gone.
func (k *kernelSignaler) Wait(timeout time.Duration) ([]reap.Pin, error) {
	deadline := time.Now().Add(timeout)
	for every := minLookEvery; ; every = min(2*every, maxLookEvery) {
		if wait := time.Until(k.nextLook); wait > 0 {
			if wait > time.Until(deadline) {
				gone := k.gone
				k.gone = nil
				if len(gone) == 0 {
					time.Sleep(max(time.Until(deadline), 0))
				}
				return gone, nil
			}
			time.Sleep(wait)
		}
		pins := make([]reap.Pin, 0, len(k.watched))
		for p := range k.watched {
			pins = append(pins, p)
		}
		start := time.Now()
		gone, err := k.look(pins)
		end := time.Now()
		k.nextLook = end.Add(min(lookPace*end.Sub(start), maxLookEvery))
		gone = append(gone, k.gone...)
		k.gone = nil
		if err != nil || len(gone) > 0 {
			return gone, err
		}
		left := time.Until(deadline)
		if left <= 0 {
			return nil, nil
		}
		time.Sleep(min(every, left))
	}
}

// look inspects pins' identities in one call and returns those gone, no
// longer watched from then on; a zombie's exit status is kept.
func (k *kernelSignaler) look(pins []reap.Pin) ([]reap.Pin, error) {
	if len(pins) == 0 {
		return nil, nil
	}
	pids := make([]uint32, len(pins))
	for i, p := range pins {
		pids[i] = k.ids[p].PID
	}
	stats := make([]lineage.Stat, len(pins))
	if err := k.in.Inspect(pids, stats); err != nil {
		// Read /proc instead, one file each.
		for i, pid := range pids {
			st, err := proc.ReadStat("/proc", int(pid))
			switch {
			case errors.Is(err, lineage.ErrNoProcess):
				stats[i] = lineage.Stat{}
			case err != nil:
				return nil, fmt.Errorf("look at the members: %w", err)
			default:
				stats[i] = st
			}
		}
	}
	var gone []reap.Pin
	for i, p := range pins {
		st, id := stats[i], k.ids[p]
		if st.PID != 0 && st.StartTicks == id.StartTicks && !st.Zombie() {
			continue
		}
		if st.PID != 0 && st.StartTicks == id.StartTicks {
			k.status[p] = st.ExitCode
		}
		if k.watched[p] {
			delete(k.watched, p)
			gone = append(gone, p)
		}
	}
	return gone, nil
}

// Status implements reap.Signaler: a member last seen as a zombie has the
// status it showed.
func (k *kernelSignaler) Status(p reap.Pin) (lineage.ExitStatus, bool) {
	st, ok := k.status[p]
	return st, ok
}

// Release implements reap.Signaler.
func (k *kernelSignaler) Release(p reap.Pin) {
	delete(k.ids, p)
	delete(k.watched, p)
	delete(k.status, p)
}
