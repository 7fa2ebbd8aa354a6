package deploy

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// goTestValueFlags are the go test flags the docs use that take a value.
var goTestValueFlags = map[string]bool{"-run": true, "-bench": true, "-benchtime": true, "-timeout": true, "-count": true}

// checkGo: `go test` names packages that exist and patterns that match
// their tests or benchmarks; `go run ./cmd/lineage-bench` only flags it
// defines; any other go command, packages that exist.
func checkGo(c docCommand) error {
	if len(c.words) < 2 {
		return fmt.Errorf("go with no subcommand")
	}
	args := c.words[2:]
	switch c.words[1] {
	case "test":
		return checkGoTest(args)
	case "run":
		if len(args) == 0 {
			return fmt.Errorf("go run of nothing")
		}
		if err := packageDir(args[0]); err != nil {
			return err
		}
		if args[0] == "./cmd/lineage-bench" {
			return checkBenchFlags(args[1:])
		}
		return nil
	default:
		for _, a := range args {
			if strings.HasPrefix(a, "./") {
				if err := packageDir(a); err != nil {
					return err
				}
			}
		}
		return nil
	}
}

func checkGoTest(args []string) error {
	flags := map[string]string{}
	var pkgs []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case goTestValueFlags[a] && i+1 < len(args):
			flags[a] = args[i+1]
			i++
		case strings.HasPrefix(a, "-"):
		default:
			if err := packageDir(a); err != nil {
				return err
			}
			pkgs = append(pkgs, strings.TrimSuffix(strings.TrimSuffix(a, "..."), "/"))
		}
	}
	if len(pkgs) == 0 {
		return fmt.Errorf("go test of no package")
	}
	kind, pattern := "Benchmark", flags["-bench"]
	if pattern == "" {
		kind, pattern = "Test", flags["-run"]
	}
	if pattern == "" || pattern == "." || pattern == "^$" {
		return nil
	}
	re, err := regexp.Compile(strings.Split(pattern, "/")[0])
	if err != nil {
		return fmt.Errorf("pattern %q: %v", pattern, err)
	}
	names, err := funcsIn(pkgs, kind)
	if err != nil {
		return err
	}
	for _, n := range names {
		if re.MatchString(n) {
			return nil
		}
	}
	return fmt.Errorf("no %s in %s matches %q", kind, strings.Join(pkgs, " "), pattern)
}

// packageDir: ./path (or ./path/...) is a directory of the tree.
func packageDir(arg string) error {
	rel := strings.TrimSuffix(strings.TrimSuffix(arg, "..."), "/")
	if !strings.HasPrefix(rel, "./") && rel != "." {
		return nil
	}
	if fi, err := os.Stat(filepath.Join(top, rel)); err != nil || !fi.IsDir() {
		return fmt.Errorf("no package %s in the tree", arg)
	}
	return nil
}

// funcsIn lists the test files' functions named kind... in the packages.
func funcsIn(pkgs []string, kind string) ([]string, error) {
	re := regexp.MustCompile(`(?m)^func (` + kind + `\w*)\(`)
	var out []string
	for _, p := range pkgs {
		files, err := filepath.Glob(filepath.Join(top, p, "*_test.go"))
		if err != nil {
			return nil, err
		}
		for _, f := range files {
			raw, err := os.ReadFile(f)
			if err != nil {
				return nil, err
			}
			for _, m := range re.FindAllStringSubmatch(string(raw), -1) {
				out = append(out, m[1])
			}
		}
	}
	return out, nil
}

var benchFlagRE = regexp.MustCompile(`flag\.(Bool|Int|Int64|Uint|Uint64|String|Duration|Float64)(?:Var)?\(\s*(?:&[\w.]+,\s*)?"([\w-]+)"`)

// benchFlags reads the flags lineage-bench defines from its source: name →
// whether it takes a value (all but the booleans).
func benchFlags() (map[string]bool, error) {
	files, err := filepath.Glob(filepath.Join(top, "cmd/lineage-bench/*.go"))
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		raw, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		for _, m := range benchFlagRE.FindAllStringSubmatch(string(raw), -1) {
			out[m[2]] = m[1] != "Bool"
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("found no flag definitions in cmd/lineage-bench")
	}
	return out, nil
}

// checkBenchFlags: every argument is a flag lineage-bench defines, with a
// value when it takes one; lineage-bench takes no other argument.
func checkBenchFlags(args []string) error {
	defined, err := benchFlags()
	if err != nil {
		return err
	}
	for i := 0; i < len(args); i++ {
		name, _, hasValue := strings.Cut(strings.TrimLeft(args[i], "-"), "=")
		if !strings.HasPrefix(args[i], "-") {
			return fmt.Errorf("lineage-bench takes no argument %q", args[i])
		}
		takes, ok := defined[name]
		if !ok {
			return fmt.Errorf("lineage-bench has no flag -%s", name)
		}
		if takes && !hasValue {
			if i+1 >= len(args) {
				return fmt.Errorf("lineage-bench -%s needs a value", name)
			}
			i++
		}
	}
	return nil
}
