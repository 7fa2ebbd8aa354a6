package bpf

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/ringbuf"

	"github.com/lineage-dev/lineage/lineage"
)

// migratePasses bounds the copy passes made while both sets' programs run;
// each pass copies what the old set's members forked during the last.
const migratePasses = 8

// oldSet is the roots and members maps of a pinned set of another layout.
type oldSet struct {
	dir            string
	roots, members *ebpf.Map
}

// openOldSet opens the maps of the set pinned in dir and checks that this
// binary reads them: a layout whose roots and members this binary can't
// read is refused, and left pinned and tracking.
func openOldSet(dir string) (*oldSet, error) {
	o := &oldSet{dir: dir}
	var err error
	if o.roots, err = loadOldMap(dir, lineageMapRoots, lineageRoot{}); err != nil {
		return nil, err
	}
	if o.members, err = loadOldMap(dir, lineageMapMembers, lineageMember{}); err != nil {
		_ = o.roots.Close()
		return nil, err
	}
	return o, nil
}

func loadOldMap[V any](dir, name string, value V) (*ebpf.Map, error) {
	m, err := ebpf.LoadPinnedMap(filepath.Join(dir, name), nil)
	if err != nil {
		return nil, fmt.Errorf("pinned set %s: %w", dir, err)
	}
	if m.Type() != ebpf.Hash || m.KeySize() != 4 || m.ValueSize() != uint32(binary.Size(value)) {
		_ = m.Close()
		return nil, fmt.Errorf("%w pinned set %s: its %s map has %d-byte values, and this binary knows no way to read them; "+
			"stop, run the older lineage's serve --uninstall (its lineages go untracked), then start this one",
			lineage.ErrInvalid, dir, name, m.ValueSize())
	}
	return m, nil
}

func (o *oldSet) Close() error {
	return errors.Join(o.roots.Close(), o.members.Close())
}

// migrate moves the roots and members of the set o into b's, which is
// pinned and attached, and then unpins o. While both sets' programs run, a
// member's fork is inserted by the old program, and by the new one once its
// forker is copied: copying repeats until a pass finds nothing new, the old
// set is unpinned (its programs detach), and a last pass copies what was
// forked meanwhile. Copied members are marked adopted, so [BPF.Members]
// checks them against /proc: one may have exited before its copy.
func (b *Tracker) migrate(o *oldSet) error {
	defer o.Close()
	if err := b.keepBacklog(o.dir); err != nil {
		return err
	}
	for range migratePasses {
		n, err := b.copyFrom(o)
		if err != nil {
			return err
		}
		if n == 0 {
			break
		}
	}
	if err := removeSet(o.dir); err != nil {
		return err
	}
	if _, err := b.copyFrom(o); err != nil {
		return err
	}
	b.pinned.MigratedFrom = o.dir
	return nil
}

// keepBacklog opens the ring buffer of the set in dir, so that Run
// delivers what its programs wrote and no tracker read (while no daemon
// ran, and until the set is unpinned) before the events of b's own ring:
// a set of layout 3 or before writes exec records in fixed slots, which
// decode reads too. A set without one is no error: it has no backlog.
func (b *Tracker) keepBacklog(dir string) error {
	m, err := ebpf.LoadPinnedMap(filepath.Join(dir, lineageMapEvents), nil)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("pinned set %s: %w", dir, err)
	}
	if m.Type() != ebpf.RingBuf {
		_ = m.Close()
		return nil
	}
	r, err := ringbuf.NewReader(m)
	if err != nil {
		_ = m.Close()
		return fmt.Errorf("pinned set %s: open ring buffer: %w", dir, err)
	}
	b.backlog = append(b.backlog, backlogRing{m: m, r: r})
	return nil
}

// copyFrom copies o's roots and members that b lacks, and says how many.
func (b *Tracker) copyFrom(o *oldSet) (int, error) {
	var (
		pid uint32
		r   lineageRoot
		m   lineageMember
		n   int
	)
	it := o.roots.Iterate()
	for it.Next(&pid, &r) {
		if err := b.objs.Roots.Update(pid, &r, ebpf.UpdateNoExist); err == nil {
			n++
			b.pinned.MigratedRoots++
		} else if !errors.Is(err, ebpf.ErrKeyExist) {
			return n, fmt.Errorf("copy root %d: %w", pid, err)
		}
	}
	if err := it.Err(); err != nil {
		return n, fmt.Errorf("read old roots: %w", err)
	}
	it = o.members.Iterate()
	for it.Next(&pid, &m) {
		m.Flags |= lineageMemberFlagMEMBER_F_ADOPTED
		if err := b.objs.Members.Update(pid, &m, ebpf.UpdateNoExist); err == nil {
			n++
			b.pinned.MigratedMembers++
		} else if !errors.Is(err, ebpf.ErrKeyExist) {
			return n, fmt.Errorf("copy member %d: %w", pid, err)
		}
	}
	if err := it.Err(); err != nil {
		return n, fmt.Errorf("read old members: %w", err)
	}
	return n, nil
}
