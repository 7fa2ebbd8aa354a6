package bpf

import (
	"fmt"
	"testing"

	"github.com/lineage-dev/lineage/internal/loader"
	"github.com/lineage-dev/lineage/internal/testutil"
	"github.com/lineage-dev/lineage/lineage"
)

// Members reads the map in batches: more entries than one batch holds, of
// two roots, come back each once, and only the asked root's, as iteration
// reads them. The entries name pids above any pid_max, so no process can
// be touched.
func TestMembersReadsEveryEntryOnce(t *testing.T) {
	b := openBPF(t, &Options{MaxMembers: 8192})
	const n = memberBatch*2 + 77
	root := lineage.Identity{PID: 1 << 30, StartTicks: 7}
	other := lineage.Identity{PID: 1<<30 + 1, StartTicks: 7}
	for i := range uint32(n) {
		owner := root
		if i%3 == 0 {
			owner = other
		}
		m := lineageMember{Start: uint64(i) + 1, RootPid: owner.PID, RootStart: owner.StartTicks}
		if err := b.objs.Members.Put(1<<30+2+i, &m); err != nil {
			t.Fatal(err)
		}
	}
	// The batch read itself works here (not only the iteration it falls
	// back on), and reads every entry.
	if all, err := b.memberBatches(); err != nil || len(all) != n {
		t.Fatalf("batch read: %d entries, %v; want %d", len(all), err, n)
	}
	ms, err := b.Members(root)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[uint32]bool{}
	for _, m := range ms {
		if seen[m.PID] {
			t.Errorf("pid %d listed twice", m.PID)
		}
		seen[m.PID] = true
		if i := m.PID - (1<<30 + 2); i%3 == 0 || m.StartTicks != uint64(i)+1 || m.Root != root {
			t.Errorf("member %+v: not root's, or its start is wrong", m)
		}
	}
	want := 0
	var pid uint32
	var m lineageMember
	for it := b.objs.Members.Iterate(); it.Next(&pid, &m); {
		if m.RootPid == root.PID {
			want++
		}
	}
	if len(ms) != want || want != n-(n+2)/3 {
		t.Errorf("%d members listed, iteration finds %d, want %d", len(ms), want, n-(n+2)/3)
	}
}

func TestFillCountsTheMembershipMap(t *testing.T) {
	b := openBPF(t, &Options{MaxMembers: 8})
	if n, capacity, err := b.Fill(); err != nil || n != 0 || capacity != 8 {
		t.Fatalf("Fill() = %d, %d, %v before any root; want 0, 8", n, capacity, err)
	}
	mark := testutil.Marker(t)
	testutil.CheckNoLeaks(t, mark)
	// The root, and two sleepers it leaves; the root exits.
	id, j := spawn(t, b, fmt.Sprintf("sleep %[1]s & sleep %[1]s & exit 0", testutil.Sleep(mark)), loader.RootOptions{})
	if err := j.wait(); err != nil {
		t.Fatal(err)
	}
	ms := memberSet(t, b, id)
	if n, capacity, err := b.Fill(); err != nil || n != len(ms) || n != 2 || capacity != 8 {
		t.Errorf("Fill() = %d, %d, %v with members %v; want 2, 8", n, capacity, err, ms)
	}
	for m := range ms {
		testutil.KillIdentity(int(m.PID), m.StartTicks)
	}
	if err := b.Forget(id); err != nil {
		t.Fatal(err)
	}
	if n, _, err := b.Fill(); err != nil || n != 0 {
		t.Errorf("Fill() = %d, %v after Forget; want 0", n, err)
	}
}
