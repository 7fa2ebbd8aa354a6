package e2e

import (
	"path/filepath"
	"strings"
	"testing"
)

// lineage status, a readiness probe's question: 0 with the daemon's
// answer while it listens, non-zero when nothing listens on the socket.
func TestStatusAsksTheSocket(t *testing.T) {
	d := startDaemon(t, "")
	out, code := d.run("status")
	if code != 0 || !strings.HasPrefix(out, "api 1\treaping on") {
		t.Fatalf("lineage status with a daemon: exit %d, %q", code, out)
	}
	none := filepath.Join(t.TempDir(), "nobody.sock")
	if _, code := d.run("status", "--socket", none); code == 0 {
		t.Error("lineage status answered 0 with no daemon on the socket")
	}
}
