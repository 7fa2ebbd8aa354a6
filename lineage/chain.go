package lineage

import "slices"

// MaxExitedKept bounds how many exited members of one root's lineage a
// pruning tree keeps for the chains of lineage parents of their live
// descendants (the middle process of a double fork). A hostile job that
// forks and exits in a loop would otherwise grow one chain without end.
const MaxExitedKept = 4096

// maxExitedKeptTotal bounds the exited members a pruning tree keeps over
// all its roots. Past it, the root that keeps the most gives one up for
// each new exit, so that many hostile roots together can't take the
// chains of another's lineage: each root keeps its share whatever the
// others do.
const maxExitedKeptTotal = 16 * MaxExitedKept

// maxForgotten is how many forgotten roots a tree remembers, to ignore
// their late events (exits still in the ring buffer when a root is
// forgotten).
const maxForgotten = 256

// hop is where a member's chain goes on when exited ancestors were dropped
// past the bound: to the nearest one kept, skipping skipped of them.
type hop struct {
	to      Identity
	skipped int
}

// Link is one step of a member's chain of lineage parents.
type Link struct {
	Member
	// Skipped counts the exited ancestors between this member and the
	// next link that were dropped to bound the tree's memory; the first
	// of them is this member's Parent.
	Skipped int
}

// above returns the member that comes after id in its chain, and how
// many dropped ancestors lie between. Callers hold t.mu.
func (t *Tree) above(id Identity) (Identity, int) {
	if h, ok := t.hops[id]; ok {
		return h.to, h.skipped
	}
	if m, ok := t.members[id]; ok {
		return m.Parent, 0
	}
	return Identity{}, 0
}

// bound drops id, an exited member just seen to exit, when its root's
// lineage keeps more exited members than [MaxExitedKept]: the oldest
// exits, nearest the roots, are the ones kept. When the tree keeps more
// than maxExitedKeptTotal, the root that keeps the most gives up one of
// its exited members instead (id, when that root is id's). A member
// dropped is skipped by its children's chains. Callers hold t.mu.
func (t *Tree) bound(id Identity) {
	m, ok := t.members[id]
	if !ok || !m.Exited {
		return
	}
	if len(t.exited[m.Root]) > MaxExitedKept {
		t.dropKept(id)
		return
	}
	if t.exitedKept <= maxExitedKeptTotal {
		return
	}
	most := m.Root
	for root, kept := range t.exited {
		if len(kept) > len(t.exited[most]) {
			most = root
		}
	}
	if most != m.Root {
		// A few tries: members contained at birth and roots are kept.
		tries := 0
		for x := range t.exited[most] {
			if t.dropKept(x) {
				return
			}
			if tries++; tries == 8 {
				break
			}
		}
	}
	t.dropKept(id)
}

// dropKept drops id, an exited member kept for its descendants, unless it
// is a root, was contained at birth or has no known root or parent; its
// children's chains then go to the next member kept above it. It reports
// whether it dropped id. Callers hold t.mu.
func (t *Tree) dropKept(id Identity) bool {
	m, ok := t.members[id]
	if !ok || !m.Exited || m.Contained || id == m.Root || m.Root.IsZero() {
		return false
	}
	next, skipped := t.above(id)
	if next.IsZero() {
		return false
	}
	kids := t.children[id]
	t.drop(id)
	for _, c := range kids {
		// c's chain went to id, perhaps past dropped ancestors of its own.
		_, before := t.above(c)
		t.hops[c] = hop{to: next, skipped: before + 1 + skipped}
		t.children[next] = append(t.children[next], c)
	}
	return true
}

// countExited records that id, in root's lineage, is an exited member
// the tree keeps (kept) or no longer keeps. Only a pruning tree, which
// bounds them, counts them. Callers hold t.mu.
func (t *Tree) countExited(root, id Identity, kept bool) {
	if !t.prune {
		return
	}
	set := t.exited[root]
	_, was := set[id]
	switch {
	case kept && !was:
		if set == nil {
			set = make(map[Identity]struct{})
			t.exited[root] = set
		}
		set[id] = struct{}{}
		t.exitedKept++
	case !kept && was:
		delete(set, id)
		if len(set) == 0 {
			delete(t.exited, root)
		}
		t.exitedKept--
	}
}

// Chain returns id and its lineage parents, id first, up to its root or
// as far as the tree knows them.
func (t *Tree) Chain(id Identity) []Link {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []Link
	seen := make(map[Identity]bool)
	for cur := id; !cur.IsZero() && !seen[cur]; {
		seen[cur] = true
		l, next, ok := t.up(cur)
		if !ok {
			break
		}
		out = append(out, l)
		if cur == l.Root {
			break
		}
		cur = next
	}
	return out
}

// Up returns what the tree knows of id as a link of its chain, and the
// member that comes next in that chain (its lineage parent, or the nearest
// ancestor kept past skipped ones). ok is false when the tree doesn't know id.
func (t *Tree) Up(id Identity) (l Link, next Identity, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.up(id)
}

func (t *Tree) up(id Identity) (Link, Identity, bool) {
	m, ok := t.members[id]
	if !ok {
		return Link{}, Identity{}, false
	}
	next, skipped := t.above(id)
	return Link{Member: clone(m), Skipped: skipped}, next, true
}

// Forget drops root's whole lineage from the tree, and ignores the events
// of that lineage that come later (for the last [maxForgotten] roots
// forgotten).
func (t *Tree) Forget(root Identity) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var gone []Identity
	for id, m := range t.members {
		if id == root || m.Root == root {
			gone = append(gone, id)
		}
	}
	// Their lists of children go first, so that dropping each of a
	// thousand siblings doesn't search what is left of the list.
	for _, id := range gone {
		delete(t.children, id)
	}
	for _, id := range gone {
		t.drop(id)
	}
	if t.forgotten == nil {
		t.forgotten = make(map[Identity]bool)
	}
	if !t.forgotten[root] {
		if len(t.forgottenOrder) == maxForgotten {
			delete(t.forgotten, t.forgottenOrder[0])
			t.forgottenOrder = slices.Delete(t.forgottenOrder, 0, 1)
		}
		t.forgotten[root] = true
		t.forgottenOrder = append(t.forgottenOrder, root)
	}
}

// Remember undoes [Tree.Forget] for root: it is tracked again.
func (t *Tree) Remember(root Identity) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.forgotten[root] {
		delete(t.forgotten, root)
		t.forgottenOrder = slices.DeleteFunc(t.forgottenOrder, func(r Identity) bool { return r == root })
	}
}

// isForgotten reports whether root was forgotten lately. Callers hold t.mu.
func (t *Tree) isForgotten(root Identity) bool { return t.forgotten[root] }
