package bpf

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/lineage-dev/lineage/internal/loader"
	"github.com/lineage-dev/lineage/lineage"
)

// Arm arms the live process id with cookie: from now on, whatever it
// forks, from any of its threads, while it is not a member, is a new root
// in the kernel before its first instruction, marked ROOT_F_ARMED with
// cookie in its roots entry. Arming it again changes the cookie; the arm
// is checked against id's start time at every fork, so an arm left for a
// process that is gone arms no stranger. A member can't be armed: what it
// forks is its root's.
func (b *Tracker) Arm(id lineage.Identity, cookie uint32) error {
	if err := id.Validate(); err != nil {
		return err
	}
	if cookie == 0 {
		return fmt.Errorf("%w arm %s: cookie 0 names no arm", lineage.ErrInvalid, id)
	}
	b.mapMu.Lock()
	defer b.mapMu.Unlock()
	var m lineageMember
	if err := b.objs.Members.Lookup(id.PID, &m); err == nil && m.Start == id.StartTicks {
		return fmt.Errorf("arm %s: %w: member of root %d@%d", id, loader.ErrAlreadyTracked, m.RootPid, m.RootStart)
	}
	if err := b.objs.Arms.Update(id.PID, &lineageArm{Start: id.StartTicks, Cookie: cookie}, ebpf.UpdateAny); err != nil {
		if errors.Is(err, unix.E2BIG) {
			return fmt.Errorf("arm %s: %w (%d processes)", id, loader.ErrArmsFull, b.objs.Arms.MaxEntries())
		}
		return fmt.Errorf("arm %s: %w", id, err)
	}
	return b.countArmsLocked()
}

// Disarm disarms id, if it is armed.
func (b *Tracker) Disarm(id lineage.Identity) error {
	b.mapMu.Lock()
	defer b.mapMu.Unlock()
	var a lineageArm
	if err := b.objs.Arms.Lookup(id.PID, &a); err != nil || a.Start != id.StartTicks {
		return nil
	}
	if err := b.objs.Arms.Delete(id.PID); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return fmt.Errorf("disarm %s: %w", id, err)
	}
	return b.countArmsLocked()
}

// ClearArms disarms every process: a daemon that takes a pinned tracker
// over knows none of its predecessor's cookies.
func (b *Tracker) ClearArms() error {
	b.mapMu.Lock()
	defer b.mapMu.Unlock()
	var (
		pid  uint32
		a    lineageArm
		pids []uint32
	)
	it := b.objs.Arms.Iterate()
	for it.Next(&pid, &a) {
		pids = append(pids, pid)
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("read arms: %w", err)
	}
	for _, pid := range pids {
		_ = b.objs.Arms.Delete(pid)
	}
	return b.countArmsLocked()
}

// countArmsLocked sets arms_count, which lets the fork hook skip the
// arms lookup while nothing is armed. Call with mapMu held.
func (b *Tracker) countArmsLocked() error {
	var (
		pid uint32
		a   lineageArm
		n   uint32
	)
	it := b.objs.Arms.Iterate()
	for it.Next(&pid, &a) {
		n++
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("read arms: %w", err)
	}
	if err := b.objs.ArmsCount.Set(n); err != nil {
		return fmt.Errorf("count arms: %w", err)
	}
	return nil
}

// ArmedRoots lists the roots that armed processes forked and the kernel
// still holds, each with the cookie of the arm it was forked under: a
// snapshot, exact however many fork events were lost.
func (b *Tracker) ArmedRoots() (map[lineage.Identity]uint32, error) {
	var (
		pid uint32
		r   lineageRoot
	)
	out := map[lineage.Identity]uint32{}
	it := b.objs.Roots.Iterate()
	for it.Next(&pid, &r) {
		if r.Flags&lineageRootFlagROOT_F_ARMED != 0 {
			out[lineage.Identity{PID: pid, StartTicks: r.Start}] = r.Cookie
		}
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("read roots: %w", err)
	}
	return out, nil
}
