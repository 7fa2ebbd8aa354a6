package bpf

import (
	"fmt"

	"github.com/cilium/ebpf"

	"github.com/lineage-dev/lineage/internal/proc"
	"github.com/lineage-dev/lineage/lineage"
)

// The kernel may skip a run of a tracing program: it counts the run in the
// program's recursion_misses instead when the same program is already
// running on that CPU. Kernels whose tracepoints can be preempted while
// lineage's program runs (Debian's 7.3 does, seen as 2 to 23 of the fork
// hook's runs in a fork storm of 85 processes under one emulated CPU) skip
// forks this way, and a skipped fork is a member's child that the fork
// hook never inserts. The second fork hook (catch_linux.go) inserts it.
// What both missed, where the first fork hook has missed runs, is adopted
// from /proc by parent pid before every listing, as Register adopts a
// root's descendants (the kernel keeps them exact from then on): a child
// whose parent is still alive, or, where this process is the child
// subreaper that spawned the lineage, an orphan it inherited
// (orphans_linux.go).

// forkMisses is how many runs of the fork hook the kernel skipped since the
// program was loaded. A Handoff holds no program to ask: it says 1, and so
// its holder (the guardian, reaping once) always adopts.
func (b *Tracker) forkMisses() (uint64, error) {
	if b.objs.HandleFork == nil {
		return 1, nil
	}
	st, err := b.objs.HandleFork.Stats()
	if err != nil {
		return 0, fmt.Errorf("read fork hook stats: %w", err)
	}
	return st.RecursionMisses, nil
}

// exitMisses is how many runs of the exit hook the kernel skipped since
// the program was loaded: each a member that exited and whose entry stays,
// a process gone that the map still lists. A Handoff says 1, as forkMisses
// does.
func (b *Tracker) exitMisses() (uint64, error) {
	if b.objs.HandleExit == nil {
		return 1, nil
	}
	st, err := b.objs.HandleExit.Stats()
	if err != nil {
		return 0, fmt.Errorf("read exit hook stats: %w", err)
	}
	return st.RecursionMisses, nil
}

// adoptMissed adds to root's lineage the live descendants of its members
// that the map lacks, when the fork hook has skipped runs; it does nothing
// otherwise.
func (b *Tracker) adoptMissed(root lineage.Identity) error {
	misses, err := b.forkMisses()
	if err != nil || misses == 0 {
		return err
	}
	return b.adoptMissedOf(root)
}

// adoptMissedOf is adoptMissed once the fork hook is known to have
// skipped runs. Where this process is a child subreaper that spawned root,
// its children that are no one's are root's orphans (orphans_linux.go).
func (b *Tracker) adoptMissedOf(root lineage.Identity) error {
	b.mapMu.Lock()
	defer b.mapMu.Unlock()
	isOrphan, release, err := b.orphansOf(root)
	if err != nil {
		return fmt.Errorf("adopt what the fork hook missed: %w", err)
	}
	defer release()
	isMember := func(id lineage.Identity) bool {
		var m lineageMember
		return b.objs.Members.Lookup(id.PID, &m) == nil && m.Start == id.StartTicks &&
			m.RootPid == root.PID && m.RootStart == root.StartTicks
	}
	add := func(child lineage.Stat, parent lineage.Identity) error {
		// A process that is another lineage's member stays its member; an
		// entry left by a dead process with the same pid (a missed exit) is
		// replaced.
		var existing lineageMember
		if b.objs.Members.Lookup(child.PID, &existing) == nil && existing.Start == child.StartTicks {
			return proc.SkipProcess
		}
		cm := lineageMember{
			Start:       child.StartTicks,
			ParentPid:   parent.PID,
			ParentStart: parent.StartTicks,
			RootPid:     root.PID,
			RootStart:   root.StartTicks,
			Flags:       lineageMemberFlagMEMBER_F_ADOPTED,
		}
		if err := b.objs.Members.Update(child.PID, &cm, ebpf.UpdateAny); err != nil {
			return err
		}
		b.adopted.Add(1)
		if parent == (lineage.Identity{}) {
			b.orphans.Add(1)
		}
		return nil
	}
	if isOrphan != nil {
		_, err = b.proc.AdoptWithOrphans(root, isMember, isOrphan, add)
	} else {
		_, err = b.proc.Adopt(root, isMember, add)
	}
	if err != nil {
		return fmt.Errorf("adopt what the fork hook missed: %w", err)
	}
	return nil
}
