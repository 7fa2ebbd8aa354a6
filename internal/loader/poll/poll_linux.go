package poll

import (
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lineage-dev/lineage/internal/proc"
	"github.com/lineage-dev/lineage/lineage"
)

// The proc backend's poller: it scans /proc at the pace procPacer sets,
// feeds the scans to the tracker and publishes the events.

// tick asks the poller to scan soon (no sooner than MinInterval after the
// last scan).
func (p *Poller) tick() {
	select {
	case p.ticker <- struct{}{}:
	default:
	}
}

func (p *Poller) poller() {
	defer p.wg.Done()
	timer := time.NewTimer(p.untilNext(false))
	defer timer.Stop()
	for {
		early := false
		select {
		case <-p.done:
			return
		case <-timer.C:
		case <-p.ticker:
			early = true
			timer.Stop()
		}
		// A scan for Members may have run meanwhile: keep the pace.
		if wait := p.untilNext(early); wait > 0 {
			timer.Reset(wait)
			continue
		}
		p.scanMu.Lock()
		_ = p.pollLocked() // kept in scanErr; Members reports it
		p.scanMu.Unlock()
		timer.Reset(p.untilNext(false))
	}
}

// untilNext returns how long until the next poll is due; early asks only for
// MinInterval since the last scan.
func (p *Poller) untilNext(early bool) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	iv := p.poll.Interval
	if early {
		iv = min(iv, p.opts.MinInterval)
	}
	return time.Until(p.lastEnd.Add(iv))
}

// refreshLocked scans /proc, unless a scan that began after the caller
// read started (seen) already did. Callers hold scanMu.
func (p *Poller) refreshLocked(seen uint64) error {
	if p.isClosed() {
		return os.ErrClosed
	}
	if p.started.Load() > seen {
		return p.scanErr
	}
	return p.pollLocked()
}

// pollLocked scans /proc, with no lock but scanMu held, and applies the
// difference to the tracker. Callers hold scanMu.
func (p *Poller) pollLocked() error {
	p.started.Add(1)
	meter := startScanMeter()
	p.mu.Lock()
	// Statuses reported from now on are kept for the next diff too: the
	// scan may read their process before it died.
	p.reapedBefore, p.reaped = p.reaped, p.reapedBefore
	p.mu.Unlock()

	p.cur.reset()
	p.beginScanSet()
	listed, err := p.reader.Scan(p.keep, p.markUnreadable)
	if err == nil {
		p.checkParents()
	}
	if err != nil {
		meter.stop()
		p.scanErr = err
		return err
	}
	// Whatever the scan found gone and the reaper reaped has been reported.
	if p.opts.Reaper != nil {
		p.opts.Reaper.Sync()
	}
	p.cur.now = proc.BootTime()
	var events []lineage.Event
	p.mu.Lock()
	maps.Copy(p.reapedBefore, p.reaped)
	p.cur.reaped = p.reapedBefore
	events = p.track.diff(p.prev.procs, p.cur)
	p.cur.reaped = nil
	clear(p.reapedBefore)
	p.mu.Unlock()
	p.publish(events)
	p.prev, p.cur = p.cur, p.prev
	p.scanErr = nil

	cost, end := meter.stop()
	p.mu.Lock()
	p.lastEnd = end
	p.poll.Scans++
	p.poll.Processes = listed
	p.poll.ScanCPU = cost
	p.poll.Interval = p.pace.observe(cost)
	p.poll.Adaptive = p.pace.adaptive()
	p.mu.Unlock()
	return nil
}

func (p *Poller) keep(st lineage.Stat) {
	if st.ExitCode == 0 && p.euid != 0 && st.Zombie() {
		st = p.trusted(st)
	}
	p.cur.procs[int(st.PID)] = st
	p.scanSet.read(st)
}

func (p *Poller) markUnreadable(pid int, _ error) { p.cur.unreadable[pid] = true }

// change runs fn on the tracker under mu, then publishes the events it
// made. Callers hold scanMu.
func (p *Poller) change(fn func(*procTracker) error) error {
	p.mu.Lock()
	err := fn(p.track)
	events := p.track.take()
	p.mu.Unlock()
	p.publish(events)
	return err
}

// publish reads what the processes of EXEC events that don't say it run
// now, records it on their members, and queues the events for Run. Callers
// hold scanMu and not mu: it reads /proc.
func (p *Poller) publish(events []lineage.Event) {
	described := false
	for i := range events {
		ev := &events[i]
		if ev.Kind != lineage.EventExec || ev.Filename != "" || ev.Argv != nil {
			continue
		}
		pid := int(ev.Process.PID)
		ev.Argv, _ = p.fs.Argv(pid)
		ev.Filename, _ = os.Readlink(filepath.Join(p.opts.ProcRoot, strconv.Itoa(pid), "exe"))
		described = true
	}
	if described {
		p.mu.Lock()
		for _, ev := range events {
			if ev.Kind == lineage.EventExec {
				p.track.described(ev.Process, ev.Filename, ev.Argv)
			}
		}
		p.mu.Unlock()
	}
	p.queue.push(events)
}

// trusted returns st with an exit code that can be believed: the kernel
// shows a zombie's as 0 to a reader without the right to inspect it, so a
// 0 is StatusUnknown unless this process is root or owns the zombie.
func (p *Poller) trusted(st lineage.Stat) lineage.Stat {
	if st.ExitCode != 0 || p.euid == 0 || !st.Zombie() {
		return st
	}
	var fi unix.Stat_t
	if err := unix.Stat(filepath.Join(p.opts.ProcRoot, strconv.Itoa(int(st.PID))), &fi); err != nil || int(fi.Uid) != p.euid {
		st.ExitCode = lineage.StatusUnknown
	}
	return st
}

// scanMeter measures the CPU time of a scan: it pins the goroutine to its
// thread until stop.
type scanMeter struct {
	cpu    time.Duration
	cpuErr error
	wall   time.Time
}

func startScanMeter() scanMeter {
	runtime.LockOSThread()
	cpu, err := threadCPU()
	return scanMeter{cpu: cpu, cpuErr: err, wall: time.Now()}
}

// stop returns the CPU time since start (the wall time where the thread's
// clock can't be read) and the time it ended.
func (m scanMeter) stop() (cost time.Duration, end time.Time) {
	defer runtime.UnlockOSThread()
	end = time.Now()
	cost = end.Sub(m.wall)
	if cpu, err := threadCPU(); err == nil && m.cpuErr == nil {
		cost = cpu - m.cpu
	}
	return cost, end
}

// threadCPU returns the CPU time the calling thread has used.
func threadCPU() (time.Duration, error) {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		return 0, err
	}
	return time.Duration(ts.Nano()), nil
}
