package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lineage-dev/lineage/client"
	"github.com/lineage-dev/lineage/internal/testutil"
)

// The Python client's own tests (clients/python/tests, the README's
// examples included) run against a real daemon, with the package
// installed in a venv as pip installs it and this test binary as their
// lineage, and must all run: none may skip.
func TestPythonClient(t *testing.T) {
	python := pythonVenv(t)
	d := startDaemon(t, "")
	mark := testutil.Marker(t)
	testutil.CheckNoLeaks(t, mark)
	// A session of another uid's, which the client must refuse to run in.
	if msg, code := asNobody(t, d).lineage("session", "open", "py-foreign", "--kind", "autonomous"); code != 0 {
		t.Fatalf("uid 65534's session open: %s", msg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	tests, err := filepath.Abs("../../clients/python/tests")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, python, "-m", "unittest", "discover", "-v", "-s", tests, "-t", tests)
	// Run from elsewhere: the tests import the installed package, not
	// the source tree.
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(),
		client.EnvSocket+"="+d.sock,
		"LINEAGE_BIN="+frontBin,
		"LINEAGE_TEST_MARK="+mark,
		"LINEAGE_TEST_FOREIGN_SESSION=py-foreign",
		"TMPDIR="+t.TempDir(),
		"PYTHONDONTWRITEBYTECODE=1",
	)
	cmd.WaitDelay = 10 * time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("python -m unittest: %v\n%s", err, out)
	}
	ran := regexp.MustCompile(`(?m)^Ran (\d+) tests?`).FindSubmatch(out)
	if ran == nil {
		t.Fatalf("no unittest summary:\n%s", out)
	}
	if n, _ := strconv.Atoi(string(ran[1])); n < 18 {
		t.Errorf("ran %d Python tests, want at least 18:\n%s", n, out)
	}
	if strings.Contains(string(out), "skipped") {
		t.Errorf("Python tests skipped:\n%s", out)
	}
}
