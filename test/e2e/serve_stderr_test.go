package e2e

import (
	"fmt"
	"os/exec"
	"testing"
	"time"

	"github.com/lineage-dev/lineage/api"
	"github.com/lineage-dev/lineage/internal/testutil"
	"github.com/lineage-dev/lineage/lineage"
)

// A host that starts the daemon as its child with pipes for its output,
// then dies: the daemon's next log line (the owner's exit, which it is
// there to act on) meets a pipe no one reads. It must act on it, not die
// of SIGPIPE, and go on serving.
func TestServeOutlivesItsHostsPipes(t *testing.T) {
	d := startDaemonWith(t, &daemon{deafStderr: true}, "")
	mark := testutil.Marker(t)
	testutil.CheckNoLeaks(t, mark)
	owner := exec.Command("sleep", testutil.Sleep(mark+"9"))
	if err := owner.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = owner.Process.Kill(); _ = owner.Wait() })
	start, _, err := testutil.StartTicks(owner.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	oid := lineage.Identity{PID: uint32(owner.Process.Pid), StartTicks: start}
	d.do("POST", "/v1/sessions", api.OpenSession{ID: "owned", Kind: "autonomous", Owner: &oid}, nil)
	d.execRoot("owned", "", fmt.Sprintf("setsid sleep %s & sleep 0.2", testutil.Sleep(mark)))
	left := atLeastSleepers(t, mark, 1)
	_ = owner.Process.Kill()
	_ = owner.Wait()
	allGone(t, left)
	deadline := time.Now().Add(5 * time.Second)
	for d.apiStatus("GET", "/v1/sessions/owned", nil) != 404 {
		if time.Now().After(deadline) {
			t.Fatal("session still open after its owner died")
		}
		time.Sleep(20 * time.Millisecond)
	}
	var st api.Status
	d.do("GET", "/v1/status", nil, &st)
	d.stop()
	if code := d.cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("the daemon ended with %v, want exit 0 on SIGTERM", d.cmd.ProcessState)
	}
}
