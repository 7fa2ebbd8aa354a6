package loader

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestHostPrivileged(t *testing.T) {
	bit := func(ns ...int) (c uint64) {
		for _, n := range ns {
			c |= 1 << n
		}
		return c
	}
	for _, c := range []struct {
		name string
		host Host
		want bool
	}{
		{"root with every capability", Host{Caps: 1<<41 - 1}, true},
		{"root without capabilities", Host{Euid: 0}, false},
		{"user with CAP_BPF and CAP_PERFMON", Host{Euid: 1000, Caps: bit(CapBPF, CapPerfmon)}, true},
		{"user with CAP_BPF only", Host{Euid: 1000, Caps: bit(CapBPF)}, false},
		{"CAP_SYS_ADMIN stands in for both", Host{Euid: 1000, Caps: bit(CapSysAdmin)}, true},
		{"capget refused, root", Host{Euid: 0, CapsErr: errors.New("no")}, true},
		{"capget refused, user", Host{Euid: 1000, CapsErr: errors.New("no")}, false},
	} {
		if got := c.host.Privileged(); got != c.want {
			t.Errorf("%s: privileged %v, want %v", c.name, got, c.want)
		}
	}
}

func TestHostGlobalPIDs(t *testing.T) {
	for _, c := range []struct {
		name          string
		host          Host
		global, known bool
	}{
		{"initial namespace", Host{PIDNamespace: "pid:[4026531836]", NSpid: []string{"42"}}, true, true},
		{"nested namespace", Host{PIDNamespace: "pid:[4026532999]", NSpid: []string{"42", "7"}}, false, true},
		{"initial inode, deeper NSpid", Host{PIDNamespace: "pid:[4026531836]", NSpid: []string{"42", "7"}}, false, true},
		{"unreadable link", Host{PIDNamespaceErr: os.ErrPermission}, true, false},
		{"odd link", Host{PIDNamespace: "pid:4026531836"}, true, false},
	} {
		global, known := c.host.GlobalPIDs()
		if global != c.global || known != c.known {
			t.Errorf("%s: global %v known %v, want %v %v", c.name, global, known, c.global, c.known)
		}
	}
}

func TestHostCheckSaysWhy(t *testing.T) {
	ok := Host{Caps: 1<<41 - 1, PIDNamespace: "pid:[4026531836]", Lockdown: LockdownIntegrity}
	if err := ok.Check(); err != nil {
		t.Fatalf("a machine that allows everything: %v", err)
	}
	for _, c := range []struct {
		name   string
		change func(*Host)
		want   string
	}{
		{"no btf", func(h *Host) { h.BTF = os.ErrNotExist }, "no BTF"},
		{"not privileged", func(h *Host) { h.Euid, h.Caps = 1000, 0 }, "not privileged"},
		{"lockdown", func(h *Host) { h.Lockdown = LockdownConfidentiality }, `lockdown is "confidentiality"`},
		{"nested pid namespace", func(h *Host) { h.PIDNamespace = "pid:[4026532999]" }, "nested PID namespace"},
	} {
		h := ok
		c.change(&h)
		err := h.Check()
		if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want ErrUnavailable saying %q", c.name, err, c.want)
		}
	}
}

func write(tb testing.TB, root, rel, content string) {
	tb.Helper()
	name := filepath.Join(root, rel)
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(name, []byte(content), 0o644); err != nil {
		tb.Fatal(err)
	}
}

// TestProbeHostReadsTheFiles reads a fake /proc and /sys.
func TestProbeHostReadsTheFiles(t *testing.T) {
	root := t.TempDir()
	write(t, root, "sys/kernel/btf/vmlinux", "BTF")
	write(t, root, "sys/kernel/security/lockdown", "none [integrity] confidentiality\n")
	write(t, root, "proc/self/status", "Name:\tsh\nNSpid:\t4242\t7\n")
	if err := os.Symlink("pid:[4026532999]", filepath.Join(root, "proc/self/ns-pid")); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(root, "proc/self/ns"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(root, "proc/self/ns-pid"), filepath.Join(root, "proc/self/ns/pid")); err != nil {
		t.Fatal(err)
	}
	h := probeHostAt(root)
	if h.BTF != nil || h.Lockdown != LockdownIntegrity || h.LockdownFrom != LockdownFromSecurityfs ||
		h.PIDNamespace != "pid:[4026532999]" || !slices.Equal(h.NSpid, []string{"4242", "7"}) {
		t.Errorf("host %+v", h)
	}
	if global, known := h.GlobalPIDs(); global || !known {
		t.Errorf("a nested namespace read as global (%v, %v)", global, known)
	}
}

func TestReadLockdown(t *testing.T) {
	for _, c := range []struct {
		name       string
		files      map[string]string
		mode, from string
		err        bool
	}{
		{"securityfs", map[string]string{"sys/kernel/security/lockdown": "[none] integrity confidentiality\n"}, LockdownNone, LockdownFromSecurityfs, false},
		{"no lockdown lsm", map[string]string{"sys/kernel/security/lsm": "capability,yama"}, LockdownNone, LockdownFromNoLSM, false},
		{"command line", map[string]string{"proc/cmdline": "quiet lockdown=confidentiality -- lockdown=none"}, LockdownConfidentiality, LockdownFromCmdline, false},
		{"after -- is for init", map[string]string{"proc/cmdline": "quiet -- lockdown=integrity"}, "", "", true},
		{"nothing to read", nil, "", "", true},
	} {
		root := t.TempDir()
		for rel, content := range c.files {
			write(t, root, rel, content)
		}
		mode, from, err := readLockdown(func(rel string) string { return filepath.Join(root, rel) })
		if mode != c.mode || from != c.from || (err != nil) != c.err {
			t.Errorf("%s: %q from %q, %v", c.name, mode, from, err)
		}
	}
}

func TestParseLockdownAndNamespaceInode(t *testing.T) {
	for in, want := range map[string]string{
		"none [integrity] confidentiality\n": "integrity",
		"[none] integrity confidentiality":   "none",
		"none integrity":                     "",
		"[broken":                            "",
	} {
		if got := parseLockdown(in); got != want {
			t.Errorf("parseLockdown(%q) = %q, want %q", in, got, want)
		}
	}
	if n, ok := namespaceInode("pid:[4026531836]"); !ok || n != initPIDNamespaceInode {
		t.Errorf("initial namespace inode %d %v", n, ok)
	}
	for _, bad := range []string{"pid:4026531836", "pid:[x]", ""} {
		if _, ok := namespaceInode(bad); ok {
			t.Errorf("namespaceInode(%q) accepted", bad)
		}
	}
}
