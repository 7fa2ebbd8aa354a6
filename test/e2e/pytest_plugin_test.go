package e2e

import (
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lineage-dev/lineage/client"
	"github.com/lineage-dev/lineage/internal/testutil"
	"github.com/lineage-dev/lineage/lineage"
)

// sampleSuite is the pytest plugin's sample suite.
const sampleSuite = "../../clients/python/tests/sample_suite"

// sampleLeak is what one test of the sample suite leaves: the property its
// JUnit test case carries and the sleep (its whole seconds) it names.
type sampleLeak struct {
	prop    string
	seconds int
}

// sampleLeaks are the sample suite's leftovers by test: test_clean leaves
// none; test_uses_server's is its module fixture's.
var sampleLeaks = map[string]sampleLeak{
	"test_setsid_leak":           {"lineage_leak", 91},
	"test_double_fork_daemon":    {"lineage_leak", 92},
	"test_function_fixture_leak": {"lineage_leak", 93},
	"test_uses_server":           {"lineage_fixture_leak", 94},
	"test_allowed_leak":          {"lineage_allowed", 96},
}

// sampleFailing are the tests --lineage-fail fails: those that leak, and
// the test at whose teardown pytest finalizes the leaking module fixture.
var sampleFailing = []string{"test_double_fork_daemon", "test_function_fixture_leak", "test_setsid_leak", "test_uses_server"}

type junitCase struct {
	Name  string `xml:"name,attr"`
	Props []struct {
		Name  string `xml:"name,attr"`
		Value string `xml:"value,attr"`
	} `xml:"properties>property"`
	Error *struct {
		Message string `xml:"message,attr"`
	} `xml:"error"`
}

type junitReport struct {
	Suites []struct {
		Cases []junitCase `xml:"testcase"`
	} `xml:"testsuite"`
}

// pytestRun is one run of the sample suite.
type pytestRun struct {
	out   string
	code  int
	cases map[string]junitCase
}

func runSampleSuite(t *testing.T, python, sock, mark string, args ...string) pytestRun {
	t.Helper()
	suite, err := filepath.Abs(sampleSuite)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	junit := filepath.Join(dir, "junit.xml")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	argv := append([]string{"-m", "pytest", "-p", "no:cacheprovider", "-q", "--rootdir", suite, "--junitxml", junit}, args...)
	cmd := exec.CommandContext(ctx, python, append(argv, suite)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), client.EnvSocket+"="+sock, "LINEAGE_TEST_MARK="+mark, "PYTHONDONTWRITEBYTECODE=1")
	cmd.WaitDelay = 10 * time.Second
	out, err := cmd.CombinedOutput()
	run := pytestRun{out: string(out), cases: map[string]junitCase{}}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		run.code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("pytest %v: %v\n%s", args, err, out)
	}
	data, err := os.ReadFile(junit)
	if err != nil {
		t.Fatalf("pytest %v wrote no JUnit XML: %v\n%s", args, err, out)
	}
	var rep junitReport
	if err := xml.Unmarshal(data, &rep); err != nil {
		t.Fatalf("JUnit XML: %v\n%s", err, data)
	}
	for _, s := range rep.Suites {
		for _, c := range s.Cases {
			run.cases[c.Name] = c
		}
	}
	if len(run.cases) != 6 {
		t.Fatalf("pytest %v: %d test cases in the JUnit XML, want 6\n%s", args, len(run.cases), out)
	}
	return run
}

// attributed checks that each test case names exactly its own leftover,
// by identity, and returns those identities by test. The identity must be
// the sleeper's that carries the test's seconds (checked while it runs).
func (r pytestRun) attributed(t *testing.T, mark string, sleepers []testutil.Proc) map[string]lineage.Identity {
	t.Helper()
	bySeconds := map[int]lineage.Identity{}
	for _, p := range sleepers {
		var s int
		if _, err := fmt.Sscanf(p.Argv[1], "%d.", &s); err == nil {
			bySeconds[s] = lineage.Identity{PID: uint32(p.PID), StartTicks: p.StartTicks}
		}
	}
	out := map[string]lineage.Identity{}
	for name, c := range r.cases {
		want, leaks := sampleLeaks[name]
		if !leaks {
			if len(c.Props) != 0 {
				t.Errorf("%s left nothing, but its test case says %+v", name, c.Props)
			}
			continue
		}
		if len(c.Props) != 1 || c.Props[0].Name != want.prop || !strings.Contains(c.Props[0].Value, fmt.Sprintf(" sleep %d.%s (age ", want.seconds, mark)) {
			t.Errorf("%s: properties %+v, want one %s naming sleep %d.%s", name, c.Props, want.prop, want.seconds, mark)
			continue
		}
		value := c.Props[0].Value
		if want.prop == "lineage_fixture_leak" {
			prefix := "fixture server (module scope, test_server.py): "
			if !strings.HasPrefix(value, prefix) {
				t.Errorf("%s: %q doesn't name the fixture", name, value)
			}
			value = strings.TrimPrefix(value, prefix)
		}
		id, err := lineage.ParseIdentity(strings.Fields(value)[0])
		if err != nil {
			t.Errorf("%s: %q names no identity: %v", name, value, err)
			continue
		}
		if sleeper, ok := bySeconds[want.seconds]; ok && sleeper != id {
			t.Errorf("%s names %s, but the sleep %d.%s it started is %s", name, id, want.seconds, mark, sleeper)
		}
		out[name] = id
	}
	return out
}

// summarised checks the terminal summary: it names exactly the leaking
// tests and the fixture, each with its leftover.
func (r pytestRun) summarised(t *testing.T, mark string) {
	t.Helper()
	if !strings.Contains(r.out, "lineage: 3 tests and 1 fixture left processes behind") {
		t.Errorf("no summary of 3 tests and 1 fixture:\n%s", r.out)
	}
	for name, want := range sampleLeaks {
		file := "test_sample.py"
		if name == "test_uses_server" {
			file = "test_server.py"
		}
		i := strings.Index(r.out, "\n"+file+"::"+name+"\n")
		if i < 0 {
			t.Errorf("the summary doesn't name %s:\n%s", name, r.out)
			continue
		}
		entry, _, _ := strings.Cut(r.out[i+1:], "\n"+"test_")
		if !strings.Contains(entry, fmt.Sprintf("sleep %d.%s", want.seconds, mark)) {
			t.Errorf("the summary's entry for %s doesn't name its sleep %d: %q", name, want.seconds, entry)
		}
	}
	if strings.Contains(r.out, "::test_clean\n") {
		t.Errorf("the summary names test_clean:\n%s", r.out)
	}
}

// killAll kills the sample suite's leftovers by identity, and waits until
// they are gone.
func killAll(t *testing.T, mark string) {
	t.Helper()
	for _, p := range testutil.Sleepers(mark) {
		testutil.KillIdentity(p.PID, p.StartTicks)
		testutil.WaitGone(p.PID, p.StartTicks, 30*time.Second)
	}
}

// The pytest plugin on its sample suite (six tests: a setsid leak, a
// double-fork daemon, a function fixture's leak, a module fixture's
// server, a clean test, an allowed leak), through a real daemon: plain
// and under pytest-xdist (enabled from the ini), each test case names
// exactly its own leftover by identity, and the summary exactly the
// leaking tests and the fixture; --lineage-fail fails exactly those;
// --lineage-reap leaves nothing but the allowed leftover; without a
// daemon the suite runs unchanged and says so once.
func TestPytestPlugin(t *testing.T) {
	python := pythonVenv(t)
	if err := exec.Command(python, "-c", "import pytest, xdist").Run(); err != nil {
		if os.Getenv(testutil.RequireToolsEnv) == "1" {
			t.Fatalf("pytest and pytest-xdist are required (apt-get install python3-pytest python3-pytest-xdist): %v", err)
		}
		t.Skip("pytest or pytest-xdist not installed (apt-get install python3-pytest python3-pytest-xdist)")
	}
	d := startDaemon(t, "")
	mark := testutil.Marker(t)
	testutil.CheckNoLeaks(t, mark)
	ini := filepath.Join(t.TempDir(), "pytest.ini")
	if err := os.WriteFile(ini, []byte("[pytest]\nlineage = true\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	for _, args := range [][]string{{"--lineage"}, {"-c", ini, "-n", "2"}} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			defer killAll(t, mark)
			r := runSampleSuite(t, python, d.sock, mark, args...)
			if r.code != 0 {
				t.Fatalf("exit %d, want 0 (nothing fails without --lineage-fail):\n%s", r.code, r.out)
			}
			sleepers := testutil.Sleepers(mark)
			if len(sleepers) != 5 {
				t.Errorf("%d sleepers run, want the 5 left behind: %v", len(sleepers), sleepers)
			}
			r.attributed(t, mark, sleepers)
			r.summarised(t, mark)
		})
	}

	t.Run("--lineage-fail", func(t *testing.T) {
		defer killAll(t, mark)
		r := runSampleSuite(t, python, d.sock, mark, "--lineage-fail")
		if r.code != 1 {
			t.Errorf("exit %d, want 1", r.code)
		}
		var failed []string
		for name, c := range r.cases {
			if c.Error != nil {
				failed = append(failed, name)
			}
		}
		slices.Sort(failed)
		if !slices.Equal(failed, sampleFailing) {
			t.Errorf("failed %v, want exactly %v:\n%s", failed, sampleFailing, r.out)
		}
		r.attributed(t, mark, testutil.Sleepers(mark))
	})

	t.Run("--lineage-reap -n 2", func(t *testing.T) {
		defer killAll(t, mark)
		r := runSampleSuite(t, python, d.sock, mark, "--lineage-reap", "-n", "2")
		if r.code != 0 {
			t.Fatalf("exit %d, want 0:\n%s", r.code, r.out)
		}
		ids := r.attributed(t, mark, nil)
		for name, id := range ids {
			alive := testutil.Alive(int(id.PID), id.StartTicks)
			if name == "test_allowed_leak" && !alive {
				t.Errorf("the allowed leftover %s of %s was reaped", id, name)
			}
			if name != "test_allowed_leak" && !testutil.WaitGone(int(id.PID), id.StartTicks, 30*time.Second) {
				t.Errorf("the leftover %s of %s outlived --lineage-reap", id, name)
			}
		}
		if left := testutil.Sleepers(mark); len(left) != 1 || !strings.HasPrefix(left[0].Argv[1], "96.") {
			t.Errorf("after --lineage-reap, left: %v; want only the allowed sleep 96", left)
		}
	})

	t.Run("no daemon", func(t *testing.T) {
		defer killAll(t, mark)
		r := runSampleSuite(t, python, filepath.Join(t.TempDir(), "none.sock"), mark, "--lineage", "-n", "2")
		if r.code != 0 || !strings.Contains(r.out, "6 passed") {
			t.Errorf("exit %d, want the suite to pass unchanged:\n%s", r.code, r.out)
		}
		if n := strings.Count(r.out, "lineage: no lineage daemon reachable"); n != 1 {
			t.Errorf("said %d times that no daemon answers, want once:\n%s", n, r.out)
		}
		if strings.Contains(r.out, "left processes behind") {
			t.Errorf("a summary without a daemon:\n%s", r.out)
		}
		for name, c := range r.cases {
			if len(c.Props) != 0 {
				t.Errorf("%s has properties without a daemon: %+v", name, c.Props)
			}
		}
	})
}
