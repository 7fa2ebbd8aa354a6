package bpf

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lineage-dev/lineage/internal/loader"
	"github.com/lineage-dev/lineage/internal/proc"
	"github.com/lineage-dev/lineage/internal/testutil"
	"github.com/lineage-dev/lineage/lineage"
	"github.com/lineage-dev/lineage/policy"
)

// The batch check reads, field by field, what /proc/PID/stat shows of every
// kind of process a reaper meets: sleeping, stopped, a zombie with its exit
// status, one that ignores SIGTERM and one that catches it, one whose
// leader thread has exited while another runs on, a thread, a kernel
// thread, and a pid no process has. (Not pid 1: the reaper never looks at
// it, and on some hosts its init is hidden from BPF.) With the full program the
// kernel must take it; where it refuses (older kernels, the compat
// program), Inspect says so and reads nothing.
func TestInspectReadsWhatProcShows(t *testing.T) {
	eachVariant(t, testInspectReadsWhatProcShows)
}

func testInspectReadsWhatProcShows(t *testing.T, v loader.Variant) {
	b := openBPF(t, &Options{Variant: v})
	if ok, why := b.Inspects(); !ok {
		if v == loader.VariantFull {
			t.Fatalf("the full program loaded, the batch check did not: %s", why)
		}
		err := b.Inspect([]uint32{1}, make([]lineage.Stat, 1))
		if err == nil || !strings.Contains(err.Error(), why) {
			t.Fatalf("Inspect without the batch check: %v, want an error saying %q", err, why)
		}
		t.Logf("no batch check on this kernel: %s", why)
		return
	}
	mark := testutil.Marker(t)
	testutil.CheckNoLeaks(t, mark)

	// Each is this test's child, killed and waited for at its end: its
	// pid can't name another process before that.
	begin := func(cmd *exec.Cmd) *exec.Cmd {
		t.Helper()
		if err := cmd.Start(); err != nil {
			t.Fatalf("start %v: %v", cmd.Args, err)
		}
		t.Cleanup(func() {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		})
		return cmd
	}
	start := func(args ...string) *exec.Cmd { return begin(exec.Command(args[0], args[1:]...)) }
	state := func(pid int) string {
		st, err := proc.ReadStat("/proc", pid)
		if err != nil {
			return ""
		}
		return st.State
	}
	sleeper := start("sleep", testutil.Sleep(mark+"1"))
	stopped := start("sleep", testutil.Sleep(mark+"2"))
	if err := stopped.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	zombie := start("sh", "-c", "exit 3")
	deaf := start("sh", "-c", `trap "" TERM; exec sleep `+testutil.Sleep(mark+"3"))
	// A shell that catches TERM and has no child: it waits in read on a
	// pipe that stays open until the test ends.
	catcher := exec.Command("sh", "-c", `trap "exit 0" TERM; read x # `+mark)
	if _, err := catcher.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	begin(catcher)
	leaderless := begin(helperCmd("leader-exit-long"))
	free := freePID(t)
	thread := quietThread(t)
	testutil.Eventually(t, 10*time.Second, "each process in its state", func() bool {
		st, err := proc.ReadStat("/proc", leaderless.Process.Pid)
		return state(stopped.Process.Pid) == "T" && state(zombie.Process.Pid) == "Z" &&
			err == nil && st.State == "Z" && st.Threads > 1 && caught(catcher.Process.Pid) && ignored(deaf.Process.Pid)
	})

	for _, tc := range []struct {
		name string
		pid  int
	}{
		{"sleeping", sleeper.Process.Pid},
		{"stopped", stopped.Process.Pid},
		{"zombie", zombie.Process.Pid},
		{"ignores TERM", deaf.Process.Pid},
		{"catches TERM", catcher.Process.Pid},
		{"leader exited", leaderless.Process.Pid},
		{"a thread", thread},
		{"kernel thread", 2},
		{"free pid", free},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want, got := agreeWithProc(t, b, tc.pid)
			if got != want {
				t.Errorf("pid %d:\ninspect %#v\n/proc   %#v", tc.pid, got, want)
			}
		})
	}
	if st, _ := agreeWithProc(t, b, zombie.Process.Pid); st.ExitCode != 3<<8 {
		t.Errorf("zombie's exit status %#x, want %#x", st.ExitCode, 3<<8)
	}
	if st, _ := agreeWithProc(t, b, deaf.Process.Pid); !st.Ignores(syscall.SIGTERM) {
		t.Errorf("a process that ignores SIGTERM: SigIgnore %#x", st.SigIgnore)
	}
}

// agreeWithProc reads pid's stat from /proc, then through b, then from
// /proc again, until both /proc reads agree (a running process changes
// between reads), and returns the /proc read and b's. A pid with no process
// is the zero Stat in both.
func agreeWithProc(t *testing.T, b *Tracker, pid int) (fromProc, inspected lineage.Stat) {
	t.Helper()
	read := func() lineage.Stat {
		st, err := proc.ReadStat("/proc", pid)
		if errors.Is(err, lineage.ErrNoProcess) {
			return lineage.Stat{}
		}
		if err != nil {
			t.Fatalf("read /proc: %v", err)
		}
		st.PGRP, st.Session, st.ArgEnd = 0, 0, 0 // not inspected
		return st
	}
	out := make([]lineage.Stat, 1)
	for range 50 {
		before := read()
		if err := b.Inspect([]uint32{uint32(pid)}, out); err != nil {
			t.Fatalf("Inspect: %v", err)
		}
		if after := read(); after == before {
			return before, out[0]
		}
	}
	t.Fatalf("pid %d changed between every two reads of /proc", pid)
	return
}

// caught and ignored say whether /proc shows pid catching or ignoring SIGTERM.
func caught(pid int) bool {
	st, err := proc.ReadStat("/proc", pid)
	return err == nil && st.Catches(syscall.SIGTERM)
}

func ignored(pid int) bool {
	st, err := proc.ReadStat("/proc", pid)
	return err == nil && st.Ignores(syscall.SIGTERM)
}

// freePID is a pid that names no process now, from the top of the range.
func freePID(t *testing.T) int {
	top, err := proc.PIDMax("/proc")
	if err != nil {
		t.Fatal(err)
	}
	for pid := int(top) - 1; pid > int(top)-1000; pid-- {
		if _, err := os.Stat(filepath.Join("/proc", strconv.Itoa(pid))); os.IsNotExist(err) {
			return pid
		}
	}
	t.Fatal("no free pid near pid_max")
	return 0
}

// quietThread is the id of a thread of this process, not its leader, that
// sleeps in a system call until the test ends.
func quietThread(t *testing.T) int {
	var fds [2]int
	if err := syscall.Pipe2(fds[:], syscall.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	tid := make(chan int)
	done := make(chan struct{})
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		tid <- syscall.Gettid()
		var b [1]byte
		_, _ = syscall.Read(fds[0], b[:])
		close(done)
	}()
	id := <-tid
	t.Cleanup(func() {
		_ = syscall.Close(fds[1])
		<-done
		_ = syscall.Close(fds[0])
	})
	testutil.Eventually(t, 5*time.Second, "the thread asleep in read", func() bool {
		b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(os.Getpid()), "task", strconv.Itoa(id), "stat"))
		return err == nil && strings.Contains(string(b), ") S ")
	})
	return id
}

// The batch signal sends each identity its signal only while the pid still
// names it: a sleeper and a process whose leader thread exited (through a
// live thread) get it and die; a stale start time, a free pid, a zombie
// and a kernel thread get nothing, each with its own error; and with the
// signals bounded by another user, a process that user could not signal
// gets nothing either.
func TestSignalBatchSignalsOnlyTheIdentity(t *testing.T) {
	b := openBPF(t, &Options{Variant: loader.VariantFull})
	if ok, why := b.Signals(); !ok {
		t.Fatalf("the full program loaded, the batch signal did not: %s", why)
	}
	mark := testutil.Marker(t)
	testutil.CheckNoLeaks(t, mark)
	begin := func(cmd *exec.Cmd) *exec.Cmd {
		t.Helper()
		if err := cmd.Start(); err != nil {
			t.Fatalf("start %v: %v", cmd.Args, err)
		}
		t.Cleanup(func() {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		})
		return cmd
	}
	identity := func(cmd *exec.Cmd) lineage.Identity {
		t.Helper()
		st, err := proc.ReadStat("/proc", cmd.Process.Pid)
		if err != nil {
			t.Fatal(err)
		}
		return st.Identity
	}
	sleepers := []*exec.Cmd{
		begin(exec.Command("sleep", testutil.Sleep(mark+"1"))),
		begin(exec.Command("sleep", testutil.Sleep(mark+"2"))),
	}
	stranger := begin(exec.Command("sleep", testutil.Sleep(mark+"3")))
	zombie := begin(exec.Command("sh", "-c", "exit 3"))
	leaderless := begin(helperCmd("leader-exit-long"))
	testutil.Eventually(t, 10*time.Second, "a zombie and a process whose leader exited", func() bool {
		z, err1 := proc.ReadStat("/proc", zombie.Process.Pid)
		l, err2 := proc.ReadStat("/proc", leaderless.Process.Pid)
		return err1 == nil && z.State == "Z" && err2 == nil && l.State == "Z" && l.Threads > 1
	})
	kthreadd, err := proc.ReadStat("/proc", 2)
	if err != nil {
		t.Fatal(err)
	}
	stale := identity(stranger)
	stale.StartTicks++
	ids := []lineage.Identity{identity(sleepers[0]), identity(sleepers[1]), identity(leaderless), stale,
		{PID: uint32(freePID(t)), StartTicks: 1}, identity(zombie), kthreadd.Identity}
	sigs := make([]syscall.Signal, len(ids))
	for i := range sigs {
		sigs[i] = syscall.SIGTERM
	}
	before, errs := make([]lineage.Stat, len(ids)), make([]error, len(ids))
	if err := b.SignalBatch(ids, sigs, before, errs); err != nil {
		t.Fatal(err)
	}
	for i, want := range []error{nil, nil, nil, lineage.ErrIdentityMismatch, lineage.ErrNoProcess, lineage.ErrNoProcess, syscall.EPERM} {
		if (want == nil) != (errs[i] == nil) || (want != nil && !errors.Is(errs[i], want)) {
			t.Errorf("%s: %v, want %v", ids[i], errs[i], want)
		}
	}
	if before[0].Identity != ids[0] || before[0].State != "S" || before[0].Comm != "sleep" {
		t.Errorf("the stat before the signal: %#v", before[0])
	}
	for _, cmd := range append(sleepers, leaderless) {
		var ws syscall.WaitStatus
		if _, err := syscall.Wait4(cmd.Process.Pid, &ws, 0, nil); err != nil || !ws.Signaled() || ws.Signal() != syscall.SIGTERM {
			t.Errorf("pid %d: %v, wait status %v; want killed by TERM", cmd.Process.Pid, err, ws)
		}
	}
	if !testutil.Alive(int(stranger.Process.Pid), identity(stranger).StartTicks) {
		t.Error("the process behind a stale identity was signalled")
	}

	bounded := openBPF(t, &Options{Variant: loader.VariantFull, KillUser: &policy.KillUser{Real: 65534, Effective: 65534}})
	mine := identity(stranger)
	if err := bounded.SignalBatch([]lineage.Identity{mine}, []syscall.Signal{syscall.SIGTERM}, before[:1], errs[:1]); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(errs[0], syscall.EACCES) || !testutil.Alive(stranger.Process.Pid, mine.StartTicks) {
		t.Errorf("root's process signalled for uid 65534: %v", errs[0])
	}
}
