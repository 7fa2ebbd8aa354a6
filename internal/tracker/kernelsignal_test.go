package tracker

import (
	"errors"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/lineage-dev/lineage/internal/proc"
	"github.com/lineage-dev/lineage/internal/reap"
	"github.com/lineage-dev/lineage/internal/testutil"
	"github.com/lineage-dev/lineage/lineage"
)

// failingBatches is a backend's batch programs that fail every call, as a
// kernel that took them and then refuses a run would.
type failingBatches struct{ calls int }

func (f *failingBatches) SignalBatch([]lineage.Identity, []syscall.Signal, []lineage.Stat, []error) error {
	f.calls++
	return errors.New("the batch signal failed")
}
func (f *failingBatches) Signals() (bool, string) { return true, "" }
func (f *failingBatches) Inspect([]uint32, []lineage.Stat) error {
	f.calls++
	return errors.New("the batch check failed")
}
func (f *failingBatches) Inspects() (bool, string) { return true, "" }

// When the kernel's batch fails, the kernel signaler signals each member
// through a pidfd, still by identity (a stale start gets nothing), and
// sees deaths in /proc: the reap goes on.
func TestKernelSignalerFallsBackWhenABatchFails(t *testing.T) {
	mark := testutil.Marker(t)
	testutil.CheckNoLeaks(t, mark)
	start := func() *exec.Cmd {
		cmd := exec.Command("sleep", testutil.Sleep(mark))
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		return cmd
	}
	victim, bystander := start(), start()
	id := func(cmd *exec.Cmd) lineage.Identity {
		st, err := proc.ReadStat("/proc", cmd.Process.Pid)
		if err != nil {
			t.Fatal(err)
		}
		return st.Identity
	}
	f := &failingBatches{}
	k := &kernelSignaler{ks: f, in: f, ids: map[reap.Pin]lineage.Identity{}, watched: map[reap.Pin]bool{}, status: map[reap.Pin]lineage.ExitStatus{}}
	stale := id(bystander)
	stale.StartTicks++
	pv, _ := k.Open(id(victim))
	ps, _ := k.Open(stale)
	errs := make([]error, 2)
	k.SendAll([]reap.Pin{pv, ps}, []syscall.Signal{syscall.SIGTERM, syscall.SIGTERM}, errs)
	if errs[0] != nil || !errors.Is(errs[1], lineage.ErrNoProcess) {
		t.Fatalf("SendAll: %v; want the victim signalled, the stale identity gone", errs)
	}
	var ws syscall.WaitStatus
	if _, err := syscall.Wait4(victim.Process.Pid, &ws, syscall.WNOHANG, nil); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, "the victim to die", func() bool {
		st, err := proc.ReadStat("/proc", victim.Process.Pid)
		return err != nil || st.Zombie()
	})
	gone, err := k.Wait(time.Second)
	if err != nil || len(gone) != 2 {
		t.Fatalf("Wait: %v, %v; want both pins gone (one found by the send, one by /proc)", gone, err)
	}
	if !testutil.Alive(bystander.Process.Pid, id(bystander).StartTicks) {
		t.Error("the bystander behind a stale identity was signalled")
	}
	if f.calls < 2 {
		t.Errorf("%d batch calls: the batches were not tried", f.calls)
	}
}
