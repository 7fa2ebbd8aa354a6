package client

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"testing"
)

func TestRootServer(t *testing.T) {
	for _, c := range []struct {
		caller int
		server uint32
		ok     bool
	}{
		{0, 0, true},
		{0, 1000, false},
		{1000, 0, true},
		{1000, 1000, true},
		{1000, 2000, true},
	} {
		err := RootServer(c.caller)(c.server)
		if (err == nil) != c.ok {
			t.Errorf("caller %d, server %d: %v", c.caller, c.server, err)
		}
	}
}

// checkServer reads the listener's credentials from a real socket: this
// process's own uid, which trust is given and may refuse.
func TestCheckServerReadsTheListenersUID(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "s.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var got uint32
	if err := checkServer(c, func(uid uint32) error { got = uid; return nil }); err != nil {
		t.Fatal(err)
	}
	if got != uint32(os.Geteuid()) {
		t.Errorf("server uid %d, want %d", got, os.Geteuid())
	}
	refuse := errors.New("no")
	if err := checkServer(c, func(uint32) error { return refuse }); !errors.Is(err, ErrUntrusted) || !errors.Is(err, refuse) {
		t.Errorf("refused: %v, want ErrUntrusted wrapping the refusal", err)
	}
}
