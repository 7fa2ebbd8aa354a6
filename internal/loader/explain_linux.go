package loader

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// minKernel is the oldest kernel the BPF backend loads on: BPF ring buffer
// (5.8) and tp_btf with BTF-typed task arguments.
var minKernel = [2]int{5, 8}

// precheck finds the common reasons BPF can't load before trying, so the
// error says what to do rather than "operation not permitted".
func precheck() error {
	if major, minor, ok := kernelVersion(); ok && (major < minKernel[0] || major == minKernel[0] && minor < minKernel[1]) {
		return fmt.Errorf("%w: kernel %d.%d is too old: the bpf backend needs %d.%d or later", ErrUnavailable, major, minor, minKernel[0], minKernel[1])
	}
	if _, err := os.Stat("/sys/kernel/btf/vmlinux"); err != nil {
		return fmt.Errorf("%w: the kernel has no BTF (/sys/kernel/btf/vmlinux is missing; it needs CONFIG_DEBUG_INFO_BTF=y)", ErrUnavailable)
	}
	if !privileged() {
		return fmt.Errorf("%w: not privileged: the bpf backend needs root, or CAP_BPF and CAP_PERFMON (run with sudo, or use --backend proc)", ErrUnavailable)
	}
	if depth := pidNamespaceDepth("/proc/self/status"); depth > 1 || !initialPIDNamespace("/proc/self/ns/pid") {
		return fmt.Errorf("%w: lineage runs in a nested PID namespace: the BPF side sees the kernel's global pids, which /proc here does not show (run it in the host's PID namespace: hostPID, docker run --pid=host; or use --backend proc)", ErrUnavailable)
	}
	return nil
}

// initPIDNamespaceInode is the fixed inode number of the initial PID
// namespace (PROC_PID_INIT_INO).
const initPIDNamespaceInode = "pid:[4026531836]"

// initialPIDNamespace reports whether the namespace link (/proc/self/ns/pid)
// names the initial PID namespace; true when it can't be read, so that the
// check never blocks a machine it can't inspect.
func initialPIDNamespace(link string) bool {
	target, err := os.Readlink(link)
	if err != nil {
		return true
	}
	return target == initPIDNamespaceInode
}

// pidNamespaceDepth returns how many PID namespaces the process is in (the
// length of NSpid in its status file), or 0 if unknown.
func pidNamespaceDepth(status string) int {
	raw, err := os.ReadFile(status)
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if rest, ok := strings.CutPrefix(line, "NSpid:"); ok {
			return len(strings.Fields(rest))
		}
	}
	return 0
}

// explainLoadError wraps a failed load or attach with what it most likely
// means.
func explainLoadError(err error) error {
	switch {
	case errors.Is(err, unix.EPERM) || errors.Is(err, os.ErrPermission):
		if !privileged() {
			return fmt.Errorf("%w: not privileged: the bpf backend needs root, or CAP_BPF and CAP_PERFMON: %w", ErrUnavailable, err)
		}
		if lockdown := lockdownMode(); lockdown == "confidentiality" {
			return fmt.Errorf("%w: kernel lockdown is %q, which refuses BPF tracing: %w", ErrUnavailable, lockdown, err)
		}
		return fmt.Errorf("%w: the kernel refused the program (a security module or a sysctl such as kernel.unprivileged_bpf_disabled may forbid it): %w", ErrUnavailable, err)
	case errors.Is(err, unix.ENOENT) || errors.Is(err, unix.EINVAL) || errors.Is(err, unix.EOPNOTSUPP):
		return fmt.Errorf("%w: this kernel lacks a BPF feature lineage needs (tp_btf tracepoints, ring buffer, BTF): %w", ErrUnavailable, err)
	}
	return fmt.Errorf("%w: %w", ErrUnavailable, err)
}

func privileged() bool {
	if os.Geteuid() == 0 {
		return true
	}
	caps, err := effectiveCaps()
	if err != nil {
		return false
	}
	const capPerfmon, capBPF = 38, 39
	return caps&(1<<capBPF) != 0 && caps&(1<<capPerfmon) != 0
}

// effectiveCaps returns this process's effective capability set.
func effectiveCaps() (uint64, error) {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return 0, fmt.Errorf("capget: %w", err)
	}
	return uint64(data[0].Effective) | uint64(data[1].Effective)<<32, nil
}

// kernelVersion returns the running kernel's major and minor version.
func kernelVersion() (major, minor int, ok bool) {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return 0, 0, false
	}
	return parseKernelVersion(unix.ByteSliceToString(u.Release[:]))
}

func parseKernelVersion(release string) (major, minor int, ok bool) {
	parts := strings.SplitN(release, ".", 3)
	if len(parts) < 2 {
		return 0, 0, false
	}
	major, err1 := strconv.Atoi(parts[0])
	minorText := parts[1]
	if i := strings.IndexFunc(minorText, func(r rune) bool { return r < '0' || r > '9' }); i >= 0 {
		minorText = minorText[:i]
	}
	minor, err2 := strconv.Atoi(minorText)
	if err1 != nil || err2 != nil {
		return 0, 0, false
	}
	return major, minor, true
}

// lockdownMode returns the active kernel lockdown mode ("none",
// "integrity", "confidentiality"), or "" if unknown.
func lockdownMode() string {
	raw, err := os.ReadFile("/sys/kernel/security/lockdown")
	if err != nil {
		return ""
	}
	s := string(raw)
	if i := strings.Index(s, "["); i >= 0 {
		if j := strings.Index(s[i:], "]"); j > 0 {
			return s[i+1 : i+j]
		}
	}
	return ""
}
