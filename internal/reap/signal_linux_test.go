package reap

import (
	"errors"
	"os"
	"os/exec"
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

func TestSignalChecksTheStartTime(t *testing.T) {
	mark := testutil.Marker(t)
	testutil.CheckNoLeaks(t, mark)
	cmd, id := startSleeper(t, mark)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()

	wrong := id
	wrong.StartTicks++
	if err := Signal(wrong, syscall.SIGKILL); !errors.Is(err, lineage.ErrIdentityMismatch) {
		t.Fatalf("signal with a wrong start time: %v, want ErrIdentityMismatch", err)
	}
	if !testutil.Alive(int(id.PID), id.StartTicks) {
		t.Fatal("a wrong identity was signalled")
	}
	for _, bad := range []lineage.Identity{{PID: 1, StartTicks: 1}, {PID: 0, StartTicks: 1}, {PID: id.PID}} {
		if err := Signal(bad, syscall.SIGKILL); !errors.Is(err, lineage.ErrInvalid) {
			t.Errorf("signal %v: %v, want ErrInvalid", bad, err)
		}
	}
	self, _, _ := testutil.StartTicks(os.Getpid())
	if err := Signal(lineage.Identity{PID: uint32(os.Getpid()), StartTicks: self}, syscall.SIGKILL); err == nil {
		t.Error("lineage signalled itself")
	}

	if err := Signal(id, syscall.SIGTERM); err != nil {
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
	if err := Signal(id, syscall.SIGTERM); !errors.Is(err, lineage.ErrNoProcess) {
		t.Errorf("signal a reaped process: %v, want ErrNoProcess", err)
	}
}
