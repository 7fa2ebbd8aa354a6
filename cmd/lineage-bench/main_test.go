package main

import (
	"errors"
	"os"
	"os/exec"
	"testing"
)

// fail exits at once, which runs no deferred removal: it removes the
// temporary directories itself.
func TestFailRemovesTempDirs(t *testing.T) {
	if os.Getenv("LINEAGE_BENCH_TEST_FAIL") == "1" {
		for _, prefix := range []string{"lineage-bench", "lineage-bench-serve"} {
			dir, err := tempDir("", prefix)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(dir+"/f", []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		fail(errors.New("on purpose"))
		return
	}
	tmp := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestFailRemovesTempDirs$")
	cmd.Env = append(os.Environ(), "LINEAGE_BENCH_TEST_FAIL=1", "TMPDIR="+tmp)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("the failing benchmark ended with %v, want exit status 1:\n%s", err, out)
	}
	left, err := os.ReadDir(tmp)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range left {
		t.Errorf("fail left %s behind", e.Name())
	}
}
