package e2e

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lineage-dev/lineage/internal/testutil"
)

// hardCancelArgs are the flags that make each backend leave a hard cancel
// to the guardian: bpf as on a kernel whose exit hook can't kill.
var hardCancelArgs = map[string][]string{
	"bpf": {"--backend", "bpf", "--hard-cancel", "guardian"},
	// A fast fixed poll, so that lineage has seen the daemon before the
	// cancel: an orphan born in the last poll interval escapes the proc
	// backend, and so the guardian (a documented limit).
	"proc": {"--backend", "proc", "--interval", "20ms"},
}

// leakyJob leaves a setsid'd sleeper and a double-forked daemon, then says
// ready and sleeps; every sleeper carries mark.
func leakyJob(mark string) []string {
	return []string{"sh", "-c", fmt.Sprintf(
		"setsid sleep %[1]s & (setsid sh -c 'sleep %[1]s & exit 0' &); sleep 0.3; echo ready; sleep %[1]s", testutil.Sleep(mark))}
}

// liveRun is a lineage run whose stderr is read as it comes.
type liveRun struct {
	cmd      *exec.Cmd
	guardian chan int // the guardian's pid, from -v; closed at stderr's end
	stderr   strings.Builder
}

var guardianLine = regexp.MustCompile(`^lineage: guardian (\d+) `)

// startLive starts lineage -v in a process group of its own and returns once
// its job says ready.
func startLive(t *testing.T, env []string, args ...string) *liveRun {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	lr := &liveRun{guardian: make(chan int, 1)}
	lr.cmd = startUntilReadyWith(t, func(cmd *exec.Cmd) {
		cmd.Env = append(cmd.Env, env...)
		cmd.Stderr = w
	}, append([]string{"run", "-v", "--grace", "1s"}, args...)...)
	w.Close()
	lines := make(chan string, 64)
	go func() {
		defer close(lines)
		for sc := bufio.NewScanner(r); sc.Scan(); {
			lines <- sc.Text()
		}
	}()
	go func() {
		defer close(lr.guardian)
		for line := range lines {
			if m := guardianLine.FindStringSubmatch(line); m != nil {
				pid, _ := strconv.Atoi(m[1])
				lr.guardian <- pid
			}
		}
	}()
	return lr
}

// hardCancel SIGKILLs lineage and its whole process group, as a CI runner
// does.
func (lr *liveRun) hardCancel(t *testing.T) {
	t.Helper()
	if err := syscall.Kill(-lr.cmd.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = lr.cmd.Wait()
}

// guardianPID returns the guardian's pid and start time, or 0 when lineage
// said it started none.
func (lr *liveRun) guardianPID(t *testing.T) (int, uint64) {
	t.Helper()
	select {
	case pid, ok := <-lr.guardian:
		if !ok {
			return 0, 0
		}
		start, _, err := testutil.StartTicks(pid)
		if err != nil {
			return pid, 0 // already gone
		}
		return pid, start
	case <-time.After(5 * time.Second):
		return 0, 0
	}
}

func waitSleepers(t *testing.T, mark string, n int) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); len(testutil.Sleepers(mark)) != n; {
		if time.Now().After(deadline) {
			t.Fatalf("%d sleepers, want %d", len(testutil.Sleepers(mark)), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestRunGuardianReapsAfterAHardCancel(t *testing.T) {
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			requireBackend(t, backend)
			mark := testutil.Marker(t)
			testutil.CheckNoLeaks(t, mark)
			by1 := startBystander(t, "with the job's environment", withLineageEnv(exec.Command("sleep", testutil.Sleep(mark+"9"))))
			by2 := startBystander(t, "in a session of its own", setsidCmd(exec.Command("sleep", testutil.Sleep(mark+"9"))))
			lr := startLive(t, nil, append(hardCancelArgs[backend], append([]string{"--"}, leakyJob(mark)...)...)...)
			gpid, gstart := lr.guardianPID(t)
			if gpid == 0 || gstart == 0 {
				t.Fatal("lineage -v names no running guardian")
			}
			waitSleepers(t, mark, 3+2) // the bystanders carry mark too

			lr.hardCancel(t)
			if !testutil.WaitGone(gpid, gstart, 30*time.Second) {
				testutil.KillIdentity(gpid, gstart)
				t.Fatal("the guardian did not exit after reaping")
			}
			for _, p := range testutil.Find(mark) {
				if !strings.Contains(strings.Join(p.Argv, " "), mark+"9") {
					t.Errorf("left alive after the hard cancel: %d %q", p.PID, p.Argv)
				}
			}
			by1.check(t)
			by2.check(t)
		})
	}
}

func TestRunHardCancelWithoutGuardianKillsNothing(t *testing.T) {
	for _, backend := range backends {
		for _, c := range []struct {
			name string
			env  []string
			args []string
		}{
			{"LINEAGE_REAPING=off", []string{"LINEAGE_REAPING=off"}, nil},
			{"--reaping off", nil, []string{"--reaping", "off"}},
			{"--keep-on-abort", nil, []string{"--keep-on-abort"}},
		} {
			t.Run(backend+"/"+c.name, func(t *testing.T) {
				requireBackend(t, backend)
				mark := testutil.Marker(t)
				testutil.CheckNoLeaks(t, mark)
				args := append(append(append([]string{}, hardCancelArgs[backend]...), c.args...), "--")
				lr := startLive(t, c.env, append(args, leakyJob(mark)...)...)
				waitSleepers(t, mark, 3)
				lr.hardCancel(t)
				if pid, _ := lr.guardianPID(t); pid != 0 {
					t.Errorf("a guardian (%d) was started", pid)
				}
				time.Sleep(500 * time.Millisecond)
				left := testutil.Sleepers(mark)
				if len(left) != 3 {
					t.Errorf("%d sleepers left after the hard cancel, want all 3", len(left))
				}
				for _, p := range testutil.Find(mark) {
					testutil.KillIdentity(p.PID, p.StartTicks)
				}
			})
		}
	}
}

func TestRunGuardianExitsAtANormalEnd(t *testing.T) {
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			requireBackend(t, backend)
			mark := testutil.Marker(t)
			testutil.CheckNoLeaks(t, mark)
			job := fmt.Sprintf("setsid sleep %[1]s >/dev/null 2>&1 & echo ready; sleep 0.3", testutil.Sleep(mark))
			lr := startLive(t, nil, append(hardCancelArgs[backend], "--", "sh", "-c", job)...)
			gpid, gstart := lr.guardianPID(t)
			if gpid == 0 {
				t.Fatal("lineage -v names no guardian")
			}
			if err := lr.cmd.Wait(); err != nil {
				t.Fatalf("lineage: %v", err)
			}
			if !testutil.WaitGone(gpid, gstart, 30*time.Second) {
				testutil.KillIdentity(gpid, gstart)
				t.Fatal("the guardian outlived a normal end")
			}
			if left := testutil.Find(mark); len(left) != 0 {
				t.Errorf("left alive: %v", left)
			}
		})
	}
}

func withLineageEnv(cmd *exec.Cmd) *exec.Cmd {
	cmd.Env = lineageCmd().Env
	return cmd
}

func setsidCmd(cmd *exec.Cmd) *exec.Cmd {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	return cmd
}
