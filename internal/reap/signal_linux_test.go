package reap

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lineage-dev/lineage/internal/testutil"
	"github.com/lineage-dev/lineage/lineage"
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

// SignalGroup reaches the group the root leads, the root's child in it
// too, and only with the root's identity; a child that left the group is
// not signalled.
func TestSignalGroupReachesTheRootsGroup(t *testing.T) {
	mark := testutil.Marker(t)
	testutil.CheckNoLeaks(t, mark)
	s, s1 := testutil.Sleep(mark), testutil.Sleep(mark+"1")
	// The root waits for its child in the group; another child leaves it.
	root := exec.Command("sh", "-c", "setsid sleep "+s1+" & sleep "+s+" & wait")
	root.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := root.Start(); err != nil {
		t.Fatal(err)
	}
	start, _, err := testutil.StartTicks(root.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { testutil.KillIdentity(root.Process.Pid, start) })
	id := lineage.Identity{PID: uint32(root.Process.Pid), StartTicks: start}
	var inGroup, left testutil.Proc
	for deadline := time.Now().Add(5 * time.Second); inGroup.PID == 0 || left.PID == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the root's children did not start")
		}
		for _, p := range testutil.Find(mark) {
			switch strings.Join(p.Argv, " ") {
			case "sleep " + s:
				inGroup = p
			case "sleep " + s1:
				left = p
			}
		}
	}
	t.Cleanup(func() {
		testutil.KillIdentity(left.PID, left.StartTicks)
		testutil.KillIdentity(inGroup.PID, inGroup.StartTicks)
	})

	wrong := id
	wrong.StartTicks++
	if err := SignalGroup(wrong, syscall.SIGTERM); !errors.Is(err, lineage.ErrIdentityMismatch) {
		t.Fatalf("group signal with a wrong start time: %v, want ErrIdentityMismatch", err)
	}
	if !testutil.Alive(inGroup.PID, inGroup.StartTicks) {
		t.Fatal("a wrong identity's group was signalled")
	}
	if err := SignalGroup(id, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- root.Wait() }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the root did not end")
	}
	// EBADF where the kernel knows the flag (6.9+), EINVAL where it doesn't.
	grouped := !errors.Is(unix.PidfdSendSignal(-1, 0, nil, unix.PIDFD_SIGNAL_PROCESS_GROUP), unix.EINVAL)
	for deadline := time.Now().Add(5 * time.Second); grouped && testutil.Alive(inGroup.PID, inGroup.StartTicks); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the root's child in its group did not get the signal")
		}
	}
	if !testutil.Alive(left.PID, left.StartTicks) {
		t.Error("a child that left the root's group was signalled")
	}
}
