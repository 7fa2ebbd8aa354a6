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
	// The domain (public: the API's and the client's vocabulary), and what
	// imports nothing of the project: the build's identity, and lineage
	// exec's fast path (C before the Go runtime).
	"lineage":            0,
	"internal/fastexec":  0,
	"internal/buildinfo": 0,
	// Reading /proc; what a backend is; the pure decisions (public: keep
	// rules are the API's); the one owner of the subreaper bit and wait4;
	// files made for the invoker.
	"internal/proc":                1,
	"internal/loader":              1,
	"policy":                       1,
	"internal/supervise":           1,
	"internal/userfile":            1,
	"internal/buildinfo/gendigest": 1,
	// The backends (loader/bpf is the only importer of cilium/ebpf), the
	// reaper, and the API's wire types (public).
	"internal/loader/bpf":  2,
	"internal/loader/poll": 2,
	"internal/reap":        2,
	"api":                  2,
	// The public Go client of the API; the hard-cancel guardian; the forensic record;
	// what this machine allows.
	"client":            3,
	"internal/guardian": 3,
	"internal/record":   3,
	"internal/doctor":   3,
	// A job from its start to its report, under either tracker; a record
	// rendered.
	"internal/job":    4,
	"internal/report": 4,
	// A tracker owned by this process, for run and serve.
	"internal/tracker": 5,
	// The sidecar's store of sessions (snapshot and journal); the sidecar.
	"internal/server/store": 5,
	"internal/server":       6,
	// What the two binaries' command lines share (the front links it).
	"internal/cli": 6,
}

// pure packages import nothing with side effects: the standard library's
// pure parts and lower pure packages only.
var pure = map[string]bool{"lineage": true, "policy": true}

var impure = []string{"os", "os/exec", "os/signal", "net", "net/http", "io/fs", "golang.org/x/sys/unix", "github.com/cilium/ebpf", "github.com/prometheus/procfs"}

func TestImportsFlowOneWay(t *testing.T) {
	root := filepath.Join("..", "..")
	for pkg := range packages(t, root) {
		rank, ranked := layers[pkg]
		if !strings.HasPrefix(pkg, "cmd/") && !ranked && pkg != "internal/testutil" && pkg != "internal/codeshape" {
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

// public are the packages a Go program outside this module imports: the
// client, the API's wire types, and the vocabulary both speak. Each type
// their exported names use must be one such a program can name, so they
// import nothing under internal/.
var public = []string{"lineage", "policy", "api", "client"}

func TestPublicPackagesImportNothingInternal(t *testing.T) {
	root := filepath.Join("..", "..")
	for _, pkg := range public {
		for imp := range imports(t, filepath.Join(root, pkg)) {
			if dep, ok := strings.CutPrefix(imp, module); ok && strings.HasPrefix(dep, "internal/") {
				t.Errorf("%s is public but imports %s, whose names a program outside the module can't write", pkg, dep)
			}
		}
	}
}

// packages lists the directories under root that hold non-test Go files,
// relative to root.
func packages(t *testing.T, root string) map[string]bool {
	t.Helper()
	out := make(map[string]bool)
	for _, top := range []string{"lineage", "policy", "api", "client", "internal", "cmd"} {
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
