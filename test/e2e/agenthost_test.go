package e2e

// An agent host starts `lineage serve` as its own child, so the daemon
// shares the host's process group, and runs its commands with `lineage
// exec`: every `cmd &` leftover is in that group too. Protection is by
// identity alone, so each session's close ends all of it, and nothing
// outside it.

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lineage-dev/lineage/api"
	"github.com/lineage-dev/lineage/client"
	"github.com/lineage-dev/lineage/internal/testutil"
)

// hostSessions is how many sessions the simulated host runs.
const hostSessions = 40

// hostScript is a session's leaky command: a background job, a setsid'd
// one, a double-forked daemon, one that ignores SIGTERM, and one that asks
// the daemon to keep it and to close its own session (a member may do
// neither) before it sleeps. $1 is the sleep argument, $2 the session.
const hostScript = `s=$1; id=$2
sleep "$s" &
setsid sleep "$s" &
(setsid sh -c 'sleep "$1" &' sh "$s" &)
sh -c 'trap "" TERM; exec sleep "$1"' sh "$s" &
sh -c 'st=$(cut -d" " -f22 /proc/$$/stat); "$LINEAGE_BIN" keep "$$@$st" >/dev/null 2>&1; "$LINEAGE_BIN" session close "$1" >/dev/null 2>&1; exec sleep "$2"' sh "$id" "$s" &
sleep 0.3
`

func TestAgentHostSessionsEndTheirLeftovers(t *testing.T) {
	requireBackend(t, "bpf")
	mark := testutil.Marker(t)
	testutil.CheckNoLeaks(t, mark)
	testutil.KillAtCleanup(t, mark)
	dir := t.TempDir()
	pin := testutil.PinRoot(t)
	host := exec.Command(os.Args[0], "-test.run=^$")
	host.Env = append(os.Environ(), testModeEnv+"=agent-host", "LINEAGE_BIN="+frontBin,
		"LINEAGE_HOST_DIR="+dir, "LINEAGE_HOST_PIN="+pin, "LINEAGE_HOST_MARK="+mark)
	// The host is in a process group of its own; the daemon and every
	// command it runs share it.
	host.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var out strings.Builder
	host.Stdout, host.Stderr = &out, &out
	host.WaitDelay = 5 * time.Second
	if err := host.Run(); err != nil {
		t.Fatalf("agent host: %v\n%s", err, out.String())
	}
	clean, alive := 0, false
	for line := range strings.Lines(out.String()) {
		switch {
		case strings.HasPrefix(line, "session ") && strings.HasSuffix(strings.TrimSpace(line), " left 0"):
			clean++
		case strings.HasPrefix(line, "session "):
			t.Errorf("agent host: %s", strings.TrimSpace(line))
		case strings.TrimSpace(line) == "bystander alive":
			alive = true
		}
	}
	if clean != hostSessions || !alive {
		t.Errorf("%d of %d sessions left nothing, bystander alive %v; the host said:\n%s", clean, hostSessions, alive, out.String())
	}
}

// agentHost is the host: it starts the daemon as its child, in its own
// process group, runs hostSessions sessions of leaky commands through
// `lineage exec`, closes each and says what of it is left, then stops the
// daemon. It prints one line a session and one for its bystander.
func agentHost() int {
	dir, pin, mark := os.Getenv("LINEAGE_HOST_DIR"), os.Getenv("LINEAGE_HOST_PIN"), os.Getenv("LINEAGE_HOST_MARK")
	front := os.Getenv("LINEAGE_BIN")
	sock := filepath.Join(dir, "lineage.sock")
	script := filepath.Join(dir, "leaky.sh")
	if err := os.WriteFile(script, []byte(hostScript), 0o644); err != nil {
		fmt.Println("error", err)
		return 1
	}
	env := append(os.Environ(), client.EnvSocket+"="+sock)
	serve := exec.Command(front, "serve", "--backend", "bpf", "--socket", sock, "--state-dir", filepath.Join(dir, "state"), "--grace", "1s", "--pin-dir", pin)
	serve.Env = env
	serveErr, err := serve.StderrPipe()
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	if err := serve.Start(); err != nil {
		fmt.Println("error", err)
		return 1
	}
	defer func() {
		_ = serve.Process.Signal(syscall.SIGTERM) // our child, not yet waited for
		_ = serve.Wait()
	}()
	served := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(serveErr)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), servingNote) {
				served <- true
			}
		}
	}()
	select {
	case <-served:
	case <-time.After(60 * time.Second):
		fmt.Println("error the daemon did not serve within 60s")
		return 1
	}
	by := exec.Command("sleep", testutil.Sleep(mark+"99")) // not a session's tag: those are 00 to 39
	if err := by.Start(); err != nil {
		fmt.Println("error", err)
		return 1
	}
	defer func() { _ = by.Process.Kill(); _ = by.Wait() }() // our child: its pid is its own
	byStart, _, err := testutil.StartTicks(by.Process.Pid)
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	c := client.New(sock)
	defer c.Close()
	for i := range hostSessions {
		id, tag := fmt.Sprintf("host-%d", i), fmt.Sprintf("%s%02d", mark, i)
		kind := []string{"interactive", "autonomous"}[i%2]
		ex := exec.Command(front, "exec", "--session", id, "--kind", kind, "--", "sh", script, testutil.Sleep(tag), id)
		ex.Env = env
		if err := ex.Run(); err != nil {
			fmt.Printf("session %s: lineage exec: %v\n", id, err)
			continue
		}
		if !testutil.Until(10*time.Second, func() bool { return len(testutil.Sleepers(tag)) >= 5 }) {
			fmt.Printf("session %s: only %d of its 5 leftovers started\n", id, len(testutil.Sleepers(tag)))
		}
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		var ended api.Ended
		err := c.Do(ctx, "POST", "/v1/sessions/"+id+"/close", nil, &ended)
		cancel()
		if err != nil {
			fmt.Printf("session %s: close: %v\n", id, err)
			continue
		}
		testutil.Until(3*time.Second, func() bool { return len(testutil.Find(tag)) == 0 })
		fmt.Printf("session %s left %d\n", id, len(testutil.Find(tag)))
	}
	if testutil.Alive(by.Process.Pid, byStart) {
		fmt.Println("bystander alive")
	} else {
		got, state, err := testutil.StartTicks(by.Process.Pid)
		fmt.Printf("bystander %d@%d: now %d %q %v\n", by.Process.Pid, byStart, got, state, err)
	}
	return 0
}
