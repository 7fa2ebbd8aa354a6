package e2e

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lineage-dev/lineage/api"
	"github.com/lineage-dev/lineage/client"
	"github.com/lineage-dev/lineage/internal/testutil"
	"github.com/lineage-dev/lineage/lineage"
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
	// Root's root is, to another uid, as one that doesn't exist.
	if err != nil || !strings.Contains(string(out), `"not_found"`) {
		t.Errorf("uid 65534 asked for root's holders: %v %s, want not_found", err, out)
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

// goCommand is a Command of the Go client through the front under test.
func goCommand(ctx context.Context, d *daemon, session, kind, script string) *client.Command {
	c := client.New(d.sock)
	cmd := c.CommandContext(ctx, session, "sh", "-c", script)
	cmd.Kind = kind
	cmd.Lineage = frontBin
	return cmd
}

// waitZombie waits for pid, a child not yet waited for, to have exited.
func waitZombie(t *testing.T, pid int) {
	t.Helper()
	testutil.Eventually(t, 30*time.Second, fmt.Sprintf("process %d to exit", pid), func() bool {
		_, state, err := testutil.StartTicks(pid)
		return err == nil && state == "Z"
	})
}

// holderIdentities and procIdentities are the sorted identities of
// holders and of processes.
func holderIdentities(hs []client.Holder) []lineage.Identity {
	var out []lineage.Identity
	for _, h := range hs {
		out = append(out, h.Process)
	}
	return sortedIdentities(out)
}

func procIdentities(ps []testutil.Proc) []lineage.Identity {
	var out []lineage.Identity
	for _, p := range ps {
		out = append(out, lineage.Identity{PID: uint32(p.PID), StartTicks: p.StartTicks})
	}
	return sortedIdentities(out)
}

func sortedIdentities(ids []lineage.Identity) []lineage.Identity {
	slices.SortFunc(ids, func(a, b lineage.Identity) int { return cmp.Compare(a.PID, b.PID) })
	return ids
}

// holderArgv is the sorted argv of holders, each joined by spaces.
func holderArgv(hs []client.Holder) []string {
	var out []string
	for _, h := range hs {
		out = append(out, strings.Join(h.Argv, " "))
	}
	slices.Sort(out)
	return out
}

// The Go client's Command on the command: Wait returns within the
// bound once the shell has exited, with its output and both sleepers
// named as holders of stdout and stderr; an autonomous turn end reaps
// them, an interactive one reports them alive.
func TestGoCommandNeverWaitsOnLeftovers(t *testing.T) {
	d := startDaemon(t, "")
	for _, kind := range []string{"autonomous", "interactive"} {
		t.Run(kind, func(t *testing.T) {
			mark := testutil.Marker(t)
			testutil.CheckNoLeaks(t, mark)
			session := "go-" + kind
			var out, errb strings.Builder
			cmd := goCommand(context.Background(), d, session, kind, leaveScript(mark))
			cmd.Stdout, cmd.Stderr = &out, &errb
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			waitZombie(t, cmd.Process.Pid)
			began := time.Now()
			if err := cmd.Wait(); err != nil {
				t.Fatalf("Wait: %v (stderr %q)", err, errb.String())
			}
			if took := time.Since(began); took > time.Second {
				t.Errorf("Wait took %v after the command exited, want under 1s (hold delay %v)", took, client.DefaultHoldDelay)
			}
			if out.String() != "built\n" {
				t.Errorf("stdout %q, want built", out.String())
			}
			// The holders are the two sleepers, by identity: one may still
			// have been setsid, before its exec of sleep, when it was named.
			sleepers := atLeastSleepers(t, mark, 2)
			if got, want := holderIdentities(cmd.Holders), procIdentities(sleepers); !slices.Equal(got, want) {
				t.Fatalf("holders %v %q, want the sleepers %v", got, holderArgv(cmd.Holders), want)
			}
			for _, h := range cmd.Holders {
				if !slices.Equal(h.Streams, []string{"stdout", "stderr"}) || len(h.Argv) == 0 || !strings.HasSuffix(h.Argv[len(h.Argv)-1], "."+mark) {
					t.Errorf("holder %s %q: streams %v, want stdout and stderr, and the sleeper's argument", h.Process, h.Argv, h.Streams)
				}
			}
			var ended api.Ended
			d.do("POST", "/v1/sessions/"+session+"/turn-end", nil, &ended)
			if kind == "autonomous" {
				allGone(t, sleepers)
			} else {
				allAlive(t, sleepers)
				reported := 0
				for _, r := range ended.Roots {
					for _, o := range r.Outcomes {
						if o.Result == lineage.Reported && strings.Contains(strings.Join(o.Argv, " "), mark) {
							reported++
						}
					}
				}
				if reported != 2 {
					t.Errorf("the interactive turn end reported %d sleepers, want 2: %+v", reported, ended)
				}
			}
			d.do("POST", "/v1/sessions/"+session+"/close", nil, nil)
			allGone(t, sleepers)
		})
	}
}

// 1 MiB written before the command exits, its leftovers holding the pipe:
// no deadlock, every byte returned, through one pipe for both streams.
func TestGoCommandKeepsEveryByte(t *testing.T) {
	d := startDaemon(t, "")
	mark := testutil.Marker(t)
	testutil.CheckNoLeaks(t, mark)
	script := "dd if=/dev/zero bs=1024 count=1024 2>/dev/null; " + leaveScript(mark)
	cmd := goCommand(context.Background(), d, "go-mib", "autonomous", script)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("CombinedOutput: %v", err)
	}
	if want := append(make([]byte, 1<<20), "built\n"...); !slices.Equal(out, want) {
		t.Errorf("got %d bytes, want %d: 1 MiB of zeros then built", len(out), len(want))
	}
	if got := holderArgv(cmd.Holders); len(got) != 2 {
		t.Errorf("holders %q, want the two sleepers", got)
	}
	sleepers := atLeastSleepers(t, mark, 2)
	d.do("POST", "/v1/sessions/go-mib/close", nil, nil)
	allGone(t, sleepers)
}

// A context that ends first ends the command's whole lineage, a
// grandchild that setsid'd included, keeps the output so far, and leaves
// the session's other roots alone.
func TestGoCommandContextEndsTheLineage(t *testing.T) {
	d := startDaemon(t, "")
	mark := testutil.Marker(t)
	testutil.CheckNoLeaks(t, mark)
	bystander := goCommand(context.Background(), d, "go-timeout", "interactive", "setsid sleep 93."+mark+" >/dev/null 2>&1 &")
	if err := bystander.Run(); err != nil {
		t.Fatal(err)
	}
	kept := atLeastSleepers(t, mark, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	cmd := goCommand(ctx, d, "go-timeout", "interactive", "echo started; setsid sleep 92."+mark+" & wait")
	var out strings.Builder
	cmd.Stdout = &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ps := atLeastSleepers(t, mark, 2)
	err := cmd.Wait()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Wait: %v, want the deadline", err)
	}
	if out.String() != "started\n" {
		t.Errorf("output so far %q, want started", out.String())
	}
	for _, p := range ps {
		if strings.HasPrefix(p.Argv[1], "92.") && !testutil.WaitGone(p.PID, p.StartTicks, time.Second) {
			t.Errorf("the setsid'd grandchild %d outlived the context's end", p.PID)
		}
	}
	allAlive(t, kept)
	d.do("POST", "/v1/sessions/go-timeout/close", nil, nil)
	allGone(t, kept)
}

// A Go client made with a relative socket runs a command in another
// directory through the same daemon: the socket was made absolute when the
// client was made, and lineage exec is given that.
func TestGoCommandRelativeSocket(t *testing.T) {
	d := startDaemon(t, "")
	t.Chdir(filepath.Dir(d.sock))
	c := client.New(filepath.Base(d.sock))
	cmd := c.Command("go-relsock", "pwd")
	cmd.Dir, cmd.Lineage = "/", frontBin
	out, err := cmd.Output()
	if err != nil || string(out) != "/\n" {
		t.Errorf("pwd in / through %s: %q, %v; want /", filepath.Base(d.sock), out, err)
	}
	d.do("POST", "/v1/sessions/go-relsock/close", nil, nil)
}

// Another uid's session is refused by Start, as a conflict, before
// anything runs: its roots would be its opener's. Root's command here names
// a session uid 65534 opened, which root can see (the client's unit tests
// have the caller that can't).
func TestGoCommandRefusesAnotherUIDsSession(t *testing.T) {
	d := startDaemon(t, "")
	if msg, code := asNobody(t, d).lineage("session", "open", "go-foreign", "--kind", "autonomous"); code != 0 {
		t.Fatalf("uid 65534's session open: %s", msg)
	}
	marker := filepath.Join(t.TempDir(), "ran")
	cmd := goCommand(context.Background(), d, "go-foreign", "", "touch "+marker)
	var ae *client.APIError
	if err := cmd.Start(); !errors.As(err, &ae) || ae.Body.Code != api.CodeConflict || !strings.Contains(err.Error(), "opened by uid 65534") {
		t.Errorf("Start: %v, want a conflict naming the opener", err)
		if err == nil {
			_ = cmd.Wait()
		}
	}
	if _, err := os.Stat(marker); err == nil || cmd.Process != nil {
		t.Error("the command ran in another uid's session")
	}
	d.do("POST", "/v1/sessions/go-foreign/close", nil, nil)
}

// What Start can't see refused is refused at lineage exec's registration:
// nothing runs, and Wait returns exit status 125 with lineage exec's one
// line on Stderr, which a command's own status 125 lacks. Here the process
// that becomes lineage exec registers itself as a root of another session
// first, after Start's look: a member of a tracked lineage, which the
// daemon won't register in a second session.
func TestGoCommandRegistrationRefusalComesFromWait(t *testing.T) {
	d := startDaemon(t, "")
	dir := t.TempDir()
	wrapper := filepath.Join(dir, "lineage")
	script := fmt.Sprintf("#!/bin/sh\n%[1]s --socket %[2]s roots add $$ --session go-first --kind autonomous >/dev/null || exit 99\nexec %[1]s \"$@\"\n", frontBin, d.sock)
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(dir, "ran")
	cmd := goCommand(context.Background(), d, "go-second", "autonomous", "touch "+marker)
	cmd.Lineage = wrapper
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("Start: %v, want the refusal from Wait", err)
	}
	var ee *exec.ExitError
	if err := cmd.Wait(); !errors.As(err, &ee) || ee.ExitCode() != 125 {
		t.Errorf("Wait: %v, want exit status 125", err)
	}
	if line := stderr.String(); !strings.HasPrefix(line, "lineage: exec: register: ") || !strings.Contains(line, "(409 conflict)") || strings.Count(line, "\n") != 1 {
		t.Errorf("stderr %q, want lineage exec's one line naming the daemon's refusal", line)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("the command ran though its registration was refused")
	}
	// The command's own 125 has no such line.
	stderr.Reset()
	cmd = goCommand(context.Background(), d, "go-own", "autonomous", "exit 125")
	cmd.Stderr = &stderr
	if err := cmd.Run(); !errors.As(err, &ee) || ee.ExitCode() != 125 || stderr.Len() != 0 {
		t.Errorf("a command's own exit 125: %v, stderr %q", err, stderr.String())
	}
	for _, s := range []string{"go-own", "go-first", "go-second"} {
		d.do("POST", "/v1/sessions/"+s+"/close", nil, nil)
	}
}
