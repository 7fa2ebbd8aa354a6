package doctor

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Status says how a check came out.
type Status string

const (
	// OK: what the check looks at is there and works.
	OK Status = "ok"
	// Warn: lineage works here, but with less than it could; the detail
	// says what is missing.
	Warn Status = "warn"
	// Fail: something lineage would use is refused; the detail says what
	// won't work and why.
	Fail Status = "fail"
	// Info: worth knowing; lineage doesn't need it by default.
	Info Status = "info"
)

// The names of the checks, in the order a Report lists them.
const (
	CheckKernel       = "kernel"
	CheckKfuncs       = "kernel 6.13 kfuncs"
	CheckGroupDead    = "kernel 6.16 group_dead"
	CheckBTF          = "btf"
	CheckPrivileges   = "privileges"
	CheckLockdown     = "lockdown"
	CheckBPFLSM       = "bpf lsm"
	CheckBPFFS        = "bpffs"
	CheckTracefs      = "tracefs"
	CheckPidfd        = "pidfd"
	CheckSubreaper    = "subreaper"
	CheckCgroup2      = "cgroup v2"
	CheckPIDNamespace = "pid namespace"
	CheckBPFLoad      = "bpf load"
)

// Check is the outcome of one check.
type Check struct {
	// Name is one of the Check* constants.
	Name   string `json:"name"`
	Status Status `json:"status"`
	// Detail says, in plain words, what was found and what it means for
	// lineage. A failed check's detail reads as a reason ("the kernel has
	// no BTF: ...").
	Detail string `json:"detail"`
	// RequiredForBPF is true for the checks whose failure means the bpf
	// backend can't be used.
	RequiredForBPF bool `json:"required_for_bpf"`
}

// Report is everything Run found.
type Report struct {
	Checks []Check `json:"checks"`
	// BPFAvailable is true when the BPF tracker loaded and /proc shows the
	// kernel's global pids: lineage's bpf backend works here.
	BPFAvailable bool `json:"bpf_available"`
	// Backend is what lineage's automatic choice lands on: "bpf" or
	// "proc".
	Backend string `json:"backend"`
	// Reason says why the bpf backend can't be used; empty when it can.
	Reason string `json:"reason,omitempty"`
	// Verdict is the one-line summary: "backend: bpf available" or
	// "backend: proc fallback, because <Reason>".
	Verdict string `json:"verdict"`
}

// Check returns the check named name, and whether the report has it.
func (r Report) Check(name string) (Check, bool) {
	for _, c := range r.Checks {
		if c.Name == name {
			return c, true
		}
	}
	return Check{}, false
}

// System is what doctor examines: the directory that /proc and /sys are read
// under, and the system calls it makes, as functions. [Host] returns the real
// machine's. A nil function makes its check report that it was not checked
// (and, for OpenBPF, that BPF is not available).
type System struct {
	// Root is the directory /proc and /sys are read under; "" means "/".
	Root string
	// Release returns the kernel release, as uname -r prints it.
	Release func() (string, error)
	// Euid returns the effective user id.
	Euid func() int
	// EffectiveCaps returns the effective capability set (capget(2)), bit
	// n set for capability number n.
	EffectiveCaps func() (uint64, error)
	// PidfdOpen opens a pidfd on the calling process and closes it.
	PidfdOpen func() error
	// Subreaper makes the calling process a child subreaper and leaves its
	// setting as it was.
	Subreaper func() error
	// OpenBPF loads and attaches lineage's BPF tracker, then closes it.
	OpenBPF func() error
}

// Capability numbers, as in linux/capability.h.
const (
	capSysAdmin    = 21
	capSysResource = 24
	capPerfmon     = 38
	capBPF         = 39
)

// initPIDNamespaceInode is the inode number of the initial PID namespace
// (PROC_PID_INIT_INO in include/linux/proc_ns.h), the same on every kernel
// since 3.8.
const initPIDNamespaceInode = 0xEFFFFFFC

// Kernel versions that change what the bpf backend can do.
var (
	// kernelBaseline: BPF ring buffer and tp_btf with typed task arguments.
	kernelBaseline = version{5, 8}
	// kernelMemcg: BPF memory is charged to the cgroup, so the memlock
	// rlimit (and CAP_SYS_RESOURCE to lift it) no longer matters.
	kernelMemcg = version{5, 11}
	// kernelKfuncs: bpf_task_from_pid and bpf_send_signal_task.
	kernelKfuncs = version{6, 13}
	// kernelGroupDead: sched_process_exit passes group_dead.
	kernelGroupDead = version{6, 16}
)

type version struct{ major, minor int }

func (v version) less(w version) bool {
	return v.major < w.major || v.major == w.major && v.minor < w.minor
}

func (v version) String() string { return fmt.Sprintf("%d.%d", v.major, v.minor) }

// parseRelease reads the major and minor version from a kernel release
// such as "6.18.44-fc-v782".
func parseRelease(release string) (version, bool) {
	parts := strings.SplitN(release, ".", 3)
	if len(parts) < 2 {
		return version{}, false
	}
	minor := parts[1]
	if i := strings.IndexFunc(minor, func(r rune) bool { return r < '0' || r > '9' }); i >= 0 {
		minor = minor[:i]
	}
	a, err1 := strconv.Atoi(parts[0])
	b, err2 := strconv.Atoi(minor)
	if err1 != nil || err2 != nil {
		return version{}, false
	}
	return version{a, b}, true
}

// run holds what several checks share.
type run struct {
	sys     System
	release string
	kernel  version
	known   bool // kernel is known
	mounts  []mount
	mntErr  error
}

// Run makes every check against sys and returns the report. It always
// returns a full report: what can't be read becomes a check's detail.
func Run(sys System) Report {
	r := &run{sys: sys}
	if sys.Release != nil {
		if rel, err := sys.Release(); err == nil {
			r.release = rel
			r.kernel, r.known = parseRelease(rel)
		} else {
			r.release = "unknown (" + err.Error() + ")"
		}
	}
	r.mounts, r.mntErr = readMountinfo(r.path("proc/self/mountinfo"))

	checks := []Check{
		r.checkKernel(),
		r.checkKfuncs(),
		r.checkGroupDead(),
		r.checkBTF(),
		r.checkPrivileges(),
		r.checkLockdown(),
		r.checkBPFLSM(),
		r.checkBPFFS(),
		r.checkTracefs(),
		r.checkPidfd(),
		r.checkSubreaper(),
		r.checkCgroup2(),
		r.checkPIDNamespace(),
		r.checkBPFLoad(),
	}
	return verdict(checks)
}

// verdict fills in the report's summary: the bpf backend is available when
// the tracker loaded and no check required for it failed after all (the
// PID namespace check can't be seen by loading).
func verdict(checks []Check) Report {
	rep := Report{Checks: checks}
	var load Check
	var failed []Check
	for _, c := range checks {
		switch {
		case c.Name == CheckBPFLoad:
			load = c
		case c.RequiredForBPF && c.Status == Fail:
			failed = append(failed, c)
		}
	}
	if load.Status == OK {
		// Loading is the authoritative answer to everything but the
		// PID namespace, which a load can't see.
		failed = slices.DeleteFunc(failed, func(c Check) bool { return c.Name != CheckPIDNamespace })
	} else if len(failed) == 0 {
		failed = []Check{load}
	}
	if len(failed) == 0 {
		rep.BPFAvailable = true
		rep.Backend = "bpf"
		rep.Verdict = "backend: bpf available"
		return rep
	}
	reasons := make([]string, len(failed))
	for i, c := range failed {
		reasons[i] = c.Detail
	}
	rep.Backend = "proc"
	rep.Reason = strings.Join(reasons, "; ")
	rep.Verdict = "backend: proc fallback, because " + rep.Reason
	return rep
}
