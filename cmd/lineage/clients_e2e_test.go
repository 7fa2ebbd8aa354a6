package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lineage-dev/lineage/internal/api"
	"github.com/lineage-dev/lineage/internal/client"
	"github.com/lineage-dev/lineage/internal/lineage"
	"github.com/lineage-dev/lineage/internal/testutil"
)

// leaveScript is the command: it prints, then leaves two sleepers
// that hold its output, one setsid'd, one double-forked.
func leaveScript(mark string) string {
	return fmt.Sprintf("echo built; setsid sleep 90.%s & (sleep 91.%s &)", mark, mark)
}

func pipeInode(t *testing.T, f *os.File) uint64 {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	return st.Ino
}

// Through a real daemon: a command run with lineage exec exits while its
// two leftovers hold its output pipe; the daemon names both, with the
// descriptors that hold it, and only to a caller who may see the root.
// The session's stream ends with an end event when the session closes.
func TestServeNamesPipeHoldersAndEndsTheSessionStream(t *testing.T) {
	d := startDaemon(t, "")
	mark := testutil.Marker(t)
	testutil.CheckNoLeaks(t, mark)
	d.do("POST", "/v1/sessions", api.OpenSession{ID: "hold", Kind: "autonomous"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	lines := d.eventLines(t, ctx, "hold")

	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	cmd := lineageCmd("exec", "--session", "hold", "--", "sh", "-c", leaveScript(mark))
	cmd.Env = append(cmd.Env, client.EnvSocket+"="+d.sock)
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	start, _, err := testutil.StartTicks(cmd.Process.Pid) // not yet waited for: still ours
	if err != nil {
		t.Fatal(err)
	}
	root := lineage.Identity{PID: uint32(cmd.Process.Pid), StartTicks: start}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the command: %v", err)
	}
	line, err := bufio.NewReader(r).ReadString('\n')
	if err != nil || line != "built\n" {
		t.Fatalf("read %q, %v; want built", line, err)
	}
	sleepers := atLeastSleepers(t, mark, 2)

	ino := pipeInode(t, r)
	var got api.Holders
	d.do("GET", client.HoldersPath(root, ino), nil, &got)
	var argv []string
	for _, h := range got.Holders {
		argv = append(argv, strings.Join(h.Argv, " "))
		if want := []api.HeldFD{{FD: 1, Pipe: ino}, {FD: 2, Pipe: ino}}; !slices.Equal(h.FDs, want) {
			t.Errorf("holder %s %q holds %v, want %v", h.Process, h.Argv, h.FDs, want)
		}
	}
	slices.Sort(argv)
	if want := []string{"sleep 90." + mark, "sleep 91." + mark}; !slices.Equal(argv, want) {
		t.Errorf("holders %q, want %q", argv, want)
	}
	n := asNobody(t, d)
	out, err := n.cmd("curl", "-s", "--unix-socket", d.sock, "http://x"+client.HoldersPath(root, ino)).Output()
	if err != nil || !strings.Contains(string(out), `"forbidden"`) {
		t.Errorf("uid 65534 asked for root's holders: %v %s, want forbidden", err, out)
	}

	var ended api.Ended
	d.do("POST", "/v1/sessions/hold/turn-end", nil, &ended)
	allGone(t, sleepers)
	d.do("POST", "/v1/sessions/hold/close", nil, nil)
	var last map[string]any
	for l := range lines {
		if err := json.Unmarshal([]byte(l), &last); err != nil {
			t.Fatalf("stream line %q: %v", l, err)
		}
	}
	if last["kind"] != "end" || last["reason"] != "session hold closed" {
		t.Errorf("the stream's last line is %v, want an end event", last)
	}
}
