package doctor

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/lineage-dev/lineage/internal/loader"
)

const allCaps = 1<<41 - 1

// A mountinfo like a machine with everything lineage could use: securityfs,
// bpffs, tracefs, pure cgroup v2.
const fullMountinfo = `21 26 0:20 / /proc rw,relatime - proc proc rw
22 26 0:21 / /sys rw,relatime - sysfs sysfs rw
26 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw
30 22 0:27 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate
31 22 0:7 / /sys/kernel/security rw,nosuid,nodev,noexec,relatime shared:5 - securityfs securityfs rw
32 22 0:28 / /sys/fs/bpf rw,nosuid,nodev,noexec,relatime shared:6 - bpf bpf rw,mode=700
33 22 0:12 / /sys/kernel/tracing rw,nosuid,nodev,noexec,relatime shared:7 - tracefs tracefs rw
`

// fakeMachine returns a System on which everything is allowed: a file tree
// under a temporary root like a 6.18 machine's with BTF, lockdown integrity,
// the listed mounts and the initial PID namespace; root with every
// capability; and system calls that succeed.
func fakeMachine(tb testing.TB) System {
	tb.Helper()
	root := tb.TempDir()
	write(tb, root, "sys/kernel/btf/vmlinux", "BTF")
	write(tb, root, "sys/kernel/security/lockdown", "none [integrity] confidentiality\n")
	write(tb, root, "sys/kernel/security/lsm", "capability,landlock,lockdown,yama,bpf")
	write(tb, root, "proc/self/mountinfo", fullMountinfo)
	write(tb, root, "proc/self/status", "Name:\tlineage\nPid:\t4242\nNSpid:\t4242\n")
	write(tb, root, "proc/cmdline", "console=ttyS0 quiet\n")
	nsLink(tb, root, "pid:[4026531836]")
	return System{
		Root:          root,
		Release:       func() (string, error) { return "6.18.44-generic", nil },
		Euid:          func() int { return 0 },
		EffectiveCaps: func() (uint64, error) { return allCaps, nil },
		PidfdOpen:     func() error { return nil },
		Subreaper:     func() error { return nil },
		OpenBPF:       func() error { return nil },
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

func remove(tb testing.TB, root, rel string) {
	tb.Helper()
	if err := os.Remove(filepath.Join(root, rel)); err != nil {
		tb.Fatal(err)
	}
}

// nsLink makes proc/self/ns/pid a symbolic link whose text is link, as the
// kernel's is.
func nsLink(tb testing.TB, root, link string) {
	tb.Helper()
	name := filepath.Join(root, "proc/self/ns/pid")
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		tb.Fatal(err)
	}
	os.Remove(name)
	if err := os.Symlink(link, name); err != nil {
		tb.Fatal(err)
	}
}

// unavailable is what the loader's errors look like when BPF can't load.
func unavailable(why string) func() error {
	return func() error { return fmt.Errorf("%w: %s", loader.ErrUnavailable, why) }
}

func TestFakeMachineAllOK(t *testing.T) {
	rep := Run(fakeMachine(t))
	if !rep.BPFAvailable || rep.Backend != "bpf" || rep.Reason != "" || rep.Verdict != "backend: bpf available" {
		t.Errorf("verdict: available=%v backend=%q reason=%q verdict=%q", rep.BPFAvailable, rep.Backend, rep.Reason, rep.Verdict)
	}
	want := []string{CheckKernel, CheckKfuncs, CheckGroupDead, CheckBTF, CheckPrivileges, CheckLockdown,
		CheckBPFLSM, CheckBPFFS, CheckTracefs, CheckPidfd, CheckSubreaper, CheckCgroup2, CheckPIDNamespace, CheckBPFLoad}
	if len(rep.Checks) != len(want) {
		t.Fatalf("got %d checks, want %d", len(rep.Checks), len(want))
	}
	for i, c := range rep.Checks {
		if c.Name != want[i] {
			t.Errorf("check %d is %q, want %q", i, c.Name, want[i])
		}
		// On a machine that allows everything, only the checks of what
		// lineage doesn't need are info.
		wantStatus := OK
		if c.Name == CheckBPFLSM || c.Name == CheckTracefs {
			wantStatus = Info
		}
		if c.Status != wantStatus {
			t.Errorf("%s: status %s, want %s (%s)", c.Name, c.Status, wantStatus, c.Detail)
		}
	}
}

// TestRefusals turns one thing on a fake machine into a refusal and checks
// that the right check says so in the right words, and what the verdict
// becomes.
func TestRefusals(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(tb testing.TB, sys *System)
		check  string
		status Status
		detail []string
		// bpf is whether the bpf backend stays available; why is what the
		// verdict must say if not.
		bpf bool
		why []string
	}{
		{
			name: "old kernel",
			change: func(tb testing.TB, sys *System) {
				sys.Release = func() (string, error) { return "5.4.0-150-generic", nil }
				sys.OpenBPF = unavailable("kernel 5.4 is too old: the bpf backend needs 5.8 or later")
			},
			check: CheckKernel, status: Fail,
			detail: []string{"5.4.0-150-generic is older than 5.8", "ring buffer", "tp_btf"},
			why:    []string{"kernel 5.4.0-150-generic is older than 5.8"},
		},
		{
			name: "kernel without kfuncs",
			change: func(tb testing.TB, sys *System) {
				sys.Release = func() (string, error) { return "6.6.30", nil }
			},
			check: CheckKfuncs, status: Warn,
			detail: []string{"before 6.13", "bpf_task_from_pid", "bpf_send_signal_task", "killing the forking member", "supervisor"},
			bpf:    true,
		},
		{
			name: "kernel without group_dead",
			change: func(tb testing.TB, sys *System) {
				sys.Release = func() (string, error) { return "6.14.0", nil }
			},
			check: CheckGroupDead, status: Info,
			detail: []string{"before 6.16", "signal->live"},
			bpf:    true,
		},
		{
			name: "unknown kernel release",
			change: func(tb testing.TB, sys *System) {
				sys.Release = func() (string, error) { return "", errors.New("uname: operation not permitted") }
			},
			check: CheckKernel, status: Warn,
			detail: []string{"can't tell the kernel version", "operation not permitted"},
			bpf:    true,
		},
		{
			name: "no btf",
			change: func(tb testing.TB, sys *System) {
				remove(tb, sys.Root, "sys/kernel/btf/vmlinux")
				sys.OpenBPF = unavailable("the kernel has no BTF")
			},
			check: CheckBTF, status: Fail,
			detail: []string{"no BTF", "/sys/kernel/btf/vmlinux is missing", "CONFIG_DEBUG_INFO_BTF=y"},
			why:    []string{"the kernel has no BTF"},
		},
		{
			name: "not privileged",
			change: func(tb testing.TB, sys *System) {
				sys.Euid = func() int { return 1000 }
				sys.EffectiveCaps = func() (uint64, error) { return 0, nil }
				sys.OpenBPF = unavailable("not privileged")
			},
			check: CheckPrivileges, status: Fail,
			detail: []string{"not privileged", "euid 1000", "none of CAP_BPF", "CAP_BPF and CAP_PERFMON", "--backend proc"},
			why:    []string{"not privileged: euid 1000"},
		},
		{
			name: "root without capabilities",
			change: func(tb testing.TB, sys *System) {
				sys.EffectiveCaps = func() (uint64, error) { return 1 << capSysResource, nil }
				sys.OpenBPF = func() error { return fmt.Errorf("%w: load bpf program: %w", loader.ErrUnavailable, syscall.EPERM) }
			},
			check: CheckPrivileges, status: Fail,
			detail: []string{"not privileged", "euid 0", "capabilities: CAP_SYS_RESOURCE;"},
			why:    []string{"not privileged: euid 0"},
		},
		{
			name: "capget refused",
			change: func(tb testing.TB, sys *System) {
				sys.EffectiveCaps = func() (uint64, error) { return 0, errors.New("capget: operation not permitted") }
				sys.OpenBPF = unavailable("not privileged")
			},
			check: CheckPrivileges, status: Fail,
			detail: []string{"can't read this process's capabilities", "capget: operation not permitted"},
			why:    []string{"can't read this process's capabilities"},
		},
		{
			name: "unprivileged user with CAP_BPF and CAP_PERFMON",
			change: func(tb testing.TB, sys *System) {
				sys.Euid = func() int { return 1000 }
				sys.EffectiveCaps = func() (uint64, error) { return 1<<capBPF | 1<<capPerfmon, nil }
			},
			check: CheckPrivileges, status: OK,
			detail: []string{"euid 1000", "CAP_BPF, CAP_PERFMON;", "CAP_SYS_RESOURCE is not needed from 5.11"},
			bpf:    true,
		},
		{
			name: "CAP_SYS_ADMIN stands in for CAP_BPF and CAP_PERFMON",
			change: func(tb testing.TB, sys *System) {
				sys.Euid = func() int { return 1000 }
				sys.EffectiveCaps = func() (uint64, error) { return 1<<capSysAdmin | 1<<capSysResource, nil }
			},
			check: CheckPrivileges, status: OK,
			detail: []string{"CAP_SYS_ADMIN, CAP_SYS_RESOURCE"},
			bpf:    true,
		},
		{
			name: "memlock on an old kernel without CAP_SYS_RESOURCE",
			change: func(tb testing.TB, sys *System) {
				sys.Release = func() (string, error) { return "5.10.0", nil }
				sys.EffectiveCaps = func() (uint64, error) { return 1<<capBPF | 1<<capPerfmon, nil }
			},
			check: CheckPrivileges, status: Warn,
			detail: []string{"without CAP_SYS_RESOURCE the memlock limit can't be lifted", "before 5.11"},
			bpf:    true,
		},
		{
			name: "lockdown confidentiality",
			change: func(tb testing.TB, sys *System) {
				write(tb, sys.Root, "sys/kernel/security/lockdown", "none integrity [confidentiality]\n")
				sys.OpenBPF = unavailable("kernel lockdown is \"confidentiality\", which refuses BPF tracing")
			},
			check: CheckLockdown, status: Fail,
			detail: []string{"lockdown is confidentiality", "refuses BPF programs that read kernel memory"},
			why:    []string{"kernel lockdown is confidentiality"},
		},
		{
			name: "lockdown confidentiality on the command line, securityfs not mounted",
			change: func(tb testing.TB, sys *System) {
				remove(tb, sys.Root, "sys/kernel/security/lockdown")
				write(tb, sys.Root, "proc/self/mountinfo", strings.ReplaceAll(fullMountinfo, "securityfs", "tmpfs"))
				write(tb, sys.Root, "proc/cmdline", "quiet lockdown=confidentiality\n")
				sys.OpenBPF = unavailable("the kernel refused the program")
			},
			check: CheckLockdown, status: Fail,
			detail: []string{"lockdown is confidentiality", "kernel command line"},
			why:    []string{"kernel lockdown is confidentiality"},
		},
		{
			name: "lockdown unknown without securityfs",
			change: func(tb testing.TB, sys *System) {
				remove(tb, sys.Root, "sys/kernel/security/lockdown")
				write(tb, sys.Root, "proc/self/mountinfo", strings.ReplaceAll(fullMountinfo, "securityfs", "tmpfs"))
			},
			check: CheckLockdown, status: Info,
			detail: []string{"unknown", "securityfs is not mounted", "the bpf load below tells"},
			bpf:    true,
		},
		{
			name: "no lockdown LSM",
			change: func(tb testing.TB, sys *System) {
				remove(tb, sys.Root, "sys/kernel/security/lockdown")
			},
			check: CheckLockdown, status: OK,
			detail: []string{"no lockdown LSM"},
			bpf:    true,
		},
		{
			name: "bpf lsm not active",
			change: func(tb testing.TB, sys *System) {
				write(tb, sys.Root, "sys/kernel/security/lsm", "capability,yama,apparmor")
			},
			check: CheckBPFLSM, status: Info,
			detail: []string{"bpf is not an active LSM (capability,yama,apparmor)", "doesn't need it"},
			bpf:    true,
		},
		{
			name: "no bpffs",
			change: func(tb testing.TB, sys *System) {
				write(tb, sys.Root, "proc/self/mountinfo", strings.ReplaceAll(fullMountinfo, " bpf bpf ", " tmpfs tmpfs "))
			},
			check: CheckBPFFS, status: Info,
			detail: []string{"not mounted at /sys/fs/bpf", "lineage serve"},
			bpf:    true,
		},
		{
			name: "no tracefs",
			change: func(tb testing.TB, sys *System) {
				write(tb, sys.Root, "proc/self/mountinfo", strings.ReplaceAll(fullMountinfo, "tracefs", "tmpfs"))
			},
			check: CheckTracefs, status: Info,
			detail: []string{"not mounted", "tp_btf tracepoints attach without tracefs"},
			bpf:    true,
		},
		{
			name: "mountinfo unreadable",
			change: func(tb testing.TB, sys *System) {
				remove(tb, sys.Root, "proc/self/mountinfo")
			},
			check: CheckCgroup2, status: Info,
			detail: []string{"unknown", "read mounts"},
			bpf:    true,
		},
		{
			name: "pidfd unsupported",
			change: func(tb testing.TB, sys *System) {
				sys.PidfdOpen = func() error { return fmt.Errorf("pidfd_open: %w", syscall.ENOSYS) }
			},
			check: CheckPidfd, status: Fail,
			detail: []string{"pidfd_open refused", "function not implemented", "5.3", "can't reap here with either backend"},
			bpf:    true,
		},
		{
			name: "subreaper refused",
			change: func(tb testing.TB, sys *System) {
				sys.Subreaper = func() error { return fmt.Errorf("set child subreaper: %w", syscall.EPERM) }
			},
			check: CheckSubreaper, status: Warn,
			detail: []string{"PR_SET_CHILD_SUBREAPER refused", "operation not permitted", "double-forked daemon"},
			bpf:    true,
		},
		{
			name: "no cgroup v2",
			change: func(tb testing.TB, sys *System) {
				write(tb, sys.Root, "proc/self/mountinfo", strings.ReplaceAll(fullMountinfo, "cgroup2", "cgroup"))
			},
			check: CheckCgroup2, status: Info,
			detail: []string{"not mounted", "doesn't depend on cgroups"},
			bpf:    true,
		},
		{
			name: "cgroup v2 beside v1",
			change: func(tb testing.TB, sys *System) {
				write(tb, sys.Root, "proc/self/mountinfo", fullMountinfo+
					"40 30 0:37 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n"+
					"41 30 0:38 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n")
			},
			check: CheckCgroup2, status: OK,
			detail: []string{"mounted at /sys/fs/cgroup, /sys/fs/cgroup/unified", "hybrid"},
			bpf:    true,
		},
		{
			name: "nested pid namespace",
			change: func(tb testing.TB, sys *System) {
				nsLink(tb, sys.Root, "pid:[4026532999]")
				write(tb, sys.Root, "proc/self/status", "Name:\tlineage\nNSpid:\t4242\t7\n")
			},
			check: CheckPIDNamespace, status: Fail,
			detail: []string{"nested PID namespace (pid:[4026532999])", "pid 7 here, 4242 outside", "hostPID"},
			// The tracker loads, but its pids are not the ones /proc shows.
			why: []string{"lineage runs in a nested PID namespace"},
		},
		{
			name: "pid namespace unreadable",
			change: func(tb testing.TB, sys *System) {
				remove(tb, sys.Root, "proc/self/ns/pid")
			},
			check: CheckPIDNamespace, status: Warn,
			detail: []string{"can't tell whether /proc shows the kernel's global pids"},
			bpf:    true,
		},
		{
			name: "load refused with every precondition met",
			change: func(tb testing.TB, sys *System) {
				sys.OpenBPF = func() error {
					return fmt.Errorf("%w: the kernel refused the program (a security module may forbid it): %w", loader.ErrUnavailable, syscall.EPERM)
				}
			},
			check: CheckBPFLoad, status: Fail,
			detail: []string{"the tracker did not load: the kernel refused the program", "operation not permitted"},
			why:    []string{"the tracker did not load: the kernel refused the program"},
		},
		{
			name: "load succeeds where a precondition looked refused",
			change: func(tb testing.TB, sys *System) {
				sys.Release = func() (string, error) { return "5.4.0-backported", nil }
			},
			check: CheckKernel, status: Fail,
			detail: []string{"older than 5.8"},
			// Loading is the authoritative answer.
			bpf: true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sys := fakeMachine(t)
			tc.change(t, &sys)
			rep := Run(sys)
			c, ok := rep.Check(tc.check)
			if !ok {
				t.Fatalf("no check %q", tc.check)
			}
			if c.Status != tc.status {
				t.Errorf("%s: status %s, want %s (%s)", c.Name, c.Status, tc.status, c.Detail)
			}
			for _, w := range tc.detail {
				if !strings.Contains(c.Detail, w) {
					t.Errorf("%s: detail %q lacks %q", c.Name, c.Detail, w)
				}
			}
			if rep.BPFAvailable != tc.bpf {
				t.Fatalf("bpf available = %v, want %v; verdict %q", rep.BPFAvailable, tc.bpf, rep.Verdict)
			}
			if tc.bpf {
				if rep.Verdict != "backend: bpf available" || rep.Backend != "bpf" || rep.Reason != "" {
					t.Errorf("verdict %q, backend %q, reason %q", rep.Verdict, rep.Backend, rep.Reason)
				}
				return
			}
			if rep.Backend != "proc" || !strings.HasPrefix(rep.Verdict, "backend: proc fallback, because ") {
				t.Errorf("verdict %q, backend %q", rep.Verdict, rep.Backend)
			}
			for _, w := range tc.why {
				if !strings.Contains(rep.Reason, w) || !strings.Contains(rep.Verdict, w) {
					t.Errorf("verdict %q lacks %q", rep.Verdict, w)
				}
			}
			if strings.Contains(rep.Verdict, loader.ErrUnavailable.Error()) {
				t.Errorf("verdict %q repeats the loader's sentinel", rep.Verdict)
			}
		})
	}
}

// When a precondition fails, the verdict names it, not the loader's
// restatement of the same refusal.
func TestVerdictNamesPreconditionsBeforeTheLoad(t *testing.T) {
	sys := fakeMachine(t)
	remove(t, sys.Root, "sys/kernel/btf/vmlinux")
	sys.Euid = func() int { return 1000 }
	sys.EffectiveCaps = func() (uint64, error) { return 0, nil }
	sys.OpenBPF = unavailable("LOADER TEXT")
	rep := Run(sys)
	want := "backend: proc fallback, because the kernel has no BTF: /sys/kernel/btf/vmlinux is missing (the kernel needs CONFIG_DEBUG_INFO_BTF=y); not privileged: euid 1000"
	if !strings.HasPrefix(rep.Verdict, want) {
		t.Errorf("verdict %q\nwant prefix %q", rep.Verdict, want)
	}
	if strings.Contains(rep.Verdict, "LOADER TEXT") {
		t.Errorf("verdict %q repeats the load's detail", rep.Verdict)
	}
	load, _ := rep.Check(CheckBPFLoad)
	if load.Status != Fail || load.Detail != "the tracker did not load: LOADER TEXT" {
		t.Errorf("bpf load: %s %q", load.Status, load.Detail)
	}
}

func TestNothingInjected(t *testing.T) {
	rep := Run(System{Root: t.TempDir()})
	if rep.BPFAvailable {
		t.Fatalf("bpf available with nothing to try: %q", rep.Verdict)
	}
	if rep.Verdict != "backend: proc fallback, because the kernel has no BTF: /sys/kernel/btf/vmlinux is missing (the kernel needs CONFIG_DEBUG_INFO_BTF=y)" {
		t.Errorf("verdict %q", rep.Verdict)
	}
	for _, name := range []string{CheckKernel, CheckPrivileges, CheckPidfd, CheckSubreaper} {
		if c, _ := rep.Check(name); c.Status != Info || c.Detail != "not checked" {
			t.Errorf("%s: %s %q, want info \"not checked\"", name, c.Status, c.Detail)
		}
	}
	if c, _ := rep.Check(CheckBPFLoad); c.Status != Fail || c.Detail != "loading the tracker was not tried" {
		t.Errorf("bpf load: %s %q", c.Status, c.Detail)
	}
}

func TestWriteJSON(t *testing.T) {
	for _, tc := range []struct {
		name      string
		openBPF   func() error
		available bool
		reason    string
	}{
		{name: "available", openBPF: func() error { return nil }, available: true},
		{name: "fallback", openBPF: unavailable("nope"), reason: "the tracker did not load: nope"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sys := fakeMachine(t)
			sys.OpenBPF = tc.openBPF
			var buf bytes.Buffer
			if err := Run(sys).WriteJSON(&buf); err != nil {
				t.Fatal(err)
			}
			var doc map[string]any
			if err := json.Unmarshal(buf.Bytes(), &doc); err != nil {
				t.Fatalf("not JSON: %v\n%s", err, buf.String())
			}
			keys := []string{"checks", "bpf_available", "backend", "verdict"}
			if !tc.available {
				keys = append(keys, "reason")
			}
			if len(doc) != len(keys) {
				t.Errorf("document has keys %v, want %v", mapKeys(doc), keys)
			}
			for _, k := range keys {
				if _, ok := doc[k]; !ok {
					t.Errorf("document lacks %q", k)
				}
			}
			if doc["bpf_available"] != tc.available {
				t.Errorf("bpf_available = %v", doc["bpf_available"])
			}
			wantBackend, wantVerdict := "bpf", "backend: bpf available"
			if !tc.available {
				wantBackend, wantVerdict = "proc", "backend: proc fallback, because "+tc.reason
				if doc["reason"] != tc.reason {
					t.Errorf("reason = %v, want %q", doc["reason"], tc.reason)
				}
			}
			if doc["backend"] != wantBackend || doc["verdict"] != wantVerdict {
				t.Errorf("backend %v, verdict %v", doc["backend"], doc["verdict"])
			}
			checks, ok := doc["checks"].([]any)
			if !ok || len(checks) != 14 {
				t.Fatalf("checks: %v", doc["checks"])
			}
			for _, c := range checks {
				m, ok := c.(map[string]any)
				if !ok {
					t.Fatalf("check is %T", c)
				}
				if len(m) != 4 {
					t.Errorf("check has keys %v, want name, status, detail, required_for_bpf", mapKeys(m))
				}
				for _, k := range []string{"name", "status", "detail"} {
					if s, ok := m[k].(string); !ok || s == "" {
						t.Errorf("check %v: %q is not a non-empty string", m["name"], k)
					}
				}
				if _, ok := m["required_for_bpf"].(bool); !ok {
					t.Errorf("check %v: required_for_bpf is not a bool", m["name"])
				}
			}
			first := checks[0].(map[string]any)
			if first["name"] != CheckKernel || first["status"] != "ok" || first["required_for_bpf"] != true {
				t.Errorf("first check: %v", first)
			}
		})
	}
}

func mapKeys(m map[string]any) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestWriteTable(t *testing.T) {
	sys := fakeMachine(t)
	sys.OpenBPF = unavailable("nope")
	rep := Run(sys)
	var buf bytes.Buffer
	if err := rep.WriteTable(&buf); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if want := 1 + len(rep.Checks) + 2; len(lines) != want {
		t.Fatalf("got %d lines, want %d:\n%s", len(lines), want, buf.String())
	}
	if f := strings.Fields(lines[0]); len(f) != 3 || f[0] != "CHECK" || f[1] != "STATUS" || f[2] != "DETAIL" {
		t.Errorf("header %q", lines[0])
	}
	// Columns line up: every status starts where the header's does.
	col := strings.Index(lines[0], "STATUS")
	for i, c := range rep.Checks {
		line := lines[1+i]
		if !strings.HasPrefix(line, c.Name+" ") || !strings.HasPrefix(line[col:], string(c.Status)+" ") || !strings.HasSuffix(line, c.Detail) {
			t.Errorf("row %q doesn't show %s / %s / %s", line, c.Name, c.Status, c.Detail)
		}
	}
	if lines[len(lines)-2] != "" || lines[len(lines)-1] != "backend: proc fallback, because the tracker did not load: nope" {
		t.Errorf("verdict lines %q", lines[len(lines)-2:])
	}
}

func TestParseRelease(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want version
		ok   bool
	}{
		{"6.18.44-fc-v782", version{6, 18}, true},
		{"5.8.0", version{5, 8}, true},
		{"6.13-rc1", version{6, 13}, true},
		{"6.16+", version{6, 16}, true},
		{"4.19.0-26-amd64", version{4, 19}, true},
		{"6", version{}, false},
		{"x.y", version{}, false},
		{"", version{}, false},
	} {
		got, ok := parseRelease(tc.in)
		if got != tc.want || ok != tc.ok {
			t.Errorf("parseRelease(%q) = %v, %v; want %v, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

func TestLockdownMode(t *testing.T) {
	for in, want := range map[string]string{
		"[none] integrity confidentiality\n": "none",
		"none [integrity] confidentiality\n": "integrity",
		"none integrity [confidentiality]\n": "confidentiality",
		"none integrity confidentiality\n":   "",
		"[broken":                            "",
	} {
		if got := lockdownMode(in); got != want {
			t.Errorf("lockdownMode(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestNamespaceInode(t *testing.T) {
	for in, want := range map[string]uint64{"pid:[4026531836]": initPIDNamespaceInode, "pid:[12]": 12} {
		if got, ok := namespaceInode(in); !ok || got != want {
			t.Errorf("namespaceInode(%q) = %d, %v", in, got, ok)
		}
	}
	for _, in := range []string{"pid:[x]", "pid:", "pid:[12"} {
		if _, ok := namespaceInode(in); ok {
			t.Errorf("namespaceInode(%q) accepted", in)
		}
	}
}

func TestReadMountinfo(t *testing.T) {
	root := t.TempDir()
	write(t, root, "mountinfo", fullMountinfo+
		`50 26 0:40 / /mnt/with\040space rw - bpf bpf rw
51 26 0:41 / /broken
`)
	got, err := readMountinfo(filepath.Join(root, "mountinfo"))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 8 {
		t.Fatalf("got %d mounts: %v", len(got), got)
	}
	if got[3] != (mount{point: "/sys/fs/cgroup", fstype: "cgroup2"}) {
		t.Errorf("mount 3: %+v", got[3])
	}
	if got[7] != (mount{point: "/mnt/with space", fstype: "bpf"}) {
		t.Errorf("escaped mount: %+v", got[7])
	}
	if _, err := readMountinfo(filepath.Join(root, "missing")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}
