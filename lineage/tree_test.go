package lineage

import (
	"errors"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

func id(pid uint32, start uint64) Identity { return Identity{PID: pid, StartTicks: start} }

// A root r forks a and b; a forks c, which execs and exits; b exits killed.
func family() (root Identity, events []Event) {
	r, a, b, c := id(100, 10), id(101, 11), id(102, 12), id(103, 13)
	return r, []Event{
		{Kind: EventFork, Process: r, Parent: id(50, 5), Root: r, IsRoot: true, Time: 1},
		{Kind: EventExec, Process: r, Root: r, Filename: "/bin/sh", Argv: []string{"sh", "job.sh"}, Time: 2},
		{Kind: EventFork, Process: a, Parent: r, Root: r, Time: 3},
		{Kind: EventFork, Process: b, Parent: r, Root: r, Time: 4},
		{Kind: EventFork, Process: c, Parent: a, Root: r, Time: 5},
		{Kind: EventExec, Process: c, Parent: a, Root: r, Filename: "/usr/bin/redis-server", Argv: []string{"redis-server", "--daemonize", "yes"}, Time: 6},
		{Kind: EventExit, Process: c, Parent: a, Root: r, Status: 1 << 8, Time: 7},
		{Kind: EventExit, Process: b, Parent: r, Root: r, Status: 9, Time: 8},
	}
}

func TestTreeIsTheSameWhateverTheOrder(t *testing.T) {
	root, events := family()
	want := NewTree()
	for _, ev := range events {
		want.Apply(ev)
	}
	wantLineage := want.Lineage(root)
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		shuffled := slices.Clone(events)
		rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		got := NewTree()
		for _, ev := range shuffled {
			got.Apply(ev)
		}
		gotLineage := got.Lineage(root)
		if len(gotLineage) != len(wantLineage) {
			t.Fatalf("order %v: %d members, want %d", shuffled, len(gotLineage), len(wantLineage))
		}
		for _, w := range wantLineage {
			g, ok := got.Get(w.Identity)
			if !ok || g.Exited != w.Exited || g.Status != w.Status || g.Parent != w.Parent || g.Root != w.Root ||
				g.Filename != w.Filename || !slices.Equal(g.Argv, w.Argv) || g.Forked != w.Forked {
				t.Fatalf("order %v: member %v is %+v, want %+v", shuffled, w.Identity, g, w)
			}
		}
	}
}

func TestTreeQueries(t *testing.T) {
	root, events := family()
	tr := NewTree()
	for _, ev := range events {
		tr.Apply(ev)
	}
	all := tr.Lineage(root)
	if len(all) != 4 || all[0].Identity != root {
		t.Fatalf("lineage %+v: want the root first, then 3 members", all)
	}
	// Parents come before their children.
	pos := map[Identity]int{}
	for i, m := range all {
		pos[m.Identity] = i
	}
	for _, m := range all[1:] {
		if pos[m.Parent] > pos[m.Identity] {
			t.Errorf("%v listed before its parent %v", m.Identity, m.Parent)
		}
	}
	live := tr.Live(root)
	if len(live) != 2 || live[0].Identity != root || live[1].Identity != id(101, 11) {
		t.Errorf("live %+v: want the root and a", live)
	}
	if got, want := tr.Ancestry(id(103, 13)), []Identity{id(103, 13), id(101, 11), root}; !slices.Equal(got, want) {
		t.Errorf("ancestry %v, want %v", got, want)
	}
	if got := tr.Children(root); len(got) != 2 {
		t.Errorf("children of the root %v", got)
	}
	c, _ := tr.Get(id(103, 13))
	if code, ok := c.Status.Exited(); !ok || code != 1 || c.Filename != "/usr/bin/redis-server" {
		t.Errorf("c is %+v", c)
	}
	b, _ := tr.Get(id(102, 12))
	if sig, ok := b.Status.Signaled(); !ok || sig != 9 || b.Status.String() != "signal KILL" {
		t.Errorf("b status %v", b.Status)
	}
}

func TestTreeNamesAMemberByItsExec(t *testing.T) {
	r, a, b := id(100, 10), id(101, 11), id(102, 12)
	tr := NewTree()
	for _, ev := range []Event{
		{Kind: EventFork, Process: r, Root: r, IsRoot: true, Comm: "lineage"},
		{Kind: EventExec, Process: r, Root: r, Comm: "sh"},
		// a forks and never execs; its last thread to end has a name of
		// its own.
		{Kind: EventFork, Process: a, Parent: r, Root: r, Comm: "redis-server"},
		{Kind: EventExit, Process: a, Parent: r, Root: r, Comm: "bio_aof_fsync"},
		// b's fork was not seen: its exit's comm is all there is.
		{Kind: EventExit, Process: b, Parent: r, Root: r, Comm: "worker"},
	} {
		tr.Apply(ev)
	}
	for who, want := range map[Identity]string{r: "sh", a: "redis-server", b: "worker"} {
		if m, _ := tr.Get(who); m.Comm != want {
			t.Errorf("%v's comm is %q, want %q", who, m.Comm, want)
		}
	}
}

// Contained is a reap's kill at birth only: a fork the full membership
// shut out (untracked, and killed with --on-full=kill) is not contained.
func TestTreeContainedIsTheReapsKillAtBirth(t *testing.T) {
	r, reaped, full := id(100, 10), id(101, 11), id(102, 12)
	tr := NewTree()
	for _, ev := range []Event{
		{Kind: EventFork, Process: r, Root: r, IsRoot: true},
		{Kind: EventFork, Process: reaped, Parent: r, Root: r, Contained: true},
		{Kind: EventFork, Process: full, Parent: r, Root: r, Untracked: true, Contained: true},
	} {
		tr.Apply(ev)
	}
	for who, want := range map[Identity]bool{reaped: true, full: false} {
		if m, _ := tr.Get(who); m.Contained != want {
			t.Errorf("%v: contained %v, want %v", who, m.Contained, want)
		}
	}
}

func TestTreeKeepsAPidReusedByAStranger(t *testing.T) {
	tr := NewTree()
	r := id(100, 10)
	tr.Apply(Event{Kind: EventFork, Process: r, Root: r, IsRoot: true})
	tr.Apply(Event{Kind: EventFork, Process: id(200, 20), Parent: r, Root: r})
	tr.Apply(Event{Kind: EventExit, Process: id(200, 20), Parent: r, Root: r})
	// The same pid, later, in another lineage.
	other := id(300, 30)
	tr.Apply(Event{Kind: EventFork, Process: id(200, 90), Parent: other, Root: other})
	for _, m := range tr.Live(r) {
		if m.PID == 200 {
			t.Errorf("the stranger at pid 200 is in r's lineage: %+v", m)
		}
	}
	if len(tr.Lineage(other)) != 1 {
		t.Errorf("the stranger is not in its own lineage")
	}
}

func TestIdentityParseAndValidate(t *testing.T) {
	good := id(1234, 5678)
	got, err := ParseIdentity(good.String())
	if err != nil || got != good {
		t.Fatalf("round trip %v: %v, %v", good, got, err)
	}
	for _, s := range []string{"", "1234", "@5", "12@", "x@5", "12@y", "1@5", "0@5", "12@0", "-3@4", "99999999999@1", "12@5@6"} {
		if _, err := ParseIdentity(s); !errors.Is(err, ErrInvalid) {
			t.Errorf("ParseIdentity(%q): %v, want ErrInvalid", s, err)
		}
	}
	if !(Identity{}).IsZero() || good.IsZero() {
		t.Error("IsZero")
	}
}

func TestParseProcess(t *testing.T) {
	for s, want := range map[string]Identity{"1234": {PID: 1234}, "1234@5678": id(1234, 5678)} {
		if got, err := ParseProcess(s); err != nil || got != want {
			t.Errorf("ParseProcess(%q) = %v, %v; want %v", s, got, err, want)
		}
	}
	for _, s := range []string{"", "abc", "0", "1", "-3", "+5", "99999999999", "1@5", "12@0", "12@y", "@5"} {
		if _, err := ParseProcess(s); !errors.Is(err, ErrInvalid) {
			t.Errorf("ParseProcess(%q): %v, want ErrInvalid", s, err)
		}
	}
}

func TestExitStatusText(t *testing.T) {
	for _, c := range []struct {
		s    ExitStatus
		want string
	}{
		{0, "exit 0"},
		{3 << 8, "exit 3"},
		{15, "signal TERM"},
		{9 | 0x80, "signal KILL"},
		{StatusUnknown, "unknown"},
	} {
		if got := c.s.String(); got != c.want {
			t.Errorf("%#x: %q, want %q", int32(c.s), got, c.want)
		}
	}
}

func TestTreePrunesExitedMembersThatMatterToNobody(t *testing.T) {
	id := func(pid uint32) Identity { return Identity{PID: pid, StartTicks: uint64(pid) * 10} } // shadows the file's id
	root := id(100)
	tr := NewTree()
	tr.SetPruning(true)
	fork := func(child, parent uint32) {
		tr.Apply(Event{Kind: EventFork, Process: id(child), Parent: id(parent), Root: root})
	}
	exit := func(pid uint32) { tr.Apply(Event{Kind: EventExit, Process: id(pid), Root: root}) }
	tr.Apply(Event{Kind: EventExec, Process: root, Root: root, Filename: "/bin/sh", Argv: []string{"sh"}})
	// 100 → 101 → 102 (lives on); 100 → 103 → 104, both exit; 105 contained.
	fork(101, 100)
	fork(102, 101)
	fork(103, 100)
	fork(104, 103)
	tr.Apply(Event{Kind: EventFork, Process: id(105), Parent: root, Root: root, Contained: true})
	exit(101) // its child 102 lives: kept, as 102's lineage parent
	exit(104)
	exit(103) // 104 and 103 matter to nobody
	exit(105) // contained at birth: the report counts it
	var got []uint32
	for _, m := range tr.Lineage(root) {
		got = append(got, m.PID)
	}
	if want := []uint32{100, 101, 102, 105}; !slices.Equal(got, want) {
		t.Errorf("lineage %v, want %v", got, want)
	}
	if anc := tr.Ancestry(id(102)); len(anc) != 3 {
		t.Errorf("ancestry of the live member %v, want it up to the root", anc)
	}
	// Once 102 exits, its exited parent goes too; the root stays.
	exit(102)
	got = got[:0]
	for _, m := range tr.Lineage(root) {
		got = append(got, m.PID)
	}
	if want := []uint32{100, 105}; !slices.Equal(got, want) {
		t.Errorf("lineage %v, want %v", got, want)
	}
	// With pruning off (a reap), exits stay for the report.
	tr.SetPruning(false)
	fork(106, 100)
	exit(106)
	if m, ok := tr.Get(id(106)); !ok || !m.Exited {
		t.Errorf("with pruning off, an exit was dropped")
	}
	// A tree of 5,000 short-lived members holds only what lives.
	tr.SetPruning(true)
	big := []string{strings.Repeat("x", 100*1024)}
	for pid := uint32(1000); pid < 6000; pid++ {
		fork(pid, 100)
		tr.Apply(Event{Kind: EventExec, Process: id(pid), Root: root, Argv: big})
		exit(pid)
	}
	if n := len(tr.Lineage(root)); n != 2 {
		t.Errorf("%d members kept after 5,000 exits, want the root and the contained one", n)
	}
}

func TestTreeCapsArgv(t *testing.T) {
	tr := NewTree()
	p := Identity{PID: 5, StartTicks: 5}
	tr.Apply(Event{Kind: EventExec, Process: p, Root: p, Argv: []string{"sh", strings.Repeat("x", 100*1024)}})
	m, _ := tr.Get(p)
	if m.Argv[len(m.Argv)-1] != ArgvCut || len(m.Argv[1]) > MaxArgvBytes {
		t.Errorf("argv of %d bytes kept", len(m.Argv[1]))
	}
}

// A job that double-forks in a loop keeps one live process at the end of an
// ever longer chain of exited ones: the tree keeps the oldest of them, up
// to its bound, and the chain skips the rest but still reaches the root.
func TestTreeBoundsTheChainsItKeeps(t *testing.T) {
	id := func(pid uint32) Identity { return Identity{PID: pid, StartTicks: uint64(pid)} } // shadows the file's id
	root := id(100)
	tr := NewTree()
	tr.SetPruning(true)
	tr.Apply(Event{Kind: EventExec, Process: root, Root: root, Argv: []string{"sh", "job"}})
	const n = MaxExitedKept + 500
	parent := root
	for pid := uint32(1000); pid < 1000+n; pid++ {
		tr.Apply(Event{Kind: EventFork, Process: id(pid), Parent: parent, Root: root})
		tr.Apply(Event{Kind: EventFork, Process: id(pid + 100000), Parent: id(pid), Root: root})
		tr.Apply(Event{Kind: EventExit, Process: id(pid), Root: root})
		parent = id(pid + 100000)
		if pid > 1000 { // the previous step's daemon moves on: it exits too
			tr.Apply(Event{Kind: EventExit, Process: id(pid - 1 + 100000), Root: root})
		}
	}
	tr.mu.Lock()
	kept := tr.exitedKept
	size := len(tr.members)
	tr.mu.Unlock()
	if kept > MaxExitedKept+1 || size > MaxExitedKept+3 {
		t.Errorf("the tree keeps %d members, %d exited, over its bound of %d", size, kept, MaxExitedKept)
	}
	chain := tr.Chain(parent)
	if len(chain) == 0 || chain[0].Identity != parent || chain[len(chain)-1].Identity != root {
		t.Fatalf("the chain of the live daemon does not reach the root: %d links", len(chain))
	}
	skipped := 0
	for _, l := range chain {
		skipped += l.Skipped
	}
	if got := len(chain) - 2 + skipped; got != 2*n-1 {
		t.Errorf("chain of %d links skipping %d stands for %d ancestors, want %d", len(chain), skipped, got, 2*n-1)
	}
	if chain[len(chain)-2].Identity != id(1000) {
		t.Errorf("the root's own child %v was not kept; the oldest exits should be", chain[len(chain)-2].Identity)
	}
	// Once the daemon exits, nothing but the root is left.
	tr.Apply(Event{Kind: EventExit, Process: parent, Root: root})
	if got := tr.Lineage(root); len(got) != 1 {
		t.Errorf("%d members left once every process exited, want the root alone", len(got))
	}
	// A forgotten root's late events are ignored; remembered again, not.
	tr.Forget(root)
	tr.Apply(Event{Kind: EventExit, Process: root, Root: root})
	if _, ok := tr.Get(root); ok {
		t.Errorf("a forgotten root's late exit brought it back")
	}
	tr.Remember(root)
	tr.Apply(Event{Kind: EventExec, Process: root, Root: root})
	if _, ok := tr.Get(root); !ok {
		t.Errorf("a root remembered again is not tracked")
	}
}

// Forgetting a root leaves nothing of its lineage in the tree, however many
// siblings it had, and touches no other root's.
func TestTreeForgetsAWholeLineage(t *testing.T) {
	tr := NewTree()
	root, other := id(100, 10), id(200, 20)
	tr.Apply(Event{Kind: EventFork, Process: root, Parent: id(50, 5), Root: root, IsRoot: true})
	tr.Apply(Event{Kind: EventFork, Process: other, Parent: id(50, 5), Root: other, IsRoot: true})
	tr.Apply(Event{Kind: EventFork, Process: id(201, 21), Parent: other, Root: other})
	for pid := uint32(1000); pid < 3000; pid++ {
		tr.Apply(Event{Kind: EventFork, Process: id(pid, 30), Parent: root, Root: root})
		if pid%2 == 0 {
			tr.Apply(Event{Kind: EventExit, Process: id(pid, 30), Parent: root, Root: root})
		}
	}
	tr.Forget(root)
	if got := tr.Lineage(root); len(got) != 0 {
		t.Errorf("%d members of a forgotten root left", len(got))
	}
	for m := range tr.members {
		if m != other && m != id(201, 21) {
			t.Errorf("%s left in the tree", m)
		}
	}
	for parent, kids := range tr.children {
		for _, k := range kids {
			if k.PID != 200 && k.PID != 201 {
				t.Errorf("%s left as a child of %s", k, parent)
			}
		}
	}
	if got := tr.Lineage(other); len(got) != 2 {
		t.Errorf("the other root's lineage has %d members, want 2", len(got))
	}
}

// Many hostile roots that each double-fork in a loop fill the tree's whole
// bound; another root's chain is still kept whole, and the tree holds
// about its bound, each root its share.
func TestTreeKeepsEachRootsShareOfChains(t *testing.T) {
	pid := func(p uint32) Identity { return Identity{PID: p, StartTicks: uint64(p)} }
	tr := NewTree()
	tr.SetPruning(true)
	const hostile = 20
	// chainLoop runs n double forks under root from pid base: the middle
	// process exits at once, the daemon it made goes on to fork the next.
	chainLoop := func(root Identity, base uint32, n int) Identity {
		parent := root
		for i := uint32(0); i < uint32(n); i++ {
			mid, daemon := pid(base+2*i), pid(base+2*i+1)
			tr.Apply(Event{Kind: EventFork, Process: mid, Parent: parent, Root: root})
			tr.Apply(Event{Kind: EventFork, Process: daemon, Parent: mid, Root: root})
			tr.Apply(Event{Kind: EventExit, Process: mid, Root: root})
			if parent != root {
				tr.Apply(Event{Kind: EventExit, Process: parent, Root: root})
			}
			parent = daemon
		}
		return parent
	}
	for r := uint32(0); r < hostile; r++ {
		root := pid(1_000_000 * (r + 1))
		tr.Apply(Event{Kind: EventExec, Process: root, Root: root})
		chainLoop(root, 1_000_000*(r+1)+1, MaxExitedKept+100)
	}
	victim := pid(50_000_000)
	tr.Apply(Event{Kind: EventExec, Process: victim, Root: victim})
	daemon := chainLoop(victim, 50_000_001, 3)
	chain := tr.Chain(daemon)
	if len(chain) != 7 {
		t.Fatalf("the victim's chain has %d links, want its 6 processes and the root", len(chain))
	}
	for _, l := range chain {
		if l.Skipped != 0 {
			t.Errorf("the victim's chain skips %d ancestors at %v: other roots took its share", l.Skipped, l.Identity)
		}
	}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if tr.exitedKept > maxExitedKeptTotal {
		t.Errorf("the tree keeps %d exited members, over its bound of %d", tr.exitedKept, maxExitedKeptTotal)
	}
	share := maxExitedKeptTotal / hostile
	for root, kept := range tr.exited {
		if root != victim && (len(kept) < share-1 || len(kept) > share+1) {
			t.Errorf("root %v keeps %d exited members, not its share of %d", root, len(kept), share)
		}
	}
	checkExitedCounts(t, tr)
}

// The counts of exited members by root stay exact when a member's root is
// learnt after its exit, and when a root is forgotten.
func TestTreeCountsExitedByRoot(t *testing.T) {
	pid := func(p uint32) Identity { return Identity{PID: p, StartTicks: uint64(p)} }
	tr := NewTree()
	tr.SetPruning(true)
	root := pid(10)
	tr.Apply(Event{Kind: EventExec, Process: root, Root: root})
	// An exit seen before its fork: no root yet.
	tr.Apply(Event{Kind: EventExit, Process: pid(11)})
	tr.Apply(Event{Kind: EventFork, Process: pid(12), Parent: pid(11)})
	tr.mu.Lock()
	checkExitedCounts(t, tr)
	tr.mu.Unlock()
	tr.Apply(Event{Kind: EventFork, Process: pid(11), Parent: root, Root: root})
	tr.Apply(Event{Kind: EventFork, Process: pid(12), Parent: pid(11), Root: root})
	tr.mu.Lock()
	if got := len(tr.exited[root]); got != 1 {
		t.Errorf("root keeps %d exited members once the exit's root is known, want 1", got)
	}
	checkExitedCounts(t, tr)
	tr.mu.Unlock()
	// Exits while not pruning are counted once pruning is on again.
	tr.SetPruning(false)
	tr.Apply(Event{Kind: EventFork, Process: pid(13), Parent: pid(12), Root: root})
	tr.Apply(Event{Kind: EventExit, Process: pid(13), Root: root})
	tr.SetPruning(true)
	tr.mu.Lock()
	checkExitedCounts(t, tr)
	tr.mu.Unlock()
	tr.Forget(root)
	tr.mu.Lock()
	if tr.exitedKept != 0 || len(tr.exited) != 0 {
		t.Errorf("a forgotten root leaves %d exited members counted (%v)", tr.exitedKept, tr.exited)
	}
	tr.mu.Unlock()
}

// checkExitedCounts holds the tree's counts to its members. Callers hold
// tr.mu.
func checkExitedCounts(t *testing.T, tr *Tree) {
	t.Helper()
	want := map[Identity]map[Identity]struct{}{}
	for id, m := range tr.members {
		if m.Exited {
			if want[m.Root] == nil {
				want[m.Root] = map[Identity]struct{}{}
			}
			want[m.Root][id] = struct{}{}
		}
	}
	total := 0
	for _, kept := range tr.exited {
		total += len(kept)
	}
	if tr.exitedKept != total || !maps.EqualFunc(tr.exited, want, maps.Equal) {
		t.Errorf("counted %d exited members (%d in the sets of %d roots), the tree holds those of %d roots", tr.exitedKept, total, len(tr.exited), len(want))
	}
}
