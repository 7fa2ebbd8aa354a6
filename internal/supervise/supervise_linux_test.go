package supervise

import (
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lineage-dev/lineage/internal/testutil"
	"github.com/lineage-dev/lineage/lineage"
)

const helperEnv = "LINEAGE_SUPERVISE_HELPER"

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) == "bounded" {
		// The supervisor side of TestChildrenBoundsUnclaimedStatuses.
		if err := superviseOrphans(); err != nil {
			fmt.Println("supervisor:", err)
			os.Exit(1)
		}
		fmt.Println("supervisor: ok")
		os.Exit(0)
	}
	if os.Getenv(helperEnv) == "pause" {
		// The supervisor side of TestChildrenPauseLeavesZombiesUntilResumed.
		if err := supervisePaused(); err != nil {
			fmt.Println("supervisor:", err)
			os.Exit(1)
		}
		fmt.Println("supervisor: ok")
		os.Exit(0)
	}
	if os.Getenv(helperEnv) == "reap-exited" {
		// The supervisor side of TestChildrenReapExited.
		if err := superviseReapExited(); err != nil {
			fmt.Println("supervisor:", err)
			os.Exit(1)
		}
		fmt.Println("supervisor: ok")
		os.Exit(0)
	}
	if os.Getenv(helperEnv) == "1" {
		// The supervisor side of TestChildrenReapsOrphansAndReportsTheJob.
		if err := superviseJob(); err != nil {
			fmt.Println("supervisor:", err)
			os.Exit(1)
		}
		fmt.Println("supervisor: ok")
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestChildrenReapsOrphansAndReportsTheJob runs the supervisor in a child
// process (the test binary again): it becomes a subreaper, and reaping every
// child would steal the test framework's own.
func TestChildrenReapsOrphansAndReportsTheJob(t *testing.T) {
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), helperEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "supervisor: ok") {
		t.Fatalf("supervisor: %v\n%s", err, out)
	}
}

func superviseJob() (err error) {
	if err := BecomeSubreaper(); err != nil {
		return err
	}
	children := WatchChildren()
	defer children.Close()
	var (
		mu      sync.Mutex
		reports = map[int]lineage.ExitStatus{}
	)
	children.OnReap(func(pid int, status lineage.ExitStatus) {
		mu.Lock()
		reports[pid] = status
		mu.Unlock()
	})
	// A job that leaves an orphan, which comes back to us, then exits 3.
	job := exec.Command("sh", "-c", "(sleep 0.2; exit 4) & exit 3")
	if err := job.Start(); err != nil {
		return err
	}
	st := <-children.Wait(job.Process.Pid)
	if code, ok := st.Exited(); !ok || code != 3 {
		return fmt.Errorf("job status %v, want exit 3", st)
	}
	defer func() {
		// Every child reaped was reported, the job's and the orphan's.
		children.Sync()
		mu.Lock()
		defer mu.Unlock()
		var codes []int
		for _, st := range reports {
			code, _ := st.Exited()
			codes = append(codes, code)
		}
		slices.Sort(codes)
		if err == nil && (reports[job.Process.Pid] != st || !slices.Equal(codes, []int{3, 4})) {
			err = fmt.Errorf("reported %v, want the job's exit 3 and the orphan's exit 4", reports)
		}
	}()
	// The orphan came back to us and, once it exited, was reaped: no child
	// is left, zombie or not.
	return noChildrenLeft()
}

// noChildrenLeft waits until this process has no child, zombie or not.
func noChildrenLeft() error {
	var left []string
	var err error
	if testutil.Until(5*time.Second, func() bool {
		left, err = childPids()
		return err != nil || len(left) == 0
	}) && err == nil {
		return nil
	}
	if err != nil {
		return err
	}
	return fmt.Errorf("children left: %v", left)
}

// childPids lists this process's children, from every thread.
func childPids() ([]string, error) {
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return nil, err
	}
	var out []string
	for _, task := range tasks {
		raw, _ := os.ReadFile("/proc/self/task/" + task.Name() + "/children")
		out = append(out, strings.Fields(string(raw))...)
	}
	return out, nil
}

// A job that leaves many orphans can't grow the statuses kept for later
// Waits without bound: only the newest are kept.
func TestChildrenBoundsUnclaimedStatuses(t *testing.T) {
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), helperEnv+"=bounded")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "supervisor: ok") {
		t.Fatalf("supervisor: %v\n%s", err, out)
	}
}

func superviseOrphans() error {
	if err := BecomeSubreaper(); err != nil {
		return err
	}
	children := WatchChildren()
	defer children.Close()
	children.mu.Lock()
	children.limit = 8
	children.mu.Unlock()
	// 40 orphans, each exiting at once, come back to us and are reaped.
	job := exec.Command("sh", "-c", "i=0; while [ $i -lt 40 ]; do (exit 5) & i=$((i+1)); done; exit 3")
	if err := job.Start(); err != nil {
		return err
	}
	st := <-children.Wait(job.Process.Pid)
	if code, ok := st.Exited(); !ok || code != 3 {
		return fmt.Errorf("job status %v, want exit 3", st)
	}
	if err := noChildrenLeft(); err != nil {
		return err
	}
	children.mu.Lock()
	defer children.mu.Unlock()
	if n := len(children.statuses); n > 8 || len(children.unclaimed) > 16 {
		return fmt.Errorf("%d statuses and %d pids kept, want at most 8 and 16", n, len(children.unclaimed))
	}
	return nil
}

// While reaping is paused, a child that exits stays a zombie and its
// status is not handed over; overlapping pauses end with the last resume,
// and then it is reaped and its status handed over.
func TestChildrenPauseLeavesZombiesUntilResumed(t *testing.T) {
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), helperEnv+"=pause")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "supervisor: ok") {
		t.Fatalf("supervisor: %v\n%s", err, out)
	}
}

// While reaping is paused, ReapExited reaps the one child it names once it
// has exited, hands its status to the child's waiter and to OnReap, and
// reaps nothing else: not a child still running, not a pid that is no child.
func TestChildrenReapExited(t *testing.T) {
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), helperEnv+"=reap-exited")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "supervisor: ok") {
		t.Fatalf("supervisor: %v\n%s", err, out)
	}
}

func superviseReapExited() error {
	children := WatchChildren()
	defer children.Close()
	resume := children.Pause()
	defer resume()
	var reaped []int
	children.OnReap(func(pid int, _ lineage.ExitStatus) { reaped = append(reaped, pid) })
	exited := exec.Command("sh", "-c", "exit 7")
	running := exec.Command("sleep", "30")
	for _, c := range []*exec.Cmd{exited, running} {
		if err := c.Start(); err != nil {
			return err
		}
	}
	defer func() {
		_ = running.Process.Kill()
		_, _ = children.ReapExited(running.Process.Pid)
	}()
	pid := exited.Process.Pid
	status := children.Wait(pid)
	if err := waitZombie(pid); err != nil {
		return err
	}
	if _, ok := children.ReapExited(running.Process.Pid); ok {
		return fmt.Errorf("a running child was reaped")
	}
	if _, ok := children.ReapExited(os.Getppid()); ok {
		return fmt.Errorf("the parent, no child, was reaped")
	}
	st, ok := children.ReapExited(pid)
	if code, exitedOK := st.Exited(); !ok || !exitedOK || code != 7 {
		return fmt.Errorf("ReapExited(%d) = %v, %v; want exit 7, true", pid, st, ok)
	}
	if _, again := children.ReapExited(pid); again {
		return fmt.Errorf("pid %d reaped twice", pid)
	}
	select {
	case got := <-status:
		if got != st {
			return fmt.Errorf("the waiter got %v, ReapExited %v", got, st)
		}
	case <-time.After(10 * time.Second):
		return fmt.Errorf("the waiter got nothing")
	}
	if len(reaped) != 1 || reaped[0] != pid {
		return fmt.Errorf("OnReap saw %v, want [%d]", reaped, pid)
	}
	if _, err := state(pid); err == nil {
		return fmt.Errorf("pid %d still in /proc after it was reaped", pid)
	}
	return nil
}

func supervisePaused() error {
	if err := BecomeSubreaper(); err != nil {
		return err
	}
	children := WatchChildren()
	defer children.Close()
	resume1 := children.Pause()
	resume2 := children.Pause()
	child := exec.Command("sh", "-c", "exit 7")
	if err := child.Start(); err != nil {
		return err
	}
	pid := child.Process.Pid
	status := children.Wait(pid)
	if err := waitZombie(pid); err != nil {
		return err
	}
	for i, resume := range []func(){resume1, resume1, resume2} {
		if i < 2 {
			resume() // resume1 twice: the second does nothing
			// A SIGCHLD or the ticker would have reaped it by now, were
			// reaping not still paused.
			time.Sleep(300 * time.Millisecond)
			if st, err := state(pid); err != nil || st != "Z" {
				return fmt.Errorf("after resume %d of 2: pid %d in state %q (%v), want a zombie", i+1, pid, st, err)
			}
			select {
			case st := <-status:
				return fmt.Errorf("status %v handed over while paused", st)
			default:
			}
			continue
		}
		resume()
	}
	select {
	case st := <-status:
		if code, ok := st.Exited(); !ok || code != 7 {
			return fmt.Errorf("status %v, want exit 7", st)
		}
	case <-time.After(10 * time.Second):
		return fmt.Errorf("pid %d not reaped after the last resume", pid)
	}
	if _, err := state(pid); err == nil {
		return fmt.Errorf("pid %d still in /proc after it was reaped", pid)
	}
	return nil
}

// state returns field 3 of /proc/PID/stat.
func state(pid int) (string, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", err
	}
	s := string(raw)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(fields) == 0 {
		return "", fmt.Errorf("stat of %d: %q", pid, s)
	}
	return fields[0], nil
}

func waitZombie(pid int) error {
	var st string
	var err error
	testutil.Until(10*time.Second, func() bool {
		st, err = state(pid)
		return err != nil || st == "Z"
	})
	switch {
	case err != nil:
		return fmt.Errorf("pid %d: %w (reaped while paused?)", pid, err)
	case st != "Z":
		return fmt.Errorf("pid %d did not exit: state %s", pid, st)
	}
	return nil
}
