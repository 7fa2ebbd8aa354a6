package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/lineage-dev/lineage/internal/testutil"
)

// debianPython is the interpreter that sees Debian's setuptools, pytest
// and pytest-xdist (python3-setuptools, python3-pytest,
// python3-pytest-xdist); the python3 first on PATH may be another.
const debianPython = "/usr/bin/python3"

// venv is one virtual environment per test binary with clients/python
// installed, as a user installs it where PyPI can't be reached: a venv
// that sees the system's site packages, pip with no index and no build
// isolation. Its directory is removed when the tests end (TestMain).
var venv struct {
	once sync.Once
	// root holds the venv (dir) and the copy it was installed from.
	root, dir string
	err       error
	out       []byte
}

// pythonVenv returns the venv's python, making the venv once. Without
// Debian's python3 and its venv module it skips, unless tools are
// required (LINEAGE_REQUIRE_TOOLS=1).
func pythonVenv(t *testing.T) string {
	t.Helper()
	testutil.LookTool(t, debianPython)
	if err := exec.Command(debianPython, "-c", "import venv, ensurepip, setuptools").Run(); err != nil {
		if os.Getenv(testutil.RequireToolsEnv) == "1" {
			t.Fatalf("%s has no venv, ensurepip or setuptools (apt-get install python3-venv python3-setuptools): %v", debianPython, err)
		}
		t.Skipf("%s has no venv, ensurepip or setuptools (apt-get install python3-venv python3-setuptools)", debianPython)
	}
	venv.once.Do(makeVenv)
	if venv.err != nil {
		t.Fatalf("make the venv: %v\n%s", venv.err, venv.out)
	}
	return filepath.Join(venv.dir, "bin", "python")
}

func makeVenv() {
	venv.root, venv.err = os.MkdirTemp("", "lineage-venv")
	if venv.err != nil {
		return
	}
	// Installed from a copy: pip's build leaves build/ and egg-info
	// beside the sources it builds.
	src := filepath.Join(venv.root, "src")
	if venv.out, venv.err = exec.Command("cp", "-r", "../../clients/python", src).CombinedOutput(); venv.err != nil {
		return
	}
	env := filepath.Join(venv.root, "env")
	if venv.out, venv.err = exec.Command(debianPython, "-m", "venv", "--system-site-packages", env).CombinedOutput(); venv.err != nil {
		return
	}
	pip := exec.Command(filepath.Join(env, "bin", "pip"), "install", "--no-index", "--no-build-isolation", "--disable-pip-version-check", "-q", src)
	pip.Env = append(os.Environ(), "PIP_NO_INPUT=1")
	venv.out, venv.err = pip.CombinedOutput()
	venv.dir = env
}

// removeVenv removes the venv, if one was made.
func removeVenv() {
	if venv.root != "" {
		os.RemoveAll(venv.root)
	}
}
