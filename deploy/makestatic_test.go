package deploy

import (
	"debug/buildinfo"
	"debug/elf"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"github.com/lineage-dev/lineage/internal/testutil"
)

// make static GOARCH=arm64 gives two static arm64 binaries, named for the
// architecture: on an amd64 machine the front's C fast path is
// cross-compiled with Debian's aarch64 cross compiler. amd64's names stay
// the plain ones make install uses. Built into a temporary directory: the
// names are read from make's plan (make -n), the binaries from a build.
func TestMakeStaticArm64(t *testing.T) {
	mk := testutil.LookTool(t, "make")
	if runtime.GOARCH != "arm64" {
		requireCrossCC(t, "aarch64-linux-gnu-gcc", "gcc-aarch64-linux-gnu libc6-dev-arm64-cross")
	}
	plan := makePlan(t, mk, "static", "GOARCH=arm64")
	for _, name := range []string{"bin/lineage-static-arm64", "bin/lineage-static-arm64-tracker"} {
		if !strings.Contains(plan, " -o "+name+" ") {
			t.Errorf("make -n static GOARCH=arm64 builds no %s:\n%s", name, plan)
		}
	}
	if runtime.GOARCH == "amd64" {
		plan := makePlan(t, mk, "static")
		for _, name := range []string{"bin/lineage-static", "bin/lineage-static-tracker"} {
			if !strings.Contains(plan, " -o "+name+" ") {
				t.Errorf("make -n static builds no %s: amd64's names changed:\n%s", name, plan)
			}
		}
	}

	dir := t.TempDir()
	front, tracker := filepath.Join(dir, "lineage-static-arm64"), filepath.Join(dir, "lineage-static-arm64-tracker")
	args := []string{"-C", "..", "static", "GOARCH=arm64", "STATIC=" + front}
	if out, err := exec.Command(mk, args...).CombinedOutput(); err != nil {
		t.Fatalf("make %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	for _, c := range []struct {
		path string
		cgo  string // the front has the C fast path; the tracker no libc at all
	}{{front, "1"}, {tracker, "0"}} {
		checkStatic(t, c.path)
		f, err := elf.Open(c.path)
		if err != nil {
			t.Fatal(err)
		}
		if f.Machine != elf.EM_AARCH64 {
			t.Errorf("%s is built for %v, want EM_AARCH64", c.path, f.Machine)
		}
		f.Close()
		info, err := buildinfo.ReadFile(c.path)
		if err != nil {
			t.Fatalf("build info of %s: %v", c.path, err)
		}
		if got := buildSetting(info, "GOARCH"); got != "arm64" {
			t.Errorf("%s: GOARCH=%q, want arm64", c.path, got)
		}
		if got := buildSetting(info, "CGO_ENABLED"); got != c.cgo {
			t.Errorf("%s: CGO_ENABLED=%q, want %s", c.path, got, c.cgo)
		}
		// What file(1) says of them, where it is installed.
		if fileTool, err := exec.LookPath("file"); err == nil {
			out, err := exec.Command(fileTool, "-b", c.path).Output()
			if err != nil || !strings.Contains(string(out), "ARM aarch64") || !strings.Contains(string(out), "statically linked") {
				t.Errorf("file %s: %s (%v), want ARM aarch64, statically linked", c.path, out, err)
			}
		}
		checkForeignExec(t, c.path)
	}
}

// checkForeignExec runs an arm64 binary as this machine would: on arm64,
// or where binfmt_misc hands aarch64 binaries to an emulator, it runs and
// names its architecture; elsewhere exec fails with the system's own
// error, ENOEXEC, before anything of lineage's runs. Under qemu-aarch64,
// where installed, it runs and names arm64 either way.
func checkForeignExec(t *testing.T, path string) {
	t.Helper()
	out, err := exec.Command(path, "version").CombinedOutput()
	switch {
	case err == nil:
		if !strings.Contains(string(out), "arch arm64") {
			t.Errorf("%s version: %s, want it to name arch arm64", path, out)
		}
	case runtime.GOARCH == "arm64" || aarch64Binfmt():
		t.Errorf("%s version on %s: %v\n%s", path, runtime.GOARCH, err, out)
	case !errors.Is(err, syscall.ENOEXEC):
		t.Errorf("%s run on %s: %v, want exec's own ENOEXEC (exec format error)", path, runtime.GOARCH, err)
	}
	if qemu, err := exec.LookPath("qemu-aarch64"); err == nil {
		out, err := exec.Command(qemu, path, "version").CombinedOutput()
		if err != nil || !strings.Contains(string(out), "arch arm64") {
			t.Errorf("qemu-aarch64 %s version: %v\n%s", path, err, out)
		}
	}
}

// aarch64Binfmt: binfmt_misc has an enabled handler for aarch64 binaries.
func aarch64Binfmt() bool {
	entries, _ := filepath.Glob("/proc/sys/fs/binfmt_misc/*")
	for _, e := range entries {
		raw, err := os.ReadFile(e)
		if err == nil && strings.HasPrefix(string(raw), "enabled") && strings.Contains(string(raw), "magic 7f454c460201010000000000000000000200b700") {
			return true
		}
	}
	return false
}

// requireCrossCC skips the test when the cross compiler cc, or the static
// C library it links, is missing (it fails under LINEAGE_REQUIRE_TOOLS=1):
// make would install them itself, as root, which a test must not.
func requireCrossCC(t *testing.T, cc, pkgs string) {
	t.Helper()
	path, err := exec.LookPath(cc)
	if err == nil {
		if out, e := exec.Command(path, "-print-file-name=libc.a").Output(); e != nil || !filepath.IsAbs(strings.TrimSpace(string(out))) {
			err = errors.New("no static libc.a")
		}
	}
	if err == nil {
		return
	}
	if os.Getenv(testutil.RequireToolsEnv) == "1" {
		t.Fatalf("%s is required (%s=1): %v (apt-get install %s)", cc, testutil.RequireToolsEnv, err, pkgs)
	}
	t.Skipf("%s: %v (apt-get install %s)", cc, err, pkgs)
}

// makePlan is what make would run for args, without running it (make -n).
func makePlan(t *testing.T, mk string, args ...string) string {
	t.Helper()
	out, err := exec.Command(mk, append([]string{"-n", "-C", ".."}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("make -n %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func buildSetting(info *buildinfo.BuildInfo, key string) string {
	for _, s := range info.Settings {
		if s.Key == key {
			return s.Value
		}
	}
	return ""
}
