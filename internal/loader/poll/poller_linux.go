package poll

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lineage-dev/lineage/internal/loader"
	"github.com/lineage-dev/lineage/internal/proc"
	"github.com/lineage-dev/lineage/lineage"
)

// Proc is the backend that polls /proc, for where BPF can't load: it needs
// no privileges beyond reading /proc. Create it with [Open] and Close it
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
// The backend never waits for a child. The caller makes this process a
// child subreaper, so that an orphan of a spawned lineage, a double-forked
// daemon say, is reparented here instead of to init and stays findable, and
// reaps its children; given that reaper (Options.Reaper), the backend
// learns the exit statuses of the members it reaps. /proc can't tell an
// orphan from a child this process started itself: one started other than
// through Spawn while a spawned root is registered is taken for an orphan of
// that lineage (see Spawn), so start such processes before Spawn, or through
// it.
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
//   - An exit's status is known when Options.Reaper reaped the member,
//     or a poll saw the member as a zombie and may read its exit code;
//     otherwise it is [lineage.StatusUnknown].
//   - Nothing happens in the kernel: Contain returns lineage.ContainStop (the reaper
//     stops the set itself), and RootOptions.DieWithSupervisor is refused.
//
// A Proc is safe for concurrent use by multiple goroutines, except that Run
// may be called only once.
type Poller struct {
	opts   Options
	fs     proc.FS
	euid   int
	ticker chan struct{}
	queue  *eventQueue

	// scanMu serialises scans, Spawn, Register and Members: no scan runs
	// between a process's start and its registration. It guards the
	// reader and the scans.
	scanMu    sync.Mutex
	reader    *proc.StatReader
	scanSet   *scanSet
	cur, prev *procScan
	scanErr   error
	// started counts scans begun, so that callers of Members can share a
	// scan that began after they asked.
	started atomic.Uint64

	// mu guards the tracker and the poller's figures. It is never held
	// during I/O, so that Forget, Contain, Stats and the reaper's reports
	// never wait for a scan.
	mu    sync.Mutex
	track *procTracker
	// reaped holds the statuses the reaper reported since the last scan
	// began; reapedBefore, during a scan, the ones reported before.
	reaped, reapedBefore map[int]lineage.ExitStatus
	poll                 Polling
	pace                 procPacer
	lastEnd              time.Time
	closed               bool

	done      chan struct{}
	wg        sync.WaitGroup
	closeOnce sync.Once
}

var _ loader.Backend = (*Poller)(nil)

// Open starts the proc backend: it scans /proc once, then starts the
// poller. Errors about opts wrap lineage.ErrInvalid.
func Open(opts *Options) (*Poller, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	o := opts.withDefaults()
	fs, err := proc.Open(o.ProcRoot)
	if err != nil {
		return nil, fmt.Errorf("proc backend: %w", err)
	}
	p := &Poller{
		opts:         o,
		fs:           fs,
		euid:         os.Geteuid(),
		reader:       fs.StatReader(),
		scanSet:      newScanSet(),
		cur:          newProcScan(),
		prev:         newProcScan(),
		reaped:       make(map[int]lineage.ExitStatus),
		reapedBefore: make(map[int]lineage.ExitStatus),
		pace:         newProcPacer(o),
		queue:        newEventQueue(o.MaxPending),
		ticker:       make(chan struct{}, 1),
		done:         make(chan struct{}),
	}
	p.reader.KeepOpen(p.scanSet.keepOpen)
	// Our own pid in the proc root's view; in a fake tree, whatever it says.
	self, _ := p.reader.Stat(os.Getpid())
	if self.PID == 0 {
		self.PID = uint32(os.Getpid())
	}
	p.track = newProcTracker(self)
	if o.Reaper != nil {
		o.Reaper.OnReap(p.reapedChild)
	}
	p.scanMu.Lock()
	err = p.pollLocked()
	p.scanMu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("proc backend: %w", err)
	}
	p.wg.Add(1)
	go p.poller()
	return p, nil
}

// Name implements Backend.
func (p *Poller) Name() string { return "proc" }

// Polling returns how the poller is doing.
func (p *Poller) Polling() Polling {
	p.mu.Lock()
	defer p.mu.Unlock()
	ps := p.poll
	ps.Unattributed = p.track.unattributed
	return ps
}

// Spawn implements Backend. The root is registered before any scan can run,
// so whatever it forks is found by the next poll, if it lives that long or
// leaves an orphan. The caller keeps cmd, and waits for it, or has
// Options.Reaper do so.
//
// An orphan is a process no poll saw before whose parent is now this process
// (it was reparented here through the subreaper). It becomes a member, with
// an unknown (zero) lineage parent, of the spawned root it must come from:
// the only spawned root, not forgotten, that started before it; or, when
// there are several, the only one with a member that leads the orphan's
// session or process group, or shares it (unless this process shares it
// too). When even that is ambiguous, the orphan is no one's member: an
// EventFork with Untracked set and Polling.Unattributed say that it
// escaped. With no spawned root, a new child of this process is not taken
// for an orphan of any lineage.
func (p *Poller) Spawn(cmd *exec.Cmd, opts loader.RootOptions) (lineage.Identity, error) {
	if opts.DieWithSupervisor {
		return lineage.Identity{}, errNoDieWithSupervisor
	}
	p.scanMu.Lock()
	defer p.scanMu.Unlock()
	if p.isClosed() {
		return lineage.Identity{}, fmt.Errorf("spawn: %w", os.ErrClosed)
	}
	if err := cmd.Start(); err != nil {
		return lineage.Identity{}, err
	}
	// Our child can't be reaped before the caller lets it, so its stat is
	// there.
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
	st = p.trusted(st)
	now := &procScan{now: proc.BootTime()}
	_ = p.change(func(t *procTracker) error {
		t.addRoot(st, t.self.Identity, true, now, cmd.Path, cmd.Args)
		return nil
	})
	p.tick()
	return st.Identity, nil
}

var errNoDieWithSupervisor = fmt.Errorf("%w: the proc backend can't kill a lineage when its supervisor dies: that needs the bpf backend", loader.ErrUnavailable)

// Register implements Backend. Descendants that a descendant created and
// that were reparented away before registration can't be found (/proc shows
// only the current parent); from then on, children are found by the poll,
// with the limits of a poller.
func (p *Poller) Register(id lineage.Identity, opts loader.RootOptions) error {
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
	case st.Zombie():
		return fmt.Errorf("register %s: it has exited: %w", id, lineage.ErrNoProcess)
	case st.Kernel:
		return fmt.Errorf("register %s: %w: a kernel thread can't be tracked", id, lineage.ErrInvalid)
	}
	now := &procScan{now: proc.BootTime()}
	var parent lineage.Identity
	if ps, err := p.reader.Stat(st.PPID); err == nil {
		parent = ps.Identity
	}
	if o := opts.Orphanage; o != (lineage.Identity{}) && o != parent {
		return fmt.Errorf("register %s: %w orphanage %s: not the root's parent (%s)", id, lineage.ErrInvalid, o, parent)
	}
	err = p.change(func(t *procTracker) error {
		if m, ok := t.members[id.PID]; ok && m.Identity == id {
			return fmt.Errorf("register %s: %w: member of root %s", id, loader.ErrAlreadyTracked, m.Root)
		}
		t.addRoot(st, parent, false, now, "", nil)
		return t.declareOrphanage(id, opts.Orphanage)
	})
	if err != nil {
		return err
	}
	_, err = p.fs.Adopt(id, p.isMember, func(child lineage.Stat, parent lineage.Identity) error {
		// Re-read with our own reader: it also reads the exit code.
		st, err := p.reader.Stat(int(child.PID))
		if err != nil || st.Identity != child.Identity {
			return nil // gone meanwhile
		}
		st = p.trusted(st)
		return p.change(func(t *procTracker) error {
			t.adoptChild(st, parent, id, now)
			return nil
		})
	})
	if err != nil {
		return fmt.Errorf("register %s: %w", id, err)
	}
	return nil
}

// DeclareOrphanage makes orphanage, which must live, the orphanage of
// root, a root registered without one: as [loader.RootOptions.Orphanage]
// at Register.
func (p *Poller) DeclareOrphanage(root, orphanage lineage.Identity) error {
	if err := p.fs.Check(orphanage); err != nil {
		return fmt.Errorf("root %s: orphanage: %w", root, err)
	}
	return p.change(func(t *procTracker) error { return t.declareOrphanage(root, orphanage) })
}

func (p *Poller) isMember(id lineage.Identity) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.track.isMember(id)
}

// Members implements Backend. It scans /proc first (or shares a scan that
// began after the call), so its cost is that of a scan, about 10 µs per
// process on the machine: call it at the pace a reaper needs, not in a
// tight loop. A root that is not registered has no members.
func (p *Poller) Members(root lineage.Identity) ([]lineage.Member, error) {
	seen := p.started.Load()
	p.scanMu.Lock()
	defer p.scanMu.Unlock()
	if err := p.refreshLocked(seen); err != nil {
		return nil, fmt.Errorf("members of %s: %w", root, err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.track.liveMembers(root), nil
}

// MembersOfEach is [Proc.Members] for each of roots, from one scan. A
// root with no live member has no entry.
func (p *Poller) MembersOfEach(roots []lineage.Identity) (map[lineage.Identity][]lineage.Member, error) {
	seen := p.started.Load()
	p.scanMu.Lock()
	defer p.scanMu.Unlock()
	if err := p.refreshLocked(seen); err != nil {
		return nil, fmt.Errorf("members: %w", err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[lineage.Identity][]lineage.Member, len(roots))
	for _, r := range roots {
		if ms := p.track.liveMembers(r); len(ms) > 0 {
			out[r] = ms
		}
	}
	return out, nil
}

// Contain implements Backend: the proc backend can't stop forks, so the
// reaper must stop the set itself (lineage.ContainStop).
func (p *Poller) Contain(root lineage.Identity) (lineage.Containment, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.track.contain(root); err != nil {
		return "", err
	}
	return lineage.ContainStop, nil
}

// Uncontain ends what Contain started, for a lineage that lives on after a
// reap that spared some of its members. The proc backend holds nothing in
// place: the stop containment is the reaper's, and the reaper resumes every
// member it stopped and did not end (kept, refused, or left when the reap
// was cut short) before it returns.
func (p *Poller) Uncontain(root lineage.Identity) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.track.uncontain(root)
}

// Forget implements Backend. Orphans of a forgotten spawned lineage that
// reparent to this process later are no longer attributed to it.
func (p *Poller) Forget(root lineage.Identity) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.track.forget(root)
}

// Stats implements Backend. Stale counts members whose pid was found reused
// by another process before a poll saw them exit; Unattributed the orphans
// that escaped because no one spawned root could claim them.
func (p *Poller) Stats() (loader.Stats, error) {
	p.mu.Lock()
	st := p.track.counts
	st.Unattributed = p.track.unattributed
	p.mu.Unlock()
	st.EventsLost = p.queue.lostCount()
	return st, nil
}

// Run implements Backend. FORK events carry the time the process started
// (to the clock tick); EXEC and EXIT events the time of the poll that saw
// them.
func (p *Poller) Run(ctx context.Context, fn func(lineage.Event)) error {
	return p.queue.run(ctx, p.done, fn)
}

// Close implements Backend: it stops the poller and closes the stat files it
// keeps open. Run returns, and Spawn, Register and Members fail with
// os.ErrClosed; the reaper's reports are ignored.
func (p *Poller) Close() error {
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

func (p *Poller) isClosed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closed
}

// reapedChild is the reaper's report of a child it reaped: its status waits
// for the next diff.
func (p *Poller) reapedChild(pid int, status lineage.ExitStatus) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.closed {
		p.reaped[pid] = status
	}
}
