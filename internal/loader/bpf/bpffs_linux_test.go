package bpf

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/lineage-dev/lineage/lineage"
)

// A pin root off bpffs is refused as invalid, and nothing is made for it;
// one under /sys/fs/bpf (mounted on demand) or on a bpffs mounted
// elsewhere, existing or not yet, is accepted.
func TestCheckPinRoot(t *testing.T) {
	off := filepath.Join(t.TempDir(), "pins", "deeper")
	for _, root := range []string{"relative/pins", off, filepath.Dir(off)} {
		if err := CheckPinRoot(root); !errors.Is(err, lineage.ErrInvalid) {
			t.Errorf("CheckPinRoot(%q) = %v, want an invalid-option error", root, err)
		}
	}
	if _, err := os.Stat(filepath.Dir(off)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the refused pin root's parent was made (%v)", err)
	}
	if err := (&Options{PinRoot: off}).Validate(); !errors.Is(err, lineage.ErrInvalid) {
		t.Errorf("Validate with a pin root off bpffs: %v, want an invalid-option error", err)
	}
	for _, root := range []string{"", "/sys/fs/bpf", "/sys/fs/bpf/lineage-check-" + filepath.Base(t.TempDir())} {
		if err := CheckPinRoot(root); err != nil {
			t.Errorf("CheckPinRoot(%q) = %v", root, err)
		}
	}
	if os.Geteuid() != 0 {
		return
	}
	mnt := mountBPFFSForTest(t)
	for _, root := range []string{mnt, filepath.Join(mnt, "not", "yet")} {
		if err := CheckPinRoot(root); err != nil {
			t.Errorf("CheckPinRoot(%q) on a bpffs mounted there: %v", root, err)
		}
	}
}

// mountBPFFSForTest mounts a bpffs of the test's own on a temporary
// directory, unmounted when the test ends, and returns the mount point.
func mountBPFFSForTest(t *testing.T) string {
	t.Helper()
	mnt := t.TempDir()
	if err := unix.Mount("bpf", mnt, "bpf", 0, "mode=0700"); err != nil {
		t.Fatalf("mount bpffs at %s: %v", mnt, err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(mnt, 0); err != nil {
			t.Errorf("unmount %s: %v", mnt, err)
		}
	})
	return mnt
}
