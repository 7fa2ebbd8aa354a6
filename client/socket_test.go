package client

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
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

// A relative socket is made absolute when the client is made, against the
// working directory then: its calls reach the daemon from anywhere after,
// and so does a command run in another directory, which is given it.
func TestNewMakesARelativeSocketAbsolute(t *testing.T) {
	sock := serveUnix(t, func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(api.Session{ID: "s1"})
	})
	t.Chdir(filepath.Dir(sock))
	c := New(filepath.Base(sock))
	if c.socket != sock {
		t.Errorf("socket %q, want %q", c.socket, sock)
	}
	dir := t.TempDir()
	t.Chdir(dir)
	if _, err := c.Status(context.Background()); err != nil {
		t.Errorf("Status from another directory: %v", err)
	}
	// The lineage binary, a script, shows the socket it is given.
	script := filepath.Join(dir, "lineage")
	if err := os.WriteFile(script, []byte("#!/bin/sh\nshift\necho \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := c.Command("s1", "pwd")
	cmd.Dir, cmd.Lineage = "/", script
	out, err := cmd.Output()
	if want := "--socket " + sock + " --session s1 -- "; err != nil || !strings.HasPrefix(string(out), want) {
		t.Errorf("lineage exec given %q, %v; want it to start %q", out, err, want)
	}
	for _, s := range []string{"/run/lineage/lineage.sock", "@abstract", ""} {
		if got := New(s).socket; got != s {
			t.Errorf("New(%q) has socket %q, want it as given", s, got)
		}
	}
}

// A socket this uid may not use says so, and what decides it, rather than
// a bare "permission denied".
func TestSendErrorOfASocketNotForThisUID(t *testing.T) {
	err := sendError("/run/lineage/lineage.sock", "GET", "/v1/status", &net.OpError{Op: "dial", Net: "unix", Err: os.NewSyscallError("connect", syscall.EACCES)})
	if !errors.Is(err, syscall.EACCES) || errors.Is(err, ErrNoDaemon) || !strings.Contains(err.Error(), "--socket-group") || !strings.Contains(err.Error(), "may not use the socket /run/lineage/lineage.sock") {
		t.Errorf("error %v, want one naming the socket and the flags that decide who may use it", err)
	}
}
