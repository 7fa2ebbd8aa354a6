package codeshape

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/lineage-dev/lineage/"

// layers ranks the internal packages as DESIGN.md draws them: a package
// may import only packages of a lower rank, so imports flow one way.
// lineage, the domain, is at the bottom; the CLI (cmd/...) is above all.
var layers = map[string]int{
	"internal/lineage": 0,

	// lineage exec's fast path, in C before the Go runtime starts: it
	// imports nothing of the project.
	"internal/fastexec": 0,
	// proc: reading /proc with plain file reads.
	"internal/userfile":  1,
	"internal/buildinfo": 1,
	// go generate's writer of the committed objects' digest, a main.
	"internal/buildinfo/gendigest": 2,
	"internal/policy":              2,
	"internal/proc":                1,
	// pidfd: signals through pidfds, the start time checked by procstat.
	// jobreport: a job's report, the reaper's outcomes and their text,
	// below reap, loader and job, for the lean front binary.
	"internal/jobreport": 4,
	// The API's wire types, shared by server and client. jobrun: a job's
	// root as lineage's child, and a run through the daemon, with no
	// backend, for the lean front binary (job's standalone run uses it).
	"internal/api":    3,
	"internal/loader": 1,
	// The backends: BPF (the only importer of cilium/ebpf) and the /proc
	// poller.
	"internal/loader/bpf":  3,
	"internal/loader/poll": 3,
	"internal/reap":        3,
	"internal/supervise":   3,
	"internal/record":      4,
	"internal/guardian":    4,
	"internal/jobrun":      5,
	"internal/report":      5,
	"internal/job":         6,
	"internal/doctor":      5,
	"internal/server":      7,
	// The client speaks the API's types (internal/api) and links none of
	// the server, so the lean front binary can use it.
	"internal/client": 8,
	// `lineage run`'s runner on the daemon: the client beside job.
	"internal/remote": 9,
}

// pure packages import nothing with side effects: the standard library's
// pure parts and lower pure packages only.
var pure = map[string]bool{"internal/lineage": true, "internal/policy": true}

var impure = []string{"os", "os/exec", "os/signal", "net", "net/http", "io/fs", "golang.org/x/sys/unix", "github.com/cilium/ebpf", "github.com/prometheus/procfs"}

func TestImportsFlowOneWay(t *testing.T) {
	root := filepath.Join("..", "..")
	for pkg := range packages(t, root) {
		rank, ranked := layers[pkg]
		if strings.HasPrefix(pkg, "internal/") && !ranked && pkg != "internal/testutil" && pkg != "internal/codeshape" {
			t.Errorf("%s has no place in the layers: add it here and to DESIGN.md's layout", pkg)
			continue
		}
		for imp := range imports(t, filepath.Join(root, pkg)) {
			if pure[pkg] {
				for _, bad := range impure {
					if imp == bad || strings.HasPrefix(imp, bad+"/") {
						t.Errorf("%s is pure but imports %s", pkg, imp)
					}
				}
			}
			dep, ok := strings.CutPrefix(imp, module)
			if !ok {
				continue
			}
			if strings.HasPrefix(dep, "cmd/") {
				t.Errorf("%s imports the CLI (%s)", pkg, dep)
				continue
			}
			if depRank, ok := layers[dep]; ok && ranked && depRank >= rank {
				t.Errorf("%s (layer %d) imports %s (layer %d): imports must flow down", pkg, rank, dep, depRank)
			}
		}
	}
}

// packages lists the directories under root that hold non-test Go files,
// relative to root.
func packages(t *testing.T, root string) map[string]bool {
	t.Helper()
	out := make(map[string]bool)
	for _, top := range []string{"internal", "cmd"} {
		err := filepath.WalkDir(filepath.Join(root, top), func(path string, d os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && d.Name() == "testdata" {
				return filepath.SkipDir
			}
			if !d.IsDir() && strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go") {
				rel, _ := filepath.Rel(root, filepath.Dir(path))
				out[filepath.ToSlash(rel)] = true
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// imports lists what the non-test Go files of dir import.
func imports(t *testing.T, dir string) map[string]bool {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[string]bool)
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(dir, name), nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, spec := range f.Imports {
			path, _ := strconv.Unquote(spec.Path.Value)
			out[path] = true
		}
	}
	return out
}
