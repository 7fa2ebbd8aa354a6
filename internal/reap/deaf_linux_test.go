package reap

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/lineage-dev/lineage/lineage"
)

// A PID namespace's init deaf to SIGTERM, among hundreds of members that
// obey it but exit one by one, slower than the reap signals them: long past
// deafPatience, with exits still coming in, the status reads that deafCheck
// spreads over the poll intervals find it and kill it without its grace.
func TestFakeDeafInitAmongSlowExits(t *testing.T) {
	f := newFakeProc(t)
	s := newFakeSignaler(f)
	s.tick = 50 * time.Microsecond // each status read takes time
	const obeying = 800
	var ids []lineage.Identity
	for i := range obeying {
		ids = append(ids, f.add(fakeProcess{pid: 3_900_000 + i, start: 5000}))
	}
	init := f.add(fakeProcess{pid: 3_900_000 + obeying, start: 5000})
	status := "Tgid:\t3903000\nNSpid:\t3903000\t1\nSigIgn:\t0000000000000000\nSigCgt:\t0000000000000000\n"
	if err := os.WriteFile(filepath.Join(f.root, strconv.Itoa(int(init.PID)), "status"), []byte(status), 0o644); err != nil {
		t.Fatal(err)
	}
	termed := make(map[int]bool)
	s.react = func(pid int, sig syscall.Signal) bool {
		termed[pid] = sig == syscall.SIGTERM
		return false // the obeying exit one at a time, below
	}
	next, exitsBeforeKill := 0, -1
	s.onWait = func() {
		if exitsBeforeKill < 0 && slices.Contains(s.sent[int(init.PID)], "KILL") {
			exitsBeforeKill = next
		}
		for next < obeying {
			pid := int(ids[next].PID)
			next++
			if termed[pid] && !s.gone[pid] {
				s.exit(pid)
				s.now += 2 * time.Millisecond // 3 ms an exit, with Wait's
				return
			}
		}
	}
	given := func() (lineage.Containment, error) { return "kernel", nil }
	all := append(slices.Clone(ids), init)
	rep, out := fakeReap(t, f, s, listed(s, all...), Options{Grace: time.Minute, Contain: given})
	if o := out[init]; o.Result != lineage.Killed || o.Reason != whyDeafInit || !slices.Equal(o.Sent, []string{"TERM", "KILL"}) {
		t.Fatalf("the namespace's init: %s (%q), sent %v; want killed as deaf to TERM after TERM", o.Result, o.Reason, o.Sent)
	}
	if !out[init].Member.Exited {
		t.Errorf("the killed init's member reads not exited")
	}
	if exitsBeforeKill < 0 || exitsBeforeKill >= obeying {
		t.Errorf("the init was killed after %d of %d exits; want it found while exits still came in", exitsBeforeKill, obeying)
	}
	if rep.Took >= time.Minute {
		t.Errorf("took %v: the init waited for the grace", rep.Took)
	}
	for _, id := range ids {
		if o := out[id]; o.Result != lineage.Terminated || !o.Member.Exited {
			t.Fatalf("%s: %s, member exited %v; want terminated, exited", id, o.Result, o.Member.Exited)
		}
	}
	t.Logf("killed after %d of %d exits, reap took %v", exitsBeforeKill, obeying, rep.Took)
}
