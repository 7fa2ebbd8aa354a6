package bpf

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/lineage-dev/lineage/internal/loader"
	"github.com/lineage-dev/lineage/internal/testutil"
	"github.com/lineage-dev/lineage/lineage"
)

func TestArmsMakeRootsOfWhatAnArmedProcessForks(t *testing.T) {
	eachVariant(t, testArmsMakeRootsOfWhatAnArmedProcessForks)
}

// This test process arms itself: the shell it runs next is a root carrying
// the cookie before its first instruction, and the setsid'd sleeper the
// shell leaves is that root's member. Re-armed, the next shell carries the
// new cookie; disarmed, or armed with a start time that isn't its own, it
// forks no root. A member can't be armed, and bad input changes nothing.
func testArmsMakeRootsOfWhatAnArmedProcessForks(t *testing.T, v loader.Variant) {
	b := openBPF(t, &Options{Variant: v})
	mark := testutil.Marker(t)
	testutil.CheckNoLeaks(t, mark)
	self, err := b.proc.Identity(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.ClearArms() })
	// run starts a shell that leaves a setsid'd sleeper and waits for it;
	// it returns the shell's identity, read before it is waited for.
	run := func(seconds int) lineage.Identity {
		t.Helper()
		c := exec.Command("sh", "-c", fmt.Sprintf("setsid sleep %d.%s >/dev/null 2>&1 &", seconds, mark))
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		start, _, err := testutil.StartTicks(c.Process.Pid)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Wait(); err != nil {
			t.Fatal(err)
		}
		return lineage.Identity{PID: uint32(c.Process.Pid), StartTicks: start}
	}
	cookieOf := func(id lineage.Identity) (uint32, bool) {
		t.Helper()
		roots, err := b.ArmedRoots()
		if err != nil {
			t.Fatal(err)
		}
		c, ok := roots[id]
		return c, ok
	}
	sleeperOf := func(root lineage.Identity, seconds int) {
		t.Helper()
		want := fmt.Sprintf("%d.%s", seconds, mark)
		waitFor(t, "the sleeper "+want+" as the root's member", 10*time.Second, func() bool {
			ms, _ := b.Members(root)
			for _, m := range ms {
				if argv, _ := b.proc.Argv(int(m.PID)); len(argv) == 2 && argv[1] == want {
					return true
				}
			}
			return false
		})
		killMembers(t, b, root)
		_ = b.Forget(root)
	}

	if err := b.Arm(self, 7); err != nil {
		t.Fatal(err)
	}
	first := run(91)
	if c, ok := cookieOf(first); !ok || c != 7 {
		t.Fatalf("the armed process's shell %s: root %v with cookie %d, want cookie 7", first, ok, c)
	}
	sleeperOf(first, 91)

	if err := b.Arm(self, 8); err != nil {
		t.Fatal(err)
	}
	second := run(92)
	if c, ok := cookieOf(second); !ok || c != 8 {
		t.Fatalf("re-armed: root %v with cookie %d, want 8", ok, c)
	}
	sleeperOf(second, 92)

	if err := b.Disarm(self); err != nil {
		t.Fatal(err)
	}
	if id := run(93); func() bool { _, ok := cookieOf(id); return ok }() {
		t.Errorf("disarmed, the shell %s is a root", id)
	}
	if err := b.Arm(lineage.Identity{PID: self.PID, StartTicks: self.StartTicks + 1}, 9); err != nil {
		t.Fatal(err)
	}
	if id := run(94); func() bool { _, ok := cookieOf(id); return ok }() {
		t.Errorf("armed with a start time not its own, the shell %s is a root", id)
	}
	if err := b.ClearArms(); err != nil {
		t.Fatal(err)
	}
	// The untracked sleepers, once both run: killed by identity.
	var loose []testutil.Proc
	waitFor(t, "the untracked sleepers", 10*time.Second, func() bool {
		loose = loose[:0]
		for _, p := range testutil.Sleepers(mark) {
			if strings.HasPrefix(p.Argv[1], "93.") || strings.HasPrefix(p.Argv[1], "94.") {
				loose = append(loose, p)
			}
		}
		return len(loose) == 2
	})
	for _, p := range loose {
		testutil.KillIdentity(p.PID, p.StartTicks)
	}

	// exec: the root is the sleeper itself, so that killing the members
	// leaves nothing a shell forked after the listing.
	root, _ := spawn(t, b, "exec sleep "+testutil.Sleep(mark), loader.RootOptions{})
	if err := b.Arm(root, 10); !errors.Is(err, loader.ErrAlreadyTracked) {
		t.Errorf("arm a member: %v, want loader.ErrAlreadyTracked", err)
	}
	if err := b.Arm(self, 0); !errors.Is(err, lineage.ErrInvalid) {
		t.Errorf("arm with cookie 0: %v, want ErrInvalid", err)
	}
	killMembers(t, b, root)
}
