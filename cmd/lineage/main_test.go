package main

import (
	"os"
	"os/exec"
	"runtime"
	"syscall"
	"testing"
	"time"
)

// The test binary doubles as the lineage binary and as the helper programs
// the end-to-end tests need, selected by this environment variable.
const testModeEnv = "LINEAGE_CMD_TEST_MODE"

func init() {
	if os.Getenv(testModeEnv) == "leader-exit" {
		// The main goroutine stays on the leader thread so that it can
		// end that thread alone.
		runtime.LockOSThread()
	}
}

func TestMain(m *testing.M) {
	if len(os.Args) == 3 && os.Args[1] == announceArg {
		// A kept program (a copy of this binary) that says it runs as
		// its first act; any environment, lineage's included.
		announce()
	}
	if len(os.Args) == 2 && os.Args[1] == guardianCommand {
		// lineage run's guardian, started with an empty environment.
		os.Exit(execute(os.Args[1:]))
	}
	switch mode := os.Getenv(testModeEnv); mode {
	case "":
		code := m.Run()
		removeVenv()
		os.Exit(code)
	case "lineage":
		os.Exit(execute(os.Args[1:]))
	case "agent-host":
		os.Exit(agentHost())
	case "leader-exit":
		// The leader thread exits; another thread runs on, for a finite
		// time, as every test process does.
		go func() {
			time.Sleep(90 * time.Second)
			os.Exit(0)
		}()
		syscall.RawSyscall(syscall.SYS_EXIT, 0, 0, 0)
	case modeCloneParent, modeVfork, modeThreadFork:
		os.Exit(forkHelper(mode))
	}
	os.Exit(2)
}

// lineageCmd returns a command that runs this test binary as lineage. Its
// socket is nowhere unless the test names one (a later LINEAGE_SOCKET in
// Env wins), so that a daemon on this host never serves a test's run.
func lineageCmd(args ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), testModeEnv+"=lineage", noDaemonEnv)
	return cmd
}

// noDaemonEnv points lineage at a socket no daemon listens on.
const noDaemonEnv = "LINEAGE_SOCKET=/nonexistent/lineage-test.sock"
