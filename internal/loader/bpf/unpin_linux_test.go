package bpf

import (
	"os"
	"path/filepath"
	"testing"
)

// A --pin-dir that holds no tracker set (a directory the user made, off
// bpffs, where the daemon pinned nothing) is left as it is, and Unpin says
// it removed nothing.
func TestUnpinLeavesADirectoryWithNoSet(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "pins")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if n, err := Unpin(dir); err != nil || n != 0 {
		t.Errorf("Unpin of an empty directory: %d sets, %v; want 0 and no error", n, err)
	}
	if _, err := os.Stat(dir); err != nil {
		t.Errorf("the empty directory after Unpin: %v, want it left", err)
	}
	mine := filepath.Join(dir, "notes")
	if err := os.WriteFile(mine, []byte("mine"), 0o600); err != nil {
		t.Fatal(err)
	}
	if n, err := Unpin(dir); err != nil || n != 0 {
		t.Errorf("Unpin of a directory of other files: %d sets, %v", n, err)
	}
	if _, err := os.Stat(mine); err != nil {
		t.Errorf("a file beside no set after Unpin: %v, want it left", err)
	}
}

// A pin root that is itself a bpffs mount, as a pin dir's refusal tells
// a user to make, unpins cleanly: its sets go, the mount stays (it can't
// be removed), and that is no error.
func TestUnpinAPinRootThatIsItsOwnMount(t *testing.T) {
	root := mountBPFFSForTest(t)
	b := openPinned(t, Options{PinRoot: root})
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if n, err := Unpin(root); err != nil || n != 1 {
		t.Fatalf("Unpin of a mount point: %d sets, %v; want 1 and no error", n, err)
	}
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() != "maps.debug" && e.Name() != "progs.debug" {
			t.Errorf("left on the mount after Unpin: %s", e.Name())
		}
	}
	if n, err := Unpin(root); err != nil || n != 0 {
		t.Errorf("a second Unpin: %d sets, %v; want 0", n, err)
	}
}
