package deploy

import (
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lineage-dev/lineage/internal/testutil"
)

// makeInstall runs `make install` from the repository's top into a fresh
// DESTDIR with the extra variables given, and returns the DESTDIR. The
// static build goes to a temporary file, not into the work tree.
func makeInstall(t *testing.T, vars ...string) string {
	t.Helper()
	mk := testutil.LookTool(t, "make")
	dest := t.TempDir()
	args := append([]string{"-C", "..", "install", "DESTDIR=" + dest, "STATIC=" + filepath.Join(t.TempDir(), "lineage")}, vars...)
	// STATIC_TRACKER follows STATIC: out of the work tree too.
	out, err := exec.Command(mk, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("make %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return dest
}

// make install puts two static binaries that run (the front and the
// tracker beside it), the unit, pointing at the tracker, and the runner
// hooks under DESTDIR.
func TestMakeInstall(t *testing.T) {
	dest := makeInstall(t)
	commit, err := exec.Command("git", "rev-parse", "--short=12", "HEAD").Output()
	if err != nil {
		t.Fatalf("git rev-parse: %v", err)
	}
	front := filepath.Join(dest, "usr/local/bin/lineage")
	for _, bin := range []string{front, filepath.Join(dest, "usr/local/bin/lineage-tracker")} {
		checkMode(t, bin, 0o755)
		checkStatic(t, bin)
		// It runs, and make stamped it with the commit it was built from.
		if out, err := exec.Command(bin, "version").CombinedOutput(); err != nil || !strings.Contains(string(out), strings.TrimSpace(string(commit))) {
			t.Errorf("%s's version does not name commit %s: %v\n%s", bin, commit, err, out)
		}
	}
	// The front hands doctor to the tracker beside it, whose help it
	// prints.
	if out, err := exec.Command(front, "doctor", "--help").CombinedOutput(); err != nil || !strings.Contains(string(out), "doctor checks") {
		t.Errorf("lineage doctor --help through the front: %v\n%s", err, out)
	}
	if self, err := os.ReadFile(front); err == nil {
		if strings.Contains(string(self), "github.com/cilium/ebpf") {
			t.Errorf("the installed front links cilium/ebpf: it is not the front")
		}
	}
	unit := filepath.Join(dest, "usr/local/lib/systemd/system/lineage.service")
	checkMode(t, unit, 0o644)
	if got := execStart(t, unit); !strings.HasPrefix(got, "/usr/local/bin/lineage-tracker serve ") {
		t.Errorf("installed unit: ExecStart=%s, want /usr/local/bin/lineage-tracker serve ...", got)
	}
	hooks := filepath.Join(dest, "usr/local/share/lineage/github-actions")
	checkMode(t, filepath.Join(hooks, "job-started.sh"), 0o755)
	checkMode(t, filepath.Join(hooks, "job-completed.sh"), 0o755)
	checkMode(t, filepath.Join(hooks, "common.sh"), 0o644)
}

// PREFIX moves both, and the unit follows the binary.
func TestMakeInstallPrefix(t *testing.T) {
	dest := makeInstall(t, "PREFIX=/opt/lineage")
	checkMode(t, filepath.Join(dest, "opt/lineage/bin/lineage"), 0o755)
	checkMode(t, filepath.Join(dest, "opt/lineage/bin/lineage-tracker"), 0o755)
	unit := filepath.Join(dest, "opt/lineage/lib/systemd/system/lineage.service")
	if got := execStart(t, unit); !strings.HasPrefix(got, "/opt/lineage/bin/lineage-tracker serve ") {
		t.Errorf("PREFIX=/opt/lineage: ExecStart=%s", got)
	}
}

func checkMode(t *testing.T, path string, want os.FileMode) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != want {
		t.Errorf("%s: mode %v, want %v", path, fi.Mode().Perm(), want)
	}
}

// checkStatic: no program interpreter and no shared library, so the binary
// runs on any distribution, whatever its libc.
func checkStatic(t *testing.T, path string) {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("%s has a program interpreter: not static", path)
		}
	}
	if libs, err := f.ImportedLibraries(); err != nil || len(libs) > 0 {
		t.Errorf("%s needs shared libraries %q (%v)", path, libs, err)
	}
}

// execStart returns the value of the unit's ExecStart=.
func execStart(t *testing.T, unit string) string {
	t.Helper()
	raw, err := os.ReadFile(unit)
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, "ExecStart="); ok {
			return v
		}
	}
	t.Fatalf("%s has no ExecStart=", unit)
	return ""
}
