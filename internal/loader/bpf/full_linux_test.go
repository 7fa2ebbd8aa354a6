package bpf

import (
	"errors"
	"os/exec"
	"testing"

	"github.com/lineage-dev/lineage/internal/loader"
	"github.com/lineage-dev/lineage/internal/testutil"
	"github.com/lineage-dev/lineage/lineage"
)

// A root the full membership can't hold is refused as such
// (ErrMembersFull, naming the size), not with the map's E2BIG, and leaves
// nothing registered.
func TestRegisterIntoAFullMembershipSaysSo(t *testing.T) {
	b := openBPF(t, &Options{MaxMembers: 2})
	mark := testutil.Marker(t)
	testutil.CheckNoLeaks(t, mark)
	var roots []lineage.Identity
	for range 3 {
		cmd := exec.Command("sleep", testutil.Sleep(mark))
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		id, err := b.proc.Identity(cmd.Process.Pid)
		if err != nil {
			t.Fatal(err)
		}
		roots = append(roots, id)
	}
	for _, r := range roots[:2] {
		if err := b.Register(r, loader.RootOptions{}); err != nil {
			t.Fatalf("register %v into room for two: %v", r, err)
		}
		t.Cleanup(func() { _ = b.Forget(r) })
	}
	err := b.Register(roots[2], loader.RootOptions{})
	if !errors.Is(err, loader.ErrMembersFull) {
		t.Fatalf("a third root into room for two: %v, want ErrMembersFull", err)
	}
	if ms, _ := b.Members(roots[2]); len(ms) != 0 {
		t.Errorf("the refused root has members %v", ms)
	}
}
