package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lineage-dev/lineage/internal/loader"
	"github.com/lineage-dev/lineage/internal/testutil"
	"github.com/lineage-dev/lineage/lineage"
)

func TestRunExitStatus(t *testing.T) {
	mark := testutil.Marker(t)
	testutil.CheckNoLeaks(t, mark)
	dir := t.TempDir()
	notExec := filepath.Join(dir, "not-executable")
	if err := os.WriteFile(notExec, []byte("#!/bin/sh\nexit 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		args []string
		want int
	}{
		{"own status passes through", []string{"--", "sh", "-c", "exit 7"}, 7},
		{"success", []string{"--", "true"}, 0},
		{"killed by a signal", []string{"--", "sh", "-c", "kill -KILL $$"}, 128 + 9},
		{"deadline", []string{"--deadline", "300ms", "--", "sleep", testutil.Sleep(mark)}, 124},
		{"not found", []string{"--", "no-such-command-" + mark}, 127},
		{"not executable", []string{"--", notExec}, 126},
	}
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			env := v.setup(t)
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) {
					res := runJob(t, mark, env, append([]string{"--backend", v.backend}, c.args...)...)
					if res.code != c.want {
						t.Errorf("exit status %d, want %d; stderr:\n%s", res.code, c.want, res.stderr)
					}
				})
			}
		})
	}
}

func TestRunDeadlineKillsTheJobAndItsLineage(t *testing.T) {
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			env := v.setup(t)
			mark := testutil.Marker(t)
			testutil.CheckNoLeaks(t, mark)
			s := testutil.Sleep(mark)
			res := runJob(t, mark, env, "--backend", v.backend, "--deadline", "1s", "--",
				// The root never ends by itself: its children may be killed
				// at birth while it is reaped.
				"sh", "-c", fmt.Sprintf("setsid sleep %[1]s & trap '' TERM; while :; do sleep %[1]s; done", s))
			if res.code != lineage.ExitDeadline {
				t.Fatalf("exit status %d, want %d; stderr:\n%s", res.code, lineage.ExitDeadline, res.stderr)
			}
			if !res.report.Deadline {
				t.Error("report does not say the deadline passed")
			}
			root := false
			for _, o := range res.report.Reap.Outcomes {
				if o.Member.Identity == res.report.Root {
					root = true
					if o.Result != lineage.Killed {
						t.Errorf("the TERM-ignoring job ended as %s, want killed", o.Result)
					}
				}
			}
			if !root {
				t.Error("the job itself is not in the reap's outcomes")
			}
			if !strings.Contains(res.stderr, "deadline") {
				t.Errorf("stderr does not mention the deadline:\n%s", res.stderr)
			}
		})
	}
}

func TestRunPassesSignalsOnThenReaps(t *testing.T) {
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			env := v.setup(t)
			mark := testutil.Marker(t)
			testutil.CheckNoLeaks(t, mark)
			s := testutil.Sleep(mark)
			var stderr bytes.Buffer
			cmd := startUntilReadyWith(t, func(cmd *exec.Cmd) {
				cmd.Stderr = &stderr
				cmd.Env = append(cmd.Env, env...)
			}, "run", "--backend", v.backend, "--grace", "1s", "--", "sh", "-c",
				fmt.Sprintf("setsid sleep %[1]s & echo ready; sleep %[1]s", s))
			sleepersOf(t, s, 2)
			if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			err := cmd.Wait()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 128+int(syscall.SIGTERM) {
				t.Fatalf("lineage ended with %v, want exit %d (the job died of the TERM passed on); stderr:\n%s", err, 128+15, stderr.String())
			}
			if left := testutil.Find(mark); len(left) != 0 {
				t.Errorf("left alive: %v", left)
			}
		})
	}
}

// A SIGINT sent to lineage by its pid reaches the job's process group, as
// Ctrl-C in a terminal does: a shell waiting for its foreground child
// exits once the child dies of it, and lineage exits 130 at once, not
// after the grace. Where the kernel can't signal a group through a pidfd
// (before 6.9), the root alone gets it; the shell then outlives the
// grace, and the report says that the reap ended it.
func TestRunPassesSIGINTToTheJobsGroup(t *testing.T) {
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			env := v.setup(t)
			grouped := groupSignalsThroughPidfds(t)
			for _, c := range []struct {
				name, trap string
				reached    bool          // the INT can end the job by itself
				grace      time.Duration // lineage's wait for the root after it
			}{
				// Long enough that the INT, not the grace, must be what
				// ended the job, where it can.
				{"obeyed", "", grouped, map[bool]time.Duration{true: 10 * time.Second, false: time.Second}[grouped]},
				{"ignored", `trap "" INT; `, false, time.Second},
			} {
				t.Run(c.name, func(t *testing.T) {
					mark := testutil.Marker(t)
					testutil.CheckNoLeaks(t, mark)
					s := testutil.Sleep(mark)
					reportPath := filepath.Join(t.TempDir(), "report.json")
					var stderr bytes.Buffer
					cmd := startUntilReadyWith(t, func(cmd *exec.Cmd) {
						cmd.Stderr = &stderr
						cmd.Env = append(cmd.Env, env...)
					}, "run", "--backend", v.backend, "--grace", c.grace.String(), "--report", reportPath, "--", "sh", "-c",
						fmt.Sprintf("%[2]ssetsid sleep %[1]s & echo ready; sleep %[1]s", s, c.trap))
					sleepersOf(t, s, 2)
					start := time.Now()
					if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
						t.Fatal(err)
					}
					err := cmd.Wait()
					took := time.Since(start)
					var ee *exec.ExitError
					if !errors.As(err, &ee) {
						t.Fatalf("lineage ended with %v; stderr:\n%s", err, stderr.String())
					}
					var rep struct {
						Decision    string `json:"decision"`
						Interrupted string `json:"interrupted"`
					}
					raw, rerr := os.ReadFile(reportPath)
					if rerr != nil {
						t.Fatal(rerr)
					}
					if err := json.Unmarshal(raw, &rep); err != nil {
						t.Fatal(err)
					}
					if rep.Interrupted != "INT" {
						t.Errorf("report: interrupted %q, want INT", rep.Interrupted)
					}
					if c.reached {
						if ee.ExitCode() != 128+int(syscall.SIGINT) || took >= c.grace {
							t.Errorf("lineage exited %d after %v, want 130 before the grace of %v; stderr:\n%s", ee.ExitCode(), took, c.grace, stderr.String())
						}
						if rep.Decision != "reap: the root exited" {
							t.Errorf("report: decision %q, want the root's exit", rep.Decision)
						}
					} else {
						// The reap's TERM ends the root; a shell that had the
						// INT pending dies of it once its child is gone.
						if code := ee.ExitCode(); (code != 128+int(syscall.SIGTERM) && (c.trap != "" || code != 128+int(syscall.SIGINT))) || took < c.grace {
							t.Errorf("lineage exited %d after %v, want 143 (the reap's TERM), or 130 (the INT pending), after the grace of %v; stderr:\n%s", code, took, c.grace, stderr.String())
						}
						if want := "reap: the root had not exited within the grace after SIGINT was passed on"; rep.Decision != want || !strings.Contains(stderr.String(), want) {
							t.Errorf("report: decision %q, want %q; stderr:\n%s", rep.Decision, want, stderr.String())
						}
					}
					if left := testutil.Find(mark); len(left) != 0 {
						t.Errorf("left alive: %v", left)
					}
				})
			}
		})
	}
}

// groupSignalsThroughPidfds reports whether this kernel signals a process
// group through a pidfd (PIDFD_SIGNAL_PROCESS_GROUP, Linux 6.9), asked
// with signal 0 of a child of the test's own, in a group of its own.
func groupSignalsThroughPidfds(t *testing.T) bool {
	t.Helper()
	child := exec.Command("sleep", "10")
	child.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = child.Process.Kill(); _ = child.Wait() }()
	fd, err := unix.PidfdOpen(child.Process.Pid, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	err = unix.PidfdSendSignal(fd, 0, nil, unix.PIDFD_SIGNAL_PROCESS_GROUP)
	if err != nil && !errors.Is(err, unix.EINVAL) {
		t.Fatalf("pidfd_send_signal to a group: %v", err)
	}
	return err == nil
}

func TestRunCatchesAForkInTheJobsFirstInstruction(t *testing.T) {
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			env := v.setup(t)
			mark := testutil.Marker(t)
			testutil.CheckNoLeaks(t, mark)
			// setsid -f forks at once and its parent exits: the daemon is
			// born before any poll could see the job.
			res := runJob(t, mark, env, "--backend", v.backend, "--", "setsid", "-f", "sleep", testutil.Sleep(mark))
			if res.code != 0 {
				t.Errorf("exit status %d; stderr:\n%s", res.code, res.stderr)
			}
			if res.report != nil {
				v.check(t, res.report)
			}
			if got := markedOutcomes(res, mark); got != 1 {
				t.Errorf("%d marked processes reaped, want the setsid daemon; stderr:\n%s", got, res.stderr)
			}
		})
	}
}

func TestRunLineageDiesWithLineageSIGKILLed(t *testing.T) {
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			requireBackend(t, backend)
			mark := testutil.Marker(t)
			testutil.CheckNoLeaks(t, mark)
			s, w := testutil.Sleep(mark), testutil.Sleep(mark+"7")
			// The job leaves three sleepers (setsid, an orphan, nohup),
			// then waits for the test's word on its stdin to fork a
			// witness (an orphan too) and a fourth sleeper.
			release, word, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { word.Close() })
			// --interval: lineage must have seen the orphan before it dies.
			cmd := startUntilReadyWith(t, func(cmd *exec.Cmd) { cmd.Stdin = release }, "run", "--backend", backend, "--interval", "20ms", "--", "sh", "-c",
				fmt.Sprintf("setsid sleep %[1]s & (sleep %[1]s &) & nohup sleep %[1]s >/dev/null 2>&1 & echo ready; read x; (sleep %[2]s &); sleep %[1]s", s, w))
			release.Close()
			first := sleepersOf(t, s, 3)
			if backend == loader.BackendProc {
				// The guardian learns of the orphan only from lineage,
				// once a scan has seen it and published what it saw.
				polled(t, cmd.Process.Pid, first...)
			}
			if _, err := word.WriteString("go\n"); err != nil {
				t.Fatal(err)
			}
			sleepersOf(t, s, 4)
			witness := sleepersOf(t, w, 1)[0]
			if backend == loader.BackendProc {
				scannedSince(t, cmd.Process.Pid, witness)
			}
			// A CI runner's hard cancel.
			if err := cmd.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			_ = cmd.Wait()
			// The kernel (bpf) or the guardian (proc) ends the lineage.
			if !testutil.Until(30*time.Second, func() bool { return len(testutil.Sleepers(mark)) == 0 }) {
				left := testutil.Sleepers(mark)
				t.Errorf("the lineage outlived lineage's SIGKILL: %v", left)
				for _, p := range left {
					testutil.KillIdentity(p.PID, p.StartTicks)
				}
			}
		})
	}
}

func TestRunKeepOnAbortLeavesTheLineage(t *testing.T) {
	requireBackend(t, loader.BackendBPF)
	mark := testutil.Marker(t)
	testutil.CheckNoLeaks(t, mark)
	// A control run of the same job without --keep-on-abort, SIGKILLed
	// right after: once its lineage is gone, whatever ends a lineage when
	// lineage dies has had its time with the one that asked to be left.
	job := func(s string) []string {
		return []string{"--", "sh", "-c", fmt.Sprintf("setsid sleep %[1]s & echo ready; sleep %[1]s", s)}
	}
	s, c := testutil.Sleep(mark), testutil.Sleep(mark+"1")
	cmd := startUntilReady(t, nil, append([]string{"run", "--backend", "bpf", "--keep-on-abort"}, job(s)...)...)
	control := startUntilReady(t, nil, append([]string{"run", "--backend", "bpf"}, job(c)...)...)
	sleepersOf(t, s, 2)
	sleepersOf(t, c, 2)
	for _, run := range []*exec.Cmd{cmd, control} {
		_ = run.Process.Kill()
		_ = run.Wait()
	}
	sleepersOf(t, c, 0)
	left := sleeping(s)
	if len(left) != 2 {
		t.Errorf("with --keep-on-abort, %d sleepers are left, want both", len(left))
	}
	for _, p := range left {
		testutil.KillIdentity(p.PID, p.StartTicks)
	}
}

func TestRunReapingOffAndKeepOnlyReport(t *testing.T) {
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			daemonEnv := v.setup(t)
			backend := v.backend
			for _, c := range []struct {
				name string
				env  []string
				args []string
			}{
				{"LINEAGE_REAPING=off", []string{"LINEAGE_REAPING=off"}, nil},
				{"env wins over --reaping on", []string{"LINEAGE_REAPING=off"}, []string{"--reaping", "on"}},
				{"--reaping off", nil, []string{"--reaping", "off"}},
			} {
				t.Run(c.name, func(t *testing.T) {
					mark := testutil.Marker(t)
					s := testutil.Sleep(mark)
					t.Cleanup(func() {
						for _, p := range testutil.Find(mark) {
							testutil.KillIdentity(p.PID, p.StartTicks)
						}
					})
					args := append([]string{"run", "--backend", backend}, c.args...)
					// The leftover must not hold lineage's output open.
					args = append(args, "--", "sh", "-c", "setsid sleep "+s+" >/dev/null 2>&1 & sleep 0.3")
					cmd := lineageCmd(args...)
					cmd.Env = append(append(cmd.Env, daemonEnv...), c.env...)
					outb, err := cmd.CombinedOutput()
					if err != nil {
						t.Fatalf("%v: %s", err, outb)
					}
					left := testutil.Sleepers(mark)
					if len(left) != 1 {
						t.Fatalf("%d sleepers left, want the one that was only reported; output:\n%s", len(left), outb)
					}
					if !strings.Contains(string(outb), "not killed") || !strings.Contains(string(outb), "reaping is off") {
						t.Errorf("output does not say the leftover was only reported:\n%s", outb)
					}
				})
			}
			t.Run("--keep exe", func(t *testing.T) {
				mark := testutil.Marker(t)
				s := testutil.Sleep(mark)
				t.Cleanup(func() {
					for _, p := range testutil.Find(mark) {
						testutil.KillIdentity(p.PID, p.StartTicks)
					}
				})
				sleepPath, err := exec.LookPath("sleep")
				if err != nil {
					t.Fatal(err)
				}
				sleepPath, _ = filepath.EvalSymlinks(sleepPath)
				script := fmt.Sprintf("setsid sleep %[1]s >/dev/null 2>&1 & setsid sh -c 'exec -a marked-%[2]s sleep %[1]s' & sleep 0.3", s, mark)
				cmd := lineageCmd("run", "--backend", backend, "--grace", "1s", "--keep", "exe:"+sleepPath, "--", "sh", "-c", script)
				cmd.Env = append(cmd.Env, daemonEnv...)
				outb, err := cmd.CombinedOutput()
				if err != nil {
					t.Fatalf("%v: %s", err, outb)
				}
				if left := testutil.Sleepers(mark); len(left) != 1 {
					t.Errorf("%d sleepers left, want the kept one; output:\n%s", len(left), outb)
				}
				if !strings.Contains(string(outb), "kept") {
					t.Errorf("output does not say which process was kept:\n%s", outb)
				}
			})
		})
	}
}

func TestRunRefusesBadInputAndStartsNothing(t *testing.T) {
	dir := t.TempDir()
	witness := filepath.Join(dir, "ran")
	job := []string{"--", "sh", "-c", "touch " + witness}
	notes := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(notes, []byte("not a program\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		env  []string
		args []string
		want string
	}{
		{"unknown backend", nil, []string{"--backend", "nonsense"}, "backend"},
		{"zero interval", nil, []string{"--backend", "proc", "--interval", "0"}, "interval"},
		{"negative interval", nil, []string{"--backend", "proc", "--interval", "-1s"}, "interval"},
		{"garbage interval", nil, []string{"--interval", "soon"}, "interval"},
		{"zero grace", nil, []string{"--grace", "0"}, "grace"},
		{"negative deadline", nil, []string{"--deadline", "-1s"}, "deadline"},
		{"bad keep rule", nil, []string{"--keep", "exe:relative/path"}, "keep"},
		{"keep rule for pid 1", nil, []string{"--keep", "1@5"}, "keep"},
		{"keep rule for no file", nil, []string{"--keep", "exe:" + dir + "/missing"}, "--keep: invalid keep rule exe:" + dir + "/missing: " + dir + "/missing: no such file"},
		{"keep rule for no program", nil, []string{"--keep", "exe:" + notes}, "notes.txt is not executable (mode 0644)"},
		{"keep rule for a directory", nil, []string{"--keep", "exe:" + dir}, "is a directory, not a program"},
		{"bad --reaping", nil, []string{"--reaping", "maybe"}, "reaping"},
		{"bad kill switch", []string{"LINEAGE_REAPING=maybe"}, nil, "LINEAGE_REAPING"},
		{"tiny map", nil, []string{"--max-members", "1"}, "max-members"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cmd := lineageCmd(append(append([]string{"run"}, c.args...), job...)...)
			cmd.Env = append(cmd.Env, c.env...)
			out, err := cmd.CombinedOutput()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != lineage.ExitFailure {
				t.Fatalf("got %v, want exit %d; output:\n%s", err, lineage.ExitFailure, out)
			}
			if !strings.Contains(string(out), c.want) {
				t.Errorf("error does not name %q:\n%s", c.want, out)
			}
			if _, err := os.Stat(witness); err == nil {
				t.Fatal("the job ran despite bad input")
			}
		})
	}
	t.Run("no command", func(t *testing.T) {
		out, err := lineageCmd("run").CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != lineage.ExitFailure || !strings.Contains(string(out), "no command") {
			t.Errorf("got %v: %s", err, out)
		}
	})
}

// startUntilReady starts lineage in a process group of its own and returns
// once its job has printed "ready"; the caller owns the command. stderr, if
// not nil, receives lineage's stderr.
func startUntilReady(t *testing.T, stderr *bytes.Buffer, args ...string) *exec.Cmd {
	t.Helper()
	return startUntilReadyWith(t, func(cmd *exec.Cmd) {
		if stderr != nil {
			cmd.Stderr = stderr
		}
	}, args...)
}

// startUntilReadyWith is startUntilReady with setup applied to the command
// before it starts.
func startUntilReadyWith(t *testing.T, setup func(*exec.Cmd), args ...string) *exec.Cmd {
	t.Helper()
	cmd := lineageCmd(args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	setup(cmd)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "ready\n" {
		t.Fatalf("job said %q, %v", line, err)
	}
	return cmd
}
