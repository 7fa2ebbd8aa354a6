package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/lineage-dev/lineage/client"
	"github.com/lineage-dev/lineage/internal/testutil"
)

// nodeDir is the Node client's package.
const nodeDir = "../../clients/node"

// The Node client's declarations check with tsc --noEmit (typescript from
// npm, installed by `npm ci` in clients/node), and its tests (node --test)
// run against a real daemon with this test binary as their lineage: all
// of them, none skipped.
func TestNodeClient(t *testing.T) {
	node := testutil.LookTool(t, "node")
	tsc := filepath.Join(nodeDir, "node_modules", ".bin", "tsc")
	if _, err := os.Stat(tsc); err != nil {
		if os.Getenv(testutil.RequireToolsEnv) == "1" {
			t.Fatalf("typescript is required (%s=1) but not installed: run npm ci in clients/node", testutil.RequireToolsEnv)
		}
		t.Skip("typescript not installed: run npm ci in clients/node")
	}
	check := exec.Command(tsc, "--noEmit", "-p", ".")
	check.Dir = nodeDir
	if out, err := check.CombinedOutput(); err != nil {
		t.Fatalf("tsc --noEmit: %v\n%s", err, out)
	}

	d := startDaemon(t, "")
	if msg, code := asNobody(t, d).lineage("session", "open", "node-foreign", "--kind", "autonomous"); code != 0 {
		t.Fatalf("uid 65534's session open: %s", msg)
	}
	t.Cleanup(func() { d.do("POST", "/v1/sessions/node-foreign/close", nil, nil) })
	mark := testutil.Marker(t)
	testutil.CheckNoLeaks(t, mark)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "--test", "test/")
	cmd.Dir = nodeDir
	cmd.Env = append(os.Environ(),
		client.EnvSocket+"="+d.sock,
		"LINEAGE_BIN="+frontBin,
		"LINEAGE_TEST_MARK="+mark,
		"LINEAGE_TEST_FOREIGN_SESSION=node-foreign",
		"TMPDIR="+t.TempDir(),
	)
	cmd.WaitDelay = 10 * time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("node --test: %v\n%s", err, out)
	}
	count := func(what string) int {
		m := regexp.MustCompile(`(?m)^# ` + what + ` (\d+)$`).FindSubmatch(out)
		if m == nil {
			t.Fatalf("no %q count in node --test's summary:\n%s", what, out)
		}
		n, _ := strconv.Atoi(string(m[1]))
		return n
	}
	if pass, fail, skipped := count("pass"), count("fail"), count("skipped"); pass < 8 || fail != 0 || skipped != 0 {
		t.Errorf("node --test: %d passed, %d failed, %d skipped; want 8 or more passed, none failed or skipped:\n%s", pass, fail, skipped, out)
	}
}
