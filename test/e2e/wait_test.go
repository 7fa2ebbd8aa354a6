package e2e

// What a test waits for when the other side has no API to ask: lineage
// run's proc backend, seen through the stat files it holds open.

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/lineage-dev/lineage/internal/testutil"
)

// holdsStatOf reports whether process holder has pid's /proc/PID/stat open.
// The proc backend keeps the stat file of each process of a job's tree
// open from the scan that first reads it (internal/loader/poll), and closes
// it at the end of the first scan that no longer lists the process: a
// test's only view of what lineage run's proc backend has seen, lineage
// run having no API to ask.
func holdsStatOf(holder, pid int) bool {
	dir := fmt.Sprintf("/proc/%d/fd", holder)
	fds, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	want := fmt.Sprintf("/proc/%d/stat", pid)
	for _, fd := range fds {
		if link, err := os.Readlink(filepath.Join(dir, fd.Name())); err == nil && link == want {
			return true
		}
	}
	return false
}

// polled waits until lineage (pid), with the proc backend, has read each
// of ps in a scan of its job's tree.
func polled(t *testing.T, lineage int, ps ...testutil.Proc) {
	t.Helper()
	for _, p := range ps {
		testutil.Eventually(t, 30*time.Second, fmt.Sprintf("lineage %d's proc backend to see %d %q", lineage, p.PID, p.Argv), func() bool {
			return holdsStatOf(lineage, p.PID)
		})
	}
}

// scannedSince waits until lineage (pid), with the proc backend, has ended
// a scan that began after witness was born, and so published (to the
// tracker and on to its guardian) all that the scans before it saw.
// witness is a process of the job, forked once the test had seen what it
// wants known; it is the test's to end. Once lineage holds witness's stat
// file, the test kills witness (lineage, its subreaper or an ancestor's,
// reaps it), and lineage closes that file at the end of the first scan
// that no longer lists it: a scan after the one that opened it, which
// began after witness was born. Scans run one at a time, each publishing
// its events before the next begins.
func scannedSince(t *testing.T, lineage int, witness testutil.Proc) {
	t.Helper()
	polled(t, lineage, witness)
	if !testutil.KillIdentity(witness.PID, witness.StartTicks) {
		t.Fatalf("the witness %d %q could not be killed", witness.PID, witness.Argv)
	}
	testutil.Eventually(t, 30*time.Second, fmt.Sprintf("lineage %d's proc backend to scan again after the witness %d died", lineage, witness.PID), func() bool {
		return !holdsStatOf(lineage, witness.PID)
	})
}

// sleepersOf waits until exactly n live sleepers run `sleep arg`, and
// returns them.
func sleepersOf(t *testing.T, arg string, n int) []testutil.Proc {
	t.Helper()
	var ps []testutil.Proc
	if !testutil.Until(30*time.Second, func() bool { ps = sleeping(arg); return len(ps) == n }) {
		t.Fatalf("%d sleepers of %s, want %d: %v", len(ps), arg, n, ps)
	}
	return ps
}

// sleeping returns the live sleepers that run `sleep arg`, arg exactly
// (testutil.Sleepers finds any that carry it).
func sleeping(arg string) []testutil.Proc {
	var ps []testutil.Proc
	for _, p := range testutil.Sleepers(arg) {
		if len(p.Argv) == 2 && p.Argv[1] == arg {
			ps = append(ps, p)
		}
	}
	return ps
}
