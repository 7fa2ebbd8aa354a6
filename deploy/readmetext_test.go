package deploy

import (
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The README's table of `lineage run`'s flags and `lineage run --help` name
// the same flags: none in the table that run lacks, none of run's (hidden
// ones aside) missing from the table.
func TestREADMERunFlagsTable(t *testing.T) {
	run, err := lineageTree(t).command([]string{"run"})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(top, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(raw), "\n| flag | default | meaning |\n")
	if !ok {
		t.Fatal("README.md has no table of run's flags (| flag | default | meaning |)")
	}
	flagRE := regexp.MustCompile("`(-{1,2}[a-z][\\w-]*)")
	inTable := map[string]bool{}
	for row := range strings.SplitSeq(table, "\n") {
		if !strings.HasPrefix(row, "|") {
			break
		}
		first := strings.Split(row, "|")[1]
		for _, m := range flagRE.FindAllStringSubmatch(first, -1) {
			long := strings.TrimPrefix(m[1], "--")
			if !strings.HasPrefix(m[1], "--") {
				long = run.shorthand[strings.TrimPrefix(m[1], "-")]
			}
			if _, ok := run.takesValue[long]; long == "" || !ok {
				t.Errorf("the README's table names %s, which lineage run doesn't take", m[1])
				continue
			}
			inTable[long] = true
		}
	}
	for name := range run.takesValue {
		if name != "help" && !inTable[name] {
			t.Errorf("lineage run --%s is missing from the README's table of run's flags", name)
		}
	}
}

// The README's Python example uses only what the Python client defines:
// the module it imports, the names imported, the methods called.
func TestREADMEPythonExample(t *testing.T) {
	py := pythonSources(t)
	var blocks []docBlock
	for _, b := range fencedBlocks(t, "README.md") {
		if b.lang == "python" {
			blocks = append(blocks, b)
		}
	}
	if len(blocks) == 0 {
		t.Fatal("README.md has no Python example")
	}
	importRE := regexp.MustCompile(`^from (\w+) import (.+)$`)
	callRE := regexp.MustCompile(`\b(\w+)\.(\w+)\(`)
	for _, b := range blocks {
		clients := map[string]bool{}
		for _, line := range b.lines {
			if m := importRE.FindStringSubmatch(line); m != nil {
				if !py.hasModule(m[1]) {
					t.Errorf("README imports %s, which clients/python doesn't hold", m[1])
				}
				for name := range strings.SplitSeq(m[2], ",") {
					if name = strings.TrimSpace(name); !py.defines(name) {
						t.Errorf("README imports %s from %s, which the client doesn't define", name, m[1])
					}
				}
			}
			if v, _, ok := strings.Cut(line, " = Client("); ok {
				clients[strings.TrimSpace(v)] = true
			}
			for _, m := range callRE.FindAllStringSubmatch(line, -1) {
				if clients[m[1]] && !py.defines(m[2]) {
					t.Errorf("README calls %s.%s, which the client doesn't define", m[1], m[2])
				}
			}
		}
		if len(clients) == 0 {
			t.Errorf("README.md:%d: a Python example that makes no Client", b.line)
		}
	}
}

// pythonTree is the Python client's source: file names and text.
type pythonTree struct {
	files map[string]string // path → text
}

func pythonSources(t *testing.T) pythonTree {
	t.Helper()
	py := pythonTree{files: map[string]string{}}
	err := filepath.WalkDir(filepath.Join(top, "clients/python"), func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".py") {
			return err
		}
		raw, err := os.ReadFile(p)
		py.files[p] = string(raw)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return py
}

// hasModule: a module file, or a package directory, of that name.
func (py pythonTree) hasModule(name string) bool {
	for p := range py.files {
		if filepath.Base(p) == name+".py" || filepath.Base(filepath.Dir(p)) == name && filepath.Base(p) == "__init__.py" {
			return true
		}
	}
	return false
}

// defines: a class, function, method or module-level name of that name.
func (py pythonTree) defines(name string) bool {
	re := regexp.MustCompile(`(?m)^\s*(?:class|def) ` + regexp.QuoteMeta(name) + `\b|^` + regexp.QuoteMeta(name) + `\s*=`)
	return slices.ContainsFunc(slices.Collect(maps.Values(py.files)), re.MatchString)
}

// No command hides from the checks above in a block that isn't ```sh: a
// sample of output or code may not start a line with a command prompt,
// lineage or make.
func TestREADMECommandsAreInShellBlocks(t *testing.T) {
	for _, b := range fencedBlocks(t, "README.md") {
		if b.lang == "sh" {
			continue
		}
		for i, line := range b.lines {
			for _, p := range []string{"$ ", "lineage ", "make ", "sudo "} {
				if strings.HasPrefix(line, p) {
					t.Errorf("README.md:%d: %q in a %q block: commands go in ```sh blocks, where they are checked", b.line+i, line, b.lang)
				}
			}
		}
	}
}
