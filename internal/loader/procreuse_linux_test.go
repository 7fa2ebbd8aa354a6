package loader

import (
	"errors"
	"testing"

	"github.com/lineage-dev/lineage/internal/lineage"
	"github.com/lineage-dev/lineage/internal/testutil"
)

// PID reuse can't fool the BPF backend's user-space side either: what
// Register adopts from /proc, and what Members reports of adopted entries, is
// checked against /proc by identity. The /proc here is a fake tree, and its
// pids are above any pid the kernel can hand out, so the entries written to
// the kernel's maps name no real process.
func TestBPFAdoptedMembersSurvivePIDReuseByIdentityOnly(t *testing.T) {
	f := newFakeProcTree(t)
	f.supervisor()
	b, err := OpenBPF(&BPFOptions{ProcRoot: f.root})
	if err != nil && !errors.Is(err, ErrUnavailable) {
		t.Fatalf("open bpf: %v", err)
	}
	testutil.SkipWithoutBPF(t, err)
	t.Cleanup(func() { b.Close() })

	root := fakeProcess{pid: fakePID + 100, ppid: 1, start: 1000}
	child := fakeProcess{pid: fakePID + 101, ppid: root.pid, start: 1010}
	grand := fakeProcess{pid: fakePID + 102, ppid: child.pid, start: 1020}
	for _, q := range []fakeProcess{root, child, grand} {
		f.set(q)
	}
	rid, cid, gid := f.id(root), f.id(child), f.id(grand)

	// A stale identity of a live pid is refused, and adopts nothing.
	stale := lineage.Identity{PID: rid.PID, StartTicks: 999}
	if err := b.Register(stale, RootOptions{}); !errors.Is(err, lineage.ErrIdentityMismatch) {
		t.Fatalf("register a stale identity: %v, want ErrIdentityMismatch", err)
	}
	if got := memberIDs(t, b, stale); len(got) != 0 {
		t.Errorf("members of a refused root: %v", got)
	}

	if err := b.Register(rid, RootOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Forget(rid) })
	if got := memberIDs(t, b, rid); !sameIDs(got, rid, cid, gid) {
		t.Fatalf("members %v, want root, child and grandchild", got)
	}

	// The child dies and a stranger gets its pid; the grandchild, now
	// reparented, stays a member.
	f.set(fakeProcess{pid: child.pid, ppid: 1, start: 5000, comm: "stranger"})
	grand.ppid = 1
	f.set(grand)
	if got := memberIDs(t, b, rid); !sameIDs(got, rid, gid) {
		t.Errorf("after the child's pid was reused: members %v, want root and grandchild", got)
	}
	// The root's pid too.
	f.set(fakeProcess{pid: root.pid, ppid: 1, start: 6000, comm: "stranger"})
	if got := memberIDs(t, b, rid); !sameIDs(got, gid) {
		t.Errorf("after the root's pid was reused: members %v, want the grandchild alone", got)
	}
	// The old child's identity can't come back as a root.
	if err := b.Register(cid, RootOptions{}); !errors.Is(err, lineage.ErrIdentityMismatch) {
		t.Errorf("register the reused child's identity: %v, want ErrIdentityMismatch", err)
	}
	// Even when the stranger turns out to be a child of a member, an
	// entry written for the old identity never passes for it.
	f.set(fakeProcess{pid: child.pid, ppid: grand.pid, start: 5000, comm: "stranger"})
	for _, id := range memberIDs(t, b, rid) {
		if id.PID == cid.PID {
			t.Errorf("pid %d is a member as %s", cid.PID, id)
		}
	}
}
