package bpf

import (
	"fmt"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/lineage-dev/lineage/lineage"
)

// A child subreaper inherits the orphans of its descendants: a process of
// a lineage this process spawned is reparented to it when its parent dies.
// Where both fork hooks skipped the fork that made such a process and its
// parent died before the next listing, adoption by parent pid can't find
// it: its parent is now this process, which is no member. So, where the
// fork hook has skipped runs and this process is a child subreaper, a live
// child of it is adopted as an orphan of the spawned root it can only have
// come from, unless it is one of the roots this tracker spawned or a helper
// this process started ([Tracker.StartHelper]).

// owned is what this process started itself, which is never an orphan of a
// lineage. Tracker.ownMu guards it.
type owned struct {
	// spawned are the roots Spawn started, while they are registered.
	spawned map[lineage.Identity]bool
	// helpers are the children StartHelper started.
	helpers map[lineage.Identity]bool
}

// StartHelper runs start, which starts a child of this process that is not
// part of any lineage (lineage's guardian) and returns its pid. No adoption
// takes that child for an orphan of a spawned lineage: a listing that
// would adopt orphans waits while start runs. start must not call the
// tracker.
func (b *Tracker) StartHelper(start func() (int, error)) error {
	b.ownMu.Lock()
	defer b.ownMu.Unlock()
	pid, err := start()
	if err != nil {
		return err
	}
	id, err := b.proc.Identity(pid)
	if err != nil {
		// Gone already: a dead child is never adopted.
		return nil
	}
	if b.own.helpers == nil {
		b.own.helpers = make(map[lineage.Identity]bool)
	}
	b.own.helpers[id] = true
	return nil
}

// spawnedRoot records id as a root this tracker spawned, until Forget.
func (b *Tracker) spawnedRoot(id lineage.Identity) {
	b.ownMu.Lock()
	defer b.ownMu.Unlock()
	if b.own.spawned == nil {
		b.own.spawned = make(map[lineage.Identity]bool)
	}
	b.own.spawned[id] = true
}

// forgetSpawned drops id from the spawned roots.
func (b *Tracker) forgetSpawned(id lineage.Identity) {
	b.ownMu.Lock()
	defer b.ownMu.Unlock()
	delete(b.own.spawned, id)
}

// orphansOf returns the test for the orphans this process inherited from
// root's lineage, with ownMu read-locked until release is called; nil (and
// a release that does nothing) when there can be none: root was not
// spawned here, or this process is no child subreaper.
func (b *Tracker) orphansOf(root lineage.Identity) (isOrphan func(lineage.Stat) bool, release func(), err error) {
	b.ownMu.RLock()
	if !b.own.spawned[root] {
		b.ownMu.RUnlock()
		return nil, func() {}, nil
	}
	subreaper, err := isChildSubreaper()
	if err != nil || !subreaper {
		b.ownMu.RUnlock()
		return nil, func() {}, err
	}
	self := os.Getpid()
	isOrphan = func(st lineage.Stat) bool {
		if st.PPID != self || st.StartTicks < root.StartTicks || b.own.spawned[st.Identity] || b.own.helpers[st.Identity] {
			return false
		}
		// The one spawned root that started before it made it; with two,
		// it is nobody's for sure, and escapes.
		for r := range b.own.spawned {
			if r != root && r.StartTicks <= st.StartTicks {
				if _, seen := b.unattributed.LoadOrStore(st.Identity, true); !seen {
					b.unattributedCount.Add(1)
				}
				return false
			}
		}
		return true
	}
	return isOrphan, b.ownMu.RUnlock, nil
}

// isChildSubreaper reports whether this process is a child subreaper.
func isChildSubreaper() (bool, error) {
	var v int32
	if err := unix.Prctl(unix.PR_GET_CHILD_SUBREAPER, uintptr(unsafe.Pointer(&v)), 0, 0, 0); err != nil {
		return false, fmt.Errorf("get child subreaper: %w", err)
	}
	return v != 0, nil
}
