package bpf

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/lineage-dev/lineage/internal/loader"
	"github.com/lineage-dev/lineage/internal/proc"
	"github.com/lineage-dev/lineage/internal/testutil"
)

// Kill-at-birth lasts only while the reaper's lease does: a contained
// lineage's forks die (the child, or with compat the forker) while it is
// renewed, and are born alive once it has lapsed, as when the holder of the
// tracker died mid-reap.
func TestContainmentEndsWithTheLease(t *testing.T) { eachVariant(t, testContainmentEndsWithTheLease) }

func testContainmentEndsWithTheLease(t *testing.T, v loader.Variant) {
	b := openBPF(t, &Options{Variant: v})
	mark := testutil.Marker(t)
	testutil.CheckNoLeaks(t, mark)
	dir := t.TempDir()
	during, after := filepath.Join(dir, "during"), filepath.Join(dir, "after")
	for _, f := range []string{during, after} {
		if err := syscall.Mkfifo(f, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// Two loops that fork a sleeper for each line they read, and nothing
	// otherwise.
	script := fmt.Sprintf(`exec 3<>%q 4<>%q
		(while read x <&3; do sleep %s & done) &
		(while read x <&4; do sleep %s & done) &
		wait`, during, after, testutil.Sleep(mark+"1"), testutil.Sleep(mark+"2"))
	id, _ := spawn(t, b, script, loader.RootOptions{})
	t.Cleanup(func() { killMembers(t, b, id) })
	waitFor(t, "both loops", 5*time.Second, func() bool { return len(memberSet(t, b, id)) >= 3 })
	if _, err := b.Contain(id); err != nil {
		t.Fatal(err)
	}
	if lease, err := b.Lease(); err != nil || lease <= proc.BootTime() {
		t.Fatalf("lease %v (%v) while contained, want it ahead of %v", lease, err, proc.BootTime())
	}
	line := func(fifo string) {
		t.Helper()
		f, err := os.OpenFile(fifo, os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.WriteString("\n"); err != nil {
			t.Fatal(err)
		}
	}
	line(during)
	waitFor(t, "a fork killed at birth", 5*time.Second, func() bool {
		st, _ := b.Stats()
		return st.Contained >= 1
	})
	// The holder is gone: nobody renews the lease, and it lapses.
	close(b.stopLease)
	b.stopLease = nil
	if err := b.objs.ReapLeaseNs.Set(uint64(proc.BootTime())); err != nil {
		t.Fatal(err)
	}
	st, _ := b.Stats()
	line(after)
	born := atLeastSleepersOf(t, mark+"2", 1)
	time.Sleep(100 * time.Millisecond) // a kill at birth would be pending by now
	for _, p := range born {
		if !testutil.Alive(p.PID, p.StartTicks) {
			t.Errorf("the fork after the lease lapsed was killed: %d", p.PID)
		}
	}
	if now, _ := b.Stats(); now.Contained != st.Contained {
		t.Errorf("%d kills at birth after the lease lapsed, want none", now.Contained-st.Contained)
	}
}

// The lease is renewed while the tracker is open.
func TestLeaseIsRenewed(t *testing.T) {
	b := openBPF(t, nil)
	first, err := b.Lease()
	if err != nil {
		t.Fatal(err)
	}
	if d := first - proc.BootTime(); d <= 0 || d > ReapLease {
		t.Fatalf("lease %v ahead at open, want (0, %v]", d, ReapLease)
	}
	waitFor(t, "a renewal", 5*time.Second, func() bool {
		l, err := b.Lease()
		return err == nil && l > first
	})
}

func atLeastSleepersOf(t *testing.T, mark string, n int) []testutil.Proc {
	t.Helper()
	var ps []testutil.Proc
	waitFor(t, fmt.Sprintf("%d sleepers", n), 5*time.Second, func() bool {
		ps = testutil.Sleepers(mark)
		return len(ps) >= n
	})
	return ps
}
