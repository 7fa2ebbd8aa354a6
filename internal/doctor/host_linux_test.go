package doctor

import (
	"errors"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/lineage-dev/lineage/internal/testutil"
)

// TestHost runs doctor on this machine. Where BPF loads, the verdict must be
// that the bpf backend is available; where it can't load, the test skips,
// unless LINEAGE_REQUIRE_BPF=1.
func TestHost(t *testing.T) {
	rep := Run(Host())
	for _, c := range rep.Checks {
		t.Logf("%-22s %-4s %s", c.Name, c.Status, c.Detail)
		if c.Detail == "not checked" {
			t.Errorf("%s was not checked", c.Name)
		}
	}
	t.Log(rep.Verdict)
	load, _ := rep.Check(CheckBPFLoad)
	if load.Status != OK {
		testutil.SkipWithoutBPF(t, errors.New(load.Detail))
	}
	if !rep.BPFAvailable || rep.Backend != "bpf" || rep.Verdict != "backend: bpf available" {
		t.Errorf("the tracker loaded, but the verdict is %q", rep.Verdict)
	}
	// A kernel that loads the tracker (5.8+) has pidfd_open (5.3+).
	if c, _ := rep.Check(CheckPidfd); c.Status != OK {
		t.Errorf("pidfd: %s %s", c.Status, c.Detail)
	}
	for _, name := range []string{CheckKernel, CheckBTF, CheckPrivileges, CheckPIDNamespace} {
		if c, _ := rep.Check(name); c.Status != OK {
			t.Errorf("the tracker loaded, but %s is %s: %s", name, c.Status, c.Detail)
		}
	}
}

func subreaper(t *testing.T) int32 {
	t.Helper()
	var v int32
	if err := unix.Prctl(unix.PR_GET_CHILD_SUBREAPER, uintptr(unsafe.Pointer(&v)), 0, 0, 0); err != nil {
		t.Fatal(err)
	}
	return v
}

func setSubreaper(t *testing.T, v uintptr) {
	t.Helper()
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, v, 0, 0, 0); err != nil {
		t.Fatal(err)
	}
}

// The subreaper probe leaves the process's setting as it found it.
func TestTrySubreaperRestores(t *testing.T) {
	was := subreaper(t)
	t.Cleanup(func() { setSubreaper(t, uintptr(was)) })
	for _, before := range []uintptr{0, 1} {
		setSubreaper(t, before)
		if err := trySubreaper(); err != nil {
			t.Fatalf("from %d: %v", before, err)
		}
		if got := subreaper(t); got != int32(before) {
			t.Errorf("subreaper was %d, is %d after the probe", before, got)
		}
	}
}
