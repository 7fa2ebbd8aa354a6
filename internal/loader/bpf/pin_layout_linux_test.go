package bpf

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/lineage-dev/lineage/internal/lineage"
	"github.com/lineage-dev/lineage/internal/loader"
	"github.com/lineage-dev/lineage/internal/testutil"
)

// A set pinned by layout 2, which had no keep_exes map, moves into layout 3
// as it is: its roots and members, their spare marks with them, and the
// new set keeps exe rules for the moved roots.
func TestPinnedLayout2IsMigrated(t *testing.T) {
	root := testutil.PinRoot(t)
	mark := testutil.Marker(t)
	testutil.CheckNoLeaks(t, mark)
	testutil.KillAtCleanup(t, mark)

	old := openPinned(t, Options{PinRoot: root, layout: 2})
	// What layout 2 pinned: the same maps but keep_exes.
	if err := os.Remove(filepath.Join(layoutDir(root, 2), lineageMapKeepExes)); err != nil {
		t.Fatal(err)
	}
	id, _ := spawn(t, old, fmt.Sprintf("sleep %s & exec sleep %s", testutil.Sleep(mark), testutil.Sleep(mark)), loader.RootOptions{})
	waitFor(t, "the root and its sleeper", 10*time.Second, func() bool { return len(testutil.Sleepers(mark)) == 2 })
	var child lineage.Identity
	for m := range memberSet(t, old, id) {
		if m != id {
			child = m
		}
	}
	if err := old.Spare(child); err != nil {
		t.Fatal(err)
	}
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}

	b := openPinned(t, Options{PinRoot: root})
	p, _ := b.Pinned()
	if p.MigratedFrom != layoutDir(root, 2) || p.Dir != layoutDir(root, 3) || p.MigratedRoots != 1 || p.MigratedMembers != 2 {
		t.Fatalf("pinned %+v, want layout 2's root and two members moved into layout 3", p)
	}
	if !spared(t, b, child) || spared(t, b, id) {
		t.Errorf("spare marks after the move: child %v, root %v; want the child's alone", spared(t, b, child), spared(t, b, id))
	}
	_, file := keptCopy(t, "sleep")
	if err := b.KeepExe(id, file); err != nil {
		t.Fatalf("keep an exe for the moved root: %v", err)
	}
	if keys := keepKeys(t, b); !slices.Contains(keys, keepExeKey(id.PID, file)) {
		t.Errorf("keep_exes %+v, want the moved root's rule", keys)
	}
	if _, err := os.Stat(filepath.Join(p.Dir, lineageMapKeepExes)); err != nil {
		t.Errorf("layout 3 pins no keep_exes map: %v", err)
	}
}

// A pinned set's second fork hook is not pinned: each tracker that takes
// the set over attaches its own, sharing the pinned maps.
func TestReusedPinnedSetRunsTheSecondForkHook(t *testing.T) {
	openBPF(t, &Options{Variant: loader.VariantFull}).Close() // skips where the full program can't load
	if !withTracefs(t) {
		return
	}
	root := testutil.PinRoot(t)
	mark := testutil.Marker(t)
	testutil.CheckNoLeaks(t, mark)
	first := openPinned(t, Options{PinRoot: root, Variant: loader.VariantFull})
	if on, off := first.ForkCatcher(); !on {
		t.Fatalf("a fresh pinned set has no second fork hook: %s", off)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	b := openPinned(t, Options{PinRoot: root})
	if p, _ := b.Pinned(); !p.Reused {
		t.Fatalf("pinned %+v, want the set reused", p)
	}
	if on, off := b.ForkCatcher(); !on {
		t.Fatalf("the reused set has no second fork hook: %s", off)
	}
	// With the pinned first fork hook gone, the second alone tracks.
	if err := b.links[0].Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(layoutDir(root, LayoutVersion), linkPin+lineageProgHandleFork)); err != nil {
		t.Fatal(err)
	}
	id, _ := spawn(t, b, fmt.Sprintf("sleep %s & wait", testutil.Sleep(mark)), loader.RootOptions{})
	t.Cleanup(func() { killMembers(t, b, id) })
	waitFor(t, "the sleeper", 10*time.Second, func() bool { return len(testutil.Sleepers(mark)) == 1 })
	s := testutil.Sleepers(mark)[0]
	if _, ok := memberSet(t, b, id)[lineage.Identity{PID: uint32(s.PID), StartTicks: s.StartTicks}]; !ok {
		t.Error("the sleeper forked with the second fork hook alone is no member")
	}
}
