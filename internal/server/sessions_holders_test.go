package server

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lineage-dev/lineage/api"
	"github.com/lineage-dev/lineage/internal/testutil"
	"github.com/lineage-dev/lineage/lineage"
)

func TestParseInodes(t *testing.T) {
	for _, c := range []struct {
		in   []string
		want []uint64
		ok   bool
	}{
		{[]string{"7"}, []uint64{7}, true},
		{[]string{"7,8", "9"}, []uint64{7, 8, 9}, true},
		{[]string{"7,7, 8"}, []uint64{7, 8}, true},
		{nil, nil, true},
		{[]string{""}, nil, false},
		{[]string{"0"}, nil, false},
		{[]string{"-1"}, nil, false},
		{[]string{"pipe:[7]"}, nil, false},
	} {
		got, err := parseInodes("pipe", c.in)
		if (err == nil) != c.ok || !slices.Equal(got, c.want) {
			t.Errorf("parseInodes(%q) = %v, %v; want %v, ok %v", c.in, got, err, c.want, c.ok)
		}
		if err != nil {
			if status, _ := classify(err); status != http.StatusBadRequest {
				t.Errorf("parseInodes(%q): status %d, want 400", c.in, status)
			}
		}
	}
	sixteen := []uint64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	if err := checkHolderQuery(sixteen[:10], sixteen[10:]); err != nil {
		t.Errorf("16 pipes and sockets: %v", err)
	}
	if err := checkHolderQuery(sixteen, []uint64{17}); err == nil {
		t.Error("17 pipes and sockets: no error")
	}
	if err := checkHolderQuery(nil, nil); err == nil {
		t.Error("nothing asked: no error")
	}
}

// The peer of a socketpair's end is the other end, as fstat shows it; a
// socket that isn't there is refused.
func TestUnixPeer(t *testing.T) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fds[0])
	defer syscall.Close(fds[1])
	var a, b syscall.Stat_t
	if err := syscall.Fstat(fds[0], &a); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Fstat(fds[1], &b); err != nil {
		t.Fatal(err)
	}
	if peer, err := unixPeer(a.Ino); err != nil || peer != b.Ino {
		t.Errorf("unixPeer(%d) = %d, %v; want %d", a.Ino, peer, err, b.Ino)
	}
	if _, err := unixPeer(0xfffffff0); err == nil {
		t.Error("unixPeer of a socket that isn't there: no error")
	}
}

// status sends a request and returns the answer's status and body.
func (l *liveServer) status(method, path string) (int, string) {
	l.t.Helper()
	req, _ := http.NewRequest(method, "http://lineage"+path, nil)
	resp, err := l.http.Do(req)
	if err != nil {
		l.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(data)
}

func inode(t *testing.T, f *os.File) uint64 {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	return st.Ino
}

// The members holding a pipe are named, with the descriptor that holds
// it, and only they: a member with its output elsewhere and a pipe the
// lineage doesn't hold are not. Bad pipes and unknown roots change
// nothing and say why.
func TestHoldersNamesTheMembersHoldingAPipe(t *testing.T) {
	l := startLiveServer(t)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	other, otherW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	defer otherW.Close()
	sleep := testutil.Sleep(l.mark)
	// The root holds the pipe as stdout and stderr; its first sleep holds
	// it too, its second has its output elsewhere.
	c := exec.Command("sh", "-c", fmt.Sprintf("sleep %s & sleep %s >/dev/null 2>&1 & wait", sleep, sleep))
	c.Stdout, c.Stderr = w, w
	// A group of its own: the daemon, this process, never reaps its own.
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	l.procs = append(l.procs, c)
	root := lineage.Identity{PID: uint32(c.Process.Pid), StartTicks: startTicks(c.Process.Pid)}
	l.do("POST", "/v1/roots", api.AddRoot{PID: int64(root.PID), Start: root.StartTicks, Session: "held", Kind: "autonomous"}, nil)
	sleepers := waitSleepers(t, l.mark, 2)

	ino := inode(t, r)
	var got api.Holders
	l.do("GET", fmt.Sprintf("/v1/roots/%s/holders?pipe=%d,%d", root, ino, inode(t, other)), nil, &got)
	if got.Root != root || got.Scanned != 3 || got.Truncated {
		t.Errorf("answer %+v, want root %s, 3 scanned", got, root)
	}
	var held []int
	for _, h := range got.Holders {
		held = append(held, int(h.Process.PID))
		if want := []api.HeldFD{{FD: 1, Pipe: ino}, {FD: 2, Pipe: ino}}; !slices.Equal(h.FDs, want) {
			t.Errorf("holder %s holds %v, want %v", h.Process, h.FDs, want)
		}
		if len(h.Argv) == 0 {
			t.Errorf("holder %s has no argv", h.Process)
		}
	}
	var holding int
	for _, s := range sleepers {
		if fds, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/1", s.PID)); strings.HasPrefix(fds, "pipe:") {
			holding = s.PID
		}
	}
	if want := []int{int(root.PID), holding}; !slices.Equal(held, sortedInts(want)) {
		t.Errorf("holders %v, want the root and the sleeper with the pipe %v", held, want)
	}

	for _, bad := range []string{"", "?pipe=", "?pipe=x", "?pipe=0"} {
		if code, body := l.status("GET", "/v1/roots/"+root.String()+"/holders"+bad); code != http.StatusBadRequest {
			t.Errorf("holders%s: %d %s, want 400", bad, code, body)
		}
	}
	if code, _ := l.status("GET", fmt.Sprintf("/v1/roots/%d@1/holders?pipe=%d", root.PID, ino)); code != http.StatusNotFound {
		t.Errorf("holders of a root with the wrong start: %d, want 404", code)
	}
	if code, _ := l.status("POST", fmt.Sprintf("/v1/roots/%s/holders?pipe=%d", root, ino)); code != http.StatusMethodNotAllowed {
		t.Errorf("POST holders: %d, want 405", code)
	}
	l.do("POST", "/v1/sessions/held/close", nil, nil)
	for _, s := range sleepers {
		if !testutil.WaitGone(s.PID, s.StartTicks, 30*time.Second) {
			t.Errorf("sleeper %d outlived its session's close", s.PID)
		}
	}
}

func sortedInts(v []int) []int {
	slices.Sort(v)
	return v
}

// waitSleepers waits for n sleepers carrying mark.
func waitSleepers(t *testing.T, mark string, n int) []testutil.Proc {
	t.Helper()
	var ps []testutil.Proc
	testutil.Eventually(t, 30*time.Second, "sleepers started", func() bool {
		ps = testutil.Sleepers(mark)
		return len(ps) >= n
	})
	return ps
}

// A child whose stdout is a socketpair's end (as Node's child_process
// makes it): asked by the caller's own end, the holders are the members
// holding the other.
func TestHoldersOfTheOtherEndOfASocket(t *testing.T) {
	l := startLiveServer(t)
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	mine, theirs := os.NewFile(uintptr(fds[0]), "mine"), os.NewFile(uintptr(fds[1]), "theirs")
	defer mine.Close()
	c := exec.Command("sh", "-c", fmt.Sprintf("sleep %s & wait", testutil.Sleep(l.mark)))
	c.Stdout = theirs
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	theirs.Close()
	l.procs = append(l.procs, c)
	root := lineage.Identity{PID: uint32(c.Process.Pid), StartTicks: startTicks(c.Process.Pid)}
	l.do("POST", "/v1/roots", api.AddRoot{PID: int64(root.PID), Start: root.StartTicks, Session: "sock", Kind: "autonomous"}, nil)
	sleepers := waitSleepers(t, l.mark, 1)
	ino := inode(t, mine)
	var got api.Holders
	l.do("GET", fmt.Sprintf("/v1/roots/%s/holders?socket=%d", root, ino), nil, &got)
	var held []int
	for _, h := range got.Holders {
		held = append(held, int(h.Process.PID))
		if want := []api.HeldFD{{FD: 1, Socket: ino}}; !slices.Equal(h.FDs, want) {
			t.Errorf("holder %s holds %v, want %v", h.Process, h.FDs, want)
		}
	}
	if want := sortedInts([]int{int(root.PID), sleepers[0].PID}); !slices.Equal(held, want) {
		t.Errorf("holders %v, want %v", held, want)
	}
	if code, _ := l.status("GET", fmt.Sprintf("/v1/roots/%s/holders?socket=%d", root, 0xfffffff0)); code != http.StatusBadRequest {
		t.Errorf("holders of a socket that isn't there: %d, want 400", code)
	}
	l.do("POST", "/v1/sessions/sock/close", nil, nil)
	for _, s := range sleepers {
		if !testutil.WaitGone(s.PID, s.StartTicks, 30*time.Second) {
			t.Errorf("sleeper %d outlived its session's close", s.PID)
		}
	}
}
