//go:build cgo

package fastexec

import (
	"testing"

	"github.com/lineage-dev/lineage/api"
	"github.com/lineage-dev/lineage/client"
	"github.com/lineage-dev/lineage/lineage"
)

// The C side's fixed values are the Go side's: where Go's `lineage exec`
// connects, and the status it exits with when the command can't run.
// (The profile variables are checked end to end: cmd/lineage's
// TestExecFastPath runs with LINEAGE_CPUPROFILE set.)
func TestValuesAreGos(t *testing.T) {
	if cannotRun != lineage.ExitCannotRun {
		t.Errorf("FASTEXEC_CANNOT_RUN = %d, lineage.ExitCannotRun = %d", cannotRun, lineage.ExitCannotRun)
	}
	if defaultSocket != api.DefaultSocket {
		t.Errorf("FASTEXEC_DEFAULT_SOCKET = %q, api.DefaultSocket = %q", defaultSocket, api.DefaultSocket)
	}
	if envSocket != client.EnvSocket {
		t.Errorf("FASTEXEC_ENV_SOCKET = %q, client.EnvSocket = %q", envSocket, client.EnvSocket)
	}
	if !Linked {
		t.Error("a cgo build says it has no fast path")
	}
}
