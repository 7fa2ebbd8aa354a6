package bpf

import (
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/lineage-dev/lineage/internal/loader"
	"github.com/lineage-dev/lineage/internal/proc"
	"github.com/lineage-dev/lineage/internal/testutil"
	"github.com/lineage-dev/lineage/lineage"
)

func TestHandoffKeepsTrackingAfterTheLoaderCloses(t *testing.T) {
	b := openBPF(t, nil)
	mark := testutil.Marker(t)
	testutil.CheckNoLeaks(t, mark)
	// The job forks only once the loader is gone.
	id, _ := spawn(t, b, fmt.Sprintf("sleep 0.3; setsid sleep %[1]s & sleep %[1]s", testutil.Sleep(mark)), loader.RootOptions{})
	files, err := b.HandoffFiles()
	if err != nil {
		t.Fatal(err)
	}
	want := 3 + len(b.links) // the maps, the links
	if b.catcher != nil {
		want++ // the second fork hook, where tracefs lets it attach
	}
	if len(files) != want {
		t.Fatalf("%d handoff files, want %d", len(files), want)
	}
	h, err := OpenHandoff(files, b.Containment())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	t.Cleanup(func() {
		ms, _ := h.Members(id)
		for _, m := range ms {
			testutil.KillIdentity(int(m.PID), m.StartTicks)
		}
	})
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}

	waitFor(t, "two sleepers", 5*time.Second, func() bool { return len(testutil.Sleepers(mark)) == 2 })
	var ms []lineage.Member
	waitFor(t, "the sleepers as members", 5*time.Second, func() bool {
		ms, err = h.Members(id)
		return err == nil && len(ms) == 3
	})
	for _, m := range ms {
		if m.Root != id {
			t.Errorf("member %s has root %s, want %s", m.Identity, m.Root, id)
		}
	}
	how, err := h.Contain(id)
	if err != nil {
		t.Fatal(err)
	}
	if want := b.Containment(); how != want {
		t.Errorf("containment %q, want %q", how, want)
	}
	if _, err := h.Contain(lineage.Identity{PID: id.PID, StartTicks: id.StartTicks + 1}); !errors.Is(err, loader.ErrNotRoot) {
		t.Errorf("contain with a wrong start time: %v, want ErrNotRoot", err)
	}
	// The handoff, not the closed loader, renews the reaper's lease now.
	first, err := h.bpf.Lease()
	if err != nil || first <= proc.BootTime() {
		t.Fatalf("the handoff's lease %v (%v), want it ahead of now", first, err)
	}
	waitFor(t, "the handoff's renewal", 5*time.Second, func() bool {
		l, err := h.bpf.Lease()
		return err == nil && l > first
	})
}

func TestOpenHandoffRejectsWhatIsNotOurMaps(t *testing.T) {
	for n := range 4 {
		var files []*os.File
		for range n {
			r, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			w.Close()
			files = append(files, r)
		}
		if _, err := OpenHandoff(files, lineage.ContainKernelForker); !errors.Is(err, lineage.ErrInvalid) {
			t.Errorf("%d pipes: %v, want ErrInvalid", n, err)
		}
	}
	b := openBPF(t, nil)
	files, err := b.HandoffFiles()
	if err != nil {
		t.Fatal(err)
	}
	// The maps swapped: each is a hash, but of the other's values.
	files[0], files[1] = files[1], files[0]
	if _, err := OpenHandoff(files, lineage.ContainKernelForker); !errors.Is(err, lineage.ErrInvalid) {
		t.Errorf("swapped maps: %v, want ErrInvalid", err)
	}
}

// A holder that can't ask the exit hook whether the kernel skipped runs of
// it (a Handoff holds no program) checks every entry against /proc: an
// entry the kernel wrote for a process that is gone (its exit hook skipped)
// is neither listed nor kept. The entry names a pid above any pid_max, so
// no process can be touched.
func TestHandoffDropsAnEntryWhoseExitWasMissed(t *testing.T) {
	b := openBPF(t, nil)
	mark := testutil.Marker(t)
	testutil.CheckNoLeaks(t, mark)
	id, _ := spawn(t, b, fmt.Sprintf("sleep %s", testutil.Sleep(mark)), loader.RootOptions{})
	t.Cleanup(func() { killMembers(t, b, id) })
	gone := uint32(1 << 30)
	m := lineageMember{Start: 5, ParentPid: id.PID, ParentStart: id.StartTicks, RootPid: id.PID, RootStart: id.StartTicks}
	if err := b.objs.Members.Put(gone, &m); err != nil {
		t.Fatal(err)
	}
	files, err := b.HandoffFiles()
	if err != nil {
		t.Fatal(err)
	}
	h, err := OpenHandoff(files, b.Containment())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	ms, err := h.Members(id)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if m.PID == gone {
			t.Errorf("the entry of a process that is gone is listed: %+v", m)
		}
	}
	if len(ms) == 0 {
		t.Error("the live root is not listed")
	}
	var left lineageMember
	if err := b.objs.Members.Lookup(gone, &left); err == nil {
		t.Errorf("the entry of a process that is gone stayed: %+v", left)
	}
}
