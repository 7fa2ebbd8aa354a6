package bpf

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/ringbuf"
	"golang.org/x/sys/unix"

	"github.com/lineage-dev/lineage/internal/loader"
	"github.com/lineage-dev/lineage/lineage"
)

// LayoutVersion names the shape of everything a pinned tracker shares
// between one daemon and the next: the maps' keys and values, the .bss
// variables, the ring buffer's records, the meaning of the flags. Bump it
// whenever bpf/lineage.h or the maps in bpf/lineage.c change in any way a
// reader of the old objects would misread (cilium/ebpf's Compatible checks
// only sizes). A pinned set lives in PinRoot/v<LayoutVersion>, and its
// layout map holds the same number.
//
// Layout 2 added the arms map (per-process arms). Layout 3 added the
// keep_exes map (the programs exe keep rules keep, per root) and the
// kernel's own spare marks (ROOT_F_KEPT, MEMBER_F_SPARED_EXE,
// MEMBER_F_CAUGHT); its members and roots are layout 2's, so a set of
// layout 1 or 2 migrates as it is. Layout 4 added the reaper's lease
// (reap_lease_ns) to .bss; its members and roots are layout 3's. Layout 5
// writes exec records sized to what they carry, and logs what the ring
// buffer drops per CPU (the drops map); its members and roots are layout
// 3's too, so a set of layout 1 to 4 migrates, and the records a set of
// layout 4 or before left in its ring (exec records in fixed slots) are
// read too (keepBacklog, decode).
const LayoutVersion = 5

// DefaultPinRoot is where `lineage serve` pins its tracker.
const DefaultPinRoot = "/sys/fs/bpf/lineage"

// The names in a pinned set's directory. layoutPin is pinned last: a set
// without it is an install that did not finish.
const (
	layoutPin = "layout"
	bssPin    = "bss"
	linkPin   = "link_"
)

// pinnedMaps names the program's maps as they are pinned, by their name in
// the collection spec.
var pinnedMaps = map[string]string{
	lineageMapMembers:  lineageMapMembers,
	lineageMapRoots:    lineageMapRoots,
	lineageMapDoomed:   lineageMapDoomed,
	lineageMapEvents:   lineageMapEvents,
	lineageMapStats:    lineageMapStats,
	lineageMapArms:     lineageMapArms,
	lineageMapKeepExes: lineageMapKeepExes,
	lineageMapDrops:    lineageMapDrops,
	".bss":             bssPin,
}

// linkOrder names the pinned links, in the order b.links holds them.
var linkOrder = []string{lineageProgHandleFork, lineageProgHandleExec, lineageProgHandleExit}

// layoutValue is the one value of a pinned set's layout map.
type layoutValue struct {
	Version uint32
	// Variant is 1 for VariantFull, 2 for VariantCompat.
	Variant uint32
}

// Pinned says what [Open] found and did under Options.PinRoot.
type Pinned struct {
	// Dir is the pinned set's directory: PinRoot/v<layout>.
	Dir string `json:"dir"`
	// Reused: the set was pinned by an earlier tracker and taken over;
	// the kernel tracked throughout. Otherwise it was loaded and pinned now.
	Reused bool `json:"reused"`
	// MigratedFrom names the directory of another layout's set whose
	// roots and members were moved into this one and which was then
	// unpinned; empty when none was.
	MigratedFrom string `json:"migrated_from,omitempty"`
	// Migrated counts the roots and members moved.
	MigratedRoots, MigratedMembers int `json:"-"`
	// AskedMaxMembers is the size asked for; MaxMembers the size in use,
	// the pinned one when a set was reused.
	AskedMaxMembers uint32 `json:"asked_max_members"`
	MaxMembers      uint32 `json:"max_members"`
}

// Pinned says where b's tracker is pinned and whether it was reused; ok is
// false when b is not pinned.
func (b *Tracker) Pinned() (Pinned, bool) {
	if b.pinned == nil {
		return Pinned{}, false
	}
	return *b.pinned, true
}

func layoutDir(root string, version uint32) string {
	return filepath.Join(root, fmt.Sprintf("v%d", version))
}

func variantCode(v loader.Variant) uint32 {
	if v == loader.VariantCompat {
		return 2
	}
	return 1
}

func codeVariant(c uint32) (loader.Variant, error) {
	switch c {
	case 1:
		return loader.VariantFull, nil
	case 2:
		return loader.VariantCompat, nil
	}
	return "", fmt.Errorf("%w pinned layout: unknown variant %d", lineage.ErrInvalid, c)
}

// readLayout reads the layout map of the set in dir; it wraps
// os.ErrNotExist when the set has none (nothing, or an unfinished install).
func readLayout(dir string) (layoutValue, error) {
	m, err := ebpf.LoadPinnedMap(filepath.Join(dir, layoutPin), nil)
	if err != nil {
		return layoutValue{}, fmt.Errorf("pinned layout %s: %w", dir, err)
	}
	defer m.Close()
	if m.Type() != ebpf.Array || m.KeySize() != 4 || m.ValueSize() != uint32(binary.Size(layoutValue{})) {
		return layoutValue{}, fmt.Errorf("%w pinned layout %s: not a layout map", lineage.ErrInvalid, dir)
	}
	var v layoutValue
	if err := m.Lookup(uint32(0), &v); err != nil {
		return layoutValue{}, fmt.Errorf("pinned layout %s: %w", dir, err)
	}
	return v, nil
}

// pinLayout creates and pins the layout map of the set in dir: the last
// step of an install.
func pinLayout(dir string, v layoutValue) error {
	m, err := ebpf.NewMap(&ebpf.MapSpec{
		Name: "lineage_layout", Type: ebpf.Array, KeySize: 4,
		ValueSize: uint32(binary.Size(v)), MaxEntries: 1,
	})
	if err != nil {
		return fmt.Errorf("pin layout: %w", err)
	}
	defer m.Close()
	if err := m.Update(uint32(0), &v, ebpf.UpdateAny); err != nil {
		return fmt.Errorf("pin layout: %w", err)
	}
	if err := m.Pin(filepath.Join(dir, layoutPin)); err != nil {
		return fmt.Errorf("pin layout: %w", err)
	}
	return nil
}

// pin pins b's maps and links in dir, the layout map last.
func (b *Tracker) pin(dir string, v layoutValue) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("pin: %w", err)
	}
	maps := map[string]*ebpf.Map{
		lineageMapMembers: b.objs.Members, lineageMapRoots: b.objs.Roots,
		lineageMapDoomed: b.objs.Doomed, lineageMapEvents: b.objs.Events,
		lineageMapStats: b.objs.Stats, lineageMapArms: b.objs.Arms, lineageMapKeepExes: b.objs.KeepExes,
		lineageMapDrops: b.objs.Drops, ".bss": b.bss,
	}
	for name, m := range maps {
		if err := m.Pin(filepath.Join(dir, pinnedMaps[name])); err != nil {
			return fmt.Errorf("pin %s: %w", name, err)
		}
	}
	for i, l := range b.links {
		if err := l.Pin(filepath.Join(dir, linkPin+linkOrder[i])); err != nil {
			return fmt.Errorf("pin %s link: %w", linkOrder[i], err)
		}
	}
	return pinLayout(dir, v)
}

// openPinned opens b's tracker from the set pinned for this layout under
// o.PinRoot, or loads and pins a new one, moving over what a set of
// another layout tracks. spec is the program to load if need be.
func (b *Tracker) openPinned(spec *ebpf.CollectionSpec, kernel *btf.Spec, f loader.Features) error {
	root := b.opts.PinRoot
	if err := ensureBPFFS(root); err != nil {
		return err
	}
	// One tracker at a time: two would install a set twice, or both
	// consume one ring buffer. The lock goes with the process.
	lock, err := lockDir(root, false)
	if errors.Is(err, unix.EWOULDBLOCK) {
		return fmt.Errorf("pin dir %s: another tracker holds it (is a lineage serve running?)", root)
	}
	if err != nil {
		return err
	}
	b.pinLock = lock
	version := b.opts.layout
	if version == 0 {
		version = LayoutVersion
	}
	dir := layoutDir(root, version)
	b.pinned = &Pinned{Dir: dir, AskedMaxMembers: b.opts.MaxMembers, MaxMembers: b.opts.MaxMembers}
	old, err := openOtherSets(root, dir)
	if err != nil {
		return err
	}
	if err := b.openSet(spec, kernel, dir, version, f); err != nil {
		closeSets(old)
		return err
	}
	for i, o := range old {
		if err := b.migrate(o); err != nil {
			closeSets(old[i+1:])
			return fmt.Errorf("move the members of %s: %w", o.dir, err)
		}
	}
	return nil
}

// openSet reuses the set pinned in dir, or loads and pins one there.
func (b *Tracker) openSet(spec *ebpf.CollectionSpec, kernel *btf.Spec, dir string, version uint32, f loader.Features) error {
	v, err := readLayout(dir)
	switch {
	case err == nil:
		if v.Version != version {
			return fmt.Errorf("%w pinned set %s: layout %d, want %d", lineage.ErrInvalid, dir, v.Version, version)
		}
		return b.reuse(spec, kernel, dir, v, f)
	case !errors.Is(err, os.ErrNotExist):
		return err
	}
	// Nothing pinned, or an install that did not finish: start afresh.
	if err := removeSet(dir); err != nil {
		return err
	}
	if err := b.load(spec, kernel); err != nil {
		return err
	}
	if err := b.pin(dir, layoutValue{Version: version, Variant: variantCode(b.loaded.Variant)}); err != nil {
		_ = removeSet(dir)
		return err
	}
	return nil
}

// reuse takes over the set pinned in dir: its maps, and the links that kept
// its programs attached while no tracker ran.
func (b *Tracker) reuse(spec *ebpf.CollectionSpec, kernel *btf.Spec, dir string, v layoutValue, f loader.Features) error {
	variant, err := codeVariant(v.Variant)
	if err != nil {
		return err
	}
	if b.opts.Variant != loader.VariantAuto && b.opts.Variant != variant {
		return fmt.Errorf("%w pinned set %s: it runs the %s program, not the %s one asked for; unpin it first (lineage serve --uninstall)",
			lineage.ErrInvalid, dir, variant, b.opts.Variant)
	}
	if b.loaded, err = f.Resolve(variant); err != nil {
		return err
	}
	b.loaded.HardCancel = loader.HardCancelNone
	replace := make(map[string]*ebpf.Map, len(pinnedMaps))
	defer func() {
		for _, m := range replace {
			_ = m.Close()
		}
	}()
	for name, file := range pinnedMaps {
		m, err := ebpf.LoadPinnedMap(filepath.Join(dir, file), nil)
		if err != nil {
			return fmt.Errorf("pinned set %s: %w", dir, err)
		}
		replace[name] = m
		if ms := spec.Maps[name]; ms.Type != ebpf.Array && ms.Type != ebpf.PerCPUArray {
			ms.MaxEntries = m.MaxEntries()
		}
	}
	b.pinned.Reused, b.pinned.MaxMembers = true, replace[lineageMapMembers].MaxEntries()
	b.opts.MaxMembers = b.pinned.MaxMembers
	b.opts.RingBytes = replace[lineageMapEvents].MaxEntries()
	b.opts.MaxRoots = replace[lineageMapRoots].MaxEntries()
	var objs struct {
		lineageMaps
		lineageVariables
		Bss *ebpf.Map `ebpf:".bss"`
	}
	if err := spec.LoadAndAssign(&objs, &ebpf.CollectionOptions{MapReplacements: replace}); err != nil {
		return fmt.Errorf("pinned set %s does not match this binary's layout %d (lineage serve --uninstall starts afresh): %w", dir, LayoutVersion, err)
	}
	b.objs.lineageMaps, b.objs.lineageVariables, b.bss = objs.lineageMaps, objs.lineageVariables, objs.Bss
	if err := b.reuseLinks(dir); err != nil {
		return err
	}
	b.attachCatcher(spec, kernel)
	b.startInspector(kernel)
	if b.reader, err = ringbuf.NewReader(b.objs.Events); err != nil {
		return fmt.Errorf("open ring buffer: %w", err)
	}
	return b.startGaps()
}

// reuseLinks opens the pinned links and, through them, the programs they
// keep attached (for their statistics).
func (b *Tracker) reuseLinks(dir string) error {
	progs := []**ebpf.Program{&b.objs.HandleFork, &b.objs.HandleExec, &b.objs.HandleExit}
	for i, name := range linkOrder {
		l, err := link.LoadPinnedLink(filepath.Join(dir, linkPin+name), nil)
		if err != nil {
			return fmt.Errorf("pinned set %s: %s link: %w", dir, name, err)
		}
		b.links = append(b.links, l)
		info, err := l.Info()
		if err != nil {
			return fmt.Errorf("pinned set %s: %s link: %w", dir, name, err)
		}
		if *progs[i], err = ebpf.NewProgramFromID(info.Program); err != nil {
			return fmt.Errorf("pinned set %s: %s program: %w", dir, name, err)
		}
	}
	return nil
}

// openOtherSets opens the finished sets under root other than the one in
// dir: those of other layouts, to migrate. It fails, opening none, when
// one of them can't be read by this binary.
func openOtherSets(root, dir string) ([]*oldSet, error) {
	entries, err := os.ReadDir(root)
	if err != nil {
		return nil, fmt.Errorf("read pin root: %w", err)
	}
	var out []*oldSet
	for _, e := range entries {
		p := filepath.Join(root, e.Name())
		if !e.IsDir() || !strings.HasPrefix(e.Name(), "v") || p == dir {
			continue
		}
		if _, err := readLayout(p); err != nil {
			continue
		}
		o, err := openOldSet(p)
		if err != nil {
			closeSets(out)
			return nil, err
		}
		out = append(out, o)
	}
	return out, nil
}

func closeSets(sets []*oldSet) {
	for _, o := range sets {
		_ = o.Close()
	}
}

// removeSet unpins everything in dir and removes it. Once no process holds
// their descriptors, the set's programs detach and its maps are freed.
func removeSet(dir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("unpin %s: %w", dir, err)
	}
	// The layout map first: a set half removed is an unfinished one.
	_ = os.Remove(filepath.Join(dir, layoutPin))
	for _, e := range entries {
		if err := os.Remove(filepath.Join(dir, e.Name())); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("unpin: %w", err)
		}
	}
	if err := os.Remove(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("unpin: %w", err)
	}
	return nil
}

// Unpin removes every tracker set pinned under root, of any layout, and
// returns how many it removed; when it removed one, root goes too if that
// leaves it empty and it is not a mount point. Their programs detach and
// their lineages are tracked no more: the processes live on, untracked. It
// refuses while a tracker has root open. Nothing under root is touched that
// is not a set's directory, and a root that held no set is left as it is.
// Unpinning what is not there is no error.
func Unpin(root string) (int, error) {
	lock, err := lockDir(root, false)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return 0, nil
	case errors.Is(err, unix.EWOULDBLOCK):
		return 0, fmt.Errorf("unpin %s: a running tracker holds it: stop it first", root)
	case err != nil:
		return 0, fmt.Errorf("unpin: %w", err)
	}
	defer lock.Close()
	entries, err := os.ReadDir(root)
	if err != nil {
		return 0, fmt.Errorf("unpin %s: %w", root, err)
	}
	removed := 0
	for _, e := range entries {
		if e.IsDir() && strings.HasPrefix(e.Name(), "v") {
			if err := removeSet(filepath.Join(root, e.Name())); err != nil {
				return removed, err
			}
			removed++
		}
	}
	if removed == 0 {
		return 0, nil
	}
	// A mount point (bpffs mounted at root) is busy; the kernel's own
	// files (maps.debug, progs.debug) leave it not empty.
	if err := os.Remove(root); err != nil && !errors.Is(err, os.ErrNotExist) && !errors.Is(err, syscall.ENOTEMPTY) && !errors.Is(err, syscall.EBUSY) {
		return removed, fmt.Errorf("unpin %s: %w", root, err)
	}
	return removed, nil
}
