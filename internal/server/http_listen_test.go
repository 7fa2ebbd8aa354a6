package server

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lineage-dev/lineage/lineage"
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
	ln.(*socketListener).UnixListener.Close()
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

// Nothing at --socket but a dead daemon's socket is removed: a regular
// file, an empty directory, a symbolic link (to a file of root's) are each
// refused, named, and left as they were.
func TestListenRefusesWhatIsNotASocket(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "secret")
	if err := os.WriteFile(target, []byte("root's"), 0o600); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "file")
	empty := filepath.Join(dir, "empty")
	link := filepath.Join(dir, "link")
	if err := os.WriteFile(file, []byte("data"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	for path, kind := range map[string]string{file: "a regular file", empty: "a directory", link: "a symbolic link"} {
		before, _ := os.Lstat(path)
		_, err := Listen(path, ListenOptions{Mode: 0o666})
		if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), kind) {
			t.Errorf("listen on %s: %v, want refused, naming the path and %q", path, err, kind)
		}
		after, err := os.Lstat(path)
		if err != nil || after.Mode() != before.Mode() || !os.SameFile(before, after) {
			t.Errorf("%s after the refusal: %v %v, want it as it was (%v)", path, after, err, before.Mode())
		}
	}
	if fi, _ := os.Stat(target); fi.Mode().Perm() != 0o600 {
		t.Errorf("the link's target has mode %v, want 0600", fi.Mode().Perm())
	}
}

// The socket's mode is set before its path is reachable, in a directory
// only the daemon writes: a symbolic link swapped in at the path while the
// socket is made is never followed, and the rename into place refuses to
// replace it.
func TestListenNoWindowForASwappedPath(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "secret")
	if err := os.WriteFile(target, []byte("root's"), 0o600); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "lineage.sock")
	beforeRename = func() {
		if err := os.Symlink(target, sock); err != nil {
			t.Error(err)
		}
	}
	t.Cleanup(func() { beforeRename = nil })
	_, err := Listen(sock, ListenOptions{Mode: 0o666})
	if err == nil || !strings.Contains(err.Error(), sock) {
		t.Errorf("listen with a link swapped in: %v, want refused, naming %s", err, sock)
	}
	if fi, _ := os.Stat(target); fi.Mode().Perm() != 0o600 {
		t.Errorf("the link's target has mode %v, want 0600", fi.Mode().Perm())
	}
	if fi, err := os.Lstat(sock); err != nil || fi.Mode().Type() != os.ModeSymlink {
		t.Errorf("%s: %v %v, want the link left as it was", sock, fi, err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 2 {
		t.Errorf("%d entries in the socket's directory, want the file and the link (no private directory left)", len(entries))
	}
}

// The race as a hostile user runs it: uid 65534 swaps a symbolic link to
// a file of root's in and out of the socket's path (in a directory it may
// write) while the daemon makes its socket, over and over. The file's mode
// never changes: every listen either makes the socket or is refused, naming
// the path.
func TestListenRacedByAnotherUser(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root, to play uid 65534")
	}
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Skip("no setpriv")
	}
	// A directory of its own that uid 65534 can reach (t.TempDir's
	// parent is private).
	dir, err := os.MkdirTemp("", "lineage-race")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	target := filepath.Join(dir, "secret")
	if err := os.WriteFile(target, []byte("root's"), 0o600); err != nil {
		t.Fatal(err)
	}
	run := filepath.Join(dir, "run")
	if err := os.Mkdir(run, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(run, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(run, "lineage.sock")
	racer := exec.Command(setpriv, "--reuid", "65534", "--regid", "65534", "--clear-groups", "--",
		"sh", "-c", fmt.Sprintf(`end=$(($(date +%%s) + 60)); while [ "$(date +%%s)" -lt "$end" ]; do ln -sfn %q %q 2>/dev/null; rm -f %q; done`, target, sock, sock))
	if err := racer.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = racer.Process.Kill(); _ = racer.Wait() })
	// Racing once its first link is seen.
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(time.Millisecond) {
		if _, err := os.Lstat(sock); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the racer made no link within 20s")
		}
	}
	made, refused := 0, 0
	for i := 0; i < 2000 && (i < 200 || made == 0 || refused == 0); i++ {
		ln, err := Listen(sock, ListenOptions{Mode: 0o666})
		switch {
		case err == nil:
			made++
			ln.Close()
		case strings.Contains(err.Error(), sock):
			refused++
		default:
			t.Fatalf("listen: %v, want it made or refused naming %s", err, sock)
		}
		if fi, err := os.Stat(target); err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("the racer's target: %v %v, want mode 0600", fi, err)
		}
	}
	t.Logf("%d sockets made, %d refused", made, refused)
}

// A path longer than a socket address holds is refused before anything is
// made: the daemon would bind it (through its directory's descriptor), but
// no client could connect.
func TestListenRefusesAPathNoClientReaches(t *testing.T) {
	dir := t.TempDir()
	long := filepath.Join(dir, strings.Repeat("a", maxSocketPath-len(dir)-1+1))
	if _, err := Listen(long, ListenOptions{}); err == nil || !errors.Is(err, lineage.ErrInvalid) || !strings.Contains(err.Error(), fmt.Sprintf("at most %d", maxSocketPath)) {
		t.Errorf("listen on %d bytes: %v, want refused as invalid, naming the limit", len(long), err)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Errorf("a refused path left %v", left)
	}
	fits := long[:len(long)-1]
	ln, err := Listen(fits, ListenOptions{})
	if err != nil {
		t.Fatalf("listen on %d bytes: %v", len(fits), err)
	}
	defer ln.Close()
	c, err := net.Dial("unix", fits)
	if err != nil {
		t.Fatalf("connect to the longest path: %v", err)
	}
	c.Close()
}

// A socket whose listener's backlog is full refuses connections with
// EAGAIN: it is a live daemon's, busy, and is left in place, not removed as
// a dead one's.
func TestListenLeavesABusyDaemonsSocket(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "busy.sock")
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if err := unix.Bind(fd, &unix.SockaddrUnix{Name: sock}); err != nil {
		t.Fatal(err)
	}
	if err := unix.Listen(fd, 0); err != nil {
		t.Fatal(err)
	}
	// Fill the backlog: connections nobody accepts, until one is refused.
	var full error
	for i := 0; i < 8 && full == nil; i++ {
		var c net.Conn
		if c, full = net.DialTimeout("unix", sock, 100*time.Millisecond); full == nil {
			defer c.Close()
		}
	}
	if !errors.Is(full, syscall.EAGAIN) {
		t.Fatalf("filling the backlog: %v, want EAGAIN", full)
	}
	before, err := os.Lstat(sock)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Listen(sock, ListenOptions{}); err == nil || !strings.Contains(err.Error(), "may be a live daemon's") {
		t.Errorf("listen over a busy daemon's socket: %v, want it refused", err)
	}
	if after, err := os.Lstat(sock); err != nil || !os.SameFile(before, after) {
		t.Errorf("the busy daemon's socket after the refusal: %v, want it as it was", err)
	}
}
