package loader

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lineage-dev/lineage/internal/lineage"
)

// Fake pids start above PID_MAX_LIMIT (4194304 on 64-bit kernels), so no real
// process can ever have one: a fake entry that reaches the kernel (the BPF
// backend's maps) names nothing.
const fakePID = 4194400

// fakeProcTree is a /proc tree in a temporary directory: each process is a
// directory with a stat and a cmdline, written in the kernel's format.
type fakeProcTree struct {
	tb   testing.TB
	root string
}

func newFakeProcTree(tb testing.TB) *fakeProcTree {
	tb.Helper()
	return &fakeProcTree{tb: tb, root: tb.TempDir()}
}

// fakeProcess is one process of a fake tree.
type fakeProcess struct {
	pid, ppid, pgrp, session int
	comm, state              string
	start, stack             uint64
	exit                     int
	argv                     []string
}

func (f *fakeProcTree) set(p fakeProcess) {
	f.tb.Helper()
	if p.state == "" {
		p.state = "S"
	}
	if p.pgrp == 0 {
		p.pgrp = p.pid
	}
	if p.session == 0 {
		p.session = p.pgrp
	}
	if p.comm == "" {
		p.comm = "sleep"
	}
	if p.stack == 0 && p.state != "Z" {
		p.stack = 0x7ffc00000000 + p.start
	}
	fields := make([]string, 53)
	for i := range fields {
		fields[i] = "0"
	}
	fields[1], fields[2], fields[3] = fmt.Sprint(p.pid), "("+p.comm+")", p.state
	fields[4], fields[5], fields[6] = fmt.Sprint(p.ppid), fmt.Sprint(p.pgrp), fmt.Sprint(p.session)
	fields[8], fields[9] = "-1", "4194304"
	fields[18], fields[20] = "20", "1"
	fields[22], fields[28], fields[52] = fmt.Sprint(p.start), fmt.Sprint(p.stack), fmt.Sprint(p.exit)
	dir := filepath.Join(f.root, fmt.Sprint(p.pid))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		f.tb.Fatal(err)
	}
	stat := strings.Join(fields[1:], " ") + "\n"
	cmdline := ""
	if p.state != "Z" {
		argv := p.argv
		if argv == nil {
			argv = []string{p.comm}
		}
		cmdline = strings.Join(argv, "\x00") + "\x00"
	}
	for name, content := range map[string]string{"stat": stat, "cmdline": cmdline} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			f.tb.Fatal(err)
		}
	}
}

func (f *fakeProcTree) remove(pid int) {
	f.tb.Helper()
	if err := os.RemoveAll(filepath.Join(f.root, fmt.Sprint(pid))); err != nil {
		f.tb.Fatal(err)
	}
}

// supervisor puts this test process in the fake tree, as the supervisor the
// proc backend finds itself to be.
func (f *fakeProcTree) supervisor() fakeProcess {
	p := fakeProcess{pid: os.Getpid(), ppid: 1, comm: "lineage", start: 50, session: 7}
	f.set(p)
	return p
}

func (f *fakeProcTree) id(p fakeProcess) lineage.Identity {
	return lineage.Identity{PID: uint32(p.pid), StartTicks: p.start}
}

// openFakeProc opens the proc backend on a fake tree; it polls only when a
// test asks (Members), never on its own.
func openFakeProc(tb testing.TB, f *fakeProcTree) (*Proc, *procEvents) {
	tb.Helper()
	p, err := OpenProc(&ProcOptions{ProcRoot: f.root, Interval: time.Hour})
	if err != nil {
		tb.Fatal(err)
	}
	ev := collectProcEvents(tb, p)
	tb.Cleanup(func() { p.Close() })
	return p, ev
}

// procEvents collects a backend's events.
type procEvents struct {
	mu     sync.Mutex
	events []lineage.Event
	stop   func()
}

func collectProcEvents(tb testing.TB, b Backend) *procEvents {
	tb.Helper()
	c := &procEvents{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- b.Run(ctx, func(ev lineage.Event) {
			c.mu.Lock()
			c.events = append(c.events, ev)
			c.mu.Unlock()
		})
	}()
	var once sync.Once
	c.stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				tb.Errorf("run: %v", err)
			}
		})
	}
	tb.Cleanup(c.stop)
	return c
}

// of returns the events about id, waiting a little for Run to deliver them.
func (c *procEvents) of(id lineage.Identity, kinds ...lineage.EventKind) []lineage.Event {
	var out []lineage.Event
	for range 100 {
		out = out[:0]
		c.mu.Lock()
		for _, ev := range c.events {
			if ev.Process == id && (len(kinds) == 0 || slices.Contains(kinds, ev.Kind)) {
				out = append(out, ev)
			}
		}
		c.mu.Unlock()
		if len(out) > 0 {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	return out
}

func (c *procEvents) all() []lineage.Event {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.events)
}

func memberIDs(tb testing.TB, b Backend, root lineage.Identity) []lineage.Identity {
	tb.Helper()
	ms, err := b.Members(root)
	if err != nil {
		tb.Fatalf("members of %s: %v", root, err)
	}
	var ids []lineage.Identity
	for _, m := range ms {
		ids = append(ids, m.Identity)
	}
	return ids
}

func sameIDs(got []lineage.Identity, want ...lineage.Identity) bool {
	g, w := slices.Clone(got), slices.Clone(want)
	less := func(a, b lineage.Identity) int { return int(a.PID) - int(b.PID) }
	slices.SortFunc(g, less)
	slices.SortFunc(w, less)
	return slices.Equal(g, w)
}

// spawnFake registers p as a root that Spawn started, as Spawn would.
func (p *Proc) spawnFake(tb testing.TB, st lineage.Stat) {
	tb.Helper()
	p.scanMu.Lock()
	defer p.scanMu.Unlock()
	_ = p.change(func(t *procTracker) error {
		t.addRoot(st, t.self.Identity, true, &procScan{}, "", []string{st.Comm})
		return nil
	})
}

func (f *fakeProcTree) stat(p fakeProcess) lineage.Stat {
	return lineage.Stat{Identity: f.id(p), PPID: p.ppid, PGRP: p.pgrp, Session: p.session, State: "S", Comm: p.comm}
}

func TestProcForkExecExitByDifference(t *testing.T) {
	f := newFakeProcTree(t)
	f.supervisor()
	root := fakeProcess{pid: fakePID, ppid: 1, comm: "sh", start: 1000, argv: []string{"sh", "-c", "job"}}
	f.set(root)
	p, events := openFakeProc(t, f)
	rid := f.id(root)
	if err := p.Register(rid, RootOptions{}); err != nil {
		t.Fatal(err)
	}

	child := fakeProcess{pid: fakePID + 1, ppid: root.pid, comm: "sh", start: 1010, stack: root.stack}
	child.stack = 0x7ffc00000000 + root.start // a fork shares its parent's stack
	f.set(child)
	cid := f.id(child)
	if got := memberIDs(t, p, rid); !sameIDs(got, rid, cid) {
		t.Fatalf("after fork: members %v, want root and child", got)
	}
	fork := events.of(cid, lineage.EventFork)
	if len(fork) != 1 || fork[0].Parent != rid || fork[0].Root != rid || fork[0].Time != 10100*time.Millisecond {
		t.Errorf("fork events: %+v", fork)
	}
	if ex := events.of(cid, lineage.EventExec); len(ex) != 0 {
		t.Errorf("a plain fork was taken for an exec: %+v", ex)
	}

	// The child execs: new name, new stack, new command line.
	child.comm, child.stack, child.argv = "sleep", 0x7ffd12340000, []string{"sleep", "60"}
	f.set(child)
	memberIDs(t, p, rid)
	ex := events.of(cid, lineage.EventExec)
	if len(ex) != 1 || !slices.Equal(ex[0].Argv, []string{"sleep", "60"}) || ex[0].Comm != "sleep" {
		t.Errorf("exec events: %+v", ex)
	}

	// It becomes a zombie with status "exit 3", then its parent reaps it.
	child.state, child.exit = "Z", 3<<8
	f.set(child)
	if got := memberIDs(t, p, rid); !sameIDs(got, rid) {
		t.Errorf("a zombie is still a member: %v", got)
	}
	exit := events.of(cid, lineage.EventExit)
	if len(exit) != 1 || exit[0].Status != 3<<8 {
		t.Errorf("exit events: %+v", exit)
	}
	f.remove(child.pid)
	memberIDs(t, p, rid)
	if exit := events.of(cid, lineage.EventExit); len(exit) != 1 {
		t.Errorf("exit reported %d times", len(exit))
	}

	// A process that is gone without a zombie seen: status unknown.
	other := fakeProcess{pid: fakePID + 2, ppid: root.pid, start: 1020}
	f.set(other)
	memberIDs(t, p, rid)
	f.remove(other.pid)
	memberIDs(t, p, rid)
	exit = events.of(f.id(other), lineage.EventExit)
	if len(exit) != 1 || exit[0].Status.Known() {
		t.Errorf("exit of a process gone unseen: %+v, want status unknown", exit)
	}
	st, _ := p.Stats()
	if st.Forks != 3 || st.Exits != 2 {
		t.Errorf("stats %+v", st)
	}
}

func TestProcMembershipSurvivesReparenting(t *testing.T) {
	f := newFakeProcTree(t)
	f.supervisor()
	root := fakeProcess{pid: fakePID, ppid: 1, start: 1000}
	child := fakeProcess{pid: fakePID + 1, ppid: root.pid, start: 1010}
	f.set(root)
	f.set(child)
	p, _ := openFakeProc(t, f)
	rid, cid := f.id(root), f.id(child)
	if err := p.Register(rid, RootOptions{}); err != nil {
		t.Fatal(err)
	}
	// setsid, then its parent dies: reparented to init, in a new session.
	f.remove(root.pid)
	child.ppid, child.session, child.pgrp = 1, child.pid, child.pid
	f.set(child)
	// And it forks a grandchild.
	grand := fakeProcess{pid: fakePID + 2, ppid: child.pid, start: 1030, session: child.pid}
	f.set(grand)
	if got := memberIDs(t, p, rid); !sameIDs(got, cid, f.id(grand)) {
		t.Errorf("members %v, want the reparented child and its child", got)
	}
	ms, _ := p.Members(rid)
	for _, m := range ms {
		if m.Identity == f.id(grand) && m.Parent != cid {
			t.Errorf("grandchild's lineage parent is %s, want %s", m.Parent, cid)
		}
	}
}

// PID reuse: a member's pid comes back with another start time. The stranger
// is never a member, nor are its children.
func TestProcPIDReuseStrangerIsNeverAMember(t *testing.T) {
	f := newFakeProcTree(t)
	f.supervisor()
	root := fakeProcess{pid: fakePID, ppid: 1, start: 1000}
	child := fakeProcess{pid: fakePID + 1, ppid: root.pid, start: 1010}
	f.set(root)
	f.set(child)
	p, events := openFakeProc(t, f)
	rid, cid := f.id(root), f.id(child)
	if err := p.Register(rid, RootOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := memberIDs(t, p, rid); !sameIDs(got, rid, cid) {
		t.Fatalf("members %v", got)
	}

	// Between two polls the child dies and its pid goes to a stranger whose
	// parent is init; the stranger forks.
	stranger := fakeProcess{pid: child.pid, ppid: 1, start: 5000, comm: "stranger"}
	f.set(stranger)
	strangerChild := fakeProcess{pid: fakePID + 3, ppid: stranger.pid, start: 5010}
	f.set(strangerChild)
	// The root's pid too: a stranger (started later) now holds it, with a
	// child of its own.
	rootStranger := fakeProcess{pid: root.pid, ppid: 1, start: 6000, comm: "stranger"}
	f.set(rootStranger)
	rootStrangerChild := fakeProcess{pid: fakePID + 4, ppid: root.pid, start: 6010}
	f.set(rootStrangerChild)

	if got := memberIDs(t, p, rid); len(got) != 0 {
		t.Errorf("members after pid reuse: %v, want none", got)
	}
	for _, q := range []fakeProcess{stranger, strangerChild, rootStranger, rootStrangerChild} {
		if p.isMember(f.id(q)) {
			t.Errorf("stranger %s is a member", f.id(q))
		}
	}
	for _, ev := range events.all() {
		if ev.Process.StartTicks >= 5000 {
			t.Errorf("event about a stranger: %+v", ev)
		}
	}
	if exit := events.of(cid, lineage.EventExit); len(exit) != 1 || exit[0].Status.Known() {
		t.Errorf("the member whose pid was reused: exit events %+v", exit)
	}
	st, _ := p.Stats()
	if st.Stale != 2 {
		t.Errorf("stale = %d, want 2 (two pids found reused)", st.Stale)
	}

	// The stranger can't be registered under the member's identity, and a
	// process that claims a parent started after it is not taken for its
	// child.
	if err := p.Register(cid, RootOptions{}); !errors.Is(err, lineage.ErrIdentityMismatch) {
		t.Errorf("register the old identity: %v, want ErrIdentityMismatch", err)
	}
	if err := p.Register(f.id(rootStranger), RootOptions{}); err != nil {
		t.Fatal(err)
	}
	older := fakeProcess{pid: fakePID + 5, ppid: rootStranger.pid, start: 5999}
	f.set(older)
	if slices.Contains(memberIDs(t, p, f.id(rootStranger)), f.id(older)) {
		t.Errorf("a process older than its supposed parent was adopted")
	}
}

// The same at the very first sight: Register adopts only by identity.
func TestProcRegisterWithStaleIdentityAdoptsNothing(t *testing.T) {
	f := newFakeProcTree(t)
	f.supervisor()
	now := fakeProcess{pid: fakePID, ppid: 1, start: 7000}
	f.set(now)
	f.set(fakeProcess{pid: fakePID + 1, ppid: now.pid, start: 7010})
	p, events := openFakeProc(t, f)
	old := lineage.Identity{PID: uint32(now.pid), StartTicks: 1000}
	if err := p.Register(old, RootOptions{}); !errors.Is(err, lineage.ErrIdentityMismatch) {
		t.Fatalf("register a reused pid's old identity: %v", err)
	}
	if got := memberIDs(t, p, old); len(got) != 0 {
		t.Errorf("members %v", got)
	}
	if _, err := p.Contain(old); !errors.Is(err, ErrNotRoot) {
		t.Errorf("contain: %v, want ErrNotRoot", err)
	}
	if evs := events.all(); len(evs) != 0 {
		t.Errorf("events: %+v", evs)
	}
}

func TestProcOrphansAreAttributedToTheSpawnedRoot(t *testing.T) {
	f := newFakeProcTree(t)
	sup := f.supervisor()
	root := fakeProcess{pid: fakePID, ppid: sup.pid, start: 1000, session: sup.session, pgrp: fakePID}
	f.set(root)
	// Started before the root: the supervisor's own, not an orphan of it.
	before := fakeProcess{pid: fakePID + 9, ppid: sup.pid, start: 900, session: sup.session}
	f.set(before)
	p, events := openFakeProc(t, f)
	p.spawnFake(t, f.stat(root))
	rid := f.id(root)

	// A double-forked daemon, reparented to us before any poll saw the
	// process between: one spawned root, so it is that root's.
	daemon := fakeProcess{pid: fakePID + 2, ppid: sup.pid, start: 1100, session: fakePID + 1}
	f.set(daemon)
	if got := memberIDs(t, p, rid); !sameIDs(got, rid, f.id(daemon)) {
		t.Fatalf("members %v, want the root and the daemon", got)
	}
	fork := events.of(f.id(daemon), lineage.EventFork)
	if len(fork) != 1 || !fork[0].Parent.IsZero() || fork[0].Root != rid {
		t.Errorf("orphan's fork: %+v, want root %s and an unknown parent", fork, rid)
	}

	// Two spawned roots: an orphan is attributed by the session or process
	// group it shares with one of them, and only then.
	root2 := fakeProcess{pid: fakePID + 20, ppid: sup.pid, start: 1200, session: sup.session, pgrp: fakePID + 20}
	f.set(root2)
	p.spawnFake(t, f.stat(root2))
	r2 := f.id(root2)
	worker := fakeProcess{pid: fakePID + 21, ppid: root2.pid, start: 1210, session: fakePID + 21, pgrp: fakePID + 21}
	f.set(worker)
	memberIDs(t, p, r2)
	inGroup := fakeProcess{pid: fakePID + 22, ppid: sup.pid, start: 1300, session: sup.session, pgrp: root2.pgrp}
	inSession := fakeProcess{pid: fakePID + 23, ppid: sup.pid, start: 1301, session: worker.session, pgrp: fakePID + 23}
	lost := fakeProcess{pid: fakePID + 24, ppid: sup.pid, start: 1302, session: fakePID + 24}
	for _, q := range []fakeProcess{inGroup, inSession, lost} {
		f.set(q)
	}
	if got := memberIDs(t, p, r2); !sameIDs(got, r2, f.id(worker), f.id(inGroup), f.id(inSession)) {
		t.Errorf("second root's members %v", got)
	}
	if got := memberIDs(t, p, rid); !sameIDs(got, rid, f.id(daemon)) {
		t.Errorf("first root's members %v", got)
	}
	untracked := events.of(f.id(lost), lineage.EventFork)
	if len(untracked) != 1 || !untracked[0].Untracked || !untracked[0].Root.IsZero() {
		t.Errorf("ambiguous orphan: events %+v, want one untracked fork", untracked)
	}
	if ps := p.PollStats(); ps.Unattributed != 1 {
		t.Errorf("unattributed = %d, want 1", ps.Unattributed)
	}
	if st, _ := p.Stats(); st.Unattributed != 1 {
		t.Errorf("stats: unattributed = %d, want 1: an escape is never hidden", st.Unattributed)
	}
	for _, id := range []lineage.Identity{f.id(before), f.id(lost)} {
		if p.isMember(id) {
			t.Errorf("%s is a member", id)
		}
	}

	// Forget drops a root and its members; its orphans are no one's.
	if err := p.Forget(rid); err != nil {
		t.Fatal(err)
	}
	if err := p.Forget(rid); !errors.Is(err, ErrNotRoot) {
		t.Errorf("forget twice: %v", err)
	}
	if p.isMember(f.id(daemon)) {
		t.Errorf("a forgotten root's member is still a member")
	}
}

func TestProcEventsQueueIsBoundedAndCountsLoss(t *testing.T) {
	f := newFakeProcTree(t)
	f.supervisor()
	root := fakeProcess{pid: fakePID, ppid: 1, start: 1000}
	f.set(root)
	for i := 1; i <= 10; i++ {
		f.set(fakeProcess{pid: fakePID + i, ppid: root.pid, start: 1000 + uint64(i)})
	}
	p, err := OpenProc(&ProcOptions{ProcRoot: f.root, Interval: time.Hour, MaxPending: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := p.Register(f.id(root), RootOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := memberIDs(t, p, f.id(root)); len(got) != 11 {
		t.Errorf("%d members, want 11: membership stays exact", len(got))
	}
	st, _ := p.Stats()
	if st.EventsLost == 0 {
		t.Errorf("no loss counted with a queue of 4: %+v", st)
	}
}

func TestProcCloseStopsEverything(t *testing.T) {
	f := newFakeProcTree(t)
	f.supervisor()
	p, err := OpenProc(&ProcOptions{ProcRoot: f.root})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error)
	go func() { done <- p.Run(context.Background(), func(lineage.Event) {}) }()
	time.Sleep(10 * time.Millisecond)
	if err := p.Run(context.Background(), func(lineage.Event) {}); err == nil {
		t.Errorf("a second Run was accepted")
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("run: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after Close")
	}
	if _, err := p.Members(lineage.Identity{PID: 2, StartTicks: 1}); !errors.Is(err, os.ErrClosed) {
		t.Errorf("members after close: %v", err)
	}
	if err := p.Register(lineage.Identity{PID: 2, StartTicks: 1}, RootOptions{}); !errors.Is(err, os.ErrClosed) {
		t.Errorf("register after close: %v", err)
	}
	if err := p.Close(); err != nil {
		t.Errorf("second close: %v", err)
	}
}

func TestProcOptionsAndParsers(t *testing.T) {
	for _, s := range []string{"0", "0s", "-1s", "nonsense", "10"} {
		if _, err := ParseInterval(s); !errors.Is(err, lineage.ErrInvalid) {
			t.Errorf("ParseInterval(%q): %v, want lineage.ErrInvalid", s, err)
		}
	}
	for s, want := range map[string]time.Duration{"": 0, "auto": 0, "250ms": 250 * time.Millisecond, " 2s ": 2 * time.Second} {
		if got, err := ParseInterval(s); err != nil || got != want {
			t.Errorf("ParseInterval(%q) = %v, %v; want %v", s, got, err, want)
		}
	}
	for _, o := range []ProcOptions{
		{Interval: -time.Second},
		{MinInterval: time.Second, MaxInterval: time.Millisecond},
		{Budget: 1.5},
		{Budget: -0.1},
		{MaxPending: -1},
	} {
		if err := o.Validate(); !errors.Is(err, lineage.ErrInvalid) {
			t.Errorf("%+v: %v, want lineage.ErrInvalid", o, err)
		}
		if _, err := OpenProc(&o); !errors.Is(err, lineage.ErrInvalid) {
			t.Errorf("OpenProc(%+v): %v, want lineage.ErrInvalid", o, err)
		}
	}
	for s, want := range map[string]string{"": "auto", "auto": "auto", "BPF": "bpf", " proc ": "proc"} {
		if got, err := ParseBackend(s); err != nil || got != want {
			t.Errorf("ParseBackend(%q) = %q, %v; want %q", s, got, err, want)
		}
	}
	_, err := ParseBackend("nonsense")
	if !errors.Is(err, lineage.ErrInvalid) || !strings.Contains(err.Error(), `"nonsense"`) {
		t.Errorf("ParseBackend(nonsense): %v", err)
	}
	if _, _, err := Open("nonsense", Options{}); !errors.Is(err, lineage.ErrInvalid) {
		t.Errorf("Open(nonsense): %v, want lineage.ErrInvalid", err)
	}
	if _, _, err := Open("auto", Options{Proc: &ProcOptions{Interval: -1}}); !errors.Is(err, lineage.ErrInvalid) {
		t.Errorf("Open(auto) with a bad interval: %v, want lineage.ErrInvalid", err)
	}
	if _, err := OpenProc(&ProcOptions{ProcRoot: filepath.Join(t.TempDir(), "none")}); err == nil {
		t.Errorf("a missing proc root was accepted")
	}
}
