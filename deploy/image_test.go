package deploy

import (
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/lineage-dev/lineage/internal/testutil"
)

// deploy/README.md's Dockerfile builds the image the DaemonSet runs: it
// copies what `make static` builds, the front to the path the container's
// command and readiness probe run, the tracker beside it, where the front
// looks for it.
func TestDeployDockerfileMatchesTheDaemonSet(t *testing.T) {
	var dockerfile []string
	for _, b := range fencedBlocks(t, "deploy/README.md") {
		if b.lang == "Dockerfile" {
			if dockerfile != nil {
				t.Fatal("deploy/README.md shows more than one Dockerfile")
			}
			dockerfile = b.lines
		}
	}
	if dockerfile == nil {
		t.Fatal("deploy/README.md shows no Dockerfile")
	}
	copies := map[string]string{} // source → destination
	entrypoint := ""
	for _, line := range dockerfile {
		f := strings.Fields(line)
		switch {
		case len(f) == 3 && f[0] == "COPY":
			copies[f[1]] = f[2]
		case len(f) > 0 && f[0] == "ENTRYPOINT":
			entrypoint = strings.TrimSpace(strings.TrimPrefix(line, "ENTRYPOINT"))
		case len(f) > 0 && f[0] != "FROM":
			t.Errorf("the Dockerfile's %q: this test knows FROM, COPY and ENTRYPOINT only", line)
		}
	}

	front, tracker := makeVar(t, "STATIC"), makeVar(t, "STATIC_TRACKER")
	frontDest, ok := copies[front]
	if !ok {
		t.Fatalf("the Dockerfile copies %v, not make static's front %s", copies, front)
	}
	if got := copies[tracker]; got != path.Join(path.Dir(frontDest), "lineage-tracker") {
		t.Errorf("the Dockerfile puts make static's tracker %s at %q, not beside the front (%s) as lineage-tracker", tracker, got, frontDest)
	}
	if entrypoint != `["`+frontDest+`"]` {
		t.Errorf("ENTRYPOINT %s, want [%q]", entrypoint, frontDest)
	}

	raw, err := os.ReadFile(daemonSetFile)
	if err != nil {
		t.Fatal(err)
	}
	ds, err := decodeDaemonSet(raw)
	if err != nil {
		t.Fatal(err)
	}
	c := ds.Spec.Template.Spec.Containers[0]
	if len(c.Command) == 0 || c.Command[0] != frontDest {
		t.Errorf("the DaemonSet runs %q, not the image's front %s", c.Command, frontDest)
	}
	if p := c.ReadinessProbe; p == nil || p.Exec == nil || len(p.Exec.Command) == 0 || p.Exec.Command[0] != frontDest {
		t.Errorf("the readiness probe does not run the image's front %s", frontDest)
	}
}

// makeVar is a Makefile variable's value for an amd64 build (the image
// deploy/README.md builds), as make itself expands it.
func makeVar(t *testing.T, name string) string {
	t.Helper()
	mk := testutil.LookTool(t, "make")
	out, err := exec.Command(mk, "-s", "--no-print-directory", "-C", top, "--eval", "lineage-print-var: ; @echo $("+name+")", "lineage-print-var", "GOARCH=amd64").Output()
	if err != nil {
		t.Fatalf("make: the value of %s: %v", name, err)
	}
	return strings.TrimSpace(string(out))
}

// Every test a deploy file's comments cite exists, and every deploy file
// that says what checks it cites one: the DaemonSet once named a test file
// that wasn't there.
func TestDeployFilesCiteRealTests(t *testing.T) {
	cites := regexp.MustCompile(`[\w./-]+_test\.go`)
	for _, f := range []string{"kubernetes/daemonset.yaml", "systemd/lineage.service", "github-actions/common.sh", "github-actions/job-started.sh", "github-actions/job-completed.sh"} {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range cites.FindAllString(string(raw), -1) {
			if _, err := os.Stat(filepath.Join(top, c)); err != nil {
				t.Errorf("%s cites %s, which doesn't exist", f, c)
			}
		}
	}
	raw, err := os.ReadFile(daemonSetFile)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(raw), "deploy/kubernetes_test.go") {
		t.Errorf("%s doesn't name the test that checks it, deploy/kubernetes_test.go", daemonSetFile)
	}
	if !strings.Contains(string(raw), "No image is published") {
		t.Errorf("%s doesn't say that its image is not published", daemonSetFile)
	}
}
