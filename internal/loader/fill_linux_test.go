package loader

import (
	"fmt"
	"testing"

	"github.com/lineage-dev/lineage/internal/testutil"
)

func TestFillCountsTheMembershipMap(t *testing.T) {
	b := openBPF(t, &BPFOptions{MaxMembers: 8})
	if n, capacity, err := b.Fill(); err != nil || n != 0 || capacity != 8 {
		t.Fatalf("Fill() = %d, %d, %v before any root; want 0, 8", n, capacity, err)
	}
	mark := testutil.Marker(t)
	testutil.CheckNoLeaks(t, mark)
	// The root, and two sleepers it leaves; the root exits.
	id, j := spawn(t, b, fmt.Sprintf("sleep %[1]s & sleep %[1]s & exit 0", testutil.Sleep(mark)), RootOptions{})
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
