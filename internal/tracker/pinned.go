package tracker

import (
	"github.com/lineage-dev/lineage/internal/loader"
	"github.com/lineage-dev/lineage/internal/loader/bpf"
	"github.com/lineage-dev/lineage/lineage"
)

// pinnedBackend is the bpf backend when it may be pinned.
type pinnedBackend interface {
	Pinned() (bpf.Pinned, bool)
	IsRoot(lineage.Identity) bool
	Uncontain(lineage.Identity) error
	Stats() (loader.Stats, error)
}

// notePinned says what the tracker found where it is pinned: a set taken
// over (with the events it lost while nobody read them), a size that is not
// the one asked for, a set of another layout moved over.
func (t *Tracker) notePinned() {
	b, ok := t.backend.(pinnedBackend)
	if !ok {
		return
	}
	p, ok := b.Pinned()
	if !ok {
		return
	}
	if !p.Reused {
		t.detail("lineage: tracker pinned in %s\n", p.Dir)
	} else {
		t.detail("lineage: pinned tracker in %s taken over: the kernel tracked throughout\n", p.Dir)
		if st, err := b.Stats(); err == nil && st.EventsLost > 0 {
			t.note("lineage: the pinned tracker has lost %d %s so far (its ring buffer overflowed); membership stayed exact\n", st.EventsLost, lineage.Plural(st.EventsLost, "event", "events"))
		}
	}
	if p.MaxMembers != p.AskedMaxMembers {
		t.note("lineage: the pinned tracker in %s holds %d members, not the %d asked for: the pinned size is kept (lineage serve --uninstall, then start again, to resize)\n",
			p.Dir, p.MaxMembers, p.AskedMaxMembers)
	}
	if p.MigratedFrom != "" {
		t.note("lineage: moved %d %s and %d %s from the pinned tracker of another layout in %s, and unpinned it\n",
			p.MigratedRoots, lineage.Plural(p.MigratedRoots, "root", "roots"), p.MigratedMembers, lineage.Plural(p.MigratedMembers, "member", "members"), p.MigratedFrom)
	}
}

// Resume takes id back as a root of the tracker, as after a restart of its
// holder: when a pinned tracker has it registered already, its lineage is
// as the kernel kept it, nothing is adopted, and id may have exited (its
// members remain its lineage). A reap the last holder died in is over: the
// lineage may fork again. Otherwise id is [Tracker.Register]ed. Either
// way, an orphanage that is gone is noted and left out, never a failure.
func (t *Tracker) Resume(id lineage.Identity, opts RegisterOptions) (*Job, error) {
	b, ok := t.backend.(pinnedBackend)
	if !ok || !b.IsRoot(id) {
		orphanage := opts.Orphanage
		opts.Orphanage = lineage.Identity{}
		j, err := t.Register(id, opts)
		if err == nil {
			t.declareOrphanage(id, orphanage)
		}
		return j, err
	}
	if err := b.Uncontain(id); err != nil {
		t.note("lineage: root %s: %v\n", id, err)
	}
	t.declareOrphanage(id, opts.Orphanage)
	return t.registered(id, opts), nil
}

// declareOrphanage gives root, held already, its orphanage, if any and the
// backend takes one.
func (t *Tracker) declareOrphanage(root, orphanage lineage.Identity) {
	ob, ok := t.backend.(orphanageBackend)
	if !ok || orphanage == (lineage.Identity{}) {
		return
	}
	if err := ob.DeclareOrphanage(root, orphanage); err != nil {
		// Gone, most likely: its orphans went elsewhere.
		t.note("lineage: root %s: %v\n", root, err)
	}
}

// orphanageBackend is a backend that takes an orphanage for a root it
// holds already.
type orphanageBackend interface {
	DeclareOrphanage(root, orphanage lineage.Identity) error
}

// rootsBackend is a backend that lists the roots in its map.
type rootsBackend interface {
	Roots() ([]lineage.Identity, error)
}

// PinnedRoots lists the roots a pinned tracker that was taken over holds
// in the kernel's map, exited ones included: those its last holder
// registered, whether or not the holder's own records still name them.
// None when the tracker is not pinned or was pinned afresh.
func (t *Tracker) PinnedRoots() ([]lineage.Identity, error) {
	b, ok := t.backend.(pinnedBackend)
	if !ok {
		return nil, nil
	}
	if p, ok := b.Pinned(); !ok || !p.Reused && p.MigratedFrom == "" {
		return nil, nil
	}
	rb, ok := t.backend.(rootsBackend)
	if !ok {
		return nil, nil
	}
	return rb.Roots()
}
