package deploy

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lineage-dev/lineage/internal/testutil"
)

const unitFile = "systemd/lineage.service"

// verifyUnit runs `systemd-analyze verify` on unit, copied as
// lineage.service with ExecStart pointing at an executable that exists
// here (verify checks that it does), and returns what it said and whether
// it exited 0.
func verifyUnit(t *testing.T, unit []byte) (string, bool) {
	t.Helper()
	analyze := testutil.LookTool(t, "systemd-analyze")
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Replace(string(unit), "ExecStart=/usr/local/bin/lineage-tracker ", "ExecStart="+self+" ", 1)
	path := filepath.Join(t.TempDir(), "lineage.service")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(analyze, "verify", path).CombinedOutput()
	if err != nil {
		if _, ok := err.(*exec.ExitError); !ok {
			t.Fatal(err)
		}
	}
	return string(out), err == nil
}

// systemd-analyze verify accepts the unit without a word: a misspelt key
// or a bad value is only a warning to it, so any output fails.
func TestSystemdUnitVerifies(t *testing.T) {
	raw, err := os.ReadFile(unitFile)
	if err != nil {
		t.Fatal(err)
	}
	if out, ok := verifyUnit(t, raw); !ok || strings.TrimSpace(out) != "" {
		t.Errorf("systemd-analyze verify %s (exit 0: %v):\n%s", unitFile, ok, out)
	}
	settings := map[string]string{}
	for line := range strings.SplitSeq(string(raw), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(line, "#") {
			settings[k] = v
		}
	}
	for k, want := range map[string]string{
		// Stopping the daemon kills the daemon alone.
		"KillMode":         "process",
		"Restart":          "on-failure",
		"RuntimeDirectory": "lineage",
		"StateDirectory":   "lineage",
		"ExecStart":        "/usr/local/bin/lineage-tracker serve --socket /run/lineage/lineage.sock --state-dir /var/lib/lineage",
	} {
		if settings[k] != want {
			t.Errorf("%s=%s, want %s", k, settings[k], want)
		}
	}
	for _, c := range []string{"CAP_BPF", "CAP_KILL", "CAP_SYS_PTRACE"} {
		if !strings.Contains(settings["CapabilityBoundingSet"], c) {
			t.Errorf("CapabilityBoundingSet lacks %s", c)
		}
	}
}

// The check above can fail: verify speaks up about a bad value and an
// unknown key.
func TestSystemdVerifyCatchesMistakes(t *testing.T) {
	raw, err := os.ReadFile(unitFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ from, to string }{
		{"\nKillMode=process", "\nKillMode=gently"},
		{"\nRestart=on-failure", "\nRestrat=on-failure"},
	} {
		bad := strings.Replace(string(raw), c.from, c.to, 1)
		if bad == string(raw) {
			t.Fatalf("%q is not in the unit", c.from)
		}
		if out, ok := verifyUnit(t, []byte(bad)); ok && strings.TrimSpace(out) == "" {
			t.Errorf("%q passed systemd-analyze verify in silence", strings.TrimSpace(c.to))
		}
	}
}
