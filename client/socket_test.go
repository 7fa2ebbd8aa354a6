package client

import (
	"testing"

	"github.com/lineage-dev/lineage/api"
)

// The socket a client command uses: --socket, else $LINEAGE_SOCKET, else
// the daemon's default.
func TestSocketPrecedence(t *testing.T) {
	t.Setenv(EnvSocket, "")
	if got := Socket(""); got != api.DefaultSocket || api.DefaultSocket != "/run/lineage/lineage.sock" {
		t.Errorf("no flag, no env: %q, want /run/lineage/lineage.sock", got)
	}
	t.Setenv(EnvSocket, "/tmp/env.sock")
	if got := Socket(""); got != "/tmp/env.sock" {
		t.Errorf("env only: %q, want the env's", got)
	}
	if got := Socket("/tmp/flag.sock"); got != "/tmp/flag.sock" {
		t.Errorf("flag and env: %q, want the flag's", got)
	}
	if EnvSocket != "LINEAGE_SOCKET" {
		t.Errorf("EnvSocket = %q, want LINEAGE_SOCKET", EnvSocket)
	}
}
