package bpf

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/lineage-dev/lineage/internal/loader"
	"github.com/lineage-dev/lineage/internal/testutil"
)

// The test binary doubles as the helper programs the BPF tests need: run
// with helperEnv set, TestMain runs the named helper instead of the tests.
const helperEnv = "LINEAGE_LOADER_TEST_HELPER"

// helperVariantEnv names the program variant the supervisor helper loads.
const helperVariantEnv = "LINEAGE_LOADER_TEST_VARIANT"

func init() {
	switch os.Getenv(helperEnv) {
	case "leader-exit", "thread-fork", "leader-exit-long":
		// Keep the main goroutine on the main thread (the thread-group
		// leader): the helper can end that thread alone, and other
		// goroutines run on other threads.
		runtime.LockOSThread()
	}
}

func TestMain(m *testing.M) {
	if name := os.Getenv(helperEnv); name != "" {
		os.Exit(runHelper(name, os.Args))
	}
	if os.Getenv(tracefsEnv) == "1" {
		// A rerun of one test in a mount namespace of its own
		// (rerunWithTracefs): tracefs is mounted here alone.
		if err := mountTracefs(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	os.Exit(m.Run())
}

func runHelper(name string, args []string) int {
	arg := ""
	if len(args) > 1 {
		arg = args[len(args)-1]
	}
	switch name {
	case "leader-exit":
		// The leader thread exits on its own; another thread runs on,
		// forks a child, and ends the process with exit_group(3).
		go func() {
			time.Sleep(300 * time.Millisecond)
			cmd := exec.Command("sleep", arg)
			if err := cmd.Start(); err == nil {
				fmt.Printf("child %d\n", cmd.Process.Pid)
			}
			time.Sleep(700 * time.Millisecond)
			os.Exit(3)
		}()
		syscall.RawSyscall(syscall.SYS_EXIT, 0, 0, 0)
		return 1 // not reached
	case "thread-fork":
		// Fork from a thread that is not the leader.
		done := make(chan int)
		go func() {
			runtime.LockOSThread()
			cmd := exec.Command("sleep", arg)
			if err := cmd.Start(); err != nil {
				done <- 0
				return
			}
			fmt.Printf("child %d tid %d\n", cmd.Process.Pid, syscall.Gettid())
			done <- cmd.Process.Pid
			_ = cmd.Wait()
		}()
		if <-done == 0 {
			return 1
		}
		time.Sleep(60 * time.Second)
		return 0
	case "supervisor":
		return runSupervisor(arg)
	case "spare-supervisor", "leader-supervisor", "uid-supervisor":
		return runSupervisorOf(name, arg)
	case "leader-exit-long":
		// The leader thread exits; another thread runs on, for a finite
		// while.
		go func() {
			time.Sleep(90 * time.Second)
			os.Exit(3)
		}()
		syscall.RawSyscall(syscall.SYS_EXIT, 0, 0, 0)
		return 1 // not reached
	}
	fmt.Fprintf(os.Stderr, "unknown helper %q\n", name)
	return 2
}

// supervisedSleepers is how many sleepers the supervisor's job leaves.
const supervisedSleepers = 300

// runSupervisor loads the tracker, spawns a leaky job that asks to die with
// its supervisor, prints the job's members once they are all there, and
// waits to be killed.
func runSupervisor(sleepArg string) int {
	b, err := Open(&Options{Variant: loader.Variant(os.Getenv(helperVariantEnv))})
	if err != nil {
		fmt.Printf("error %v\n", err)
		return 1
	}

	// Three escapes, and enough plain sleepers that the kernel must send
	// many kills in a row.
	script := fmt.Sprintf(`setsid sleep %[1]s & (sleep %[1]s &) & nohup sleep %[1]s >/dev/null 2>&1 &
i=0; while [ $i -lt %[2]d ]; do sleep %[1]s & i=$((i+1)); done; echo started`, sleepArg, supervisedSleepers-3)
	cmd := exec.Command("sh", "-c", script)
	root, err := b.Spawn(cmd, loader.RootOptions{DieWithSupervisor: true})
	if err != nil {
		fmt.Printf("error %v\n", err)
		return 1
	}
	_ = cmd.Wait()
	// The root exited; wait for all its sleepers.
	for i := 0; i < 1500; i++ {
		ms, _ := b.Members(root)
		sleeping := sleeperPIDs(sleepArg)
		n := 0
		for _, m := range ms {
			if sleeping[int(m.PID)] {
				n++
			}
		}
		if n == supervisedSleepers {
			for _, m := range ms {
				if sleeping[int(m.PID)] {
					fmt.Printf("member %d %d\n", m.PID, m.StartTicks)
				}
			}
			fmt.Println("ready")
			time.Sleep(60 * time.Second)
			// The tracker must stay reachable: its file descriptors
			// close when the garbage collector finalizes it.
			runtime.KeepAlive(b)
			return 0
		}
		time.Sleep(10 * time.Millisecond)
	}
	fmt.Println("error members never appeared")
	return 1
}

// sleeperPIDs returns the pids of the live sleepers carrying token.
func sleeperPIDs(token string) map[int]bool {
	out := make(map[int]bool)
	for _, p := range testutil.Sleepers(token) {
		out[p.PID] = true
	}
	return out
}

// helperCmd returns a command that runs the named helper.
func helperCmd(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], append([]string{"-test.run=^$"}, args...)...)
	cmd.Env = append(os.Environ(), helperEnv+"="+name)
	return cmd
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}
