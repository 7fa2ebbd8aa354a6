package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lineage-dev/lineage/api"
	"github.com/lineage-dev/lineage/client"
	"github.com/lineage-dev/lineage/internal/testutil"
	"github.com/lineage-dev/lineage/lineage"
)

// fdsAndThreads counts a process's open descriptors and threads.
func fdsAndThreads(t *testing.T, pid int) (int, int) {
	t.Helper()
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	threads := 0
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "Threads:"); ok {
			threads, _ = strconv.Atoi(strings.TrimSpace(v))
		}
	}
	return len(fds), threads
}

// Many clients at once open sessions, exec commands that leave processes
// behind and close the sessions: every root is found, every leftover
// reaped, no bystander touched, and the daemon holds no more descriptors
// or threads afterwards than a few. 100 clients; 20 with -short (the
// machine this was written on has 2 cores).
func TestServeManyConcurrentClients(t *testing.T) {
	n := 100
	if testing.Short() {
		n = 20
	}
	d := startDaemon(t, "")
	mark := testutil.Marker(t)
	testutil.CheckNoLeaks(t, mark)
	by := startSleep(t, exec.Command("sleep", testutil.LongSleep(mark+"9")))
	var st0 api.Status
	d.do("GET", "/v1/status", nil, &st0)
	fds0, threads0 := fdsAndThreads(t, d.cmd.Process.Pid)

	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- storm(d, fmt.Sprintf("c%d", i), mark)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	took := time.Since(start)
	t.Logf("%d clients in %v", n, took)
	if took > 2*time.Minute {
		t.Errorf("%d clients took %v", n, took)
	}
	if left := testutil.Sleepers(mark); len(left) != 1 {
		t.Errorf("%d sleepers left, want only the bystander", len(left))
	}
	if pid, st := ident(t, by); !testutil.Alive(pid, st) {
		t.Error("the bystander was killed")
	}
	var ss []api.Session
	d.do("GET", "/v1/sessions", nil, &ss)
	if len(ss) != 0 {
		t.Errorf("%d sessions left open", len(ss))
	}
	time.Sleep(200 * time.Millisecond)
	var st1 api.Status
	d.do("GET", "/v1/status", nil, &st1)
	fds1, threads1 := fdsAndThreads(t, d.cmd.Process.Pid)
	// Go keeps the threads it grew under load; they are only logged.
	t.Logf("daemon: %d -> %d fds, %d -> %d goroutines, %d -> %d threads",
		fds0, fds1, st0.Goroutines, st1.Goroutines, threads0, threads1)
	if fds1 > fds0+4 {
		t.Errorf("daemon fds grew from %d to %d", fds0, fds1)
	}
	if st1.Goroutines > st0.Goroutines+4 {
		t.Errorf("daemon goroutines grew from %d to %d", st0.Goroutines, st1.Goroutines)
	}
}

// storm is one client's work: open, exec a leaky command, close.
func storm(d *daemon, id, mark string) error {
	c := client.New(d.sock)
	defer c.Close()
	if err := c.Do(context.Background(), "POST", "/v1/sessions", api.OpenSession{ID: id, Kind: "autonomous"}, nil); err != nil {
		return fmt.Errorf("%s: open: %w", id, err)
	}
	cmd := lineageCmd("exec", "--session", id, "--", "sh", "-c", "setsid sleep "+testutil.Sleep(mark)+" >/dev/null 2>&1 & exit 0")
	cmd.Env = append(cmd.Env, "LINEAGE_SOCKET="+d.sock)
	if out, err := cmd.CombinedOutput(); err != nil && !strings.Contains(err.Error(), "WaitDelay") {
		return fmt.Errorf("%s: exec: %v: %s", id, err, out)
	}
	var end api.Ended
	if err := c.Do(context.Background(), "POST", "/v1/sessions/"+id+"/close", nil, &end); err != nil {
		return fmt.Errorf("%s: close: %w", id, err)
	}
	if len(end.Roots) != 1 {
		return fmt.Errorf("%s: %d roots closed, want 1", id, len(end.Roots))
	}
	n := results(end)
	if n[lineage.Terminated]+n[lineage.Killed] != 1 {
		return fmt.Errorf("%s: outcomes %v, want the leftover ended", id, n)
	}
	return nil
}
