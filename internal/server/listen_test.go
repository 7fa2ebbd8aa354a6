package server

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// The socket gets the mode and group asked for (lineage serve's
// --socket-mode and --socket-group); a live daemon's socket is never taken
// over, a dead one's is replaced, and an unknown group leaves no socket.
func TestListenSetsModeAndGroup(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "run", "lineage.sock")
	// Another group than its own when root; unprivileged, its own.
	gid := os.Getgid()
	if os.Getuid() == 0 {
		gid = 65534
	}
	ln, err := Listen(sock, ListenOptions{Mode: 0o640, Group: strconv.Itoa(gid)})
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(sock)
	if err != nil {
		t.Fatal(err)
	}
	if st := fi.Sys().(*syscall.Stat_t); fi.Mode().Perm() != 0o640 || int(st.Gid) != gid || fi.Mode()&os.ModeSocket == 0 {
		t.Errorf("socket %v, group %d; want a socket, 0640, group %d", fi.Mode(), st.Gid, gid)
	}
	if _, err := Listen(sock, ListenOptions{}); err == nil || !strings.Contains(err.Error(), "already answers") {
		t.Errorf("a second listen beside a live one: %v, want it refused", err)
	}
	// A socket file its daemon left behind when it died.
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	ln.Close()
	ln, err = Listen(sock, ListenOptions{})
	if err != nil {
		t.Fatalf("listen over a dead daemon's socket: %v", err)
	}
	if fi, err := os.Stat(sock); err != nil || fi.Mode().Perm() != 0o660 {
		t.Errorf("default mode: %v %v, want 0660", fi.Mode(), err)
	}
	ln.Close()

	other := filepath.Join(filepath.Dir(sock), "other.sock")
	if _, err := Listen(other, ListenOptions{Group: "no-such-group-lineage"}); err == nil {
		t.Error("an unknown group was accepted")
	}
	if _, err := os.Stat(other); !os.IsNotExist(err) {
		t.Errorf("after a refused group: %v, want no socket", err)
	}
}
