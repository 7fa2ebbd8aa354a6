package poll

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lineage-dev/lineage/internal/loader"
	"github.com/lineage-dev/lineage/internal/testutil"
	"github.com/lineage-dev/lineage/lineage"
)

// openStatFiles returns the pids whose /proc/PID/stat this process holds
// open.
func openStatFiles(t *testing.T) map[int]bool {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[int]bool)
	for _, e := range ents {
		target, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name()))
		if err != nil || !strings.HasPrefix(target, "/proc/") || !strings.HasSuffix(target, "/stat") {
			continue
		}
		if pid, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(target, "/proc/"), "/stat")); err == nil {
			out[pid] = true
		}
	}
	return out
}

// The poller keeps open the stat files of members and candidates only, not
// one for every process on the host.
func TestProcKeepsOpenMembersOnly(t *testing.T) {
	marker := testutil.Marker(t)
	testutil.CheckNoLeaks(t, marker)
	testutil.KillAtCleanup(t, marker)
	p, _ := openRealProc(t)
	arg := testutil.Sleep(marker)
	cmd := exec.Command("sh", "-c", "sleep "+arg+" & sleep "+arg+" & wait")
	root, err := p.Spawn(cmd, loader.RootOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Wait() })
	ms := waitMembers(t, p, root, "two sleepers", func(ms []lineage.Member) bool { return len(ms) == 3 })
	if _, err := p.Members(root); err != nil { // one more scan, members known
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	if _, err := p.Members(root); err != nil {
		t.Fatal(err)
	}
	open := openStatFiles(t)
	host, err := p.reader.PIDs(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if !open[int(m.PID)] {
			t.Errorf("member %s: stat file not kept open", m.Identity)
		}
	}
	// Members, and the test process's children (candidates): a handful,
	// against every process on the host.
	if len(open) > len(ms)+8 {
		t.Errorf("%d stat files open for %d members (%d processes on the host): want members and candidates only", len(open), len(ms), len(host))
	}
	for _, m := range ms {
		testutil.KillIdentity(int(m.PID), m.StartTicks)
	}
}
