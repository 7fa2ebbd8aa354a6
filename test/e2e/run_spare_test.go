package e2e

// What lineage spares, the kernel spares too (a kept process survives a hard
// cancel), and a process the full membership map can't track is killed
// unless --on-full=escape lets it go.

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lineage-dev/lineage/internal/loader"
	"github.com/lineage-dev/lineage/internal/testutil"
)

// keptSleep copies sleep(1) to a program of its own, for an exe: rule that
// keeps it and nothing else.
func keptSleep(t *testing.T) string {
	t.Helper()
	src, err := exec.LookPath("sleep")
	if err != nil {
		t.Fatal(err)
	}
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	path := filepath.Join(t.TempDir(), "kept-sleep")
	out, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestRunKeptSurvivesHardCancel(t *testing.T) {
	for _, v := range []variant{variants[0], variants[2]} {
		t.Run(v.name, func(t *testing.T) { testRunKeptSurvivesHardCancel(t, v) })
	}
}

func testRunKeptSurvivesHardCancel(t *testing.T, v variant) {
	env := v.setup(t)
	mark := testutil.Marker(t)
	testutil.CheckNoLeaks(t, mark)
	kept := keptSleep(t)
	script := fmt.Sprintf("%[1]s %[2]s & sleep %[2]s & sleep 0.5; echo ready; sleep %[2]s", kept, testutil.Sleep(mark))
	cmd := startUntilReadyWith(t, func(cmd *exec.Cmd) { cmd.Env = append(cmd.Env, env...) },
		"run", "--backend", v.backend, "--keep", "exe:"+kept, "--", "sh", "-c", script)
	t.Cleanup(func() {
		for _, p := range testutil.Find(mark) {
			testutil.KillIdentity(p.PID, p.StartTicks)
		}
	})
	var keptProc testutil.Proc
	for deadline := time.Now().Add(5 * time.Second); keptProc.PID == 0 || len(testutil.Sleepers(mark)) != 2; {
		if time.Now().After(deadline) {
			t.Fatalf("kept %v, want it and 2 sleepers: %v", keptProc, testutil.Find(mark))
		}
		for _, p := range testutil.Find(mark) {
			if len(p.Argv) > 0 && p.Argv[0] == kept {
				keptProc = p
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	hardCancel(t, cmd)
	_ = cmd.Wait()
	deadline := time.Now().Add(20 * time.Second)
	for len(testutil.Sleepers(mark)) > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if left := testutil.Sleepers(mark); len(left) != 0 {
		t.Errorf("%d processes outlived the hard cancel: %v", len(left), left)
	}
	if !testutil.Alive(keptProc.PID, keptProc.StartTicks) {
		t.Errorf("the process --keep exe:%s spares died in the hard cancel", kept)
	}
}

func TestRunFullMap(t *testing.T) {
	for _, on := range []string{"kill", "escape"} {
		t.Run(on, func(t *testing.T) {
			requireBackend(t, loader.BackendBPF)
			mark, daemonMark := testutil.Marker(t), testutil.Marker(t)+"7"
			testutil.CheckNoLeaks(t, daemonMark)
			t.Cleanup(func() {
				for _, p := range testutil.Sleepers(daemonMark) {
					testutil.KillIdentity(p.PID, p.StartTicks)
				}
			})
			script := fmt.Sprintf(`i=0; while [ $i -lt 99 ]; do sleep %s & i=$((i+1)); done; setsid sleep %s >/dev/null 2>&1 </dev/null & sleep 0.3; exit 0`,
				testutil.Sleep(mark), testutil.Sleep(daemonMark))
			res := runJob(t, mark, nil, "--backend", "bpf", "--max-members", "100", "--on-full", on, "--", "sh", "-c", script)
			if res.report == nil {
				t.Fatalf("no report; stderr:\n%s", res.stderr)
			}
			daemons := len(testutil.Sleepers(daemonMark))
			st := res.report.Stats
			if on == "escape" {
				if daemons != 1 || st.UntrackedKilled != 0 || !strings.Contains(res.stderr, "escaped") {
					t.Errorf("%d daemons, %d killed: want the daemon escaped, and said so; stderr:\n%s", daemons, st.UntrackedKilled, res.stderr)
				}
				return
			}
			if daemons != 0 || st.UntrackedKilled < 1 || !strings.Contains(res.stderr, "were killed") {
				t.Errorf("%d daemons, %d killed: want the daemon killed, and said so; stderr:\n%s", daemons, st.UntrackedKilled, res.stderr)
			}
		})
	}
}
