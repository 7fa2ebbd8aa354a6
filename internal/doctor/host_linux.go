package doctor

import (
	"fmt"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/lineage-dev/lineage/internal/loader"
	"github.com/lineage-dev/lineage/internal/loader/bpf"
)

// Host returns the real machine: the loader's own pre-checks and probes,
// the root file system, pidfd_open(2), prctl(2) and the BPF tracker itself.
// Its OpenBPF attaches lineage's tracker machine-wide for a moment and
// closes it.
func Host() System {
	return System{
		Root:      "/",
		Host:      loader.ProbeHost,
		Features:  bpf.ProbeFeatures,
		PidfdOpen: pidfdSelf,
		Subreaper: trySubreaper,
		OpenBPF:   openBPF,
	}
}

func pidfdSelf() error {
	fd, err := unix.PidfdOpen(os.Getpid(), 0)
	if err != nil {
		return fmt.Errorf("pidfd_open: %w", err)
	}
	return unix.Close(fd)
}

// trySubreaper reports whether this process may become a child subreaper.
// If it already is one, the answer is yes and nothing changes; otherwise it
// sets the attribute and clears it again at once. An orphan that happens to
// reparent in that moment becomes this process's child.
func trySubreaper() error {
	var was int32
	if err := unix.Prctl(unix.PR_GET_CHILD_SUBREAPER, uintptr(unsafe.Pointer(&was)), 0, 0, 0); err != nil {
		return fmt.Errorf("get child subreaper: %w", err)
	}
	if was != 0 {
		return nil
	}
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("set child subreaper: %w", err)
	}
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("clear child subreaper: %w", err)
	}
	return nil
}

func openBPF() (loader.Loaded, error) {
	b, err := bpf.Open(nil)
	if err != nil {
		return loader.Loaded{}, err
	}
	l := b.Loaded()
	if err := b.Close(); err != nil {
		return l, fmt.Errorf("close bpf tracker: %w", err)
	}
	return l, nil
}
