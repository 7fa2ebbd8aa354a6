package supervise

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lineage-dev/lineage/lineage"
)

// BecomeSubreaper makes the calling process a child subreaper: orphaned
// descendants are re-parented to it rather than to init. It then owns their
// zombies; use [Children] to reap them. The bit is inherited by nothing and
// lasts until the process exits.
func BecomeSubreaper() error {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("become child subreaper: %w", err)
	}
	return nil
}

// Children reaps every child of the process as soon as it exits (its own
// children and the orphans a subreaper inherits) and remembers the exit
// status of the ones it was asked about. Only one Children may run in a
// process, and nothing else in the process may wait for children while it
// runs (exec.Cmd.Wait included). Its methods are safe for concurrent use.
type Children struct {
	// holding is held while reaping, and by Hold.
	holding sync.Mutex
	// mu is held from each wait4 to the end of its report, so that Sync
	// can wait for the reports.
	mu       sync.Mutex
	onReap   func(pid int, status lineage.ExitStatus)
	statuses map[int]lineage.ExitStatus
	// unclaimed orders statuses oldest first; at most limit are kept, so
	// that a job that orphans without end can't grow lineage.
	unclaimed []int
	limit     int
	waiters   map[int][]chan lineage.ExitStatus
	sigs      chan os.Signal
	// pauses counts the Pauses not yet resumed (changed under pauseMu);
	// wake tells the loop that the last one was.
	pauseMu sync.Mutex
	pauses  atomic.Int32
	wake    chan struct{}
	stop    chan struct{}
	done    chan struct{}
}

// WatchChildren starts reaping children. Stop it with Close.
func WatchChildren() *Children {
	c := &Children{
		statuses: make(map[int]lineage.ExitStatus),
		limit:    maxUnclaimed,
		waiters:  make(map[int][]chan lineage.ExitStatus),
		sigs:     make(chan os.Signal, 1),
		wake:     make(chan struct{}, 1),
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
	}
	signal.Notify(c.sigs, syscall.SIGCHLD)
	go c.loop()
	return c
}

func (c *Children) loop() {
	defer close(c.done)
	// SIGCHLD wakes the loop; the ticker covers a signal coalesced with
	// one that arrived while the loop was reaping.
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		c.reapAll(false)
		select {
		case <-c.stop:
			c.reapAll(true)
			return
		case <-c.sigs:
		case <-c.wake:
		case <-tick.C:
		}
	}
}

// reapAll reaps every child that has exited, unless reaping is paused
// (and not final).
func (c *Children) reapAll(final bool) {
	c.holding.Lock()
	defer c.holding.Unlock()
	for (final || c.pauses.Load() == 0) && c.reapOne() {
	}
}

// Pause stops reaping until resume is called; Pauses may overlap, and
// reaping starts again when the last is resumed. Unlike Hold, it blocks
// neither the caller nor another Pause. Children that exit meanwhile stay
// zombies, with their pids, and Wait's channels get nothing until then.
//
// It is for a reap of many of the process's children: each wait4(2) looks
// through every child of the process, dead or alive, so reaping thousands
// as they die costs time in the square of their number, and holds the
// kernel's task list lock against the deaths it waits for. Reaped after
// the reap, when nearly every child is dead, they cost time in their
// number. Pause only for a bounded time: zombies hold their pids.
//
// While paused, SIGCHLD is not asked for: thousands of deaths would
// otherwise wake the loop thousands of times, for nothing.
func (c *Children) Pause() (resume func()) {
	c.pauseMu.Lock()
	if c.pauses.Add(1) == 1 {
		signal.Stop(c.sigs)
	}
	c.pauseMu.Unlock()
	var once sync.Once
	return func() { once.Do(c.resume) }
}

func (c *Children) resume() {
	c.pauseMu.Lock()
	defer c.pauseMu.Unlock()
	if c.pauses.Add(-1) > 0 {
		return
	}
	select {
	case <-c.stop: // closed: it asks for SIGCHLD no more
		return
	default:
	}
	signal.Notify(c.sigs, syscall.SIGCHLD)
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// reapOne reaps one child that has exited, if there is one, and reports it.
func (c *Children) reapOne() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	var ws unix.WaitStatus
	pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
	for errors.Is(err, unix.EINTR) {
		pid, err = unix.Wait4(-1, &ws, unix.WNOHANG, nil)
	}
	if err != nil || pid <= 0 {
		return false
	}
	c.report(pid, lineage.ExitStatus(ws))
	return true
}

// ReapExited reaps pid, if it is a child of the process that has exited,
// with one wait4(2) for that pid alone (which looks at no other child), and
// reports it as the loop would: to OnReap, then to its waiters or kept for
// a later Wait. It returns the status when it reaped pid. It is for a reap
// of many children while reaping is paused: each reaped as it is seen to
// die costs the same whatever the number of children, and the last die
// with nothing left to reap. It waits while reaping is held ([Children.Hold]).
func (c *Children) ReapExited(pid int) (lineage.ExitStatus, bool) {
	if pid <= 0 {
		return 0, false
	}
	c.holding.Lock()
	defer c.holding.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	var ws unix.WaitStatus
	got, err := unix.Wait4(pid, &ws, unix.WNOHANG, nil)
	for errors.Is(err, unix.EINTR) {
		got, err = unix.Wait4(pid, &ws, unix.WNOHANG, nil)
	}
	if err != nil || got != pid {
		return 0, false
	}
	status := lineage.ExitStatus(ws)
	c.report(pid, status)
	return status, true
}

// report hands a reaped child's status to OnReap and to its waiters, or
// keeps it. Callers hold c.mu.
func (c *Children) report(pid int, status lineage.ExitStatus) {
	if c.onReap != nil {
		c.onReap(pid, status)
	}
	if ws := c.waiters[pid]; len(ws) > 0 {
		for _, w := range ws {
			w <- status
		}
		delete(c.waiters, pid)
	} else {
		c.keep(pid, status)
	}
}

// maxUnclaimed bounds the statuses kept for children nobody has asked
// about yet: the job's root asks right after it starts.
const maxUnclaimed = 1024

// keep remembers pid's status for a later Wait, dropping the oldest
// unclaimed ones beyond the limit. Callers hold c.mu.
func (c *Children) keep(pid int, status lineage.ExitStatus) {
	if _, ok := c.statuses[pid]; !ok {
		c.unclaimed = append(c.unclaimed, pid)
	}
	c.statuses[pid] = status
	for len(c.statuses) > c.limit && len(c.unclaimed) > 0 {
		delete(c.statuses, c.unclaimed[0])
		c.unclaimed = c.unclaimed[1:]
	}
	if len(c.unclaimed) > 2*c.limit {
		// Claimed pids linger in the order: drop them.
		live := c.unclaimed[:0]
		for _, p := range c.unclaimed {
			if _, ok := c.statuses[p]; ok {
				live = append(live, p)
			}
		}
		c.unclaimed = slices.Clip(live)
	}
}

// OnReap has fn called with the pid and status of every child reaped from
// then on, the ones waited for included, right after each is reaped. fn
// must not block nor call c's methods. A later OnReap replaces fn.
func (c *Children) OnReap(fn func(pid int, status lineage.ExitStatus)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.onReap = fn
}

// Sync returns once every child reaped before the call has been reported
// to the OnReap function. Unlike Hold, it does not stop reaping.
func (c *Children) Sync() {
	c.mu.Lock()
	defer c.mu.Unlock()
}

// Hold stops reaping until release is called, so that a child that exits
// at once stays a zombie, with its /proc entry, while it is being
// registered. Hold it briefly: orphans wait as zombies meanwhile.
func (c *Children) Hold() (release func()) {
	c.holding.Lock()
	return c.holding.Unlock
}

// Wait returns a channel that receives pid's exit status once it has been
// reaped (at once if it already was). Ask before the pid can be reused:
// for the job, right after starting it.
func (c *Children) Wait(pid int) <-chan lineage.ExitStatus {
	ch := make(chan lineage.ExitStatus, 1)
	c.mu.Lock()
	defer c.mu.Unlock()
	if st, ok := c.statuses[pid]; ok {
		delete(c.statuses, pid)
		ch <- st
		return ch
	}
	c.waiters[pid] = append(c.waiters[pid], ch)
	return ch
}

// Forget drops the statuses of reaped children nobody asked about.
func (c *Children) Forget() {
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(c.statuses)
	c.unclaimed = nil
}

// Close stops reaping, after one last pass.
func (c *Children) Close() {
	c.pauseMu.Lock() // a resume must not ask for SIGCHLD again
	signal.Stop(c.sigs)
	close(c.stop)
	c.pauseMu.Unlock()
	<-c.done
}

// Terminal is the controlling terminal the job runs in the foreground of,
// when lineage's stdin is one.
type Terminal struct {
	fd   int
	pgrp int
}

// ForegroundTerminal returns the terminal on fd if it is lineage's
// controlling terminal and lineage is in its foreground, or nil.
func ForegroundTerminal(fd int) *Terminal {
	pgrp, err := unix.IoctlGetInt(fd, unix.TIOCGPGRP)
	if err != nil || pgrp != unix.Getpgrp() {
		return nil
	}
	return &Terminal{fd: fd, pgrp: pgrp}
}

// FD is the terminal's file descriptor, for SysProcAttr.Ctty.
func (t *Terminal) FD() int { return t.fd }

// Restore gives the terminal's foreground back to lineage's process group
// once the job, which had it, is done.
func (t *Terminal) Restore() error {
	// A background process group may set the foreground only while
	// SIGTTOU is ignored.
	signal.Ignore(syscall.SIGTTOU)
	defer signal.Reset(syscall.SIGTTOU)
	if err := unix.IoctlSetPointerInt(t.fd, unix.TIOCSPGRP, t.pgrp); err != nil {
		return fmt.Errorf("restore terminal foreground: %w", err)
	}
	return nil
}
