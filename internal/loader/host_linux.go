package loader

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// ProbeHost reads this machine's pre-checks (see [Host]). It needs no
// privileges and changes nothing.
func ProbeHost() Host { return probeHostAt("/") }

// probeHostAt reads the files of a Host under root, for tests; the system
// calls are the real ones.
func probeHostAt(root string) Host {
	at := func(rel string) string { return filepath.Join(root, rel) }
	h := Host{Euid: os.Geteuid()}
	var u unix.Utsname
	if err := unix.Uname(&u); err == nil {
		h.Release = unix.ByteSliceToString(u.Release[:])
	}
	if _, err := os.Stat(at("sys/kernel/btf/vmlinux")); err != nil {
		h.BTF = err
	}
	h.Caps, h.CapsErr = effectiveCaps()
	h.Lockdown, h.LockdownFrom, h.LockdownErr = readLockdown(at)
	h.PIDNamespace, h.PIDNamespaceErr = os.Readlink(at("proc/self/ns/pid"))
	if raw, err := os.ReadFile(at("proc/self/status")); err == nil {
		h.NSpid = parseNSpid(string(raw))
	}
	return h
}

// readLockdown reads the lockdown mode from securityfs, or, where securityfs
// is not mounted, from the kernel command line.
func readLockdown(at func(string) string) (mode, from string, err error) {
	raw, err := os.ReadFile(at("sys/kernel/security/lockdown"))
	switch {
	case err == nil:
		return parseLockdown(string(raw)), LockdownFromSecurityfs, nil
	case !errors.Is(err, os.ErrNotExist):
		return "", "", err
	}
	if _, lerr := os.Stat(at("sys/kernel/security/lsm")); lerr == nil {
		return LockdownNone, LockdownFromNoLSM, nil
	}
	cmdline, cerr := os.ReadFile(at("proc/cmdline"))
	if cerr == nil {
		if mode := cmdlineLockdown(string(cmdline)); mode != "" {
			return mode, LockdownFromCmdline, nil
		}
	}
	return "", "", fmt.Errorf("securityfs is not mounted at /sys/kernel/security: %w", err)
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
