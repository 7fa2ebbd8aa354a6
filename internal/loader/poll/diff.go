package poll

import (
	"fmt"
	"slices"
	"time"

	"github.com/lineage-dev/lineage/internal/loader"
	"github.com/lineage-dev/lineage/lineage"
)

// procTracker is the proc backend's core: the membership that successive
// scans of /proc imply, and the events that tell its changes. It does no
// I/O, reads no clock and takes no lock: the poller (proc_linux.go) reads
// /proc, passes in what it read and the time, and publishes the events the
// tracker returns. EXEC events it returns carry no Filename or Argv; the
// poller reads them and hands them back with described. It is not safe for
// concurrent use.
type procTracker struct {
	// self is this process: orphans reparented to it may come from a
	// spawned root.
	self    lineage.Stat
	members map[uint32]*procMember
	roots   map[lineage.Identity]*procRoot
	// spawned holds every root Spawn started, forgotten or not: its ppid is
	// this process, and it is no orphan.
	spawned map[lineage.Identity]bool
	// leftRecently maps the pids of members gone in the last two scans to
	// their root, to attribute orphans whose session or group they led.
	leftRecently, leftBefore map[uint32]lineage.Identity
	// counts holds Forks, Execs, Exits and Stale.
	counts loader.Stats
	// unattributed counts orphans no spawned root could claim.
	unattributed uint64
	fresh        []int
	out          []lineage.Event
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
	// orphanage is the process, the root's parent, declared to inherit
	// the lineage's orphans (loader.RootOptions.Orphanage); zero if none.
	orphanage lineage.Identity
}

// procScan is what one scan of /proc read, and when.
type procScan struct {
	// procs holds every process's stat, by pid.
	procs map[int]lineage.Stat
	// unreadable holds the pids listed whose stat could not be read for
	// another reason than being gone: nothing is concluded about them.
	unreadable map[int]bool
	// reaped holds the wait statuses, by pid, of the children this
	// process's reaper reaped since the scan before.
	reaped map[int]lineage.ExitStatus
	// parentLost holds the pids whose parent, a member when the process
	// was read, was no longer that member when the poller read the parent
	// again right after: the pid it names as parent may be a stranger that
	// took the member's pid. They are not adopted from this scan.
	parentLost map[int]bool
	now        time.Duration
}

func newProcScan() *procScan {
	return &procScan{procs: make(map[int]lineage.Stat), unreadable: make(map[int]bool), parentLost: make(map[int]bool)}
}

func (s *procScan) reset() {
	clear(s.procs)
	clear(s.unreadable)
	clear(s.parentLost)
	s.reaped = nil
}

// exitStatus is st's wait status: what the reaper got, or else field 52
// (which the poller sets to StatusUnknown when it may not be trusted).
func (s *procScan) exitStatus(st lineage.Stat) lineage.ExitStatus {
	if status, ok := s.reaped[int(st.PID)]; ok {
		return status
	}
	return st.ExitCode
}

// goneStatus is the wait status of the process that had pid and is gone.
func (s *procScan) goneStatus(pid uint32) lineage.ExitStatus {
	if status, ok := s.reaped[int(pid)]; ok {
		return status
	}
	return lineage.StatusUnknown
}

func newProcTracker(self lineage.Stat) *procTracker {
	return &procTracker{
		self:         self,
		members:      make(map[uint32]*procMember),
		roots:        make(map[lineage.Identity]*procRoot),
		spawned:      make(map[lineage.Identity]bool),
		leftRecently: make(map[uint32]lineage.Identity),
		leftBefore:   make(map[uint32]lineage.Identity),
	}
}

// take returns the events queued since the last take.
func (t *procTracker) take() []lineage.Event {
	out := t.out
	t.out = nil
	return out
}

// diff turns the difference between the scan before (prev) and this one
// (cur) into membership changes, and returns the events that tell them.
func (t *procTracker) diff(prev map[int]lineage.Stat, cur *procScan) []lineage.Event {
	t.leftBefore, t.leftRecently = t.leftRecently, t.leftBefore
	clear(t.leftRecently)
	for pid, m := range t.members {
		if !cur.unreadable[int(pid)] {
			t.update(m, cur)
		}
	}
	t.adoptFresh(prev, cur)
	return t.take()
}

// update follows member m to this scan: gone, dead, or changed.
func (t *procTracker) update(m *procMember, cur *procScan) {
	st, ok := cur.procs[int(m.PID)]
	switch {
	case !ok || st.StartTicks != m.StartTicks:
		if ok {
			t.counts.Stale++ // the pid was reused by a stranger
		}
		if !m.Exited {
			t.exited(m, cur.goneStatus(m.PID), cur.now)
		}
		t.leftRecently[m.PID] = m.Root
		delete(t.members, m.PID)
	case st.Zombie():
		// Dead, and kept (exited) until its zombie is reaped.
		if !m.Exited {
			t.exited(m, cur.exitStatus(st), cur.now)
		}
	default:
		m.ppid, m.pgrp, m.session = st.PPID, st.PGRP, st.Session
		if st.Comm != m.Comm || changedStack(m.stack, st.StartStack) {
			t.execed(m, st, cur.now, "", nil)
		}
		m.prevStack, m.stack = m.stack, st.StartStack
	}
}

// adoptFresh makes members of the processes whose parent is a member, and
// of the orphans reparented to this process that a spawned root claims.
// It judges the processes no scan saw before and those that changed
// parents; then, once it adopted any, the processes seen before whose
// parent is now a member: they were left out only because their own parent
// was not adopted yet (deferred by parentLost, say), and must not stay out
// once it is in.
func (t *procTracker) adoptFresh(prev map[int]lineage.Stat, cur *procScan) {
	fresh := t.fresh[:0]
	for pid, st := range cur.procs {
		if t.isMemberStat(st) || st.Kernel {
			continue
		}
		if old, ok := prev[pid]; ok && old.StartTicks == st.StartTicks && old.PPID == st.PPID && !t.parentMayAdopt(st) {
			continue
		}
		if cur.parentLost[pid] {
			// Its parent may be a stranger: judge it again at the next
			// scan, as if this one had not seen it.
			delete(cur.procs, pid)
			continue
		}
		fresh = append(fresh, pid)
	}
	forks := t.counts.Forks
	t.fresh = t.adoptAll(fresh, cur)
	for t.counts.Forks != forks {
		forks = t.counts.Forks
		late := t.fresh[:0]
		for pid, st := range cur.procs {
			if !st.Kernel && !t.isMemberStat(st) && t.parentMayAdopt(st) {
				late = append(late, pid)
			}
		}
		t.fresh = t.adoptAll(late, cur)
	}
}

// adoptAll judges the processes of pids, parents before children: it
// repeats until a pass adopts nothing. It returns pids, to be reused.
func (t *procTracker) adoptAll(pids []int, cur *procScan) []int {
	slices.Sort(pids) // the same events, in the same order, for the same scans
	for changed := true; changed; {
		changed = false
		for i, pid := range pids {
			if pid != 0 && t.adoptOne(cur.procs[pid], cur) {
				pids[i], changed = 0, true
			}
		}
	}
	return pids
}

// isMemberStat reports whether st is a member's process.
func (t *procTracker) isMemberStat(st lineage.Stat) bool {
	m, ok := t.members[st.PID]
	return ok && m.StartTicks == st.StartTicks
}

// parentMayAdopt reports whether st's parent is a member it may be a child
// of: alive, and not younger than st.
func (t *procTracker) parentMayAdopt(st lineage.Stat) bool {
	parent, ok := t.members[uint32(st.PPID)]
	return ok && !parent.Exited && parent.StartTicks <= st.StartTicks
}

// adoptOne adopts st if it is a member's child or an orphan reparented to
// this process, and reports whether it is done with st.
func (t *procTracker) adoptOne(st lineage.Stat, cur *procScan) bool {
	if t.parentMayAdopt(st) {
		parent := t.members[uint32(st.PPID)]
		t.adopt(st, parent, parent.Root, cur)
		return true
	}
	if st.PPID != int(t.self.PID) || t.spawned[st.Identity] {
		return t.adoptFromOrphanage(st, cur)
	}
	root, ok, ambiguous := t.attribute(st)
	switch {
	case ok:
		t.adopt(st, nil, root, cur)
	case ambiguous:
		t.unattributed++
		t.emit(lineage.Event{Kind: lineage.EventFork, Time: lineage.TicksToDuration(st.StartTicks), Process: st.Identity, Comm: st.Comm, Untracked: true})
	}
	return true
}

// addRoot makes st a root, and a member with the lineage parent given. A
// spawned root's orphans are attributed to it; filename and argv, when
// known, are its exec's.
func (t *procTracker) addRoot(st lineage.Stat, parent lineage.Identity, spawned bool, cur *procScan, filename string, argv []string) {
	if spawned {
		t.spawned[st.Identity] = true
	}
	t.roots[st.Identity] = &procRoot{id: st.Identity, spawned: spawned}
	m := t.addMember(st, parent, st.Identity, true)
	t.execed(m, st, cur.now, filename, argv)
	if st.Zombie() {
		t.exited(m, cur.exitStatus(st), cur.now)
	}
}

// adopt makes st a member, child of parent (nil when unknown: an orphan),
// and emits what can be told of it.
func (t *procTracker) adopt(st lineage.Stat, parent *procMember, root lineage.Identity, cur *procScan) {
	var pid lineage.Identity
	if parent != nil {
		pid = parent.Identity
	}
	m := t.addMember(st, pid, root, false)
	if st.Zombie() {
		t.exited(m, cur.exitStatus(st), cur.now)
		return
	}
	// A forked child shares its parent's name and stack until it execs.
	if parent == nil || st.Comm != parent.Comm ||
		(changedStack(parent.stack, st.StartStack) && changedStack(parent.prevStack, st.StartStack)) {
		t.execed(m, st, cur.now, "", nil)
	}
}

// adoptChild makes st a member as child of parent, if parent is one.
func (t *procTracker) adoptChild(st lineage.Stat, parent, root lineage.Identity, cur *procScan) {
	if pm, ok := t.members[parent.PID]; ok && pm.Identity == parent {
		t.adopt(st, pm, root, cur)
	}
}

func changedStack(old, cur uint64) bool {
	// 0 means unknown: a zombie, or not ours to inspect.
	return old != 0 && cur != 0 && old != cur
}

// addMember records st as a member and emits its FORK.
func (t *procTracker) addMember(st lineage.Stat, parent, root lineage.Identity, isRoot bool) *procMember {
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
	t.members[st.PID] = m
	t.counts.Forks++
	t.emit(lineage.Event{
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

// execed emits an EXEC for m, with filename and argv when known.
func (t *procTracker) execed(m *procMember, st lineage.Stat, now time.Duration, filename string, argv []string) {
	m.Comm, m.Filename, m.Argv = st.Comm, filename, slices.Clone(argv)
	t.counts.Execs++
	t.emit(lineage.Event{
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

// described records what member id runs, as read after its EXEC.
func (t *procTracker) described(id lineage.Identity, filename string, argv []string) {
	if m, ok := t.members[id.PID]; ok && m.Identity == id {
		m.Filename, m.Argv = filename, slices.Clone(argv)
	}
}

// exited marks m dead and emits its EXIT.
func (t *procTracker) exited(m *procMember, status lineage.ExitStatus, now time.Duration) {
	m.Exited, m.Status, m.Ended = true, status, now
	t.counts.Exits++
	t.emit(lineage.Event{
		Kind:    lineage.EventExit,
		Time:    now,
		Process: m.Identity,
		Parent:  m.Parent,
		Root:    m.Root,
		Comm:    m.Comm,
		Status:  status,
	})
}

func (t *procTracker) emit(ev lineage.Event) { t.out = append(t.out, ev) }

// isMember reports whether id is a member, live or not yet reaped.
func (t *procTracker) isMember(id lineage.Identity) bool {
	m, ok := t.members[id.PID]
	return ok && m.Identity == id
}

// liveMembers returns root's members that have not exited, by identity.
func (t *procTracker) liveMembers(root lineage.Identity) []lineage.Member {
	var out []lineage.Member
	for _, m := range t.members {
		if m.Root == root && !m.Exited {
			c := m.Member
			c.Argv = slices.Clone(m.Argv)
			out = append(out, c)
		}
	}
	slices.SortFunc(out, func(a, b lineage.Member) int { return lineage.Compare(a.Identity, b.Identity) })
	return out
}

// contain marks root as being reaped.
func (t *procTracker) contain(root lineage.Identity) error {
	r, ok := t.roots[root]
	if !ok {
		return fmt.Errorf("root %s: %w", root, loader.ErrNotRoot)
	}
	r.reaping = true
	return nil
}

// uncontain ends root's reap: nothing of the proc backend's containment
// outlives it (the reaper resumes what it stopped and did not end).
func (t *procTracker) uncontain(root lineage.Identity) error {
	r, ok := t.roots[root]
	if !ok {
		return fmt.Errorf("root %s: %w", root, loader.ErrNotRoot)
	}
	r.reaping = false
	return nil
}

// forget drops root and its members. Orphans of a forgotten spawned root
// that reparent to this process later are no longer attributed to it.
func (t *procTracker) forget(root lineage.Identity) error {
	if _, ok := t.roots[root]; !ok {
		return fmt.Errorf("forget %s: %w", root, loader.ErrNotRoot)
	}
	delete(t.roots, root)
	for pid, m := range t.members {
		if m.Root == root {
			delete(t.members, pid)
		}
	}
	return nil
}
