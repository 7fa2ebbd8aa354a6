package main

// A member that joins lineage's own process group is protected: lineage
// never signals it, and the kernel spares it too, so that what it forks
// while the rest of its lineage is reaped is born alive.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lineage-dev/lineage/internal/job"
	"github.com/lineage-dev/lineage/internal/lineage"
	"github.com/lineage-dev/lineage/internal/loader"
	"github.com/lineage-dev/lineage/internal/testutil"
)

func TestRunMemberInLineagesGroupForksThroughTheReap(t *testing.T) {
	requireBackend(t, loader.BackendBPF)
	py := realPython(t)
	mark := testutil.Marker(t)
	testutil.CheckNoLeaks(t, mark)
	t.Cleanup(func() {
		for _, p := range testutil.Find(mark) {
			testutil.KillIdentity(p.PID, p.StartTicks)
		}
	})
	dir := t.TempDir()
	killed, reportPath := filepath.Join(dir, "killed"), filepath.Join(dir, "report.json")
	// The grouped member joins the process group of the job's parent,
	// lineage, then forks short sleeps (for at most about 100 s), noting
	// each one killed. The slow member takes 1.5 s to act on SIGTERM, and
	// forks nothing meanwhile: the reap, and the lineage's containment in
	// the kernel, last that long.
	grouped := fmt.Sprintf(`%s -c 'import os, sys; os.setpgid(0, os.getpgid(int(sys.argv[1]))); os.execvp("sh", ["sh", "-c", sys.argv[2], sys.argv[3]])' "$PPID" 'i=0; while [ $i -lt 2000 ]; do sleep 0.05 || echo killed >> %s; i=$((i+1)); done' %s`,
		py, killed, testutil.Sleep(mark))
	slow := fmt.Sprintf(`%s -c 'import signal, sys, time; signal.signal(signal.SIGTERM, lambda *a: (time.sleep(1.5), sys.exit(0))); time.sleep(float(sys.argv[1]))' %s`,
		py, testutil.Sleep(mark))
	script := grouped + " </dev/null >/dev/null 2>&1 & " + slow + " </dev/null >/dev/null 2>&1 & sleep 1; exit 0"
	cmd := lineageCmd("run", "--standalone", "--backend", "bpf", "--report", reportPath, "--grace", "20s", "--", "sh", "-c", script)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Run(); err != nil {
		t.Fatalf("lineage run: %v\n%s", err, stderr.String())
	}
	raw, err := os.ReadFile(reportPath)
	if err != nil {
		t.Fatal(err)
	}
	var rep job.Report
	if err := json.Unmarshal(raw, &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Reap == nil {
		t.Fatalf("no reap in the report:\n%s", raw)
	}
	var refused, terminated int
	for _, o := range rep.Reap.Outcomes {
		argv := strings.Join(o.Argv, " ")
		switch {
		case strings.Contains(argv, "setpgid") || strings.Contains(argv, "while"):
			if o.Result != lineage.Refused || !strings.Contains(o.Reason, "process group") {
				t.Errorf("grouped member %s: %s (%s), want refused: in lineage's process group", o.Member.Identity, o.Result, o.Reason)
			}
			refused++
		case strings.Contains(argv, "SIGTERM"):
			if o.Result != lineage.Terminated {
				t.Errorf("slow member %s: %s (%s), want terminated", o.Member.Identity, o.Result, o.Reason)
			}
			terminated++
		}
	}
	if refused == 0 || terminated != 1 {
		t.Errorf("%d grouped and %d slow members in the report, want 1 or more and 1; stderr:\n%s", refused, terminated, stderr.String())
	}
	if len(testutil.Find(mark)) == 0 {
		t.Errorf("the grouped member did not outlive the reap; stderr:\n%s", stderr.String())
	}
	if note, err := os.ReadFile(killed); err == nil {
		t.Errorf("children of the grouped member were killed during the reap (%d):\n%s", bytes.Count(note, []byte("\n")), stderr.String())
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
