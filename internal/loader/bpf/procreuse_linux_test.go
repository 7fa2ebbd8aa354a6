package bpf

import (
	"errors"
	"testing"

	"github.com/lineage-dev/lineage/internal/loader"
	"github.com/lineage-dev/lineage/internal/testutil"
	"github.com/lineage-dev/lineage/lineage"
)

// PID reuse can't fool the BPF backend's user-space side either: what
// Register adopts from /proc, and what Members reports of adopted entries, is
// checked against /proc by identity. The /proc here is a fake tree, and its
// pids are above any pid the kernel can hand out, so the entries written to
// the kernel's maps name no real process.
func TestBPFAdoptedMembersSurvivePIDReuseByIdentityOnly(t *testing.T) {
	f := testutil.NewFakeProc(t)
	f.Supervisor()
	b, err := Open(&Options{ProcRoot: f.Root})
	if err != nil && !errors.Is(err, loader.ErrUnavailable) {
		t.Fatalf("open bpf: %v", err)
	}
	testutil.SkipWithoutBPF(t, err)
	t.Cleanup(func() { b.Close() })

	root := testutil.FakeProcess{PID: testutil.FakePID + 100, PPID: 1, Start: 1000}
	child := testutil.FakeProcess{PID: testutil.FakePID + 101, PPID: root.PID, Start: 1010}
	grand := testutil.FakeProcess{PID: testutil.FakePID + 102, PPID: child.PID, Start: 1020}
	for _, q := range []testutil.FakeProcess{root, child, grand} {
		f.Set(q)
	}
	rid, cid, gid := f.ID(root), f.ID(child), f.ID(grand)

	// A stale identity of a live pid is refused, and adopts nothing.
	stale := lineage.Identity{PID: rid.PID, StartTicks: 999}
	if err := b.Register(stale, loader.RootOptions{}); !errors.Is(err, lineage.ErrIdentityMismatch) {
		t.Fatalf("register a stale identity: %v, want ErrIdentityMismatch", err)
	}
	if got := testutil.MemberIDs(t, b, stale); len(got) != 0 {
		t.Errorf("members of a refused root: %v", got)
	}

	if err := b.Register(rid, loader.RootOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Forget(rid) })
	if got := testutil.MemberIDs(t, b, rid); !testutil.SameIDs(got, rid, cid, gid) {
		t.Fatalf("members %v, want root, child and grandchild", got)
	}

	// The child dies and a stranger gets its pid; the grandchild, now
	// reparented, stays a member.
	f.Set(testutil.FakeProcess{PID: child.PID, PPID: 1, Start: 5000, Comm: "stranger"})
	grand.PPID = 1
	f.Set(grand)
	if got := testutil.MemberIDs(t, b, rid); !testutil.SameIDs(got, rid, gid) {
		t.Errorf("after the child's pid was reused: members %v, want root and grandchild", got)
	}
	// The root's pid too.
	f.Set(testutil.FakeProcess{PID: root.PID, PPID: 1, Start: 6000, Comm: "stranger"})
	if got := testutil.MemberIDs(t, b, rid); !testutil.SameIDs(got, gid) {
		t.Errorf("after the root's pid was reused: members %v, want the grandchild alone", got)
	}
	// The old child's identity can't come back as a root.
	if err := b.Register(cid, loader.RootOptions{}); !errors.Is(err, lineage.ErrIdentityMismatch) {
		t.Errorf("register the reused child's identity: %v, want ErrIdentityMismatch", err)
	}
	// Even when the stranger turns out to be a child of a member, an
	// entry written for the old identity never passes for it.
	f.Set(testutil.FakeProcess{PID: child.PID, PPID: grand.PID, Start: 5000, Comm: "stranger"})
	for _, id := range testutil.MemberIDs(t, b, rid) {
		if id.PID == cid.PID {
			t.Errorf("pid %d is a member as %s", cid.PID, id)
		}
	}
}
