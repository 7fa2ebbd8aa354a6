// Package e2e drives lineage's two built binaries, the front (lineage)
// and the tracker beside it (lineage-tracker), from outside, as a user
// does: real jobs, real daemons, real BPF, bystanders that must survive,
// and a leak check on every test. TestMain builds both binaries once (with
// the race detector when the tests have it), or takes them from
// $LINEAGE_E2E_BIN (a directory holding both: the kernel matrix's static
// ones). The test binary doubles as the helper programs the tests run,
// selected by testModeEnv.
package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
	"time"
)

// testModeEnv selects the helper program the test binary runs instead of
// the tests.
const testModeEnv = "LINEAGE_CMD_TEST_MODE"

// binEnv names a directory holding lineage and lineage-tracker, built
// already; unset, TestMain builds them.
const binEnv = "LINEAGE_E2E_BIN"

// frontBin and trackerBin are the binaries under test, side by side.
var frontBin, trackerBin string

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
		// its first act, in any environment.
		announce()
	}
	switch mode := os.Getenv(testModeEnv); mode {
	case "":
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
	default:
		os.Exit(2)
	}
	dir, built, err := binaries()
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: %v\n", err)
		os.Exit(1)
	}
	frontBin, trackerBin = filepath.Join(dir, "lineage"), filepath.Join(dir, "lineage-tracker")
	code := m.Run()
	removeVenv()
	if built {
		os.RemoveAll(dir)
	}
	os.Exit(code)
}

// binaries returns the directory of the binaries under test, and whether
// it built them there (and so owns the directory).
func binaries() (string, bool, error) {
	if dir := os.Getenv(binEnv); dir != "" {
		for _, name := range []string{"lineage", "lineage-tracker"} {
			if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
				return "", false, fmt.Errorf("$%s: %w", binEnv, err)
			}
		}
		return dir, false, nil
	}
	gotool, err := exec.LookPath("go")
	if err != nil {
		gotool = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	dir, err := os.MkdirTemp("", "lineage-e2e-bin")
	if err != nil {
		return "", false, err
	}
	args := []string{"build"}
	if raceEnabled {
		args = append(args, "-race")
	}
	for _, b := range []struct{ out, pkg string }{{"lineage", "./cmd/lineage"}, {"lineage-tracker", "./cmd/lineage-tracker"}} {
		cmd := exec.Command(gotool, append(args, "-o", filepath.Join(dir, b.out), b.pkg)...)
		cmd.Dir = filepath.Join("..", "..")
		if out, err := cmd.CombinedOutput(); err != nil {
			os.RemoveAll(dir)
			return "", false, fmt.Errorf("go build %s: %v\n%s", b.pkg, err, out)
		}
	}
	return dir, true, nil
}

// lineageCmd returns a command that runs the front with args. Its socket
// is nowhere unless the test names one (a later LINEAGE_SOCKET in Env
// wins), so that a daemon on this host never serves a test's run.
func lineageCmd(args ...string) *exec.Cmd {
	cmd := exec.Command(frontBin, args...)
	cmd.Env = append(os.Environ(), noDaemonEnv)
	return cmd
}

// noDaemonEnv points lineage at a socket no daemon listens on.
const noDaemonEnv = "LINEAGE_SOCKET=/nonexistent/lineage-test.sock"
