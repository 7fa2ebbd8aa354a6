package loader

import (
	"fmt"
	"strconv"
	"strings"
)

// Capability numbers, as in linux/capability.h.
const (
	CapSetgid      = 6
	CapSetuid      = 7
	CapSysAdmin    = 21
	CapSysResource = 24
	CapPerfmon     = 38
	CapBPF         = 39
)

// initPIDNamespaceInode is the inode number of the initial PID namespace
// (PROC_PID_INIT_INO), the same on every kernel since 3.8.
const initPIDNamespaceInode = 0xEFFFFFFC

// Lockdown modes, as /sys/kernel/security/lockdown names them.
const (
	LockdownNone            = "none"
	LockdownIntegrity       = "integrity"
	LockdownConfidentiality = "confidentiality"
)

// Where a Host's lockdown mode was read.
const (
	// LockdownFromSecurityfs: /sys/kernel/security/lockdown.
	LockdownFromSecurityfs = "securityfs"
	// LockdownFromNoLSM: securityfs is mounted but has no lockdown file:
	// the kernel has no lockdown LSM, which is mode none.
	LockdownFromNoLSM = "no lockdown lsm"
	// LockdownFromCmdline: securityfs is not mounted; the mode is the
	// kernel command line's lockdown= (the mode at boot).
	LockdownFromCmdline = "cmdline"
)

// Host is what the loader's pre-checks read from this machine before any
// BPF is tried: the facts that decide whether the bpf backend may be tried
// at all. [ProbeHost] reads them; its zero value knows nothing.
type Host struct {
	// Release is the kernel release, as uname -r prints it. It is for
	// people: nothing is decided from it.
	Release string
	// BTF is nil when the kernel's BTF (/sys/kernel/btf/vmlinux) is
	// there, and otherwise why not.
	BTF error
	// Euid is the effective user id.
	Euid int
	// Caps is the effective capability set (bit n for capability n);
	// CapsErr says why it could not be read.
	Caps    uint64
	CapsErr error
	// Lockdown is the kernel lockdown mode (Lockdown*), or "" when
	// unknown; LockdownFrom says where it was read (LockdownFrom*), and
	// LockdownErr why it could not be.
	Lockdown     string
	LockdownFrom string
	LockdownErr  error
	// PIDNamespace is the text of /proc/self/ns/pid ("pid:[4026531836]"),
	// PIDNamespaceErr why it could not be read, and NSpid this process's
	// pid in each PID namespace from /proc's own inwards.
	PIDNamespace    string
	PIDNamespaceErr error
	NSpid           []string
}

// HasCap reports whether the effective set holds capability n.
func (h Host) HasCap(n int) bool { return h.CapsErr == nil && h.Caps&(1<<n) != 0 }

// Privileged reports whether this process may load and attach lineage's
// tracing programs: CAP_BPF and CAP_PERFMON, each of which CAP_SYS_ADMIN
// stands in for (the kernel's bpf_capable and perfmon_capable). When the
// capabilities can't be read, root counts as privileged.
func (h Host) Privileged() bool {
	if h.CapsErr != nil {
		return h.Euid == 0
	}
	admin := h.HasCap(CapSysAdmin)
	return (admin || h.HasCap(CapBPF)) && (admin || h.HasCap(CapPerfmon))
}

// LockdownRefuses reports whether kernel lockdown refuses BPF programs
// that read kernel memory (mode confidentiality).
func (h Host) LockdownRefuses() bool { return h.Lockdown == LockdownConfidentiality }

// GlobalPIDs reports whether /proc here shows the kernel's global pids, the
// ones the BPF side sees: the initial PID namespace, one level deep. known
// is false when it can't tell; then the check never blocks.
func (h Host) GlobalPIDs() (global, known bool) {
	if h.PIDNamespaceErr != nil {
		return true, false
	}
	ino, ok := namespaceInode(h.PIDNamespace)
	if !ok {
		return true, false
	}
	return ino == initPIDNamespaceInode && len(h.NSpid) <= 1, true
}

// Check returns nil when the bpf backend may be tried here, and otherwise
// why not, wrapping ErrUnavailable, in words a user can act on.
func (h Host) Check() error {
	if h.BTF != nil {
		return fmt.Errorf("%w: the kernel has no BTF (/sys/kernel/btf/vmlinux; it needs CONFIG_DEBUG_INFO_BTF=y): %w", ErrUnavailable, h.BTF)
	}
	if !h.Privileged() {
		return fmt.Errorf("%w: not privileged: the bpf backend needs root, or CAP_BPF and CAP_PERFMON (run with sudo, or use --backend proc)", ErrUnavailable)
	}
	if h.LockdownRefuses() {
		return fmt.Errorf("%w: kernel lockdown is %q, which refuses BPF tracing", ErrUnavailable, h.Lockdown)
	}
	if global, _ := h.GlobalPIDs(); !global {
		return fmt.Errorf("%w: lineage runs in a nested PID namespace (%s): the BPF side sees the kernel's global pids, which /proc here does not show (run it in the host's PID namespace: hostPID, docker run --pid=host; or use --backend proc)", ErrUnavailable, h.PIDNamespace)
	}
	return nil
}

// namespaceInode reads the inode number from a namespace link such as
// "pid:[4026531836]".
func namespaceInode(link string) (uint64, bool) {
	i := strings.IndexByte(link, '[')
	if i < 0 || !strings.HasSuffix(link, "]") {
		return 0, false
	}
	n, err := strconv.ParseUint(link[i+1:len(link)-1], 10, 64)
	return n, err == nil
}

// parseNSpid returns the NSpid field of a /proc/PID/status file's text, or
// nil.
func parseNSpid(status string) []string {
	for _, line := range strings.Split(status, "\n") {
		if rest, ok := strings.CutPrefix(line, "NSpid:"); ok {
			return strings.Fields(rest)
		}
	}
	return nil
}

// parseLockdown returns the bracketed mode in the lockdown file's text
// ("none integrity [confidentiality]"), or "".
func parseLockdown(s string) string {
	i := strings.IndexByte(s, '[')
	if i < 0 {
		return ""
	}
	j := strings.IndexByte(s[i:], ']')
	if j < 0 {
		return ""
	}
	return s[i+1 : i+j]
}

// cmdlineLockdown returns the lockdown= parameter of a kernel command line,
// or "".
func cmdlineLockdown(cmdline string) string {
	for _, f := range strings.Fields(cmdline) {
		if f == "--" {
			break // the rest is for init
		}
		if mode, ok := strings.CutPrefix(f, "lockdown="); ok {
			return mode
		}
	}
	return ""
}
