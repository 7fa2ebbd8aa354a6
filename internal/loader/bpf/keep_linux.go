package bpf

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/cilium/ebpf"

	"github.com/lineage-dev/lineage/internal/loader"
	"github.com/lineage-dev/lineage/lineage"
)

var _ loader.KernelKeeper = (*Tracker)(nil)

// The kernel applies keep rules itself as they apply (bpf/lineage.c,
// spare_at_exec and spared_at_fork): an exe rule is an entry of keep_exes
// per root and program, a kept lineage its root's ROOT_F_KEPT. A spawned
// root's rules are in the map before it is forked, under root pid 0 (its
// pid is not known yet, and it execs its first program before Spawn
// returns), and move under its pid before it stops being a spawning root.

// KeepExe implements KernelKeeper.
func (b *Tracker) KeepExe(root lineage.Identity, file lineage.FileID) error {
	b.mapMu.Lock()
	defer b.mapMu.Unlock()
	if !b.isRootLocked(root) {
		return fmt.Errorf("keep %s: root %s: %w", file, root, loader.ErrNotRoot)
	}
	return b.putKeepExe(root, file)
}

func (b *Tracker) putKeepExe(root lineage.Identity, file lineage.FileID) error {
	k := keepExeKey(root.PID, file)
	if err := b.objs.KeepExes.Update(&k, root.StartTicks, ebpf.UpdateAny); err != nil {
		return fmt.Errorf("keep %s for root %s: %w", file, root, err)
	}
	return nil
}

func keepExeKey(rootPID uint32, file lineage.FileID) lineageKeepExe {
	return lineageKeepExe{Ino: file.Ino, Dev: file.Dev, RootPid: rootPID}
}

// KeepLineage implements KernelKeeper.
func (b *Tracker) KeepLineage(root lineage.Identity) error {
	if err := b.setRootFlag(root, lineageRootFlagROOT_F_KEPT, true); err != nil {
		return err
	}
	// Its members forked before are marked as its forks are from now on.
	entries, err := b.memberEntries()
	for _, e := range entries {
		if e.m.RootPid == root.PID && e.m.RootStart == root.StartTicks {
			err = errors.Join(err, b.mark(lineage.Identity{PID: e.pid, StartTicks: e.m.Start}, markSticky))
		}
	}
	return err
}

// Spare implements Sparer: user space's mark spares id whatever it execs.
func (b *Tracker) Spare(id lineage.Identity) error { return b.mark(id, markSticky) }

// SpareProgram implements KernelKeeper.
func (b *Tracker) SpareProgram(id lineage.Identity) error { return b.mark(id, markProgram) }

// How a spare mark lasts: markSticky spares a process whatever it execs,
// markProgram while it runs the program it runs now (the kernel's own mark
// for a kept program; its forks inherit it).
type markKind int

const (
	markSticky markKind = iota
	markProgram
)

// mark marks id spared in the kernel, as kind says. A sticky mark
// replaces a program's; a program's mark adds nothing to a mark of either
// kind.
func (b *Tracker) mark(id lineage.Identity, kind markKind) error {
	b.mapMu.Lock()
	defer b.mapMu.Unlock()
	var m lineageMember
	if err := b.objs.Members.Lookup(id.PID, &m); err != nil || m.Start != id.StartTicks {
		return fmt.Errorf("spare %s: %w", id, loader.ErrNotMember)
	}
	flags := m.Flags
	spared := flags&lineageMemberFlagMEMBER_F_SPARED != 0
	program := flags&lineageMemberFlagMEMBER_F_SPARED_EXE != 0
	switch {
	case kind == markProgram && spared, kind == markSticky && spared && !program:
		return nil
	case kind == markProgram:
		flags |= lineageMemberFlagMEMBER_F_SPARED | lineageMemberFlagMEMBER_F_SPARED_EXE
	default:
		flags = flags&^lineageMemberFlagMEMBER_F_SPARED_EXE | lineageMemberFlagMEMBER_F_SPARED
	}
	m.Flags = flags
	// UpdateExist: if id exited meanwhile, its entry is gone and nothing is
	// written. The kernel writes a pid's entry only at its fork, and a pid
	// is not reused within the few microseconds between lookup and update.
	// A mark the exec hook changes meanwhile loses to this one: the race
	// spares, never kills.
	if err := b.objs.Members.Update(id.PID, &m, ebpf.UpdateExist); err != nil {
		return fmt.Errorf("spare %s: %w", id, err)
	}
	return nil
}

// Spared reports whether the kernel spares id: a mark of either kind.
func (b *Tracker) Spared(id lineage.Identity) (bool, error) {
	var m lineageMember
	if err := b.objs.Members.Lookup(id.PID, &m); err != nil || m.Start != id.StartTicks {
		return false, fmt.Errorf("spared %s: %w", id, loader.ErrNotMember)
	}
	return m.Flags&lineageMemberFlagMEMBER_F_SPARED != 0, nil
}

// armKeeps puts the rules of the root about to be spawned under root pid
// 0, where the exec hook finds them for a spawning root's members. Call
// with spawnMu held; disarmKeeps undoes it.
func (b *Tracker) armKeeps(files []lineage.FileID) error {
	if len(files) == 0 {
		return nil
	}
	b.mapMu.Lock()
	for _, f := range files {
		k := keepExeKey(0, f)
		if err := b.objs.KeepExes.Update(&k, uint64(0), ebpf.UpdateAny); err != nil {
			b.mapMu.Unlock()
			b.disarmKeeps(files)
			return fmt.Errorf("arm keep %s: %w", f, err)
		}
	}
	b.mapMu.Unlock()
	if err := b.objs.SpawnKeeps.Set(uint32(len(files))); err != nil {
		b.disarmKeeps(files)
		return fmt.Errorf("arm keeps: %w", err)
	}
	return nil
}

func (b *Tracker) disarmKeeps(files []lineage.FileID) {
	if len(files) == 0 {
		return
	}
	_ = b.objs.SpawnKeeps.Set(uint32(0))
	b.mapMu.Lock()
	defer b.mapMu.Unlock()
	for _, f := range files {
		k := keepExeKey(0, f)
		_ = b.objs.KeepExes.Delete(&k)
	}
}

// forgetKeeps removes root's exe rules from the kernel.
func (b *Tracker) forgetKeeps(root lineage.Identity) error {
	var (
		k     lineageKeepExe
		start uint64
		gone  []lineageKeepExe
	)
	it := b.objs.KeepExes.Iterate()
	for it.Next(&k, &start) {
		if k.RootPid == root.PID && start == root.StartTicks {
			gone = append(gone, k)
		}
	}
	b.mapMu.Lock()
	defer b.mapMu.Unlock()
	for i := range gone {
		_ = b.objs.KeepExes.Delete(&gone[i])
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("forget the keeps of %s: %w", root, err)
	}
	return nil
}

func (b *Tracker) isRootLocked(root lineage.Identity) bool {
	var r lineageRoot
	return b.objs.Roots.Lookup(root.PID, &r) == nil && r.Start == root.StartTicks
}

// PinnedSpared reads, from the tracker pinned for this layout under root,
// whether the kernel spares each of ids: true for a member marked spared
// (by the kernel's own keep rules or by user space), false for a member
// not marked; an identity that is no member is left out. It reads and
// changes nothing else, and takes no lock: what a daemon that died left
// in the kernel can be read after it.
func PinnedSpared(root string, ids ...lineage.Identity) (map[lineage.Identity]bool, error) {
	dir := layoutDir(root, LayoutVersion)
	members, err := ebpf.LoadPinnedMap(filepath.Join(dir, lineageMapMembers), &ebpf.LoadPinOptions{ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("pinned set %s: %w", dir, err)
	}
	defer members.Close()
	out := make(map[lineage.Identity]bool, len(ids))
	for _, id := range ids {
		var m lineageMember
		if err := members.Lookup(id.PID, &m); err != nil || m.Start != id.StartTicks {
			continue
		}
		out[id] = m.Flags&lineageMemberFlagMEMBER_F_SPARED != 0
	}
	return out, nil
}
