package codeshape

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/lineage-dev/lineage/internal/testutil"
)

// heavyModules are what the front must not link: their package inits cost
// every command's start (BPF map creation, regexps, protobuf descriptors,
// the default Prometheus registry).
var heavyModules = []string{
	"github.com/cilium/ebpf",
	"github.com/prometheus/procfs",
	"github.com/prometheus/client_golang",
	"google.golang.org/protobuf",
}

// deps lists the packages `go build` links into the command pkg.
func deps(t *testing.T, pkg string) []string {
	t.Helper()
	gotool := testutil.LookTool(t, "go")
	cmd := exec.Command(gotool, "list", "-deps", pkg)
	cmd.Dir = "../.."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps %s: %v", pkg, err)
	}
	return strings.Fields(string(out))
}

func TestFrontLinksNoHeavyPackage(t *testing.T) {
	linksHeavy := func(pkgs []string) []string {
		var bad []string
		for _, p := range pkgs {
			for _, m := range heavyModules {
				if p == m || strings.HasPrefix(p, m+"/") {
					bad = append(bad, p)
				}
			}
		}
		return bad
	}
	if bad := linksHeavy(deps(t, "./cmd/lineage")); len(bad) != 0 {
		t.Errorf("the front links %d heavy packages: %v", len(bad), bad)
	}
	// The check can see them: the tracker links them all.
	full := strings.Join(linksHeavy(deps(t, "./cmd/lineage-tracker")), " ")
	for _, m := range heavyModules {
		if !strings.Contains(full, m) {
			t.Errorf("the tracker links nothing of %s: the check is blind", m)
		}
	}
}
