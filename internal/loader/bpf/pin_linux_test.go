package bpf

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/lineage-dev/lineage/internal/loader"
	"github.com/lineage-dev/lineage/internal/testutil"
	"github.com/lineage-dev/lineage/lineage"
)

// openPinned opens a pinned tracker under root that the test closes early
// or, at the latest, when it ends.
func openPinned(t *testing.T, opts Options) *Tracker {
	t.Helper()
	return openBPF(t, &opts)
}

// A pinned tracker tracks on while no process holds it: a fork made while
// it is closed is a member once it is opened again, the ring buffer resumes
// with that fork's event, and what overflowed meanwhile is counted as lost.
func TestPinnedTrackerTracksWhileClosed(t *testing.T) {
	root := testutil.PinRoot(t)
	mark := testutil.Marker(t)
	testutil.CheckNoLeaks(t, mark)
	trigger := filepath.Join(t.TempDir(), "go")
	opts := Options{PinRoot: root, RingBytes: uint32(os.Getpagesize())}

	b := openPinned(t, opts)
	if p, ok := b.Pinned(); !ok || p.Reused || p.Dir != layoutDir(root, LayoutVersion) {
		t.Fatalf("first open: pinned %+v %v, want a fresh set in %s", p, ok, layoutDir(root, LayoutVersion))
	}
	script := fmt.Sprintf("while [ ! -e %s ]; do sleep 0.05; done; setsid sleep %s & i=0; while [ $i -lt 100 ]; do /bin/true; i=$((i + 1)); done; exec sleep %s",
		trigger, testutil.Sleep(mark+"1"), testutil.Sleep(mark))
	id, _ := spawn(t, b, script, loader.RootOptions{DieWithSupervisor: true})
	testutil.KillAtCleanup(t, mark)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}

	// Nothing holds the tracker now but its pins.
	if err := os.WriteFile(trigger, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	// The root execs its sleep once its hundred children are done: their
	// records overflow the one-page ring no one reads.
	waitFor(t, "the daemon forked while closed", 10*time.Second, func() bool { return len(testutil.Sleepers(mark+"1")) == 1 })
	waitFor(t, "the children run while closed", 20*time.Second, func() bool { return len(testutil.Sleepers(mark)) == 2 })
	forked := testutil.Sleepers(mark + "1")[0]
	forkedID := lineage.Identity{PID: uint32(forked.PID), StartTicks: forked.StartTicks}

	b = openPinned(t, Options{PinRoot: root, RingBytes: 1 << 20})
	if p, _ := b.Pinned(); !p.Reused {
		t.Fatalf("second open: pinned %+v, want the set reused", p)
	}
	if !b.IsRoot(id) {
		t.Errorf("root %s is not a root after the reopen", id)
	}
	if _, ok := memberSet(t, b, id)[forkedID]; !ok {
		t.Errorf("process %s forked while closed is not a member of %s", forkedID, id)
	}
	rec := record(t, b)
	waitFor(t, "the fork's event", 10*time.Second, func() bool {
		for _, ev := range rec.snapshot() {
			if ev.Kind == lineage.EventFork && ev.Process == forkedID {
				return true
			}
		}
		return false
	})
	st, err := b.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if st.EventsLost == 0 {
		t.Errorf("stats %+v: the full ring buffer must have counted lost events", st)
	}
	if b.HardCancel() != loader.HardCancelNone {
		t.Errorf("hard cancel %s: a pinned tracker must kill nothing when its process dies", b.HardCancel())
	}
}

// A set pinned by another layout is moved into a new one: its roots and
// members are tracked by the new set, and the old one is unpinned.
func TestPinnedSetOfAnotherLayoutIsMigrated(t *testing.T) {
	root := testutil.PinRoot(t)
	mark := testutil.Marker(t)
	testutil.CheckNoLeaks(t, mark)
	testutil.KillAtCleanup(t, mark)

	old := openPinned(t, Options{PinRoot: root, MaxMembers: 2048, layout: LayoutVersion + 100})
	trigger := filepath.Join(t.TempDir(), "go")
	script := fmt.Sprintf("setsid sleep %s & while [ ! -e %s ]; do sleep 0.05; done; setsid sleep %s & exec sleep %s",
		testutil.Sleep(mark+"1"), trigger, testutil.Sleep(mark+"2"), testutil.Sleep(mark))
	id, _ := spawn(t, old, script, loader.RootOptions{})
	waitFor(t, "the first leftover", 10*time.Second, func() bool { return len(testutil.Sleepers(mark+"1")) == 1 })
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}

	b := openPinned(t, Options{PinRoot: root, MaxMembers: 2048})
	p, _ := b.Pinned()
	if p.Reused || p.MigratedFrom != layoutDir(root, LayoutVersion+100) || p.MigratedRoots != 1 {
		t.Fatalf("pinned %+v, want a new set with the old one's root moved over", p)
	}
	if _, err := os.Stat(p.MigratedFrom); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("old set %s: %v, want it unpinned", p.MigratedFrom, err)
	}
	ms := memberSet(t, b, id)
	for _, s := range testutil.Sleepers(mark + "1") {
		if _, ok := ms[lineage.Identity{PID: uint32(s.PID), StartTicks: s.StartTicks}]; !ok {
			t.Errorf("leftover %d not moved over: members %v", s.PID, ms)
		}
	}
	// The new set's programs track the moved lineage on.
	if err := os.WriteFile(trigger, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the second leftover", 10*time.Second, func() bool { return len(testutil.Sleepers(mark+"2")) == 1 })
	s := testutil.Sleepers(mark + "2")[0]
	if _, ok := memberSet(t, b, id)[lineage.Identity{PID: uint32(s.PID), StartTicks: s.StartTicks}]; !ok {
		t.Errorf("leftover forked after the migration is not a member")
	}
}

// A reused set keeps its size whatever the new open asks for, and says so.
func TestPinnedSetKeepsItsSize(t *testing.T) {
	root := testutil.PinRoot(t)
	b := openPinned(t, Options{PinRoot: root, MaxMembers: 1024})
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	b = openPinned(t, Options{PinRoot: root, MaxMembers: 4096})
	p, _ := b.Pinned()
	if !p.Reused || p.MaxMembers != 1024 || p.AskedMaxMembers != 4096 {
		t.Errorf("pinned %+v, want the pinned 1024 members kept over the 4096 asked", p)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if n, err := Unpin(root); err != nil || n != 1 {
		t.Fatalf("Unpin: %d sets, %v; want 1", n, err)
	}
	if _, err := os.Stat(root); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("pin root after Unpin: %v, want it gone", err)
	}
	if n, err := Unpin(root); err != nil || n != 0 {
		t.Errorf("unpinning nothing: %d sets, %v", n, err)
	}
}

// One tracker at a time holds a pin root: a second one, and Unpin, are
// refused while the first is open, and change nothing.
func TestPinnedSetIsHeldByOneTracker(t *testing.T) {
	root := testutil.PinRoot(t)
	b := openPinned(t, Options{PinRoot: root})
	if second, err := Open(&Options{PinRoot: root}); err == nil {
		second.Close()
		t.Fatal("a second tracker opened a held pin root")
	}
	if _, err := Unpin(root); err == nil {
		t.Fatal("Unpin of a held pin root succeeded")
	}
	p, _ := b.Pinned()
	if _, err := readLayout(p.Dir); err != nil {
		t.Fatalf("after the refusals: %v, want the set still pinned", err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if n, err := Unpin(root); err != nil || n != 1 {
		t.Fatalf("Unpin once closed: %d sets, %v; want 1", n, err)
	}
}
