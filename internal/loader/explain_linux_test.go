package loader

import (
	"os"
	"path/filepath"
	"testing"
)

func TestPIDNamespaceDepth(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		status string
		want   int
	}{
		{"Name:\tsh\nNSpid:\t4242\n", 1},
		{"Name:\tsh\nNSpid:\t4242\t7\n", 2},
		{"Name:\tsh\nNSpid:\t4242\t7\t1\n", 3},
		{"Name:\tsh\n", 0},
	} {
		path := filepath.Join(dir, "status")
		if err := os.WriteFile(path, []byte(c.status), 0o644); err != nil {
			t.Fatal(err)
		}
		if got := pidNamespaceDepth(path); got != c.want {
			t.Errorf("%q: depth %d, want %d", c.status, got, c.want)
		}
	}
	if got := pidNamespaceDepth(filepath.Join(dir, "missing")); got != 0 {
		t.Errorf("missing file: depth %d", got)
	}
	// This test runs in the host's PID namespace, as the BPF tests need.
	if got := pidNamespaceDepth("/proc/self/status"); got != 1 {
		t.Errorf("this process is %d PID namespaces deep, want 1", got)
	}
	if !initialPIDNamespace("/proc/self/ns/pid") {
		t.Error("this process is not in the initial PID namespace")
	}
	link := filepath.Join(dir, "ns")
	if err := os.Symlink("pid:[4026532999]", link); err != nil {
		t.Fatal(err)
	}
	if initialPIDNamespace(link) {
		t.Error("a nested namespace's link passed as the initial one")
	}
}

func TestParseKernelVersion(t *testing.T) {
	for _, c := range []struct {
		release      string
		major, minor int
		ok           bool
	}{
		{"6.18.44-fc-v782", 6, 18, true},
		{"5.8.0", 5, 8, true},
		{"6.13-rc1", 6, 13, true},
		{"garbage", 0, 0, false},
	} {
		major, minor, ok := parseKernelVersion(c.release)
		if major != c.major || minor != c.minor || ok != c.ok {
			t.Errorf("%q: %d.%d %v", c.release, major, minor, ok)
		}
	}
}
