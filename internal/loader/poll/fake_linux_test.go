package poll

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lineage-dev/lineage/internal/loader"
	"github.com/lineage-dev/lineage/internal/testutil"
	"github.com/lineage-dev/lineage/lineage"
)

// openFakeProc opens the proc backend on a fake tree; it polls only when a
// test asks (Members), never on its own.
func openFakeProc(tb testing.TB, f *testutil.FakeProc) (*Poller, *procEvents) {
	tb.Helper()
	p, err := Open(&Options{ProcRoot: f.Root, Interval: time.Hour})
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

func collectProcEvents(tb testing.TB, b loader.Backend) *procEvents {
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

// spawnFake registers p as a root that Spawn started, as Spawn would.
func (p *Poller) spawnFake(tb testing.TB, st lineage.Stat) {
	tb.Helper()
	p.scanMu.Lock()
	defer p.scanMu.Unlock()
	_ = p.change(func(t *procTracker) error {
		t.addRoot(st, t.self.Identity, true, &procScan{}, "", []string{st.Comm})
		return nil
	})
}

func TestProcForkExecExitByDifference(t *testing.T) {
	f := testutil.NewFakeProc(t)
	f.Supervisor()
	root := testutil.FakeProcess{PID: testutil.FakePID, PPID: 1, Comm: "sh", Start: 1000, Argv: []string{"sh", "-c", "job"}}
	f.Set(root)
	p, events := openFakeProc(t, f)
	rid := f.ID(root)
	if err := p.Register(rid, loader.RootOptions{}); err != nil {
		t.Fatal(err)
	}

	child := testutil.FakeProcess{PID: testutil.FakePID + 1, PPID: root.PID, Comm: "sh", Start: 1010, Stack: root.Stack}
	child.Stack = 0x7ffc00000000 + root.Start // a fork shares its parent's stack
	f.Set(child)
	cid := f.ID(child)
	if got := testutil.MemberIDs(t, p, rid); !testutil.SameIDs(got, rid, cid) {
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
	child.Comm, child.Stack, child.Argv = "sleep", 0x7ffd12340000, []string{"sleep", "60"}
	f.Set(child)
	testutil.MemberIDs(t, p, rid)
	ex := events.of(cid, lineage.EventExec)
	if len(ex) != 1 || !slices.Equal(ex[0].Argv, []string{"sleep", "60"}) || ex[0].Comm != "sleep" {
		t.Errorf("exec events: %+v", ex)
	}

	// It becomes a zombie with status "exit 3", then its parent reaps it.
	child.State, child.Exit = "Z", 3<<8
	f.Set(child)
	if got := testutil.MemberIDs(t, p, rid); !testutil.SameIDs(got, rid) {
		t.Errorf("a zombie is still a member: %v", got)
	}
	exit := events.of(cid, lineage.EventExit)
	if len(exit) != 1 || exit[0].Status != 3<<8 {
		t.Errorf("exit events: %+v", exit)
	}
	f.Remove(child.PID)
	testutil.MemberIDs(t, p, rid)
	if exit := events.of(cid, lineage.EventExit); len(exit) != 1 {
		t.Errorf("exit reported %d times", len(exit))
	}

	// A process that is gone without a zombie seen: status unknown.
	other := testutil.FakeProcess{PID: testutil.FakePID + 2, PPID: root.PID, Start: 1020}
	f.Set(other)
	testutil.MemberIDs(t, p, rid)
	f.Remove(other.PID)
	testutil.MemberIDs(t, p, rid)
	exit = events.of(f.ID(other), lineage.EventExit)
	if len(exit) != 1 || exit[0].Status.Known() {
		t.Errorf("exit of a process gone unseen: %+v, want status unknown", exit)
	}
	st, _ := p.Stats()
	if st.Forks != 3 || st.Exits != 2 {
		t.Errorf("stats %+v", st)
	}
}

func TestProcMembershipSurvivesReparenting(t *testing.T) {
	f := testutil.NewFakeProc(t)
	f.Supervisor()
	root := testutil.FakeProcess{PID: testutil.FakePID, PPID: 1, Start: 1000}
	child := testutil.FakeProcess{PID: testutil.FakePID + 1, PPID: root.PID, Start: 1010}
	f.Set(root)
	f.Set(child)
	p, _ := openFakeProc(t, f)
	rid, cid := f.ID(root), f.ID(child)
	if err := p.Register(rid, loader.RootOptions{}); err != nil {
		t.Fatal(err)
	}
	// setsid, then its parent dies: reparented to init, in a new session.
	f.Remove(root.PID)
	child.PPID, child.Session, child.PGRP = 1, child.PID, child.PID
	f.Set(child)
	// And it forks a grandchild.
	grand := testutil.FakeProcess{PID: testutil.FakePID + 2, PPID: child.PID, Start: 1030, Session: child.PID}
	f.Set(grand)
	if got := testutil.MemberIDs(t, p, rid); !testutil.SameIDs(got, cid, f.ID(grand)) {
		t.Errorf("members %v, want the reparented child and its child", got)
	}
	ms, _ := p.Members(rid)
	for _, m := range ms {
		if m.Identity == f.ID(grand) && m.Parent != cid {
			t.Errorf("grandchild's lineage parent is %s, want %s", m.Parent, cid)
		}
	}
}

// PID reuse: a member's pid comes back with another start time. The stranger
// is never a member, nor are its children.
func TestProcPIDReuseStrangerIsNeverAMember(t *testing.T) {
	f := testutil.NewFakeProc(t)
	f.Supervisor()
	root := testutil.FakeProcess{PID: testutil.FakePID, PPID: 1, Start: 1000}
	child := testutil.FakeProcess{PID: testutil.FakePID + 1, PPID: root.PID, Start: 1010}
	f.Set(root)
	f.Set(child)
	p, events := openFakeProc(t, f)
	rid, cid := f.ID(root), f.ID(child)
	if err := p.Register(rid, loader.RootOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := testutil.MemberIDs(t, p, rid); !testutil.SameIDs(got, rid, cid) {
		t.Fatalf("members %v", got)
	}

	// Between two polls the child dies and its pid goes to a stranger whose
	// parent is init; the stranger forks.
	stranger := testutil.FakeProcess{PID: child.PID, PPID: 1, Start: 5000, Comm: "stranger"}
	f.Set(stranger)
	strangerChild := testutil.FakeProcess{PID: testutil.FakePID + 3, PPID: stranger.PID, Start: 5010}
	f.Set(strangerChild)
	// The root's pid too: a stranger (started later) now holds it, with a
	// child of its own.
	rootStranger := testutil.FakeProcess{PID: root.PID, PPID: 1, Start: 6000, Comm: "stranger"}
	f.Set(rootStranger)
	rootStrangerChild := testutil.FakeProcess{PID: testutil.FakePID + 4, PPID: root.PID, Start: 6010}
	f.Set(rootStrangerChild)

	if got := testutil.MemberIDs(t, p, rid); len(got) != 0 {
		t.Errorf("members after pid reuse: %v, want none", got)
	}
	for _, q := range []testutil.FakeProcess{stranger, strangerChild, rootStranger, rootStrangerChild} {
		if p.isMember(f.ID(q)) {
			t.Errorf("stranger %s is a member", f.ID(q))
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
	if err := p.Register(cid, loader.RootOptions{}); !errors.Is(err, lineage.ErrIdentityMismatch) {
		t.Errorf("register the old identity: %v, want ErrIdentityMismatch", err)
	}
	if err := p.Register(f.ID(rootStranger), loader.RootOptions{}); err != nil {
		t.Fatal(err)
	}
	older := testutil.FakeProcess{PID: testutil.FakePID + 5, PPID: rootStranger.PID, Start: 5999}
	f.Set(older)
	if slices.Contains(testutil.MemberIDs(t, p, f.ID(rootStranger)), f.ID(older)) {
		t.Errorf("a process older than its supposed parent was adopted")
	}
}

// The same at the very first sight: Register adopts only by identity.
func TestProcRegisterWithStaleIdentityAdoptsNothing(t *testing.T) {
	f := testutil.NewFakeProc(t)
	f.Supervisor()
	now := testutil.FakeProcess{PID: testutil.FakePID, PPID: 1, Start: 7000}
	f.Set(now)
	f.Set(testutil.FakeProcess{PID: testutil.FakePID + 1, PPID: now.PID, Start: 7010})
	p, events := openFakeProc(t, f)
	old := lineage.Identity{PID: uint32(now.PID), StartTicks: 1000}
	if err := p.Register(old, loader.RootOptions{}); !errors.Is(err, lineage.ErrIdentityMismatch) {
		t.Fatalf("register a reused pid's old identity: %v", err)
	}
	if got := testutil.MemberIDs(t, p, old); len(got) != 0 {
		t.Errorf("members %v", got)
	}
	if _, err := p.Contain(old); !errors.Is(err, loader.ErrNotRoot) {
		t.Errorf("contain: %v, want ErrNotRoot", err)
	}
	if evs := events.all(); len(evs) != 0 {
		t.Errorf("events: %+v", evs)
	}
}

func TestProcOrphansAreAttributedToTheSpawnedRoot(t *testing.T) {
	f := testutil.NewFakeProc(t)
	sup := f.Supervisor()
	root := testutil.FakeProcess{PID: testutil.FakePID, PPID: sup.PID, Start: 1000, Session: sup.Session, PGRP: testutil.FakePID}
	f.Set(root)
	// Started before the root: the supervisor's own, not an orphan of it.
	before := testutil.FakeProcess{PID: testutil.FakePID + 9, PPID: sup.PID, Start: 900, Session: sup.Session}
	f.Set(before)
	p, events := openFakeProc(t, f)
	p.spawnFake(t, f.Stat(root))
	rid := f.ID(root)

	// A double-forked daemon, reparented to us before any poll saw the
	// process between: one spawned root, so it is that root's.
	daemon := testutil.FakeProcess{PID: testutil.FakePID + 2, PPID: sup.PID, Start: 1100, Session: testutil.FakePID + 1}
	f.Set(daemon)
	if got := testutil.MemberIDs(t, p, rid); !testutil.SameIDs(got, rid, f.ID(daemon)) {
		t.Fatalf("members %v, want the root and the daemon", got)
	}
	fork := events.of(f.ID(daemon), lineage.EventFork)
	if len(fork) != 1 || !fork[0].Parent.IsZero() || fork[0].Root != rid {
		t.Errorf("orphan's fork: %+v, want root %s and an unknown parent", fork, rid)
	}

	// Two spawned roots: an orphan is attributed by the session or process
	// group it shares with one of them, and only then.
	root2 := testutil.FakeProcess{PID: testutil.FakePID + 20, PPID: sup.PID, Start: 1200, Session: sup.Session, PGRP: testutil.FakePID + 20}
	f.Set(root2)
	p.spawnFake(t, f.Stat(root2))
	r2 := f.ID(root2)
	worker := testutil.FakeProcess{PID: testutil.FakePID + 21, PPID: root2.PID, Start: 1210, Session: testutil.FakePID + 21, PGRP: testutil.FakePID + 21}
	f.Set(worker)
	testutil.MemberIDs(t, p, r2)
	inGroup := testutil.FakeProcess{PID: testutil.FakePID + 22, PPID: sup.PID, Start: 1300, Session: sup.Session, PGRP: root2.PGRP}
	inSession := testutil.FakeProcess{PID: testutil.FakePID + 23, PPID: sup.PID, Start: 1301, Session: worker.Session, PGRP: testutil.FakePID + 23}
	lost := testutil.FakeProcess{PID: testutil.FakePID + 24, PPID: sup.PID, Start: 1302, Session: testutil.FakePID + 24}
	for _, q := range []testutil.FakeProcess{inGroup, inSession, lost} {
		f.Set(q)
	}
	if got := testutil.MemberIDs(t, p, r2); !testutil.SameIDs(got, r2, f.ID(worker), f.ID(inGroup), f.ID(inSession)) {
		t.Errorf("second root's members %v", got)
	}
	if got := testutil.MemberIDs(t, p, rid); !testutil.SameIDs(got, rid, f.ID(daemon)) {
		t.Errorf("first root's members %v", got)
	}
	untracked := events.of(f.ID(lost), lineage.EventFork)
	if len(untracked) != 1 || !untracked[0].Untracked || !untracked[0].Root.IsZero() {
		t.Errorf("ambiguous orphan: events %+v, want one untracked fork", untracked)
	}
	if ps := p.Polling(); ps.Unattributed != 1 {
		t.Errorf("unattributed = %d, want 1", ps.Unattributed)
	}
	if st, _ := p.Stats(); st.Unattributed != 1 {
		t.Errorf("stats: unattributed = %d, want 1: an escape is never hidden", st.Unattributed)
	}
	for _, id := range []lineage.Identity{f.ID(before), f.ID(lost)} {
		if p.isMember(id) {
			t.Errorf("%s is a member", id)
		}
	}

	// Forget drops a root and its members; its orphans are no one's.
	if err := p.Forget(rid); err != nil {
		t.Fatal(err)
	}
	if err := p.Forget(rid); !errors.Is(err, loader.ErrNotRoot) {
		t.Errorf("forget twice: %v", err)
	}
	if p.isMember(f.ID(daemon)) {
		t.Errorf("a forgotten root's member is still a member")
	}
}

func TestProcEventsQueueIsBoundedAndCountsLoss(t *testing.T) {
	f := testutil.NewFakeProc(t)
	f.Supervisor()
	root := testutil.FakeProcess{PID: testutil.FakePID, PPID: 1, Start: 1000}
	f.Set(root)
	for i := 1; i <= 10; i++ {
		f.Set(testutil.FakeProcess{PID: testutil.FakePID + i, PPID: root.PID, Start: 1000 + uint64(i)})
	}
	p, err := Open(&Options{ProcRoot: f.Root, Interval: time.Hour, MaxPending: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := p.Register(f.ID(root), loader.RootOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := testutil.MemberIDs(t, p, f.ID(root)); len(got) != 11 {
		t.Errorf("%d members, want 11: membership stays exact", len(got))
	}
	st, _ := p.Stats()
	if st.EventsLost == 0 {
		t.Errorf("no loss counted with a queue of 4: %+v", st)
	}
}

func TestProcCloseStopsEverything(t *testing.T) {
	f := testutil.NewFakeProc(t)
	f.Supervisor()
	p, err := Open(&Options{ProcRoot: f.Root})
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
	if err := p.Register(lineage.Identity{PID: 2, StartTicks: 1}, loader.RootOptions{}); !errors.Is(err, os.ErrClosed) {
		t.Errorf("register after close: %v", err)
	}
	if err := p.Close(); err != nil {
		t.Errorf("second close: %v", err)
	}
}

func TestProcOptionsAndParsers(t *testing.T) {
	for _, s := range []string{"0", "0s", "-1s", "nonsense", "10"} {
		if _, err := loader.ParseInterval(s); !errors.Is(err, lineage.ErrInvalid) {
			t.Errorf("ParseInterval(%q): %v, want lineage.ErrInvalid", s, err)
		}
	}
	for s, want := range map[string]time.Duration{"": 0, "auto": 0, "250ms": 250 * time.Millisecond, " 2s ": 2 * time.Second} {
		if got, err := loader.ParseInterval(s); err != nil || got != want {
			t.Errorf("ParseInterval(%q) = %v, %v; want %v", s, got, err, want)
		}
	}
	for _, o := range []Options{
		{Interval: -time.Second},
		{MinInterval: time.Second, MaxInterval: time.Millisecond},
		{Budget: 1.5},
		{Budget: -0.1},
		{MaxPending: -1},
	} {
		if err := o.Validate(); !errors.Is(err, lineage.ErrInvalid) {
			t.Errorf("%+v: %v, want lineage.ErrInvalid", o, err)
		}
		if _, err := Open(&o); !errors.Is(err, lineage.ErrInvalid) {
			t.Errorf("Open(%+v): %v, want lineage.ErrInvalid", o, err)
		}
	}
	for s, want := range map[string]string{"": "auto", "auto": "auto", "BPF": "bpf", " proc ": "proc"} {
		if got, err := loader.ParseBackend(s); err != nil || got != want {
			t.Errorf("ParseBackend(%q) = %q, %v; want %q", s, got, err, want)
		}
	}
	_, err := loader.ParseBackend("nonsense")
	if !errors.Is(err, lineage.ErrInvalid) || !strings.Contains(err.Error(), `"nonsense"`) {
		t.Errorf("ParseBackend(nonsense): %v", err)
	}
	if _, _, err := loader.Open("nonsense", openers(nil)); !errors.Is(err, lineage.ErrInvalid) {
		t.Errorf("Open(nonsense): %v, want lineage.ErrInvalid", err)
	}
	if _, _, err := loader.Open("auto", openers(&Options{Interval: -1})); !errors.Is(err, lineage.ErrInvalid) {
		t.Errorf("Open(auto) with a bad interval: %v, want lineage.ErrInvalid", err)
	}
	if _, err := Open(&Options{ProcRoot: filepath.Join(t.TempDir(), "none")}); err == nil {
		t.Errorf("a missing proc root was accepted")
	}
}
