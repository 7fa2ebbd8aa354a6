package bpf

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lineage-dev/lineage/internal/loader"
	"github.com/lineage-dev/lineage/internal/testutil"
	"github.com/lineage-dev/lineage/lineage"
)

// A process whose fork no hook saw and whose parent died is the child of
// the child subreaper that spawned its lineage: the adoption after skipped
// forks takes it as the lineage's orphan, and its descendants with it,
// while a helper the subreaper started stays out.
func TestAdoptsTheOrphansASubreaperInherits(t *testing.T) {
	b := openBPF(t, nil)
	mark := testutil.Marker(t)
	testutil.CheckNoLeaks(t, mark)
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0) })

	var helper *exec.Cmd
	if err := b.StartHelper(func() (int, error) {
		helper = exec.Command("sleep", testutil.Sleep(mark))
		if err := helper.Start(); err != nil {
			return 0, err
		}
		return helper.Process.Pid, nil
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = helper.Process.Kill()
		_ = helper.Wait()
	})

	dir := t.TempDir()
	pidFile := filepath.Join(dir, "orphan")
	s := testutil.Sleep(mark)
	root, _ := spawn(t, b, orphanScript(s, pidFile), loader.RootOptions{})
	t.Cleanup(func() { killMembers(t, b, root) })
	orphan, grandchild := awaitOrphan(t, b, pidFile)
	forgetForks(b, orphan, grandchild)
	if ms := memberSet(t, b, root); len(ms) != 1 {
		t.Fatalf("before the adoption the lineage is %v, want its root alone", ms)
	}
	if err := b.adoptMissedOf(root); err != nil {
		t.Fatal(err)
	}
	ms := memberSet(t, b, root)
	checkAdopted(t, ms, orphan, grandchild)
	for id := range ms {
		if int(id.PID) == helper.Process.Pid {
			t.Error("the subreaper's helper was adopted")
		}
	}
	if len(ms) != 3 {
		t.Errorf("the lineage is %v, want the root, the orphan and its child", ms)
	}
	st, err := b.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if st.AdoptedOrphans != 1 || st.AdoptedAfterMiss != 2 {
		t.Errorf("stats: %d adopted, %d orphans; want 2 and 1", st.AdoptedAfterMiss, st.AdoptedOrphans)
	}

	// A process that is not the subreaper's is nobody's orphan.
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0); err != nil {
		t.Fatal(err)
	}
	forgetForks(b, orphan, grandchild)
	if err := b.adoptMissedOf(root); err != nil {
		t.Fatal(err)
	}
	if ms := memberSet(t, b, root); len(ms) != 1 {
		t.Errorf("no subreaper: the lineage is %v, want its root alone", ms)
	}
}

// orphanScript is a root's script whose subshell starts a shell that
// starts a sleep, then exits: that shell is an orphan, reparented to this
// process (a child subreaper), with a child. The orphan's pid goes to
// pidFile; the root then sleeps for sleep.
func orphanScript(sleep, pidFile string) string {
	return fmt.Sprintf(`(sh -c 'sleep %[1]s & wait' & echo $! >%[2]s.tmp; mv %[2]s.tmp %[2]s); exec sleep %[1]s`, sleep, pidFile)
}

// awaitOrphan waits for orphanScript's orphan to be this process's child
// with its own child, and ends both when the test does.
func awaitOrphan(t *testing.T, b *Tracker, pidFile string) (orphan, grandchild lineage.Identity) {
	t.Helper()
	waitFor(t, "the orphan reparented to this process, with a child", 10*time.Second, func() bool {
		raw, err := os.ReadFile(pidFile)
		if err != nil {
			return false
		}
		pid, _ := strconv.Atoi(strings.TrimSpace(string(raw)))
		st, err := b.proc.Stat(pid)
		if err != nil || st.PPID != os.Getpid() {
			return false
		}
		orphan = st.Identity
		return len(childrenOf(b, orphan)) == 1
	})
	grandchild = childrenOf(b, orphan)[0]
	t.Cleanup(func() {
		// Each is this process's child once the one before is gone.
		for _, id := range []lineage.Identity{orphan, grandchild} {
			testutil.KillIdentity(int(id.PID), id.StartTicks)
			var ws unix.WaitStatus
			_, _ = unix.Wait4(int(id.PID), &ws, 0, nil)
		}
	})
	return orphan, grandchild
}

// forgetForks drops ids from the map, as if both fork hooks had skipped
// the forks that made them.
func forgetForks(b *Tracker, ids ...lineage.Identity) {
	for _, id := range ids {
		b.deleteMember(id)
	}
}

// checkAdopted fails t unless ms holds the orphan, with no parent, and its
// child under it.
func checkAdopted(t *testing.T, ms map[lineage.Identity]lineage.Member, orphan, grandchild lineage.Identity) {
	t.Helper()
	if m, ok := ms[orphan]; !ok || m.Parent != (lineage.Identity{}) {
		t.Errorf("the orphan: %+v (listed %v), want a member with no parent", m, ok)
	}
	if m, ok := ms[grandchild]; !ok || m.Parent != orphan {
		t.Errorf("the orphan's child: %+v (listed %v), want a member, child of the orphan", m, ok)
	}
}

// childrenOf returns the live children of id, by parent pid.
func childrenOf(b *Tracker, id lineage.Identity) []lineage.Identity {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", id.PID, id.PID))
	if err != nil {
		return nil
	}
	var out []lineage.Identity
	for _, f := range strings.Fields(string(raw)) {
		pid, _ := strconv.Atoi(f)
		if c, err := b.proc.Identity(pid); err == nil {
			out = append(out, c)
		}
	}
	return out
}

// A root registered with an orphanage (a `lineage run` front registering
// its job with the daemon) has its orphans adopted from that process's
// children, as a spawned root's are from this process's; a root registered
// without one, or whose orphanage is not its parent, has none.
func TestAdoptsTheOrphansOfADeclaredOrphanage(t *testing.T) {
	b := openBPF(t, nil)
	mark := testutil.Marker(t)
	testutil.CheckNoLeaks(t, mark)
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0) })
	self, err := b.proc.Identity(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}

	// As in the test above, with the root started here and registered.
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "orphan")
	s := testutil.Sleep(mark)
	cmd := exec.Command("sh", "-c", orphanScript(s, pidFile))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-done })
	root, err := b.proc.Identity(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Register(root, loader.RootOptions{Orphanage: lineage.Identity{PID: 1, StartTicks: 1}}); !errors.Is(err, lineage.ErrInvalid) {
		t.Fatalf("registered with init as its orphanage: %v, want an error wrapping ErrInvalid", err)
	}
	if err := b.Register(root, loader.RootOptions{Orphanage: self}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { killMembers(t, b, root) })
	orphan, grandchild := awaitOrphan(t, b, pidFile)
	forgetForks(b, orphan, grandchild)
	if err := b.adoptMissedOf(root); err != nil {
		t.Fatal(err)
	}
	ms := memberSet(t, b, root)
	checkAdopted(t, ms, orphan, grandchild)
	if len(ms) != 3 {
		t.Errorf("the lineage is %v, want the root, the orphan and its child", ms)
	}

	// Registered again without an orphanage, the root has no orphans.
	if err := b.Forget(root); err != nil {
		t.Fatal(err)
	}
	if err := b.Register(root, loader.RootOptions{}); err != nil {
		t.Fatal(err)
	}
	forgetForks(b, orphan, grandchild)
	if err := b.adoptMissedOf(root); err != nil {
		t.Fatal(err)
	}
	if ms := memberSet(t, b, root); len(ms) != 1 {
		t.Errorf("no orphanage: the lineage is %v, want its root alone", ms)
	}
	// Declared afterwards (as a daemon restarted takes a root back), the
	// orphanage gives them back.
	if err := b.DeclareOrphanage(root, lineage.Identity{PID: uint32(os.Getpid()), StartTicks: self.StartTicks + 1}); err == nil {
		t.Error("an orphanage with a wrong start time was taken")
	}
	if err := b.DeclareOrphanage(root, self); err != nil {
		t.Fatal(err)
	}
	if err := b.adoptMissedOf(root); err != nil {
		t.Fatal(err)
	}
	if ms := memberSet(t, b, root); len(ms) != 3 {
		t.Errorf("orphanage declared: the lineage is %v, want the root, the orphan and its child", ms)
	}
}
