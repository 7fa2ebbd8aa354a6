package loader

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lineage-dev/lineage/internal/lineage"
	"github.com/lineage-dev/lineage/internal/proc"
)

// Proc is the backend that polls /proc, for where BPF can't load: it needs
// no privileges beyond reading /proc. Create it with [OpenProc] and Close it
// when done.
//
// A background poller scans /proc (every process's /proc/PID/stat) and
// derives forks, execs and exits by difference from the scan before. It keeps
// each process's stat file open from one scan to the next (see
// [proc.StatReader]): one descriptor per process on the machine, up to
// half the soft RLIMIT_NOFILE. A process becomes a member when its parent is
// a member, and stays one, however it is reparented, until its identity is
// gone: membership is by lineage, not by current ppid, and a pid that comes
// back with another start time is a stranger. A zombie counts as exited.
// Members scans afresh, so what it returns is never older than the call.
//
// Spawn makes this process a child subreaper (PR_SET_CHILD_SUBREAPER, unless
// ProcOptions.NoSubreaper), so that an orphan of a spawned lineage, a
// double-forked daemon say, is reparented to this process instead of init and
// stays findable. The bit stays set for the life of the process, Close
// included. The poller reaps the zombies of the orphans it so inherits (with
// wait4 on each one's pid, never on any pid); the zombie of a spawned root is
// left to the caller's cmd.Wait. /proc can't tell an orphan from a child
// this process started itself: one started other than through Spawn while a
// spawned root is registered is taken for an orphan of that lineage (see
// Spawn), so start such processes before Spawn, or through it.
//
// What it can't do, it says:
//
//   - A process that lives and dies between two polls is invisible to the
//     record: no FORK, EXEC or EXIT for it. Its children are still found if
//     they outlive it and are reparented to this process through the
//     subreaper.
//   - A double fork that completes inside one poll interval outside a
//     subreaper escapes: the grandchild is reparented to init (or to another
//     subreaper) before any poll saw the process between, and nothing in
//     /proc links it to the lineage any more. Registered roots (Register)
//     are in this case: the subreaper catches the orphans of spawned roots
//     only.
//   - An exec is seen as a change of command name or of stack address
//     between two polls; only the last of several is recorded, and one that
//     keeps both (the same program with address space randomisation off) is
//     missed.
//   - An exit's status is known when this process reaped the member (an
//     orphan it inherited) or a poll saw the member as a zombie and may read
//     its exit code; otherwise it is [lineage.StatusUnknown].
//   - Nothing happens in the kernel: Contain returns lineage.ContainStop (the reaper
//     stops the set itself), and RootOptions.DieWithSupervisor is refused.
//
// A Proc is safe for concurrent use by multiple goroutines, except that Run
// may be called only once.
type Proc struct {
	opts   ProcOptions
	fs     proc.FS
	self   lineage.Stat
	euid   int
	ticker chan struct{}

	// scanMu serialises scans, Spawn and Register: no scan runs between a
	// process's start and its registration. It guards the scan state.
	scanMu     sync.Mutex
	reader     *proc.StatReader
	cur, prev  map[int]lineage.Stat
	unreadable map[int]bool
	fresh      []int
	scanErr    error
	// started counts scans begun, so that callers of Members can share a
	// scan that began after they asked.
	started atomic.Uint64

	mu      sync.Mutex
	members map[uint32]*procMember
	roots   map[lineage.Identity]*procRoot
	// spawned holds every root Spawn started, forgotten or not: their
	// zombies are for the caller's cmd.Wait, never for the poller.
	spawned map[lineage.Identity]bool
	// orphans are children of ours that are no one's members (unattributed,
	// or of a forgotten lineage) whose zombies the poller reaps.
	orphans map[lineage.Identity]bool
	// leftRecently maps the pids of members gone in the last two scans to
	// their root, to attribute orphans whose session or group they led.
	leftRecently, leftBefore map[uint32]lineage.Identity
	pending                  []lineage.Event
	stats                    Stats
	poll                     PollStats
	lastEnd                  time.Time
	cost                     time.Duration
	reaps                    bool
	ran, closed              bool

	subreaper sync.Once
	subErr    error
	notify    chan struct{}
	done      chan struct{}
	wg        sync.WaitGroup
	closeOnce sync.Once
}

type procMember struct {
	lineage.Member
	// stack and prevStack are the member's stack address now and at the
	// poll before: a change means an exec.
	stack, prevStack    uint64
	ppid, pgrp, session int
}

type procRoot struct {
	id      lineage.Identity
	spawned bool
	reaping bool
}

// PollStats describe the proc backend's polling.
type PollStats struct {
	// Scans counts completed scans of /proc.
	Scans uint64 `json:"scans"`
	// Processes is how many processes the last scan saw.
	Processes int `json:"processes"`
	// ScanCPU is the CPU time of the last scan.
	ScanCPU time.Duration `json:"scan_cpu_ns"`
	// Interval is the time between two polls now.
	Interval time.Duration `json:"interval_ns"`
	// Adaptive is set when Interval follows the cost of a scan.
	Adaptive bool `json:"adaptive"`
	// Unattributed counts orphans reparented to this process that could not
	// be attributed to exactly one spawned root: they escaped, and an
	// EventFork with Untracked set said so.
	Unattributed uint64 `json:"unattributed"`
}

var _ Backend = (*Proc)(nil)

// OpenProc starts the proc backend: it scans /proc once, then starts the
// poller. Errors about opts wrap lineage.ErrInvalid.
func OpenProc(opts *ProcOptions) (*Proc, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	o := opts.withDefaults()
	fs, err := proc.Open(o.ProcRoot)
	if err != nil {
		return nil, fmt.Errorf("proc backend: %w", err)
	}
	p := &Proc{
		opts:         o,
		fs:           fs,
		euid:         os.Geteuid(),
		reader:       fs.StatReader(),
		cur:          make(map[int]lineage.Stat),
		prev:         make(map[int]lineage.Stat),
		unreadable:   make(map[int]bool),
		members:      make(map[uint32]*procMember),
		roots:        make(map[lineage.Identity]*procRoot),
		spawned:      make(map[lineage.Identity]bool),
		orphans:      make(map[lineage.Identity]bool),
		leftRecently: make(map[uint32]lineage.Identity),
		leftBefore:   make(map[uint32]lineage.Identity),
		ticker:       make(chan struct{}, 1),
		notify:       make(chan struct{}, 1),
		done:         make(chan struct{}),
	}
	// Our own pid in the proc root's view; in a fake tree, whatever it says.
	p.self, _ = p.reader.Stat(os.Getpid())
	if p.self.PID == 0 {
		p.self.PID = uint32(os.Getpid())
	}
	p.scanMu.Lock()
	err = p.scanLocked()
	p.scanMu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("proc backend: %w", err)
	}
	p.wg.Add(1)
	go p.poller()
	return p, nil
}

// Name implements Backend.
func (p *Proc) Name() string { return "proc" }

// PollStats returns how the poller is doing.
func (p *Proc) PollStats() PollStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.poll
}

// Spawn implements Backend. The root is registered before any scan can run,
// so whatever it forks is found by the next poll, if it lives that long or
// leaves an orphan. Unless ProcOptions.NoSubreaper is set, Spawn first makes
// this process a child subreaper (for the rest of its life). The caller keeps
// cmd and must Wait for it, as with any exec.Cmd.
//
// An orphan is a process no poll saw before whose parent is now this process
// (it was reparented here through the subreaper). It becomes a member, with
// an unknown (zero) lineage parent, of the spawned root it must come from:
// the only spawned root, not forgotten, that started before it; or, when
// there are several, the only one with a member that leads the orphan's
// session or process group, or shares it (unless this process shares it
// too). When even that is ambiguous, the orphan is no one's member: an
// EventFork with Untracked set and PollStats.Unattributed say that it
// escaped, and its zombie is still reaped. With no spawned root, a new child
// of this process is not taken for an orphan of any lineage: it is left
// alone, zombie included.
func (p *Proc) Spawn(cmd *exec.Cmd, opts RootOptions) (lineage.Identity, error) {
	if opts.DieWithSupervisor {
		return lineage.Identity{}, errNoDieWithSupervisor
	}
	if !p.opts.NoSubreaper {
		if err := p.becomeSubreaper(); err != nil {
			return lineage.Identity{}, err
		}
	}
	p.scanMu.Lock()
	defer p.scanMu.Unlock()
	if p.isClosed() {
		return lineage.Identity{}, fmt.Errorf("spawn: %w", os.ErrClosed)
	}
	if err := cmd.Start(); err != nil {
		return lineage.Identity{}, err
	}
	// Our child can't be reaped before we Wait, so its stat is there.
	st, err := p.reader.Stat(cmd.Process.Pid)
	if err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return lineage.Identity{}, fmt.Errorf("spawn %s: %w", cmd.Path, err)
	}
	// Start returns once the exec can no longer fail, which may be before
	// the kernel has set the new name and stack: take the name the kernel
	// gives (the file's base name, cut to 15 bytes) and learn the stack at
	// the next poll, so that the exec is not reported twice.
	st.Comm = filepath.Base(cmd.Path)
	if len(st.Comm) > 15 {
		st.Comm = st.Comm[:15]
	}
	st.StartStack = 0
	now := proc.BootTime()
	p.mu.Lock()
	p.spawned[st.Identity] = true
	p.roots[st.Identity] = &procRoot{id: st.Identity, spawned: true}
	m := p.addMember(st, p.self.Identity, st.Identity, true)
	p.execed(m, st, now, cmd.Path, cmd.Args)
	if isZombie(st) {
		p.exited(m, p.zombieStatus(st), now)
	}
	p.mu.Unlock()
	p.tick()
	return st.Identity, nil
}

var errNoDieWithSupervisor = fmt.Errorf("%w: the proc backend can't kill a lineage when its supervisor dies: that needs the bpf backend", ErrUnavailable)

func (p *Proc) becomeSubreaper() error {
	p.subreaper.Do(func() {
		if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
			p.subErr = fmt.Errorf("become child subreaper: %w", err)
			return
		}
		p.mu.Lock()
		p.reaps = true
		p.mu.Unlock()
	})
	return p.subErr
}

// Register implements Backend. Descendants that a descendant created and
// that were reparented away before registration can't be found (/proc shows
// only the current parent); from then on, children are found by the poll,
// with the limits of a poller.
func (p *Proc) Register(id lineage.Identity, opts RootOptions) error {
	if opts.DieWithSupervisor {
		return fmt.Errorf("register %s: %w", id, errNoDieWithSupervisor)
	}
	if err := id.Validate(); err != nil {
		return err
	}
	p.scanMu.Lock()
	defer p.scanMu.Unlock()
	if p.isClosed() {
		return fmt.Errorf("register %s: %w", id, os.ErrClosed)
	}
	st, err := p.reader.Stat(int(id.PID))
	switch {
	case err != nil:
		return fmt.Errorf("register %s: %w", id, err)
	case st.StartTicks != id.StartTicks:
		return fmt.Errorf("register %s: pid %d started at %d: %w", id, id.PID, st.StartTicks, lineage.ErrIdentityMismatch)
	case isZombie(st):
		return fmt.Errorf("register %s: it has exited: %w", id, lineage.ErrNoProcess)
	case st.Kernel:
		return fmt.Errorf("register %s: %w: a kernel thread can't be tracked", id, lineage.ErrInvalid)
	}
	now := proc.BootTime()
	var parent lineage.Identity
	if ps, err := p.reader.Stat(st.PPID); err == nil {
		parent = ps.Identity
	}
	p.mu.Lock()
	if m, ok := p.members[id.PID]; ok && m.Identity == id {
		p.mu.Unlock()
		return fmt.Errorf("register %s: %w: member of root %s", id, ErrAlreadyTracked, m.Root)
	}
	p.roots[id] = &procRoot{id: id}
	m := p.addMember(st, parent, id, true)
	p.execed(m, st, now, "", nil)
	p.mu.Unlock()

	_, err = p.fs.Adopt(id, p.isMember, func(child lineage.Stat, parent lineage.Identity) error {
		// Re-read with our own reader: it also reads the exit code.
		st, err := p.reader.Stat(int(child.PID))
		if err != nil || st.Identity != child.Identity {
			return nil // gone meanwhile
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		if pm, ok := p.members[parent.PID]; ok && pm.Identity == parent {
			p.adopt(st, pm, id, now)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("register %s: %w", id, err)
	}
	return nil
}

func (p *Proc) isMember(id lineage.Identity) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	m, ok := p.members[id.PID]
	return ok && m.Identity == id
}

// Members implements Backend. It scans /proc first (or shares a scan that
// began after the call), so its cost is that of a scan, about 10 µs per
// process on the machine: call it at the pace a reaper needs, not in a
// tight loop. A root that is not registered has no members.
func (p *Proc) Members(root lineage.Identity) ([]lineage.Member, error) {
	if err := p.refresh(); err != nil {
		return nil, fmt.Errorf("members of %s: %w", root, err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []lineage.Member
	for _, m := range p.members {
		if m.Root == root && !m.Exited {
			c := m.Member
			c.Argv = slices.Clone(m.Argv)
			out = append(out, c)
		}
	}
	slices.SortFunc(out, func(a, b lineage.Member) int { return lineage.Compare(a.Identity, b.Identity) })
	return out, nil
}

// Contain implements Backend: the proc backend can't stop forks, so the
// reaper must stop the set itself (lineage.ContainStop).
func (p *Proc) Contain(root lineage.Identity) (lineage.Containment, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	r, ok := p.roots[root]
	if !ok {
		return "", fmt.Errorf("root %s: %w", root, ErrNotRoot)
	}
	r.reaping = true
	return lineage.ContainStop, nil
}

// Forget implements Backend. Orphans of a forgotten spawned lineage that
// reparent to this process later are no longer attributed to it; their
// zombies are still reaped.
func (p *Proc) Forget(root lineage.Identity) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.roots[root]; !ok {
		return fmt.Errorf("forget %s: %w", root, ErrNotRoot)
	}
	delete(p.roots, root)
	for pid, m := range p.members {
		if m.Root == root {
			if m.ppid == int(p.self.PID) && !p.spawned[m.Identity] {
				p.orphans[m.Identity] = true
			}
			delete(p.members, pid)
		}
	}
	return nil
}

// Stats implements Backend. Stale counts members whose pid was found reused
// by another process before a poll saw them exit.
func (p *Proc) Stats() (Stats, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stats, nil
}

// Run implements Backend. FORK events carry the time the process started
// (to the clock tick); EXEC and EXIT events the time of the poll that saw
// them.
func (p *Proc) Run(ctx context.Context, fn func(lineage.Event)) error {
	p.mu.Lock()
	if p.ran {
		p.mu.Unlock()
		return errors.New("proc backend: run: already running")
	}
	p.ran = true
	p.mu.Unlock()
	var batch []lineage.Event
	deliver := func() {
		p.mu.Lock()
		batch, p.pending = p.pending, batch[:0]
		p.mu.Unlock()
		for _, ev := range batch {
			fn(ev)
		}
		clear(batch)
	}
	for {
		select {
		case <-ctx.Done():
			deliver()
			return nil
		case <-p.done:
			deliver()
			return nil
		case <-p.notify:
			deliver()
		}
	}
}

// Close implements Backend: it stops the poller and closes the stat files it
// keeps open. Run returns, and Spawn, Register and Members fail with
// os.ErrClosed. The subreaper bit stays set.
func (p *Proc) Close() error {
	p.closeOnce.Do(func() {
		p.mu.Lock()
		p.closed = true
		p.mu.Unlock()
		close(p.done)
		p.wg.Wait()
		p.scanMu.Lock()
		p.reader.Close()
		p.scanMu.Unlock()
	})
	return nil
}

func (p *Proc) isClosed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closed
}

// tick asks the poller to scan soon (no sooner than MinInterval after the
// last scan).
func (p *Proc) tick() {
	select {
	case p.ticker <- struct{}{}:
	default:
	}
}

func (p *Proc) poller() {
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
		_ = p.scanLocked() // kept in scanErr; Members reports it
		p.scanMu.Unlock()
		timer.Reset(p.untilNext(false))
	}
}

// untilNext returns how long until the next poll is due; early asks only for
// MinInterval since the last scan.
func (p *Proc) untilNext(early bool) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	iv := p.poll.Interval
	if early {
		iv = min(iv, p.opts.MinInterval)
	}
	return time.Until(p.lastEnd.Add(iv))
}

// refresh scans /proc, unless a scan that began after the call already did.
func (p *Proc) refresh() error {
	seen := p.started.Load()
	p.scanMu.Lock()
	defer p.scanMu.Unlock()
	if p.isClosed() {
		return os.ErrClosed
	}
	if p.started.Load() > seen {
		return p.scanErr
	}
	return p.scanLocked()
}

// scanLocked reads every process's stat and applies the difference.
// Callers hold scanMu.
func (p *Proc) scanLocked() error {
	p.started.Add(1)
	// Measure the scan's own CPU time: pin the goroutine to its thread.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	cpu0, cpuErr := threadCPU()
	wall0 := time.Now()

	clear(p.cur)
	clear(p.unreadable)
	listed, err := p.reader.Scan(p.keep, p.markUnreadable)
	if err != nil {
		p.scanErr = err
		return err
	}
	p.apply(proc.BootTime())
	p.prev, p.cur = p.cur, p.prev
	p.scanErr = nil

	end := time.Now()
	cost := end.Sub(wall0)
	if cpu1, err := threadCPU(); err == nil && cpuErr == nil {
		cost = cpu1 - cpu0
	}
	p.mu.Lock()
	p.lastEnd = end
	p.poll.Scans++
	p.poll.Processes = listed
	p.poll.ScanCPU = cost
	p.setInterval(cost)
	p.mu.Unlock()
	return nil
}

func (p *Proc) keep(st lineage.Stat)            { p.cur[int(st.PID)] = st }
func (p *Proc) markUnreadable(pid int, _ error) { p.unreadable[pid] = true }

// budgetAim is the share of the budget the scans themselves aim at; the rest
// is for what a scan's CPU time doesn't show (the runtime's wakeups and
// garbage collection) and for processes appearing between two scans.
const budgetAim = 0.8

// setInterval adapts the poll interval to the cost of a scan: it follows a
// rise at once and a fall slowly, so the budget holds while the number of
// processes grows. Callers hold mu.
func (p *Proc) setInterval(cost time.Duration) {
	if p.opts.Interval > 0 {
		p.poll.Interval = p.opts.Interval
		return
	}
	if cost > p.cost {
		p.cost = cost
	} else {
		p.cost = (3*p.cost + cost) / 4
	}
	iv := time.Duration(float64(p.cost) / (p.opts.Budget * budgetAim)).Round(time.Microsecond)
	p.poll.Interval = min(max(iv, p.opts.MinInterval), p.opts.MaxInterval)
	p.poll.Adaptive = true
}

// apply turns the difference between the last scan (prev) and this one
// (cur) into membership changes and events. Callers hold scanMu.
func (p *Proc) apply(now time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.leftBefore, p.leftRecently = p.leftRecently, p.leftBefore
	clear(p.leftRecently)

	// Members: gone, dead, or changed.
	for pid, m := range p.members {
		if p.unreadable[int(pid)] {
			continue
		}
		st, ok := p.cur[int(pid)]
		if !ok || st.StartTicks != m.StartTicks {
			if ok {
				p.stats.Stale++ // the pid was reused by a stranger
			}
			if !m.Exited {
				p.exited(m, lineage.StatusUnknown, now)
			}
			p.leftRecently[pid] = m.Root
			delete(p.members, pid)
			continue
		}
		if isZombie(st) {
			status, reaped := p.reap(st)
			if !m.Exited {
				if !reaped {
					status = p.zombieStatus(st)
				}
				p.exited(m, status, now)
			}
			if reaped {
				p.leftRecently[pid] = m.Root
				delete(p.members, pid)
			}
			continue
		}
		m.ppid, m.pgrp, m.session = st.PPID, st.PGRP, st.Session
		if st.Comm != m.Comm || changedStack(m.stack, st.StartStack) {
			p.execed(m, st, now, "", nil)
		}
		m.prevStack, m.stack = m.stack, st.StartStack
	}

	// Orphans that are no one's members: reap their zombies.
	for id := range p.orphans {
		st, ok := p.cur[int(id.PID)]
		if !ok || st.Identity != id {
			delete(p.orphans, id)
			continue
		}
		if isZombie(st) {
			if _, reaped := p.reap(st); reaped {
				delete(p.orphans, id)
			}
		}
	}

	// Processes not seen by the last scan.
	fresh := p.fresh[:0]
	for pid, st := range p.cur {
		if old, ok := p.prev[pid]; ok && old.StartTicks == st.StartTicks {
			continue
		}
		if m, ok := p.members[uint32(pid)]; (ok && m.StartTicks == st.StartTicks) || st.Kernel {
			continue
		}
		fresh = append(fresh, pid)
	}
	p.fresh = fresh
	// Parents before children: repeat until a pass adopts nothing.
	for changed := true; changed; {
		changed = false
		for i, pid := range fresh {
			if pid == 0 {
				continue
			}
			st := p.cur[pid]
			if parent, ok := p.members[uint32(st.PPID)]; ok && !parent.Exited && parent.StartTicks <= st.StartTicks {
				p.adopt(st, parent, parent.Root, now)
				fresh[i], changed = 0, true
				continue
			}
			if st.PPID != int(p.self.PID) || p.spawned[st.Identity] {
				continue
			}
			// An orphan reparented to us through the subreaper.
			fresh[i], changed = 0, true
			root, ok, ambiguous := p.attribute(st)
			if ok {
				p.adopt(st, nil, root, now)
				continue
			}
			if !ambiguous {
				continue // no spawned root it could come from
			}
			p.poll.Unattributed++
			p.orphans[st.Identity] = true
			p.emit(lineage.Event{Kind: lineage.EventFork, Time: lineage.TicksToDuration(st.StartTicks), Process: st.Identity, Comm: st.Comm, Untracked: true})
		}
	}
}

// attribute finds the spawned root an orphan reparented to us belongs to:
// the only registered spawned root that started before it, or else the only
// one whose members lead, or share (other than with us), the orphan's session
// or process group. It reports ambiguous when there were several candidates
// and none of them stood out. Callers hold mu.
func (p *Proc) attribute(st lineage.Stat) (root lineage.Identity, ok, ambiguous bool) {
	var cands []lineage.Identity
	for id, r := range p.roots {
		if r.spawned && id.StartTicks <= st.StartTicks {
			cands = append(cands, id)
		}
	}
	switch len(cands) {
	case 0:
		return lineage.Identity{}, false, false
	case 1:
		return cands[0], true, false
	}
	match := make(map[lineage.Identity]bool)
	for _, m := range p.members {
		if !slices.Contains(cands, m.Root) {
			continue
		}
		if int(m.PID) == st.Session || int(m.PID) == st.PGRP ||
			(m.session == st.Session && st.Session != p.self.Session) ||
			(m.pgrp == st.PGRP && st.PGRP != p.self.PGRP) {
			match[m.Root] = true
		}
	}
	for _, left := range []map[uint32]lineage.Identity{p.leftRecently, p.leftBefore} {
		for _, pid := range []int{st.Session, st.PGRP} {
			if root, ok := left[uint32(pid)]; ok && slices.Contains(cands, root) {
				match[root] = true
			}
		}
	}
	if len(match) == 1 {
		for root := range match {
			return root, true, false
		}
	}
	return lineage.Identity{}, false, true
}

// addMember records st as a member and emits its FORK. Callers hold mu.
func (p *Proc) addMember(st lineage.Stat, parent, root lineage.Identity, isRoot bool) *procMember {
	m := &procMember{
		Member: lineage.Member{
			Identity: st.Identity,
			Parent:   parent,
			Root:     root,
			Comm:     st.Comm,
			Forked:   lineage.TicksToDuration(st.StartTicks),
		},
		stack:   st.StartStack,
		ppid:    st.PPID,
		pgrp:    st.PGRP,
		session: st.Session,
	}
	p.members[st.PID] = m
	p.stats.Forks++
	p.emit(lineage.Event{
		Kind:    lineage.EventFork,
		Time:    m.Forked,
		Process: m.Identity,
		Parent:  parent,
		Root:    root,
		Comm:    st.Comm,
		IsRoot:  isRoot,
	})
	return m
}

// adopt makes st a member, child of parent (nil when unknown: an orphan),
// and emits what can be told of it. Callers hold mu.
func (p *Proc) adopt(st lineage.Stat, parent *procMember, root lineage.Identity, now time.Duration) {
	var pid lineage.Identity
	if parent != nil {
		pid = parent.Identity
	}
	m := p.addMember(st, pid, root, false)
	if isZombie(st) {
		status, reaped := p.reap(st)
		if !reaped {
			status = p.zombieStatus(st)
		}
		p.exited(m, status, now)
		if reaped {
			delete(p.members, st.PID)
		}
		return
	}
	// A forked child shares its parent's name and stack until it execs.
	if parent == nil || st.Comm != parent.Comm ||
		(changedStack(parent.stack, st.StartStack) && changedStack(parent.prevStack, st.StartStack)) {
		p.execed(m, st, now, "", nil)
	}
}

func changedStack(old, cur uint64) bool {
	// 0 means unknown: a zombie, or not ours to inspect.
	return old != 0 && cur != 0 && old != cur
}

// execed emits an EXEC for m with argv, or when nil its current command
// line. Callers hold mu.
func (p *Proc) execed(m *procMember, st lineage.Stat, now time.Duration, filename string, argv []string) {
	if argv == nil {
		argv, _ = p.fs.Argv(int(st.PID))
	}
	if filename == "" {
		filename, _ = os.Readlink(filepath.Join(p.opts.ProcRoot, strconv.Itoa(int(st.PID)), "exe"))
	}
	m.Comm, m.Filename, m.Argv = st.Comm, filename, slices.Clone(argv)
	p.stats.Execs++
	p.emit(lineage.Event{
		Kind:     lineage.EventExec,
		Time:     now,
		Process:  m.Identity,
		Parent:   m.Parent,
		Root:     m.Root,
		Comm:     st.Comm,
		Filename: filename,
		Argv:     slices.Clone(argv),
	})
}

// exited marks m dead and emits its EXIT. Callers hold mu.
func (p *Proc) exited(m *procMember, status lineage.ExitStatus, now time.Duration) {
	m.Exited, m.Status, m.Ended = true, status, now
	p.stats.Exits++
	p.emit(lineage.Event{
		Kind:    lineage.EventExit,
		Time:    now,
		Process: m.Identity,
		Parent:  m.Parent,
		Root:    m.Root,
		Comm:    m.Comm,
		Status:  status,
	})
}

// reap waits for st, a zombie, if it is an orphan we inherited as subreaper
// (never a spawned root: that one is the caller's). Callers hold mu.
func (p *Proc) reap(st lineage.Stat) (lineage.ExitStatus, bool) {
	if !p.reaps || st.PPID != int(p.self.PID) || p.spawned[st.Identity] {
		return 0, false
	}
	var ws unix.WaitStatus
	got, err := unix.Wait4(int(st.PID), &ws, unix.WNOHANG, nil)
	if err != nil || got != int(st.PID) {
		return 0, false
	}
	return lineage.ExitStatus(ws), true
}

// zombieStatus reads a zombie's exit status from its stat, if we may: the
// kernel shows 0 to a reader without the right to inspect the process.
func (p *Proc) zombieStatus(st lineage.Stat) lineage.ExitStatus {
	if st.ExitCode != 0 || p.euid == 0 {
		return st.ExitCode
	}
	var fi unix.Stat_t
	if err := unix.Stat(filepath.Join(p.opts.ProcRoot, strconv.Itoa(int(st.PID))), &fi); err == nil && int(fi.Uid) == p.euid {
		return st.ExitCode
	}
	return lineage.StatusUnknown
}

// emit queues ev for Run. Callers hold mu.
func (p *Proc) emit(ev lineage.Event) {
	if len(p.pending) >= p.opts.MaxPending {
		p.stats.EventsLost++
		return
	}
	p.pending = append(p.pending, ev)
	select {
	case p.notify <- struct{}{}:
	default:
	}
}

func isZombie(st lineage.Stat) bool { return st.Zombie() }

// threadCPU returns the CPU time the calling thread has used.
func threadCPU() (time.Duration, error) {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		return 0, err
	}
	return time.Duration(ts.Nano()), nil
}
