package deploy

import (
	"fmt"
	"go/scanner"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// readmeRunners names, for each command the README shows, what runs it.
// The key is the command's signature: the program, its subcommands and the
// flags it uses, without values (cliUse.signature; for make, the target and
// the variables set). The value is
//   - a test function's name: its file must hold each subcommand, target,
//     variable and flag as a Go string literal (a subcommand may be in the
//     test's name instead), so the test can't stop running it unnoticed;
//   - "demo": scripts/demo.sh runs it, or the Makefile's demo target makes
//     it;
//   - "ci": .ci/run runs it;
//   - "by hand: why", for what nothing here runs on its own.
//
// A README command with no entry fails, and so does an entry no README
// command uses.
var readmeRunners = map[string]string{
	"lineage run --deadline":              "TestRunDeadlineKillsTheJobAndItsLineage",
	"lineage run --report":                "TestRunCatchesEveryEscape",
	"lineage run --keep":                  "TestRunReapingOffAndKeepOnlyReport",
	"lineage run --record":                "TestRunRecordsAJob",
	"lineage run --record --redact":       "TestRunRecordRedactsAndRefusesABadPattern",
	"lineage report":                      "TestRunRecordsAJob",
	"lineage report --format":             "TestRunRecordsAJob",
	"lineage report --format -o":          "TestReportOutputFile",
	"lineage report --leaks-only":         "TestReportTreeShapes",
	"lineage doctor":                      "demo",
	"lineage serve":                       "TestFront",
	"lineage session open --kind --label": "TestServeSessionsThroughCLIAndCurl",
	"lineage exec --session":              "TestServeSessionsThroughCLIAndCurl",
	"lineage session report":              "TestServeSessionsThroughCLIAndCurl",
	"lineage turn end":                    "TestServeSessionsThroughCLIAndCurl",
	"lineage session close":               "TestServeRootsCommands",
	"make install":                        "TestMakeInstall",
	"make static":                         "TestMakeInstall",
	"make static GOARCH":                  "TestMakeStaticArm64",
	"make build":                          "demo",
	"make test":                           "ci",
	"make demo":                           "by hand: the demo is the README's example itself; its output above is a sample of it",
}

var cli struct {
	once sync.Once
	dir  string
	tree *cliTree
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if cli.dir != "" {
		os.RemoveAll(cli.dir)
	}
	os.Exit(code)
}

// lineageTree builds lineage (the front and the tracker beside it, as
// make build lays them out, without cgo) once, and returns its tree.
func lineageTree(t *testing.T) *cliTree {
	t.Helper()
	cli.once.Do(func() {
		if cli.dir, cli.err = os.MkdirTemp("", "lineage-doc-"); cli.err != nil {
			return
		}
		cli.err = buildLineage(cli.dir)
		cli.tree = &cliTree{bin: filepath.Join(cli.dir, "lineage"), cache: map[string]*cliCommand{}}
	})
	if cli.err != nil {
		t.Fatal(cli.err)
	}
	return cli.tree
}

func buildLineage(dir string) error {
	goTool, err := exec.LookPath("go")
	if err != nil {
		return err
	}
	front := []string{"build", "-o", filepath.Join(dir, "lineage"), "./cmd/lineage"}
	tracker := []string{"build", "-o", filepath.Join(dir, "lineage-tracker"), "./cmd/lineage-tracker"}
	for _, args := range [][]string{front, tracker} {
		cmd := exec.Command(goTool, args...)
		cmd.Dir = top
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	return nil
}

// Every command of every doc parses: lineage's against the built command
// tree, make's against the Makefile, go's against the packages and
// lineage-bench's flags. Other programs are the machine's.
func TestDocCommandsParse(t *testing.T) {
	tree := lineageTree(t)
	mk := readMakefile(t)
	n := 0
	for _, f := range docFiles {
		for _, c := range shellCommands(t, f) {
			var err error
			switch c.words[0] {
			case "lineage":
				_, err = tree.parseLineage(c.words[1:])
			case "make":
				err = checkMake(mk, c)
			case "go":
				err = checkGo(c)
			default:
				continue
			}
			n++
			if err != nil {
				t.Errorf("%s\n\t%v", c, err)
			}
		}
	}
	if n < 40 {
		t.Errorf("only %d lineage, make and go commands in the docs: is the parser reading them?", n)
	}
}

// Every command the README shows is run by a test, by make demo or by CI,
// or says why not (readmeRunners).
func TestREADMECommandsAreRun(t *testing.T) {
	tree := lineageTree(t)
	mk := readMakefile(t)
	tests := testFunctions(t)
	used := map[string]bool{}
	for _, c := range shellCommands(t, "README.md") {
		sig, words, err := readmeSignature(tree, c)
		if err != nil {
			t.Errorf("%s\n\t%v", c, err)
			continue
		}
		runner, ok := readmeRunners[sig]
		if !ok {
			t.Errorf("%s\n\tnothing is said to run %q: add it to readmeRunners, with the test that runs it", c, sig)
			continue
		}
		used[sig] = true
		if err := checkRunner(mk, tests, runner, c.words[0], words); err != nil {
			t.Errorf("%s\n\t%s: %v", c, runner, err)
		}
	}
	for sig := range readmeRunners {
		if !used[sig] {
			t.Errorf("readmeRunners names %q, which the README no longer shows", sig)
		}
	}
}

// readmeSignature returns the command's signature and the words its runner
// must show: lineage's subcommands and flags, make's targets and variables,
// another program's flags.
func readmeSignature(tree *cliTree, c docCommand) (string, []string, error) {
	switch c.words[0] {
	case "lineage":
		u, err := tree.parseLineage(c.words[1:])
		if err != nil {
			return "", nil, err
		}
		return u.signature(), append(slices.Clone(u.path), u.flags...), nil
	case "make":
		var words []string
		for _, w := range c.words[1:] {
			name, _, _ := strings.Cut(w, "=")
			words = append(words, name)
		}
		return strings.Join(append([]string{"make"}, words...), " "), words, nil
	default:
		words := []string{c.words[0]}
		for _, w := range c.words[1:] {
			if strings.HasPrefix(w, "-") {
				words = append(words, w)
			}
		}
		return strings.Join(words, " "), words, nil
	}
}

// checkRunner: the runner exists and shows the words.
func checkRunner(mk makefile, tests map[string][]string, runner, program string, words []string) error {
	switch {
	case runner == "demo":
		if program == "make" {
			if !mk.runs("demo", words[0]) {
				return fmt.Errorf("make demo doesn't make %s", words[0])
			}
			return nil
		}
		return fileRunsWords("scripts/demo.sh", words)
	case runner == "ci":
		if program != "make" {
			return fmt.Errorf("only make targets are said to run in CI")
		}
		raw, err := os.ReadFile(filepath.Join(top, ".ci/run"))
		if err != nil {
			return err
		}
		for _, m := range regexp.MustCompile(`(?m)^\s*make ([\w-]+)`).FindAllStringSubmatch(string(raw), -1) {
			if mk.runs(m[1], words[0]) {
				return nil
			}
		}
		return fmt.Errorf(".ci/run makes nothing that makes %s", words[0])
	case strings.HasPrefix(runner, "by hand: "):
		if len(strings.TrimPrefix(runner, "by hand: ")) < 20 {
			return fmt.Errorf("say why nothing runs it")
		}
		return nil
	}
	files, ok := tests[runner]
	if !ok {
		return fmt.Errorf("no test function %s in the tree", runner)
	}
	var errs []string
	for _, f := range files {
		err := testShowsWords(mk, f, runner, program, words)
		if err == nil {
			return nil
		}
		errs = append(errs, err.Error())
	}
	return fmt.Errorf("%s", strings.Join(errs, "; "))
}

// testShowsWords: the test's file holds each word as a string literal (a
// flag's literal may carry its value: "--format=json"); a lineage
// subcommand may be in the test's name instead. For make, a target the
// file names must make the README's.
func testShowsWords(mk makefile, file, name, program string, words []string) error {
	lits, err := stringLiterals(file)
	if err != nil {
		return err
	}
	has := func(w string) bool {
		return slices.ContainsFunc(lits, func(l string) bool { return l == w || strings.HasPrefix(l, w+"=") })
	}
	for i, w := range words {
		switch {
		case program == "make" && i == 0:
			if !slices.ContainsFunc(lits, func(l string) bool { return mk.prerequisites[l] != nil && mk.runs(l, w) }) {
				return fmt.Errorf("%s names no make target that makes %s", file, w)
			}
		case has(w):
		case program == "lineage" && !strings.HasPrefix(w, "-") && strings.Contains(strings.ToLower(name), w):
		default:
			return fmt.Errorf("%s holds no literal %q", file, w)
		}
	}
	return nil
}

// fileRunsWords: a line of the shell script holds every word.
func fileRunsWords(path string, words []string) error {
	raw, err := os.ReadFile(filepath.Join(top, path))
	if err != nil {
		return err
	}
	for line := range strings.SplitSeq(string(raw), "\n") {
		got, err := shellWords(line)
		if err != nil {
			continue
		}
		if !slices.ContainsFunc(words, func(w string) bool { return !slices.Contains(got, w) }) {
			return nil
		}
	}
	return fmt.Errorf("no line of %s runs %s", path, strings.Join(words, " "))
}

// testFunctions maps each Test function of the tree to the files that
// define one of that name.
func testFunctions(t *testing.T) map[string][]string {
	t.Helper()
	re := regexp.MustCompile(`(?m)^func (Test\w+)\(`)
	out := map[string][]string{}
	err := filepath.WalkDir(top, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && p != top && (strings.HasPrefix(d.Name(), ".") || d.Name() == "bench-results" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, "_test.go") {
			return nil
		}
		raw, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, m := range re.FindAllStringSubmatch(string(raw), -1) {
			out[m[1]] = append(out[m[1]], p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// stringLiterals returns the Go string literals of a file, unquoted.
func stringLiterals(path string) ([]string, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	fset := token.NewFileSet()
	var s scanner.Scanner
	s.Init(fset.AddFile(path, -1, len(src)), src, nil, 0)
	var out []string
	for {
		_, tok, lit := s.Scan()
		if tok == token.EOF {
			return out, nil
		}
		if tok == token.STRING {
			if v, err := strconv.Unquote(lit); err == nil {
				out = append(out, v)
			}
		}
	}
}
