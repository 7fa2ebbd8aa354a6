//go:build linux

package reap

import (
	"errors"
	"os/exec"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/lineage-dev/lineage/internal/testutil"
	"github.com/lineage-dev/lineage/lineage"
)

// The default Signaler: pins, signals, reports each exit once, and tells the
// exit status once the process is reaped.
func TestPidfds(t *testing.T) {
	p, err := newPidfds()
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	l := newLab(t)
	cmd := exec.Command("sleep", "60")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	l.record(identityOf(t, cmd.Process.Pid), "sleeper")
	pin, err := p.Open(lineage.Identity{PID: uint32(cmd.Process.Pid)})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Release(pin)
	if err := p.Send(pin, 0); err != nil {
		t.Errorf("probe a live process: %v", err)
	}
	if pins, err := p.Wait(0); err != nil || len(pins) > 0 {
		t.Errorf("Wait(0) on a live process: %v, %v", pins, err)
	}
	if err := p.Send(pin, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	var got []Pin
	testutil.Until(10*time.Second, func() bool {
		pins, err := p.Wait(time.Second)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, pins...)
		return len(got) > 0
	})
	if !slices.Equal(got, []Pin{pin}) {
		t.Fatalf("Wait: %v, want [%v]", got, pin)
	}
	if pins, _ := p.Wait(0); len(pins) > 0 {
		t.Errorf("an exit reported twice: %v", pins)
	}
	_ = cmd.Wait()
	if st, ok := p.Status(pin); !ok {
		t.Log("no exit status: PIDFD_INFO_EXIT needs Linux 6.15")
	} else if sig, ok := st.Signaled(); !ok || sig != syscall.SIGTERM {
		t.Errorf("status %v, want signal TERM", st)
	}
	if err := p.Send(pin, syscall.SIGKILL); !errors.Is(err, lineage.ErrNoProcess) {
		t.Errorf("signal a reaped process: %v, want ErrNoProcess", err)
	}
	if _, err := p.Open(lineage.Identity{PID: uint32(cmd.Process.Pid)}); !errors.Is(err, lineage.ErrNoProcess) {
		t.Logf("open a reaped pid: %v (its pid may have been reused)", err)
	}
	if _, err := p.Open(ownThread(t)); !errors.Is(err, ErrNotProcess) {
		t.Errorf("open a thread: %v, want ErrNotProcess", err)
	}
}
