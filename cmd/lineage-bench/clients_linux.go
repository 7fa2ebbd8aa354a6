package main

import (
	_ "embed"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// The clients' figures (-only clients), against one running `lineage
// serve`: the Python client's Client.run(["true"]) over
// subprocess.run(["true"]), and the pytest plugin's cost per test, pytest
// --lineage over plain pytest, on 1,000 trivial tests. The package is
// installed into a venv of Debian's python3 as the tests install it.

//go:embed pysrc/bench_run.py
var benchRunPy string

// clientsFlags are the clients' benchmark's knobs.
type clientsFlags struct {
	runs, tests, rounds int
	source              string
}

func clientFlags() *clientsFlags {
	var f clientsFlags
	flag.IntVar(&f.runs, "client-runs", 200, `Client.run(["true"]) runs, each beside a subprocess.run(["true"]) (-only clients)`)
	flag.IntVar(&f.tests, "pytest-tests", 1000, "trivial tests per pytest run (-only clients)")
	flag.IntVar(&f.rounds, "pytest-rounds", 3, "interleaved pytest runs, plain and --lineage (-only clients)")
	flag.StringVar(&f.source, "python-client", "clients/python", "the Python package installed for -only clients")
	return &f
}

func benchClients(lineageBin string, f clientsFlags) {
	d, err := startBenchDaemon(lineageBin, false, "")
	if err != nil {
		fail(err)
	}
	defer d.stop()
	dir, err := tempDir("", "lineage-bench-clients")
	if err != nil {
		fail(err)
	}
	defer os.RemoveAll(dir)
	python, err := benchVenv(dir, f.source)
	if err != nil {
		fail(err)
	}
	bin, err := filepath.Abs(lineageBin)
	if err != nil {
		fail(err)
	}

	script := filepath.Join(dir, "bench_run.py")
	if err := os.WriteFile(script, []byte(benchRunPy), 0o644); err != nil {
		fail(err)
	}
	out, err := exec.Command(python, script, d.sock, bin, strconv.Itoa(f.runs)).Output()
	if err != nil {
		fail(fmt.Errorf("the Python client's figure: %w", err))
	}
	var run struct {
		Subprocess, Client float64
		Rounds             int
	}
	if err := json.Unmarshal(out, &run); err != nil {
		fail(fmt.Errorf("the Python client's figure %q: %w", out, err))
	}

	plain, armed, err := measurePytest(python, d.sock, dir, f.tests, f.rounds)
	if err != nil {
		fail(err)
	}
	perTest := (armed - plain) / time.Duration(f.tests)

	fmt.Printf("### The clients\n\n")
	fmt.Printf("| figure | lineage | baseline | cost | target |\n|---|---|---|---|---|\n")
	fmt.Printf("| Python `Client.run([\"true\"])`, median of %d | %s | `subprocess.run([\"true\"])` %s | +%s | ≤ 5 ms |\n",
		run.Rounds, seconds(run.Client), seconds(run.Subprocess), seconds(run.Client-run.Subprocess))
	fmt.Printf("| `pytest --lineage`, %d trivial tests, median of %d | %s | plain pytest %s | +%s a test | ≤ 2 ms a test |\n\n",
		f.tests, f.rounds, armed.Round(time.Millisecond), plain.Round(time.Millisecond), perTest.Round(time.Microsecond))
}

func seconds(s float64) string {
	return time.Duration(s * float64(time.Second)).Round(10 * time.Microsecond).String()
}

// benchVenv makes a venv that sees Debian's site packages (setuptools,
// pytest) and installs the Python package from a copy of source into it,
// offline; it returns the venv's python.
func benchVenv(dir, source string) (string, error) {
	src := filepath.Join(dir, "src")
	if out, err := exec.Command("cp", "-r", source, src).CombinedOutput(); err != nil {
		return "", fmt.Errorf("copy %s: %v: %s", source, err, out)
	}
	env := filepath.Join(dir, "venv")
	if out, err := exec.Command("/usr/bin/python3", "-m", "venv", "--system-site-packages", env).CombinedOutput(); err != nil {
		return "", fmt.Errorf("python3 -m venv (apt-get install python3-venv): %v: %s", err, out)
	}
	pip := exec.Command(filepath.Join(env, "bin", "pip"), "install", "-q", "--no-index", "--no-build-isolation", "--disable-pip-version-check", src)
	if out, err := pip.CombinedOutput(); err != nil {
		return "", fmt.Errorf("pip install %s: %v: %s", source, err, out)
	}
	return filepath.Join(env, "bin", "python"), nil
}

// measurePytest times pytest on n trivial tests, plain and with --lineage,
// interleaved round by round, and returns the medians.
func measurePytest(python, sock, dir string, n, rounds int) (plain, armed time.Duration, err error) {
	suite := filepath.Join(dir, "suite")
	if err := os.MkdirAll(suite, 0o755); err != nil {
		return 0, 0, err
	}
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "def test_%d():\n    pass\n\n\n", i)
	}
	if err := os.WriteFile(filepath.Join(suite, "test_trivial.py"), []byte(b.String()), 0o644); err != nil {
		return 0, 0, err
	}
	run := func(args ...string) (time.Duration, error) {
		cmd := exec.Command(python, append([]string{"-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", suite}, append(args, suite)...)...)
		cmd.Env = append(os.Environ(), "LINEAGE_SOCKET="+sock, "PYTHONDONTWRITEBYTECODE=1")
		began := time.Now()
		out, err := cmd.CombinedOutput()
		took := time.Since(began)
		if err != nil || !strings.Contains(string(out), fmt.Sprintf("%d passed", n)) {
			return 0, fmt.Errorf("pytest %v: %v\n%s", args, err, out)
		}
		if len(args) > 0 && strings.Contains(string(out), "without process attribution") {
			return 0, fmt.Errorf("pytest --lineage ran without the daemon:\n%s", out)
		}
		return took, nil
	}
	var ps, as []float64
	for range rounds {
		p, err := run()
		if err != nil {
			return 0, 0, err
		}
		a, err := run("--lineage")
		if err != nil {
			return 0, 0, err
		}
		ps, as = append(ps, p.Seconds()), append(as, a.Seconds())
	}
	return time.Duration(median(ps) * float64(time.Second)), time.Duration(median(as) * float64(time.Second)), nil
}
