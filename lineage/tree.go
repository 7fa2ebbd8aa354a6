package lineage

import (
	"slices"
	"sync"
	"time"
)

// Member is what the tree knows of one process of a lineage.
type Member struct {
	Identity
	Parent Identity `json:"parent"`
	Root   Identity `json:"root"`
	Comm   string   `json:"comm,omitempty"`
	// Filename and Argv are from the member's last exec, if one was seen.
	Filename string   `json:"filename,omitempty"`
	Argv     []string `json:"argv,omitempty"`
	// Forked and Ended are times since boot; zero when not seen.
	Forked time.Duration `json:"-"`
	Ended  time.Duration `json:"-"`
	Exited bool          `json:"exited"`
	Status ExitStatus    `json:"status,omitempty"`
	// Contained is set when the member was killed at birth during a reap
	// (not when the full membership shut it out: see [Event.Untracked]).
	Contained bool `json:"contained,omitempty"`
}

// Tree mirrors lineages as trees, built from events that may arrive in any
// order: an exit or an exec may be seen before the fork that created the
// process, and the tree converges to the same state whichever order it gets.
// A Tree is safe for concurrent use by multiple goroutines.
type Tree struct {
	mu      sync.Mutex
	members map[Identity]*Member
	// children indexes members by lineage parent.
	children map[Identity][]Identity
	// prune drops exited members that matter to nobody (see [Tree.SetPruning]).
	prune bool
	// hops, and while pruning exited (the exited members kept, by
	// Member.Root, zero included) and exitedKept (their number), bound
	// the exited ancestors kept for live descendants (chain.go);
	// forgotten holds recently forgotten roots, forgottenOrder the same
	// oldest first.
	hops           map[Identity]hop
	exitedKept     int
	exited         map[Identity]map[Identity]struct{}
	forgotten      map[Identity]bool
	forgottenOrder []Identity
}

// NewTree returns an empty tree.
func NewTree() *Tree {
	return &Tree{
		members:  make(map[Identity]*Member),
		children: make(map[Identity][]Identity),
		hops:     make(map[Identity]hop),
		exited:   make(map[Identity]map[Identity]struct{}),
	}
}

// node returns the member for id, creating an empty one. Callers hold t.mu.
func (t *Tree) node(id Identity) *Member {
	m, ok := t.members[id]
	if !ok {
		m = &Member{Identity: id}
		t.members[id] = m
	}
	return m
}

// link records parent and root for m once; later events don't move a member.
func (t *Tree) link(m *Member, parent, root Identity) {
	if m.Root.IsZero() && !root.IsZero() {
		if m.Exited {
			t.countExited(m.Root, m.Identity, false)
			t.countExited(root, m.Identity, true)
		}
		m.Root = root
	}
	if m.Parent.IsZero() && !parent.IsZero() {
		m.Parent = parent
		t.children[parent] = append(t.children[parent], m.Identity)
	}
}

// Apply records one event.
func (t *Tree) Apply(ev Event) {
	if ev.Process.IsZero() {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.isForgotten(ev.Root) {
		return
	}
	m := t.node(ev.Process)
	t.link(m, ev.Parent, ev.Root)
	// A fork's comm is the parent's name and an exit's that of the
	// process's last thread to end (a thread's own name, as redis-server's
	// bio_aof_fsync): they only fill in a comm not known; an exec's is the
	// new program's.
	if ev.Comm != "" && (m.Comm == "" || ev.Kind == EventExec) {
		m.Comm = ev.Comm
	}
	switch ev.Kind {
	case EventFork:
		if m.Forked == 0 {
			m.Forked = ev.Time
		}
		if ev.Contained && !ev.Untracked {
			// Untracked too, it was killed for the full membership
			// (--on-full=kill), not contained by a reap.
			m.Contained = true
		}
	case EventExec:
		m.Filename = ev.Filename
		m.Argv = CapArgv(slices.Clone(ev.Argv))
	case EventExit:
		if !m.Exited {
			t.countExited(m.Root, m.Identity, true)
		}
		m.Exited = true
		m.Status = ev.Status
		m.Ended = ev.Time
		if t.prune {
			t.pruneFrom(m.Identity)
			t.bound(m.Identity)
		}
	}
}

// SetPruning turns pruning on or off. While it is on, a member that has
// exited is dropped as soon as it matters to nobody: it is not a root, was
// not contained at birth, its fork was seen, and no member still in the
// tree (a live descendant's chain) names it as lineage parent; its parent
// is then looked at again. The tree then holds the live members, their
// chains of lineage parents and the roots, however many processes a job
// runs through. Of those chains it keeps at most [MaxExitedKept] exited
// members a root, and fewer when many roots keep that many; past that, a
// member that exits is dropped even though it has descendants, and
// [Tree.Chain] says how many ancestors it skips there.
// Turn pruning off before a reap whose exits a report must show.
func (t *Tree) SetPruning(on bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if on == t.prune {
		return
	}
	t.prune = on
	clear(t.exited)
	t.exitedKept = 0
	if !on {
		return
	}
	for id, m := range t.members {
		if m.Exited {
			t.countExited(m.Root, id, true)
		}
	}
	for id, m := range t.members {
		if m.Exited {
			t.pruneFrom(id)
		}
	}
}

// pruneFrom drops id, then its lineage parent, for as long as each is an
// exited member that matters to nobody. Callers hold t.mu.
func (t *Tree) pruneFrom(id Identity) {
	for {
		m, ok := t.members[id]
		if !ok || !m.Exited || m.Contained || m.Parent.IsZero() || m.Root.IsZero() || id == m.Root || len(t.children[id]) > 0 {
			return
		}
		parent, _ := t.above(id)
		t.drop(id)
		id = parent
	}
}

// drop deletes id from the tree and from its parent's children (its
// parent in the walk: the lineage parent, or past skipped ancestors).
// Callers hold t.mu.
func (t *Tree) drop(id Identity) {
	m, ok := t.members[id]
	if !ok {
		return
	}
	parent, _ := t.above(id)
	if m.Exited {
		t.countExited(m.Root, id, false)
	}
	delete(t.members, id)
	delete(t.children, id)
	delete(t.hops, id)
	siblings := slices.DeleteFunc(t.children[parent], func(c Identity) bool { return c == id })
	if len(siblings) == 0 {
		delete(t.children, parent)
	} else {
		t.children[parent] = siblings
	}
}

// Get returns what is known of id.
func (t *Tree) Get(id Identity) (Member, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	m, ok := t.members[id]
	if !ok {
		return Member{}, false
	}
	return clone(m), true
}

// Lineage returns every process ever seen in root's lineage, root first,
// then in order of descent (parents before their children).
func (t *Tree) Lineage(root Identity) []Member {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []Member
	seen := make(map[Identity]bool)
	var walk func(id Identity)
	walk = func(id Identity) {
		if seen[id] {
			return
		}
		seen[id] = true
		if m, ok := t.members[id]; ok && (id == root || m.Root == root) {
			out = append(out, clone(m))
		}
		for _, c := range t.children[id] {
			walk(c)
		}
	}
	walk(root)
	// Members whose parent chain is not (yet) known still belong to root.
	var rest []Member
	for id, m := range t.members {
		if !seen[id] && m.Root == root {
			rest = append(rest, clone(m))
		}
	}
	slices.SortFunc(rest, func(a, b Member) int { return Compare(a.Identity, b.Identity) })
	return append(out, rest...)
}

// Live returns the members of root's lineage not known to have exited.
func (t *Tree) Live(root Identity) []Member {
	all := t.Lineage(root)
	live := all[:0]
	for _, m := range all {
		if !m.Exited {
			live = append(live, m)
		}
	}
	return live
}

// Ancestry returns id's lineage parents from id itself up to its root (or as
// far as they are known).
func (t *Tree) Ancestry(id Identity) []Identity {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []Identity
	seen := make(map[Identity]bool)
	for cur := id; !cur.IsZero() && !seen[cur]; {
		seen[cur] = true
		m, ok := t.members[cur]
		if !ok {
			break
		}
		out = append(out, cur)
		if cur == m.Root {
			break
		}
		cur, _ = t.above(cur)
	}
	return out
}

// Children returns the members whose lineage parent is id.
func (t *Tree) Children(id Identity) []Identity {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.children[id])
}

func clone(m *Member) Member {
	c := *m
	c.Argv = slices.Clone(m.Argv)
	return c
}
