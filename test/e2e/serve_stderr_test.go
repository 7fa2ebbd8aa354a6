package e2e

import (
	"testing"

	"github.com/lineage-dev/lineage/api"
)

// A host that starts the daemon as its child with pipes for its output,
// then dies: the daemon's next log line (the owner's exit, which it is
// there to act on) meets a pipe no one reads. It must act on it, not die
// of SIGPIPE, and go on serving.
func TestServeOutlivesItsHostsPipes(t *testing.T) {
	d := startDaemonWith(t, &daemon{deafStderr: true}, "")
	ownerExitClosesSession(t, d, "autonomous")
	var st api.Status
	d.do("GET", "/v1/status", nil, &st)
	d.stop()
	if code := d.cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("the daemon ended with %v, want exit 0 on SIGTERM", d.cmd.ProcessState)
	}
}
