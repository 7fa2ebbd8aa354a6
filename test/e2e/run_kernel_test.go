package e2e

// The escapes that depend most on the kernel's fork and exit paths, and a
// hard cancel: what the kernel matrix (scripts/kmatrix) runs on every kernel,
// and what runs here on this machine's.

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lineage-dev/lineage/internal/loader"
	"github.com/lineage-dev/lineage/internal/testutil"
)

// The helper modes of the test binary (testModeEnv) for these tests. Each
// starts a sleep(1) with the argument it is given, writes what it did to the
// file named by forkNoteEnv ("helper=PID child=PID ppid=PID [tid=TID]") and
// exits without waiting for it.
const (
	modeCloneParent = "clone-parent"
	modeVfork       = "vfork"
	modeThreadFork  = "thread-fork"
	forkNoteEnv     = "LINEAGE_TEST_FORK_NOTE"
)

func init() {
	if os.Getenv(testModeEnv) == modeThreadFork {
		// The main goroutine keeps the leader thread, so that another
		// goroutine's locked thread is surely not the leader.
		runtime.LockOSThread()
	}
}

// forkHelper runs the helper mode; it returns the exit status.
func forkHelper(mode string) int {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "fork helper: no sleep argument")
		return 2
	}
	cmd := exec.Command("sleep", os.Args[1])
	note := ""
	var err error
	switch mode {
	case modeCloneParent:
		// The child's parent is this process's parent: its ppid never
		// names the process that created it.
		cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_PARENT}
		err = cmd.Start()
	case modeVfork:
		// Go starts every process with clone(CLONE_VM|CLONE_VFORK), as
		// posix_spawn does: the child borrows this process's memory until
		// it execs.
		err = cmd.Start()
	case modeThreadFork:
		done := make(chan struct{})
		go func() {
			defer close(done)
			// Never unlocked: the thread ends with this goroutine, so the
			// child's forking thread is gone before the reap.
			runtime.LockOSThread()
			tid := unix.Gettid()
			if tid == os.Getpid() {
				err = fmt.Errorf("fork helper: on the leader thread")
				return
			}
			note = fmt.Sprintf(" tid=%d", tid)
			err = cmd.Start()
		}()
		<-done
	default:
		err = fmt.Errorf("fork helper: unknown mode %q", mode)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	ppid, err := statPPID(cmd.Process.Pid)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	line := fmt.Sprintf("helper=%d child=%d ppid=%d%s\n", os.Getpid(), cmd.Process.Pid, ppid, note)
	if err := os.WriteFile(os.Getenv(forkNoteEnv), []byte(line), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	return 0
}

// statPPID reads field 4 of /proc/PID/stat.
func statPPID(pid int) (int, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("read stat: %w", err)
	}
	s := string(raw)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(fields) < 2 {
		return 0, fmt.Errorf("short stat of %d", pid)
	}
	return strconv.Atoi(fields[1])
}

// forkNote is what a fork helper wrote.
type forkNote struct {
	helper, child, ppid, tid int
}

func readForkNote(t *testing.T, path string) forkNote {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("the fork helper left no note: %v", err)
	}
	var n forkNote
	for _, kv := range strings.Fields(string(raw)) {
		k, v, _ := strings.Cut(kv, "=")
		i, err := strconv.Atoi(v)
		if err != nil {
			t.Fatalf("fork note %q: %v", raw, err)
		}
		switch k {
		case "helper":
			n.helper = i
		case "child":
			n.child = i
		case "ppid":
			n.ppid = i
		case "tid":
			n.tid = i
		}
	}
	return n
}

func TestRunCatchesKernelLevelEscapes(t *testing.T) {
	cases := []struct {
		name string
		mode string
		// check checks the helper's note itself: the test proves what it
		// claims only if the kernel did what the helper asked.
		check func(t *testing.T, n forkNote)
	}{
		{"CLONE_PARENT", modeCloneParent, func(t *testing.T, n forkNote) {
			if n.ppid == n.helper {
				t.Errorf("the CLONE_PARENT child's parent is its creator %d: CLONE_PARENT had no effect", n.helper)
			}
		}},
		{"vfork", modeVfork, nil},
		{"fork from a thread", modeThreadFork, func(t *testing.T, n forkNote) {
			if n.tid == 0 || n.tid == n.helper {
				t.Errorf("the fork came from thread %d, want one that is not the leader (%d)", n.tid, n.helper)
			}
		}},
	}
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			requireBackend(t, backend)
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) {
					mark := testutil.Marker(t)
					testutil.CheckNoLeaks(t, mark)
					notePath := filepath.Join(t.TempDir(), "note")
					// The helper runs in the foreground and exits; its
					// child must be reaped all the same.
					script := fmt.Sprintf(`%s=%s %s=%s "$LINEAGE_TEST_BINARY" %s || exit 9`+settle+"; exit 5",
						testModeEnv, c.mode, forkNoteEnv, notePath, testutil.Sleep(mark))
					res := runJob(t, mark, []string{"LINEAGE_TEST_BINARY=" + os.Args[0]},
						"--backend", backend, "--", "sh", "-c", script)
					if res.code != 5 {
						t.Fatalf("exit status %d, want the job's own 5; stderr:\n%s", res.code, res.stderr)
					}
					n := readForkNote(t, notePath)
					if c.check != nil {
						c.check(t, n)
					}
					if res.report == nil || res.report.Reap == nil {
						t.Fatalf("no reap in the report; stderr:\n%s", res.stderr)
					}
					found := false
					for _, o := range res.report.Reap.Outcomes {
						if int(o.Member.PID) != n.child {
							continue
						}
						found = true
						// Only the kernel knows which process created
						// another; /proc knows its parent of the moment.
						if backend == loader.BackendBPF && int(o.Member.Parent.PID) != n.helper {
							t.Errorf("the child's lineage parent is %d, want its creator %d (ppid at birth %d)", o.Member.Parent.PID, n.helper, n.ppid)
						}
					}
					if !found {
						t.Errorf("the helper's child %d is not in the reap's outcomes; stderr:\n%s", n.child, res.stderr)
					}
				})
			}
		})
	}
}

// hardCancel does what a CI runner's hard cancel does to lineage: it
// SIGKILLs lineage's whole process group, each process by its identity,
// until none is left.
func hardCancel(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	pgid := cmd.Process.Pid
	for deadline := time.Now().Add(5 * time.Second); ; {
		group := processGroup(pgid)
		if len(group) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("lineage's process group %d outlived its SIGKILL: %v", pgid, group)
		}
		for _, p := range group {
			testutil.KillIdentity(p.PID, p.StartTicks)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// processGroup returns the live processes of process group pgid.
func processGroup(pgid int) []testutil.Proc {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []testutil.Proc
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		raw, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		s := string(raw)
		fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		// fields[0] is field 3 (state); field 5 (pgrp) is fields[2].
		if len(fields) < 3 || fields[2] != strconv.Itoa(pgid) || fields[0] == "Z" || fields[0] == "X" {
			continue
		}
		if start, state, err := testutil.StartTicks(pid); err == nil && state != "Z" && state != "X" {
			out = append(out, testutil.Proc{PID: pid, StartTicks: start})
		}
	}
	return out
}

// hardCancelJob leaves behind, before saying ready, one process of each
// kind: a background job, nohup, setsid, a double fork and one that ignores
// SIGTERM. Six sleepers in all, with the job's own. None is stopped: when
// lineage dies, the job's process group is orphaned, and the kernel would
// SIGHUP a group with a stopped member, killing what lineage should kill.
const hardCancelJob = `sleep %[1]s &
nohup sleep %[1]s >/dev/null 2>&1 &
setsid sleep %[1]s &
(setsid sh -c 'sleep %[1]s & exit 0' &)
sh -c 'trap "" TERM; exec sleep %[1]s' &
sleep 0.3; echo ready; sleep %[1]s`

const hardCancelSleepers = 6

// startHardCancelJob starts lineage on hardCancelJob and waits until every
// sleeper runs.
func startHardCancelJob(t *testing.T, mark string, env []string, args ...string) *exec.Cmd {
	t.Helper()
	args = append(append([]string{"run"}, args...), "--", "sh", "-c", fmt.Sprintf(hardCancelJob, testutil.Sleep(mark)))
	// startUntilReady's command starts with the test's environment.
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	cmd := startUntilReady(t, nil, args...)
	for deadline := time.Now().Add(10 * time.Second); len(testutil.Sleepers(mark)) != hardCancelSleepers; {
		if time.Now().After(deadline) {
			t.Fatalf("%d sleepers, want %d", len(testutil.Sleepers(mark)), hardCancelSleepers)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return cmd
}

func TestRunHardCancel(t *testing.T) {
	// The proc backend can't do this: nothing is left in user space once
	// lineage is killed (TestRunSurvivesItsOwnSIGKILLOnlyWhereTheKernelCan).
	t.Run(loader.BackendBPF, func(t *testing.T) {
		requireBackend(t, loader.BackendBPF)
		mark := testutil.Marker(t)
		testutil.CheckNoLeaks(t, mark)
		// Where the guardian reaps (no kernel hard cancel), the sleeper
		// that ignores SIGTERM dies after the grace.
		cmd := startHardCancelJob(t, mark, nil, "--backend", "bpf", "--grace", "1s")
		hardCancel(t, cmd)
		_ = cmd.Wait()
		deadline := time.Now().Add(runLimit() / 6)
		for len(testutil.Find(mark)) > 0 && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if left := testutil.Find(mark); len(left) != 0 {
			t.Errorf("%d processes outlived the hard cancel: %v", len(left), left)
		}
	})
}

func TestRunHardCancelWithReapingOffKillsNothing(t *testing.T) {
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			requireBackend(t, backend)
			mark := testutil.Marker(t)
			testutil.CheckNoLeaks(t, mark)
			cmd := startHardCancelJob(t, mark, []string{"LINEAGE_REAPING=off"}, "--backend", backend)
			before := testutil.Sleepers(mark)
			hardCancel(t, cmd)
			_ = cmd.Wait()
			// Whatever would kill them would do it at once: the kernel
			// when the supervisor's exit is seen.
			time.Sleep(time.Second)
			for _, p := range before {
				if !testutil.Alive(p.PID, p.StartTicks) {
					t.Errorf("with reaping off, %d %q was killed", p.PID, p.Argv)
				}
			}
			// The test ends them itself, by identity.
			for _, p := range testutil.Find(mark) {
				testutil.KillIdentity(p.PID, p.StartTicks)
			}
		})
	}
}
