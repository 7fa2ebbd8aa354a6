package e2e

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lineage-dev/lineage/api"
	"github.com/lineage-dev/lineage/internal/testutil"
)

// hooksDir holds the GitHub Actions runner hooks.
var hooksDir, _ = filepath.Abs("../../deploy/github-actions")

// lineageOnPath puts `lineage` in a new directory, for the hooks to call
// by name: a link to the front under test, which finds the tracker beside
// the file it resolves to.
func lineageOnPath(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.Symlink(frontBin, filepath.Join(dir, "lineage")); err != nil {
		t.Fatal(err)
	}
	return dir
}

// The test plays a self-hosted runner: a fake worker (a shell) runs the
// job-started hook, then steps that leave processes behind every way a
// job can (setsid, a double fork, nohup, a scrubbed environment, all at
// once), then the job-completed hook. Afterwards nothing the steps left
// is running, the worker is, and so is a bystander started beside it.
func TestGitHubActionsHooks(t *testing.T) {
	d := startDaemon(t, "")
	mark := testutil.Marker(t)
	testutil.CheckNoLeaks(t, mark)
	sleep := testutil.Sleep(mark)
	by := startBystander(t, "a process beside the runner", exec.Command("sleep", sleep))

	steps := strings.Join([]string{
		`setsid sleep ` + sleep + ` >/dev/null 2>&1 &`,
		`sh -c '(sleep ` + sleep + ` >/dev/null 2>&1 &) &'`,
		`nohup sleep ` + sleep + ` >/dev/null 2>&1 &`,
		`env -i /bin/sh -c 'setsid sh -c "(nohup sleep ` + sleep + ` >/dev/null 2>&1 &) &"'`,
	}, "\n")
	// The worker reads a line before each hook's turn: the test says when.
	// After the completed hook it says so and waits to be let go.
	worker := exec.Command("sh", "-c", fmt.Sprintf(`
		sh %[1]s/job-started.sh || exit 3
		%[2]s
		read go
		sh %[1]s/job-completed.sh || exit 4
		echo completed
		read go
		exit 0`, hooksDir, steps))
	random := knownRandom(t)
	worker.Env = append(os.Environ(),
		"PATH="+lineageOnPath(t)+":"+os.Getenv("PATH"),
		"LINEAGE_SOCKET="+d.sock, "LINEAGE_GHA_STRICT=1", "LINEAGE_GHA_RANDOM="+random,
		"GITHUB_RUN_ID=4242", "GITHUB_RUN_ATTEMPT=2", "GITHUB_JOB=build")
	stdin, err := worker.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out := startWorker(t, worker)
	wpid := worker.Process.Pid
	wstart, _, err := testutil.StartTicks(wpid)
	if err != nil {
		t.Fatal(err)
	}
	session := fmt.Sprintf("gha-4242-2-%d-%s", wpid, knownRandomHex)

	left := atLeastSleepers(t, mark, 5) // four steps' and the bystander
	var s api.Session
	d.do("GET", "/v1/sessions/"+session, nil, &s)
	if len(s.Roots) != 1 || s.Roots[0].Root.PID != uint32(wpid) || !s.SelfClose {
		t.Fatalf("session %s after the started hook: %+v", session, s)
	}
	io.WriteString(stdin, "\n")
	log := out.until(t, "completed")
	for _, p := range left {
		if p.PID == by.cmd.Process.Pid {
			continue
		}
		if !testutil.WaitGone(p.PID, p.StartTicks, 30*time.Second) {
			t.Errorf("a step's leftover survived the completed hook: %d %q", p.PID, p.Argv)
		}
	}
	if !testutil.Alive(wpid, wstart) {
		t.Fatal("the worker did not survive the completed hook")
	}
	by.check(t)
	if !strings.Contains(log, fmt.Sprintf("%d@%d\tkept", wpid, wstart)) {
		t.Errorf("the close did not report the worker as kept:\n%s", log)
	}
	if code := d.apiStatus("GET", "/v1/sessions/"+session, nil); code != 404 {
		t.Errorf("the session is still open after the completed hook (%d)", code)
	}
	stdin.Close()
	if err := worker.Wait(); err != nil {
		t.Errorf("the worker: %v\n%s", err, log)
	}
}

// knownRandomHex is the random part of a session id the hooks read from
// the file knownRandom writes.
const knownRandomHex = "0123456789abcdef"

// knownRandom writes the bytes of knownRandomHex to a file, for the hooks
// to read as their random source (LINEAGE_GHA_RANDOM): the test knows the
// session id the hooks will open.
func knownRandom(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "random")
	if err := os.WriteFile(path, []byte{0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef}, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// A session id is its opener's: when another user of the host has taken
// the job's (uid 65534 opens it before the job starts), the started hook
// fails the job, strict or not, and nothing of the job runs; the taker's
// session is left as it was. A daemon that can't be reached only warns,
// unless strict.
func TestGitHubActionsHookSessionTaken(t *testing.T) {
	d := startDaemon(t, "")
	n := asNobody(t, d)
	mark := testutil.Marker(t)
	testutil.CheckNoLeaks(t, mark)
	ran := filepath.Join(t.TempDir(), "ran")
	for _, c := range []struct {
		name   string
		socket string
		strict string
		take   bool
		want   string // the worker's exit: 3 for a failed started hook
		log    string
	}{
		{"taken", d.sock, "0", true, "exit status 3", "::error::lineage: session gha-4242-1-"},
		{"no daemon", filepath.Join(t.TempDir(), "none.sock"), "0", false, "", "::warning::lineage: could not open session"},
		{"no daemon, strict", filepath.Join(t.TempDir(), "none.sock"), "1", false, "exit status 3", "::error::lineage: could not open session"},
	} {
		t.Run(c.name, func(t *testing.T) {
			os.Remove(ran)
			worker := exec.Command("sh", "-c", fmt.Sprintf(`
				read go
				sh %s/job-started.sh || exit 3
				touch %s
				exit 0`, hooksDir, ran))
			worker.Env = append(os.Environ(),
				"PATH="+lineageOnPath(t)+":"+os.Getenv("PATH"),
				"LINEAGE_SOCKET="+c.socket, "LINEAGE_GHA_STRICT="+c.strict, "LINEAGE_GHA_RANDOM="+knownRandom(t),
				"GITHUB_RUN_ID=4242", "GITHUB_RUN_ATTEMPT=1")
			stdin, err := worker.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			out := startWorker(t, worker)
			session := fmt.Sprintf("gha-4242-1-%d-%s", worker.Process.Pid, knownRandomHex)
			if c.take {
				if msg, code := n.lineage("session", "open", session, "--kind", "interactive"); code != 0 {
					t.Fatalf("uid 65534 could not open %s: %s", session, msg)
				}
			}
			before := snapshot(t, d)
			io.WriteString(stdin, "\n")
			stdin.Close()
			err = worker.Wait()
			if got := fmt.Sprint(err); (c.want == "" && err != nil) || (c.want != "" && got != c.want) {
				t.Errorf("the worker: %v, want %q\n%s", err, c.want, out)
			}
			if !strings.Contains(out.String(), c.log) {
				t.Errorf("the job's log:\n%s\nwant %q", out, c.log)
			}
			_, statErr := os.Stat(ran)
			if jobRan := statErr == nil; jobRan != (c.want == "") {
				t.Errorf("the job ran: %v, want %v", jobRan, c.want == "")
			}
			if after := snapshot(t, d); after != before {
				t.Errorf("the hook changed the daemon's state:\nbefore %s\nafter  %s", before, after)
			}
			if c.take {
				var s api.Session
				d.do("GET", "/v1/sessions/"+session, nil, &s)
				if s.UID != 65534 || len(s.Roots) != 0 {
					t.Errorf("the taken session %s: %+v, want uid 65534's, with no root", session, s)
				}
			}
		})
	}
}

// output collects what a process writes, for a test to wait on.
type output struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (o *output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.Write(p)
}

func (o *output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.String()
}

// until waits up to a minute for a line that reads line, and returns all
// that was written so far.
func (o *output) until(t *testing.T, line string) string {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); ; {
		s := o.String()
		if strings.Contains("\n"+s, "\n"+line+"\n") {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("no line %q within a minute:\n%s", line, s)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// startWorker starts the fake worker, its stdout and stderr collected;
// it is killed, if still running, when the test ends.
func startWorker(t *testing.T, cmd *exec.Cmd) *output {
	t.Helper()
	out := &output{}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
		if t.Failed() {
			t.Logf("the worker's output:\n%s", out)
		}
	})
	return out
}
