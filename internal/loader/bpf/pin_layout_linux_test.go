package bpf

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/lineage-dev/lineage/internal/loader"
	"github.com/lineage-dev/lineage/internal/testutil"
	"github.com/lineage-dev/lineage/lineage"
)

// A set pinned by layout 2, which had no keep_exes map, moves into this
// binary's layout (3 added keep_exes, 4 the reaper's lease, 5 the drops
// map and sized exec records) as it is: its
// roots and members, their spare marks with them, and the new set keeps
// exe rules for the moved roots.
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
	if p.MigratedFrom != layoutDir(root, 2) || p.Dir != layoutDir(root, LayoutVersion) || p.MigratedRoots != 1 || p.MigratedMembers != 2 {
		t.Fatalf("pinned %+v, want layout 2's root and two members moved into layout %d", p, LayoutVersion)
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
		t.Errorf("layout %d pins no keep_exes map: %v", LayoutVersion, err)
	}
}

// A set pinned by layout 3 or 4, which had no drops map, moves into the
// current layout, and the events its ring buffer holds (written while no
// tracker read them) are delivered before the new set's own.
func TestPinnedLayout3And4AreMigratedWithTheirBacklog(t *testing.T) {
	for _, layout := range []uint32{3, 4} {
		t.Run(fmt.Sprintf("layout%d", layout), func(t *testing.T) { testPinnedLayoutIsMigratedWithItsBacklog(t, layout) })
	}
}

func testPinnedLayoutIsMigratedWithItsBacklog(t *testing.T, layout uint32) {
	root := testutil.PinRoot(t)
	mark := testutil.Marker(t)
	testutil.CheckNoLeaks(t, mark)
	testutil.KillAtCleanup(t, mark)

	old := openPinned(t, Options{PinRoot: root, layout: layout})
	if err := os.Remove(filepath.Join(layoutDir(root, layout), lineageMapDrops)); err != nil {
		t.Fatal(err)
	}
	// No reader runs: the job's events wait in the old set's ring.
	id, j := spawn(t, old, "/bin/true backlog", loader.RootOptions{})
	if err := j.wait(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the root's exit", 5*time.Second, func() bool {
		st, err := old.Stats()
		return err == nil && st.Exits >= 2
	})
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}

	b := openPinned(t, Options{PinRoot: root})
	if p, _ := b.Pinned(); p.MigratedFrom != layoutDir(root, layout) || p.Dir != layoutDir(root, LayoutVersion) {
		t.Fatalf("pinned %+v, want layout %d's set moved into layout %d", p, layout, LayoutVersion)
	}
	if _, err := os.Stat(layoutDir(root, layout)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("layout %d's set is still pinned: %v", layout, err)
	}
	rec := record(t, b)
	var kinds []lineage.EventKind
	waitFor(t, "the root's exit from the old ring", 5*time.Second, func() bool {
		kinds = kinds[:0]
		exited := false
		for _, ev := range rec.snapshot() {
			if ev.Process == id {
				kinds = append(kinds, ev.Kind)
				exited = exited || ev.Kind == lineage.EventExit
			}
		}
		return exited
	})
	if !slices.Contains(kinds, lineage.EventFork) || !slices.Contains(kinds, lineage.EventExec) {
		t.Errorf("the root's events from the old ring: %v, want its fork, exec and exit", kinds)
	}
	if st, err := b.Stats(); err != nil || st.Undecodable != 0 {
		t.Errorf("stats %+v, %v: the old ring's records must decode", st, err)
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
