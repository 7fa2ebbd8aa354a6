package e2e

import (
	"context"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lineage-dev/lineage/client"
	"github.com/lineage-dev/lineage/internal/testutil"
)

// The Python client's own tests (clients/python) run against a real daemon,
// with this test binary as their lineage, and must all run: none may skip.
func TestPythonClient(t *testing.T) {
	python := testutil.LookTool(t, "python3")
	d := startDaemon(t, "")
	mark := testutil.Marker(t)
	testutil.CheckNoLeaks(t, mark)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, python, "-m", "unittest", "-v")
	cmd.Dir = "../../clients/python"
	cmd.Env = append(os.Environ(),
		client.EnvSocket+"="+d.sock,
		"LINEAGE_BIN="+frontBin,
		"LINEAGE_TEST_MARK="+mark,
		"TMPDIR="+t.TempDir(),
		"PYTHONDONTWRITEBYTECODE=1",
	)
	cmd.WaitDelay = 10 * time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("python3 -m unittest: %v\n%s", err, out)
	}
	ran := regexp.MustCompile(`(?m)^Ran (\d+) tests?`).FindSubmatch(out)
	if ran == nil {
		t.Fatalf("no unittest summary:\n%s", out)
	}
	if n, _ := strconv.Atoi(string(ran[1])); n < 6 {
		t.Errorf("ran %d Python tests, want at least 6:\n%s", n, out)
	}
	if strings.Contains(string(out), "skipped") {
		t.Errorf("Python tests skipped:\n%s", out)
	}
}
