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
	"github.com/lineage-dev/lineage/lineage"
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

// fakeMachine returns a System on which everything is allowed: the
// loader's pre-checks of a 6.18 machine (BTF, root with every capability,
// lockdown integrity, the initial PID namespace), its probes (every
// feature), the full program loading, a file tree under a temporary root
// with the listed mounts, and system calls that succeed.
func fakeMachine(tb testing.TB) System {
	tb.Helper()
	root := tb.TempDir()
	write(tb, root, "sys/kernel/security/lsm", "capability,landlock,lockdown,yama,bpf")
	write(tb, root, "proc/self/mountinfo", fullMountinfo)
	return System{
		Root:      root,
		Host:      func() loader.Host { return fullHost },
		Features:  func() (loader.Features, error) { return fullFeatures, nil },
		PidfdOpen: func() error { return nil },
		Subreaper: func() error { return nil },
		OpenBPF:   func() (loader.Loaded, error) { return fullLoad, nil },
	}
}

var (
	fullHost = loader.Host{
		Release:      "6.18.44-generic",
		Caps:         allCaps,
		Lockdown:     loader.LockdownIntegrity,
		LockdownFrom: loader.LockdownFromSecurityfs,
		PIDNamespace: "pid:[4026531836]",
		NSpid:        []string{"4242"},
	}
	fullFeatures = loader.Features{Kfuncs: true, Loop: true, ForEach: true, GroupDead: true}
	fullLoad     = loader.Loaded{Variant: loader.VariantFull, Containment: lineage.ContainKernel, HardCancel: loader.HardCancelKernel, GroupDead: true, Batch: loader.Batch{Check: true, Signal: true}}
	// compatLoad is what a 5.10 or 6.1 kernel loads.
	compatLoad = loader.Loaded{Variant: loader.VariantCompat, Containment: lineage.ContainKernelForker, HardCancel: loader.HardCancelNone}
)

// host changes the fake machine's pre-checks.
func host(sys *System, change func(*loader.Host)) {
	h := fullHost
	change(&h)
	sys.Host = func() loader.Host { return h }
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

// unavailable is what the loader's errors look like when BPF can't load.
func unavailable(why string) func() (loader.Loaded, error) {
	return func() (loader.Loaded, error) {
		return loader.Loaded{}, fmt.Errorf("%w: %s", loader.ErrUnavailable, why)
	}
}

func TestFakeMachineAllOK(t *testing.T) {
	rep := Run(fakeMachine(t))
	if !rep.BPFAvailable || rep.Backend != "bpf" || rep.Reason != "" || rep.Verdict != "backend: bpf available" {
		t.Errorf("verdict: available=%v backend=%q reason=%q verdict=%q", rep.BPFAvailable, rep.Backend, rep.Reason, rep.Verdict)
	}
	want := []string{CheckKernel, CheckBTF, CheckPrivileges, CheckLockdown, CheckBPFLSM, CheckBPFFS, CheckTracefs,
		CheckPidfd, CheckSubreaper, CheckCgroup2, CheckPIDNamespace, CheckBPFLoad, CheckTracking, CheckContainment,
		CheckHardCancel, CheckExecArgv, CheckBatchReap}
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
			name: "no ring buffer",
			change: func(tb testing.TB, sys *System) {
				sys.Features = func() (loader.Features, error) {
					return loader.Features{RingBuf: fmt.Errorf("ring buffer: %w", errors.ErrUnsupported)}, nil
				}
				sys.OpenBPF = unavailable("the kernel has no BPF ring buffer (Linux 5.8+)")
			},
			check: CheckKernel, status: Fail,
			detail: []string{"6.18.44-generic: the kernel has no BPF ring buffer (Linux 5.8+)"},
			why:    []string{"the kernel has no BPF ring buffer"},
		},
		{
			name: "features can't be probed",
			change: func(tb testing.TB, sys *System) {
				sys.Features = func() (loader.Features, error) { return loader.Features{}, errors.New("load kernel btf: nope") }
			},
			check: CheckKernel, status: Warn,
			detail: []string{"can't probe its BPF features", "nope", "the bpf load below is the answer"},
			bpf:    true,
		},
		{
			name: "a 5.10 or 6.1 kernel: the compat program",
			change: func(tb testing.TB, sys *System) {
				sys.Features = func() (loader.Features, error) { return loader.Features{}, nil }
				sys.OpenBPF = func() (loader.Loaded, error) { return compatLoad, nil }
			},
			check: CheckTracking, status: OK,
			detail: []string{"compat program", "exactly as with the full program", "needs the kfuncs", "live count"},
			bpf:    true,
		},
		{
			name: "the compat program contains by killing the forker",
			change: func(tb testing.TB, sys *System) {
				sys.OpenBPF = func() (loader.Loaded, error) { return compatLoad, nil }
			},
			check: CheckContainment, status: Warn,
			detail: []string{"kernel-forker", "a member that forks is killed itself"},
			bpf:    true,
		},
		{
			name: "the compat program: the guardian ends a hard-cancelled lineage",
			change: func(tb testing.TB, sys *System) {
				sys.OpenBPF = func() (loader.Loaded, error) { return compatLoad, nil }
			},
			check: CheckHardCancel, status: OK,
			detail: []string{"guardian:", "compat program can't signal"},
			bpf:    true,
		},
		{
			name: "6.13 to 6.15: the full program without group_dead",
			change: func(tb testing.TB, sys *System) {
				sys.OpenBPF = func() (loader.Loaded, error) {
					return loader.Loaded{Variant: loader.VariantFull, Containment: lineage.ContainKernel, HardCancel: loader.HardCancelNone}, nil
				}
			},
			check: CheckHardCancel, status: OK,
			detail: []string{"guardian:", "no group_dead", "refuses to signal"},
			bpf:    true,
		},
		{
			name: "the verifier refuses the program",
			change: func(tb testing.TB, sys *System) {
				sys.OpenBPF = unavailable("the kernel's verifier refused the compat program (Unreleased reference id=6; kernel 6.1.0)")
			},
			check: CheckBPFLoad, status: Fail,
			detail: []string{"the tracker did not load: the kernel's verifier refused the compat program (Unreleased reference id=6"},
			why:    []string{"verifier refused the compat program"},
		},
		{
			name: "proc fallback: what each feature becomes",
			change: func(tb testing.TB, sys *System) {
				sys.OpenBPF = unavailable("nope")
			},
			check: CheckExecArgv, status: Warn,
			detail: []string{"proc: argv is read from /proc"},
			why:    []string{"the tracker did not load: nope"},
		},
		{
			name: "a kernel without the batch signal",
			change: func(tb testing.TB, sys *System) {
				sys.OpenBPF = func() (loader.Loaded, error) {
					l := fullLoad
					l.Batch = loader.Batch{Check: true, SignalOff: "the kernel refused the batch signal: no bpf_send_signal_task"}
					return l, nil
				}
			},
			check: CheckBatchReap, status: Info,
			detail: []string{"checks its members many in one system call and signals each through its pidfd", "no bpf_send_signal_task"},
			bpf:    true,
		},
		{
			name: "a kernel without the batch programs",
			change: func(tb testing.TB, sys *System) {
				sys.OpenBPF = func() (loader.Loaded, error) {
					l := fullLoad
					l.Batch = loader.Batch{CheckOff: "the kernel refused the batch check: E2BIG", SignalOff: "the kernel refused the batch check: E2BIG"}
					return l, nil
				}
			},
			check: CheckBatchReap, status: Info,
			detail: []string{"reads each member's /proc/PID/stat", "E2BIG"},
			bpf:    true,
		},
		{
			name: "proc fallback: the guardian ends a hard-cancelled lineage",
			change: func(tb testing.TB, sys *System) {
				sys.OpenBPF = unavailable("nope")
			},
			check: CheckHardCancel, status: Warn,
			detail: []string{"guardian:", "descendants by parent pid"},
			why:    []string{"the tracker did not load: nope"},
		},
		{
			name: "no btf",
			change: func(tb testing.TB, sys *System) {
				host(sys, func(h *loader.Host) { h.BTF = fmt.Errorf("stat: %w", os.ErrNotExist) })
				sys.OpenBPF = unavailable("the kernel has no BTF")
			},
			check: CheckBTF, status: Fail,
			detail: []string{"no BTF", "/sys/kernel/btf/vmlinux is missing", "CONFIG_DEBUG_INFO_BTF=y"},
			why:    []string{"the kernel has no BTF"},
		},
		{
			name: "not privileged",
			change: func(tb testing.TB, sys *System) {
				host(sys, func(h *loader.Host) { h.Euid, h.Caps = 1000, 0 })
				sys.OpenBPF = unavailable("not privileged")
			},
			check: CheckPrivileges, status: Fail,
			detail: []string{"not privileged", "euid 1000", "none of CAP_BPF", "CAP_BPF and CAP_PERFMON", "--backend proc"},
			why:    []string{"not privileged: euid 1000"},
		},
		{
			name: "root without capabilities",
			change: func(tb testing.TB, sys *System) {
				host(sys, func(h *loader.Host) { h.Caps = 1 << loader.CapSysResource })
				sys.OpenBPF = func() (loader.Loaded, error) {
					return loader.Loaded{}, fmt.Errorf("%w: load bpf program: %w", loader.ErrUnavailable, syscall.EPERM)
				}
			},
			check: CheckPrivileges, status: Fail,
			detail: []string{"not privileged", "euid 0", "capabilities: CAP_SYS_RESOURCE;"},
			why:    []string{"not privileged: euid 0"},
		},
		{
			name: "capget refused",
			change: func(tb testing.TB, sys *System) {
				host(sys, func(h *loader.Host) { h.CapsErr = errors.New("capget: operation not permitted") })
				sys.OpenBPF = unavailable("not privileged")
			},
			check: CheckPrivileges, status: Fail,
			detail: []string{"can't read this process's capabilities", "capget: operation not permitted"},
			why:    []string{"can't read this process's capabilities"},
		},
		{
			name: "unprivileged user with CAP_BPF and CAP_PERFMON",
			change: func(tb testing.TB, sys *System) {
				host(sys, func(h *loader.Host) { h.Euid, h.Caps = 1000, 1<<loader.CapBPF|1<<loader.CapPerfmon })
			},
			check: CheckPrivileges, status: OK,
			detail: []string{"euid 1000", "CAP_BPF, CAP_PERFMON;", "without CAP_SYS_RESOURCE the memlock limit can't be lifted", "the bpf load below tells"},
			bpf:    true,
		},
		{
			name: "CAP_SYS_ADMIN stands in for CAP_BPF and CAP_PERFMON",
			change: func(tb testing.TB, sys *System) {
				host(sys, func(h *loader.Host) { h.Euid, h.Caps = 1000, 1<<loader.CapSysAdmin|1<<loader.CapSysResource })
			},
			check: CheckPrivileges, status: OK,
			detail: []string{"CAP_SYS_ADMIN, CAP_SYS_RESOURCE"},
			bpf:    true,
		},
		{
			name: "lockdown confidentiality",
			change: func(tb testing.TB, sys *System) {
				host(sys, func(h *loader.Host) { h.Lockdown = loader.LockdownConfidentiality })
				sys.OpenBPF = unavailable("kernel lockdown is \"confidentiality\", which refuses BPF tracing")
			},
			check: CheckLockdown, status: Fail,
			detail: []string{"lockdown is confidentiality", "refuses BPF programs that read kernel memory"},
			why:    []string{"kernel lockdown is confidentiality"},
		},
		{
			name: "lockdown confidentiality on the command line, securityfs not mounted",
			change: func(tb testing.TB, sys *System) {
				host(sys, func(h *loader.Host) {
					h.Lockdown, h.LockdownFrom = loader.LockdownConfidentiality, loader.LockdownFromCmdline
				})
				sys.OpenBPF = unavailable("the kernel refused the program")
			},
			check: CheckLockdown, status: Fail,
			detail: []string{"lockdown is confidentiality", "kernel command line"},
			why:    []string{"kernel lockdown is confidentiality"},
		},
		{
			name: "lockdown unknown without securityfs",
			change: func(tb testing.TB, sys *System) {
				host(sys, func(h *loader.Host) {
					h.Lockdown, h.LockdownFrom, h.LockdownErr = "", "", errors.New("securityfs is not mounted at /sys/kernel/security")
				})
			},
			check: CheckLockdown, status: Info,
			detail: []string{"unknown", "securityfs is not mounted", "the bpf load below tells"},
			bpf:    true,
		},
		{
			name: "no lockdown LSM",
			change: func(tb testing.TB, sys *System) {
				host(sys, func(h *loader.Host) { h.Lockdown, h.LockdownFrom = loader.LockdownNone, loader.LockdownFromNoLSM })
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
			detail: []string{"not mounted at /sys/fs/bpf", "lineage serve mounts it there", "lineage run pins nothing"},
			bpf:    true,
		},
		{
			name: "no tracefs",
			change: func(tb testing.TB, sys *System) {
				write(tb, sys.Root, "proc/self/mountinfo", strings.ReplaceAll(fullMountinfo, "tracefs", "tmpfs"))
			},
			check: CheckTracefs, status: Info,
			detail: []string{"not mounted", "the second fork hook", "the tp_btf hooks need none", "adopted from /proc"},
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
				host(sys, func(h *loader.Host) { h.PIDNamespace, h.NSpid = "pid:[4026532999]", []string{"4242", "7"} })
			},
			check: CheckPIDNamespace, status: Fail,
			detail: []string{"nested PID namespace (pid:[4026532999])", "pid 7 here, 4242 outside", "hostPID"},
			// The tracker loads, but its pids are not the ones /proc shows.
			why: []string{"lineage runs in a nested PID namespace"},
		},
		{
			name: "pid namespace unreadable",
			change: func(tb testing.TB, sys *System) {
				host(sys, func(h *loader.Host) { h.PIDNamespace, h.PIDNamespaceErr = "", os.ErrPermission })
			},
			check: CheckPIDNamespace, status: Warn,
			detail: []string{"can't tell whether /proc shows the kernel's global pids"},
			bpf:    true,
		},
		{
			name: "load refused with every precondition met",
			change: func(tb testing.TB, sys *System) {
				sys.OpenBPF = func() (loader.Loaded, error) {
					return loader.Loaded{}, fmt.Errorf("%w: the kernel refused the program (a security module may forbid it): %w", loader.ErrUnavailable, syscall.EPERM)
				}
			},
			check: CheckBPFLoad, status: Fail,
			detail: []string{"the tracker did not load: the kernel refused the program", "operation not permitted"},
			why:    []string{"the tracker did not load: the kernel refused the program"},
		},
		{
			name: "load succeeds where a probe looked refused",
			change: func(tb testing.TB, sys *System) {
				sys.Features = func() (loader.Features, error) { return loader.Features{RingBuf: errors.ErrUnsupported}, nil }
			},
			check: CheckKernel, status: Fail,
			detail: []string{"no BPF ring buffer"},
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
	host(&sys, func(h *loader.Host) { h.BTF, h.Euid, h.Caps = os.ErrNotExist, 1000, 0 })
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
	if rep.Verdict != "backend: proc fallback, because loading the tracker was not tried" {
		t.Errorf("verdict %q", rep.Verdict)
	}
	for _, name := range []string{CheckKernel, CheckBTF, CheckPrivileges, CheckLockdown, CheckPIDNamespace, CheckPidfd, CheckSubreaper} {
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
		openBPF   func() (loader.Loaded, error)
		available bool
		reason    string
	}{
		{name: "available", openBPF: func() (loader.Loaded, error) { return fullLoad, nil }, available: true},
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
			if !ok || len(checks) != 17 {
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
