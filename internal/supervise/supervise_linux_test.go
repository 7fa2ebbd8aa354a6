package supervise

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lineage-dev/lineage/internal/lineage"
	"github.com/lineage-dev/lineage/internal/testutil"
)

func startSleeper(t *testing.T, mark string) (*exec.Cmd, lineage.Identity) {
	t.Helper()
	cmd := exec.Command("sleep", testutil.Sleep(mark))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	start, _, err := testutil.StartTicks(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { testutil.KillIdentity(cmd.Process.Pid, start) })
	return cmd, lineage.Identity{PID: uint32(cmd.Process.Pid), StartTicks: start}
}

func TestSignalIdentityChecksTheStartTime(t *testing.T) {
	mark := testutil.Marker(t)
	testutil.CheckNoLeaks(t, mark)
	proc, err := lineage.OpenProcFS("/proc")
	if err != nil {
		t.Fatal(err)
	}
	cmd, id := startSleeper(t, mark)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()

	wrong := id
	wrong.StartTicks++
	if err := SignalIdentity(proc, wrong, syscall.SIGKILL); !errors.Is(err, lineage.ErrIdentityMismatch) {
		t.Fatalf("signal with a wrong start time: %v, want ErrIdentityMismatch", err)
	}
	if !testutil.Alive(int(id.PID), id.StartTicks) {
		t.Fatal("a wrong identity was signalled")
	}
	for _, bad := range []lineage.Identity{{PID: 1, StartTicks: 1}, {PID: 0, StartTicks: 1}, {PID: id.PID}} {
		if err := SignalIdentity(proc, bad, syscall.SIGKILL); !errors.Is(err, lineage.ErrInvalidIdentity) {
			t.Errorf("signal %v: %v, want ErrInvalidIdentity", bad, err)
		}
	}
	self, _, _ := testutil.StartTicks(os.Getpid())
	if err := SignalIdentity(proc, lineage.Identity{PID: uint32(os.Getpid()), StartTicks: self}, syscall.SIGKILL); err == nil {
		t.Error("lineage signalled itself")
	}

	if err := SignalIdentity(proc, id, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGTERM {
			t.Errorf("sleeper ended with %v, want SIGTERM", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the sleeper did not get the signal")
	}
	if err := SignalIdentity(proc, id, syscall.SIGTERM); !errors.Is(err, lineage.ErrNoProcess) {
		t.Errorf("signal a reaped process: %v, want ErrNoProcess", err)
	}
}

const helperEnv = "LINEAGE_SUPERVISE_HELPER"

func TestMain(m *testing.M) {
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

func superviseJob() error {
	if err := BecomeSubreaper(); err != nil {
		return err
	}
	children := WatchChildren()
	defer children.Close()
	// A job that leaves an orphan, which comes back to us, then exits 3.
	job := exec.Command("sh", "-c", "(sleep 0.2; exit 4) & exit 3")
	if err := job.Start(); err != nil {
		return err
	}
	st := <-children.Wait(job.Process.Pid)
	if code, ok := st.Exited(); !ok || code != 3 {
		return fmt.Errorf("job status %v, want exit 3", st)
	}
	// The orphan came back to us and, once it exited, was reaped: no child
	// is left, zombie or not.
	deadline := time.Now().Add(5 * time.Second)
	for {
		left, err := childPids()
		if err != nil {
			return err
		}
		if len(left) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("children left: %v", left)
		}
		time.Sleep(20 * time.Millisecond)
	}
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
