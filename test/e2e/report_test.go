package e2e

import (
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// lineage report, given a run report instead of a record, says what the
// file is and how to record one, and exits non-zero.
func TestReportOfARunReportSaysWhatItIs(t *testing.T) {
	path := filepath.Join(t.TempDir(), "run.json")
	run := lineageCmd("run", "--standalone", "--backend", "proc", "--report", path, "--", "true")
	if out, err := run.CombinedOutput(); err != nil {
		t.Fatalf("lineage run: %v\n%s", err, out)
	}
	out, err := lineageCmd("report", path).CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || !strings.Contains(string(out), "this is a run report (lineage run --report), not a record") || !strings.Contains(string(out), "lineage run --record") {
		t.Errorf("lineage report of a run report: %v\n%s", err, out)
	}
}
