package bpf

import (
	"encoding/binary"
	"fmt"
	"path/filepath"
	"time"
	"weak"

	"github.com/cilium/ebpf"

	"github.com/lineage-dev/lineage/internal/loader"
	"github.com/lineage-dev/lineage/internal/proc"
	"github.com/lineage-dev/lineage/lineage"
)

// ReapLease bounds how long kill-at-birth outlives the process holding the
// tracker. [Tracker.Contain] marks a root as reaping, and the kernel kills its
// members' new children at birth only while the reaper's lease lasts: the
// holder extends it every leaseEvery while the tracker is open, so a holder
// that dies mid-reap (a daemon's kill -9; its death kills nothing) leaves a
// lineage that can fork again within ReapLease. A holder that takes a
// pinned tracker over renews the lease as it opens it.
const ReapLease = 10 * time.Second

// leaseEvery is how often the lease is renewed: a tenth of it, so that a
// holder that is merely slow (a stop-the-world pause, a loaded machine)
// never lets it lapse.
const leaseEvery = ReapLease / 10

// renewLease extends the reaper's lease to ReapLease from now, on the boot
// clock the program reads (bpf_ktime_get_boot_ns).
func (b *Tracker) renewLease() error {
	if err := b.setLease(uint64(proc.BootTime() + ReapLease)); err != nil {
		return fmt.Errorf("renew the reaper's lease: %w", err)
	}
	return nil
}

// setLease writes the lease's end: through the program's variable, or,
// for a handoff, which has the .bss map but no program, through the map's
// memory at the variable's offset.
func (b *Tracker) setLease(ns uint64) error {
	if b.leaseMem != nil {
		var v [8]byte
		binary.NativeEndian.PutUint64(v[:], ns)
		_, err := b.leaseMem.WriteAt(v[:], b.leaseOff)
		return err
	}
	return b.objs.ReapLeaseNs.Set(ns)
}

// leaseOffset is where the lease lies in the .bss of variant v.
func leaseOffset(v loader.Variant) (int64, error) {
	load := loadLineage
	if v == loader.VariantCompat {
		load = loadLineageCompat
	}
	spec, err := load()
	if err != nil {
		return 0, err
	}
	vs, ok := spec.Variables[lineageVarReapLeaseNs]
	if !ok || vs.SectionName != ".bss" {
		return 0, fmt.Errorf("no %s in .bss", lineageVarReapLeaseNs)
	}
	return int64(vs.Offset), nil
}

// keepLease renews the lease now and then every leaseEvery until stop is
// closed or b is collected: it holds b weakly, so that an unreachable
// tracker is still finalized (and stops tracking) as it always was.
func (b *Tracker) keepLease(stop <-chan struct{}) error {
	if err := b.renewLease(); err != nil {
		return err
	}
	wb := weak.Make(b)
	go func() {
		tick := time.NewTicker(leaseEvery)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				b := wb.Value()
				if b == nil {
					return
				}
				_ = b.renewLease()
			}
		}
	}()
	return nil
}

// Lease is when the reaper's lease ends, on the boot clock: until then a
// reaping root's new children are killed at birth.
func (b *Tracker) Lease() (time.Duration, error) {
	var ns uint64
	if b.leaseMem != nil {
		var v [8]byte
		if _, err := b.leaseMem.ReadAt(v[:], b.leaseOff); err != nil {
			return 0, fmt.Errorf("read the reaper's lease: %w", err)
		}
		ns = binary.NativeEndian.Uint64(v[:])
	} else if err := b.objs.ReapLeaseNs.Get(&ns); err != nil {
		return 0, fmt.Errorf("read the reaper's lease: %w", err)
	}
	return time.Duration(min(ns, 1<<63-1)), nil
}

// PinnedReaping reads what the tracker pinned for this layout under root
// holds of reaps: the roots marked as reaping, and when the reaper's lease
// ends, on the boot clock. Past the lease, the marks kill nothing: this is
// what a holder that died mid-reap left behind. It reads and changes
// nothing else, and takes no lock.
func PinnedReaping(root string) ([]lineage.Identity, time.Duration, error) {
	dir := layoutDir(root, LayoutVersion)
	lv, err := readLayout(dir)
	if err != nil {
		return nil, 0, err
	}
	variant, err := codeVariant(lv.Variant)
	if err != nil {
		return nil, 0, err
	}
	off, err := leaseOffset(variant)
	if err != nil {
		return nil, 0, err
	}
	bss, err := ebpf.LoadPinnedMap(filepath.Join(dir, bssPin), &ebpf.LoadPinOptions{ReadOnly: true})
	if err != nil {
		return nil, 0, fmt.Errorf("pinned set %s: %w", dir, err)
	}
	defer bss.Close()
	value := make([]byte, bss.ValueSize())
	if err := bss.Lookup(uint32(0), value); err != nil || int64(len(value)) < off+8 {
		return nil, 0, fmt.Errorf("pinned set %s: read .bss: %v", dir, err)
	}
	lease := time.Duration(min(binary.NativeEndian.Uint64(value[off:]), 1<<63-1))
	roots, err := ebpf.LoadPinnedMap(filepath.Join(dir, lineageMapRoots), &ebpf.LoadPinOptions{ReadOnly: true})
	if err != nil {
		return nil, 0, fmt.Errorf("pinned set %s: %w", dir, err)
	}
	defer roots.Close()
	var (
		pid     uint32
		r       lineageRoot
		reaping []lineage.Identity
	)
	it := roots.Iterate()
	for it.Next(&pid, &r) {
		if r.Flags&lineageRootFlagROOT_F_REAPING != 0 {
			reaping = append(reaping, lineage.Identity{PID: pid, StartTicks: r.Start})
		}
	}
	if err := it.Err(); err != nil {
		return nil, 0, fmt.Errorf("pinned set %s: read roots: %w", dir, err)
	}
	return reaping, lease, nil
}
