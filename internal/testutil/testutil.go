// Package testutil holds what lineage's tests share: the rule that decides
// whether a BPF test may skip, and a guard that fails a test which leaves a
// process behind.
//
// Processes are found and signalled by identity only (pid and start time,
// checked through a pidfd), never by name or by process group.
package testutil

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// RequireBPFEnv is the environment variable that turns BPF skips into
// failures: .ci/run and Dockerfile.test set it where the kernel can load BPF.
const RequireBPFEnv = "LINEAGE_REQUIRE_BPF"

// SkipWithoutBPF skips tb when err says BPF can't load here, unless
// LINEAGE_REQUIRE_BPF=1, in which case it fails: CI can't pass by skipping.
func SkipWithoutBPF(tb testing.TB, err error) {
	tb.Helper()
	if err == nil {
		return
	}
	if os.Getenv(RequireBPFEnv) == "1" {
		tb.Fatalf("BPF is required (%s=1) but can't load: %v", RequireBPFEnv, err)
	}
	tb.Skipf("BPF can't load here: %v", err)
}

// Marker returns a token unique to this test run, to put in the argv of every
// process a test starts (for example as a sleep duration, "60.<marker>"), so
// that a leak check can find them however they were reparented or renamed.
func Marker(tb testing.TB) string {
	tb.Helper()
	return fmt.Sprintf("%d%06d", os.Getpid()%100000, time.Now().UnixNano()%1000000)
}

// Sleep returns a sleep(1) duration argument, finite (at most about two
// minutes: every test process has a finite lifetime) and carrying marker.
func Sleep(marker string) string {
	return "97." + marker
}

// LongSleep is [Sleep] for a bystander that must outlive a long test (one
// that runs for minutes on a loaded machine): at most about five minutes.
func LongSleep(marker string) string {
	return "297." + marker
}

// Proc is a process found by Find.
type Proc struct {
	PID        int
	StartTicks uint64
	Argv       []string
}

// Find returns the live processes (zombies excluded) whose command line
// contains token.
func Find(token string) []Proc {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []Proc
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		raw := cmdline(e.Name())
		if !bytes.Contains(raw, []byte(token)) {
			continue
		}
		start, state, err := StartTicks(pid)
		if err != nil || state == "Z" || state == "X" {
			continue
		}
		argv := strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00")
		out = append(out, Proc{PID: pid, StartTicks: start, Argv: argv})
	}
	return out
}

// cmdline reads /proc/PID/cmdline, or, when the leader thread has exited
// while others run on (it reads empty then), a live thread's.
func cmdline(pid string) []byte {
	raw, _ := os.ReadFile(filepath.Join("/proc", pid, "cmdline"))
	if len(raw) > 0 {
		return raw
	}
	tasks, _ := os.ReadDir(filepath.Join("/proc", pid, "task"))
	for _, t := range tasks {
		if raw, _ := os.ReadFile(filepath.Join("/proc", pid, "task", t.Name(), "cmdline")); len(raw) > 0 {
			return raw
		}
	}
	return nil
}

// StartTicks reads field 22 (start time) and field 3 (state) of
// /proc/PID/stat, parsed by hand so tests don't share the product's parser.
// The state is "Z+" for a process whose leader thread is a zombie while
// other threads run (field 20 counts more than one thread).
func StartTicks(pid int) (uint64, string, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, "", err
	}
	s := string(raw)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, "", errors.New("malformed stat")
	}
	fields := strings.Fields(s[i+1:])
	// fields[0] is field 3 (state); field 22 is fields[19].
	if len(fields) < 20 {
		return 0, "", errors.New("short stat")
	}
	start, err := strconv.ParseUint(fields[19], 10, 64)
	state := fields[0]
	if threads, _ := strconv.Atoi(fields[17]); state == "Z" && threads > 1 {
		// The leader thread is a zombie but other threads run on: the
		// process lives.
		state = "Z+"
	}
	return start, state, err
}

// KillIdentity sends SIGKILL to pid through a pidfd if, and only if, it is
// still the process that started at start. It reports whether it sent.
func KillIdentity(pid int, start uint64) bool {
	if pid <= 1 || pid == os.Getpid() {
		return false
	}
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	got, _, err := StartTicks(pid)
	if err != nil || got != start {
		return false
	}
	return unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0) == nil
}

// CheckNoLeaks registers a cleanup that fails tb if any live process still
// carries token once the test is over, and kills those it finds (by
// identity) so that one failure does not leak into the next test.
func CheckNoLeaks(tb testing.TB, token string) {
	tb.Helper()
	tb.Cleanup(func() {
		// Processes being killed may take a moment to disappear.
		deadline := time.Now().Add(3 * time.Second)
		var left []Proc
		for {
			left = Find(token)
			if len(left) == 0 || time.Now().After(deadline) {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		for _, p := range left {
			tb.Errorf("leaked process %d (start %d): %q", p.PID, p.StartTicks, p.Argv)
			KillIdentity(p.PID, p.StartTicks)
		}
	})
}

// KillAtCleanup registers a cleanup that kills, by identity, every live
// process that carries token once the test is over: the test's own
// processes, named by the token only it hands out.
func KillAtCleanup(tb testing.TB, token string) {
	tb.Helper()
	tb.Cleanup(func() {
		for _, p := range Find(token) {
			KillIdentity(p.PID, p.StartTicks)
		}
	})
}

// WaitGone waits until the process (pid, start) is gone (or a zombie), up to
// timeout, and reports whether it is.
func WaitGone(pid int, start uint64, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for {
		got, state, err := StartTicks(pid)
		if err != nil || got != start || state == "Z" || state == "X" {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Alive reports whether (pid, start) is a live, non-zombie process.
func Alive(pid int, start uint64) bool {
	got, state, err := StartTicks(pid)
	return err == nil && got == start && state != "Z" && state != "X"
}

// Sleepers returns the live sleep(1) processes carrying token: argv[0] is
// "sleep", or starts with "marked-" for a sleep renamed with `exec -a`. A
// shell whose script will start a sleeper carries the token too, and is
// not one.
func Sleepers(token string) []Proc {
	var out []Proc
	for _, p := range Find(token) {
		if len(p.Argv) > 0 && (p.Argv[0] == "sleep" || strings.HasPrefix(p.Argv[0], "marked-")) {
			out = append(out, p)
		}
	}
	return out
}

// RequireToolsEnv is the environment variable that turns a missing tool's
// skip into a failure (set by .ci/run, which installs every tool the tests
// use).
const RequireToolsEnv = "LINEAGE_REQUIRE_TOOLS"

// LookTool returns the path of the program name, or skips the test when it
// is not installed, unless LINEAGE_REQUIRE_TOOLS=1, in which case it fails:
// CI can't pass by skipping.
func LookTool(tb testing.TB, name string) string {
	tb.Helper()
	path, err := exec.LookPath(name)
	if err == nil {
		return path
	}
	if os.Getenv(RequireToolsEnv) == "1" {
		tb.Fatalf("%s is required (%s=1) but not installed: %v", name, RequireToolsEnv, err)
	}
	tb.Skipf("%s not installed (apt-get install -y %s)", name, name)
	return ""
}
