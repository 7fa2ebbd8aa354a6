package bpf

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/lineage-dev/lineage/internal/loader"
	"github.com/lineage-dev/lineage/internal/proc"
	"github.com/lineage-dev/lineage/lineage"
)

// MaxHandoffFiles bounds how many descriptors [OpenHandoff] accepts: the two
// maps and the program links.
const MaxHandoffFiles = 16

// HandoffFiles returns new descriptors, close-on-exec, for what another
// process needs to reap b's lineages once b's owner is gone: the members
// map, the roots map, the .bss map (where the reaper's lease is renewed),
// then one per attached program link, in that order. Hold the links, not
// only the maps: a program stays attached while one descriptor of its link
// is open, and without the fork hook a member forks out of reach. The
// caller owns the files and closes them; b is unchanged.
func (b *Tracker) HandoffFiles() ([]*os.File, error) {
	fds := []int{b.objs.Members.FD(), b.objs.Roots.FD(), b.bss.FD()}
	for _, l := range b.links {
		raw, ok := l.(interface{ FD() int })
		if !ok {
			return nil, fmt.Errorf("handoff: link %T has no descriptor", l)
		}
		fds = append(fds, raw.FD())
	}
	if b.catcher != nil {
		raw, ok := b.catcher.(interface{ FD() int })
		if !ok {
			return nil, fmt.Errorf("handoff: link %T has no descriptor", b.catcher)
		}
		fds = append(fds, raw.FD())
	}
	files := make([]*os.File, 0, len(fds))
	for _, fd := range fds {
		dup, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
		if err != nil {
			closeFiles(files)
			return nil, fmt.Errorf("handoff: dup descriptor: %w", err)
		}
		files = append(files, os.NewFile(uintptr(dup), "lineage-handoff"))
	}
	return files, nil
}

func closeFiles(files []*os.File) {
	for _, f := range files {
		_ = f.Close()
	}
}

// Handoff is the membership another process handed over with
// [(*Tracker).HandoffFiles]: enough to list and contain a lineage, nothing to
// spawn, register or read events with. It keeps the programs attached for
// as long as it is open. Safe for concurrent use by multiple goroutines.
type Handoff struct {
	bpf   *Tracker
	bss   *ebpf.Map
	links []*os.File
}

// OpenHandoff takes over files, in the order [(*Tracker).HandoffFiles] gives
// them, and checks that the first three are the membership, roots and
// .bss maps this binary knows. containment is what the loader's
// [(*Tracker).Containment] said. From then on the Handoff renews the reaper's
// lease until it is closed (see [ReapLease]). On success the Handoff owns
// the files; on error they are closed. Errors for files that are not the
// expected maps wrap lineage.ErrInvalid.
func OpenHandoff(files []*os.File, containment lineage.Containment) (*Handoff, error) {
	if len(files) < 3 || len(files) > MaxHandoffFiles {
		closeFiles(files)
		return nil, fmt.Errorf("%w handoff: %d descriptors, want 3 to %d", lineage.ErrInvalid, len(files), MaxHandoffFiles)
	}
	procFS, err := proc.Open("/proc")
	if err != nil {
		closeFiles(files)
		return nil, err
	}
	members, err := handoffMap(files[0], "members", lineageMember{})
	if err != nil {
		closeFiles(files[1:])
		return nil, err
	}
	roots, err := handoffMap(files[1], "roots", lineageRoot{})
	if err != nil {
		_ = members.Close()
		closeFiles(files[2:])
		return nil, err
	}
	b := &Tracker{proc: procFS, loaded: loader.Loaded{Containment: containment}}
	b.objs.Members, b.objs.Roots = members, roots
	h := &Handoff{bpf: b, links: files[3:]}
	if err := h.openLease(files[2], containment); err != nil {
		_ = members.Close()
		_ = roots.Close()
		closeFiles(files[3:])
		return nil, err
	}
	return h, nil
}

// openLease maps the .bss map in f, and renews the lease in it from now
// on. f is closed in all cases.
func (h *Handoff) openLease(f *os.File, containment lineage.Containment) error {
	defer f.Close()
	variant := loader.VariantFull
	if containment == lineage.ContainKernelForker {
		variant = loader.VariantCompat
	}
	off, err := leaseOffset(variant)
	if err != nil {
		return fmt.Errorf("handoff: %w", err)
	}
	fd, err := unix.FcntlInt(f.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("handoff bss map: %w", err)
	}
	m, err := ebpf.NewMapFromFD(fd)
	if err != nil {
		return fmt.Errorf("%w handoff: bss map: %w", lineage.ErrInvalid, err)
	}
	if m.Type() != ebpf.Array || m.KeySize() != 4 || int64(m.ValueSize()) < off+8 {
		_ = m.Close()
		return fmt.Errorf("%w handoff: bss map: got %v with %d-byte values, want the program's .bss", lineage.ErrInvalid, m.Type(), m.ValueSize())
	}
	mem, err := m.Memory()
	if err != nil {
		_ = m.Close()
		return fmt.Errorf("handoff: bss map: %w", err)
	}
	h.bss, h.bpf.leaseMem, h.bpf.leaseOff = m, mem, off
	h.bpf.stopLease = make(chan struct{})
	return h.bpf.keepLease(h.bpf.stopLease)
}

// handoffMap turns f into the map named want, checking its shape against
// the value type this binary was built with. f is closed in all cases.
func handoffMap[V any](f *os.File, want string, value V) (*ebpf.Map, error) {
	defer f.Close()
	fd, err := unix.FcntlInt(f.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("handoff %s map: %w", want, err)
	}
	m, err := ebpf.NewMapFromFD(fd)
	if err != nil {
		return nil, fmt.Errorf("%w handoff: %s map: %w", lineage.ErrInvalid, want, err)
	}
	size := uint32(binary.Size(value))
	if m.Type() != ebpf.Hash || m.KeySize() != 4 || m.ValueSize() != size {
		_ = m.Close()
		return nil, fmt.Errorf("%w handoff: %s map: got %v with %d-byte keys and %d-byte values, want a hash of 4-byte keys and %d-byte values",
			lineage.ErrInvalid, want, m.Type(), m.KeySize(), m.ValueSize(), size)
	}
	return m, nil
}

// Members returns the live members of root's lineage, as [(*Tracker).Members].
func (h *Handoff) Members(root lineage.Identity) ([]lineage.Member, error) {
	return h.bpf.Members(root)
}

// Contain marks root's lineage as reaping in the kernel, as
// [(*Tracker).Contain]: from now on the fork hook kills what its members fork
// (or, before kernel 6.13, the member that forks).
func (h *Handoff) Contain(root lineage.Identity) (lineage.Containment, error) {
	return h.bpf.Contain(root)
}

// Close releases the maps and the links. Once the last holder of the links
// closes them, the programs detach and nothing is tracked any more.
func (h *Handoff) Close() error {
	close(h.bpf.stopLease)
	errs := []error{h.bpf.objs.Members.Close(), h.bpf.objs.Roots.Close(), h.bss.Close()}
	for _, f := range h.links {
		errs = append(errs, f.Close())
	}
	return errors.Join(errs...)
}
