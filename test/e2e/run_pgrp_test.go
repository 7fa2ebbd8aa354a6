package e2e

// Protection is by identity alone: a leftover that moves itself into
// lineage's own process group is a member like any other, reaped and
// reported, with either backend, standalone and through the daemon. (The
// rule that spared it came from tools that kill by process group; lineage
// never signals a group.)

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lineage-dev/lineage/client"
	"github.com/lineage-dev/lineage/internal/loader"
	"github.com/lineage-dev/lineage/internal/testutil"
	"github.com/lineage-dev/lineage/lineage"
)

func TestRunLeftoverInLineagesGroupIsReaped(t *testing.T) {
	py := realPython(t)
	for _, v := range append(variants, variant{"proc via daemon", loader.BackendProc, true}) {
		t.Run(v.name, func(t *testing.T) {
			requireBackend(t, v.backend)
			var env []string
			var d *daemon
			args := []string{"--backend", v.backend}
			if v.daemon {
				// --backend proc is daemon-wide (a run asking for it gets
				// a tracker of its own): the daemon's backend is its own.
				d = startDaemon(t, "", "--backend", v.backend)
				env = []string{client.EnvSocket + "=" + d.sock}
				args = nil
			}
			mark := testutil.Marker(t)
			testutil.CheckNoLeaks(t, mark)
			// The leftover joins the process group of the job's parent,
			// lineage run, then sleeps. The job exits once the leftover is
			// tracked: a poller finds it only while its parent lives.
			leftover := fmt.Sprintf(`%s -c 'import os, sys; os.setpgid(0, os.getpgid(int(sys.argv[1]))); os.execvp("sleep", ["sleep", sys.argv[2]])' "$PPID" %s`,
				py, testutil.Sleep(mark))
			release := filepath.Join(t.TempDir(), "release")
			args = append(args, "--", "sh", "-c", leftover+fmt.Sprintf(` </dev/null >/dev/null 2>&1 & while [ ! -e %q ]; do sleep 0.02; done; exit 0`, release))
			go releaseWhenTracked(t, d, v, mark, release)
			res := runJob(t, mark, env, args...)
			if res.report == nil || res.report.Reap == nil {
				t.Fatalf("no reap in the report; stderr:\n%s", res.stderr)
			}
			v.check(t, res.report)
			found := false
			for _, o := range res.report.Reap.Outcomes {
				if !strings.Contains(strings.Join(o.Argv, " "), mark) {
					continue
				}
				found = true
				if o.Result != lineage.Terminated || o.Reason != "" {
					t.Errorf("the leftover in lineage's process group %s: %s (%s), want terminated", o.Member.Identity, o.Result, o.Reason)
				}
			}
			if !found {
				t.Errorf("the leftover is not in the report; stderr:\n%s", res.stderr)
			}
		})
	}
}

// releaseWhenTracked creates the file release once the job's marked
// sleeper runs and is tracked: through the daemon d, when it is a member
// there; with the proc backend standalone, after a second more (lineage
// run has no API to ask); with bpf at once (it tracks from the fork).
func releaseWhenTracked(t *testing.T, d *daemon, v variant, mark, release string) {
	defer func() { _ = os.WriteFile(release, nil, 0o600) }()
	// The job's sleeper, not runJob's bystanders (whose argv carries mark
	// too).
	var sleeper testutil.Proc
	if !testutil.Until(30*time.Second, func() bool {
		for _, p := range testutil.Sleepers(mark) {
			if len(p.Argv) == 2 && p.Argv[1] == testutil.Sleep(mark) {
				sleeper = p
				return true
			}
		}
		return false
	}) {
		return // the job fails on its own, and says why
	}
	switch {
	case d != nil:
		id := lineage.Identity{PID: uint32(sleeper.PID), StartTicks: sleeper.StartTicks}
		testutil.Until(30*time.Second, func() bool {
			_, err := d.client().Why(context.Background(), id.String())
			return err == nil
		})
	case v.backend == loader.BackendProc:
		time.Sleep(time.Second * testutil.WaitScale())
	}
}

// realPython returns the python3 interpreter itself, not a wrapper that
// would fork on its way to it (pyenv's shims are shell scripts).
func realPython(t *testing.T) string {
	t.Helper()
	py := testutil.LookTool(t, "python3")
	out, err := exec.Command(py, "-c", "import sys; print(sys.executable)").Output()
	if err != nil {
		t.Fatalf("%s: %v", py, err)
	}
	return strings.TrimSpace(string(out))
}
