package bpf

import (
	"fmt"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/lineage-dev/lineage/internal/proc"
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
// this process started ([Tracker.StartHelper]). A root registered with an
// orphanage (loader.RootOptions.Orphanage: the `lineage run` front that
// registered its job with the daemon, a child subreaper the root is a
// child of) has its orphans adopted the same way from that process's
// children.

// owned is what this process started itself, which is never an orphan of a
// lineage. Tracker.ownMu guards it.
type owned struct {
	// spawned are the roots Spawn started, while they are registered.
	spawned map[lineage.Identity]bool
	// helpers are the children StartHelper started.
	helpers map[lineage.Identity]bool
	// orphanages are the registered roots' declared orphanages, by root.
	orphanages map[lineage.Identity]lineage.Identity
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

// orphanageOf records orphanage as root's, until Forget.
func (b *Tracker) orphanageOf(root, orphanage lineage.Identity) {
	b.ownMu.Lock()
	defer b.ownMu.Unlock()
	if b.own.orphanages == nil {
		b.own.orphanages = make(map[lineage.Identity]lineage.Identity)
	}
	b.own.orphanages[root] = orphanage
}

// DeclareOrphanage makes orphanage the orphanage of root, a root held
// without one (registered again, or taken back from a pinned tracker): as
// [loader.RootOptions.Orphanage] at Register. The orphanage must live and,
// while root lives, be its parent; otherwise the error wraps
// lineage.ErrInvalid or says the process is gone.
func (b *Tracker) DeclareOrphanage(root, orphanage lineage.Identity) error {
	err := b.proc.Check(orphanage)
	if err != nil {
		err = fmt.Errorf("orphanage: %w", err)
	} else if st, serr := b.proc.Stat(int(root.PID)); serr == nil && proc.CheckStat(st, root) == nil {
		err = b.checkOrphanage(st, orphanage)
	}
	if err != nil {
		return fmt.Errorf("root %s: %w", root, err)
	}
	b.orphanageOf(root, orphanage)
	return nil
}

// checkOrphanage checks that o is the live parent of the root st is of.
func (b *Tracker) checkOrphanage(st lineage.Stat, o lineage.Identity) error {
	if st.PPID != int(o.PID) {
		return fmt.Errorf("%w orphanage %s: not the root's parent (pid %d)", lineage.ErrInvalid, o, st.PPID)
	}
	if err := b.proc.Check(o); err != nil {
		return fmt.Errorf("orphanage: %w", err)
	}
	return nil
}

// forgetSpawned drops id from the spawned roots and the orphanages.
func (b *Tracker) forgetSpawned(id lineage.Identity) {
	b.ownMu.Lock()
	defer b.ownMu.Unlock()
	delete(b.own.spawned, id)
	delete(b.own.orphanages, id)
}

// orphansOf returns the test for the orphans root's lineage left to its
// orphanage, with ownMu read-locked until release is called; nil (and a
// release that does nothing) when there can be none. The orphanage of a
// root spawned here is this process, when it is a child subreaper; of a
// registered root, the one it was registered with, while it lives.
func (b *Tracker) orphansOf(root lineage.Identity) (isOrphan func(lineage.Stat) bool, release func(), err error) {
	b.ownMu.RLock()
	none := func() (func(lineage.Stat) bool, func(), error) {
		b.ownMu.RUnlock()
		return nil, func() {}, err
	}
	// rivals are the roots whose orphans go to the same process, root
	// among them.
	var orphanage int
	var rivals map[lineage.Identity]bool
	switch declared, ok := b.own.orphanages[root]; {
	case b.own.spawned[root]:
		var subreaper bool
		if subreaper, err = isChildSubreaper(); err != nil || !subreaper {
			return none()
		}
		orphanage, rivals = os.Getpid(), b.own.spawned
	case ok:
		if b.proc.Check(declared) != nil {
			return none() // gone: its children went elsewhere
		}
		orphanage, rivals = int(declared.PID), map[lineage.Identity]bool{}
		for r, o := range b.own.orphanages {
			if o == declared {
				rivals[r] = true
			}
		}
	default:
		return none()
	}
	isOrphan = func(st lineage.Stat) bool {
		if st.PPID != orphanage || st.StartTicks < root.StartTicks || rivals[st.Identity] || b.own.helpers[st.Identity] {
			return false
		}
		// The one root that started before it made it; with two, it is
		// nobody's for sure, and escapes.
		for r := range rivals {
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
