package doctor

import (
	"errors"
	"slices"
	"strings"

	"github.com/lineage-dev/lineage/internal/loader"
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
	CheckTracking     = "exact tracking"
	CheckContainment  = "containment"
	CheckHardCancel   = "hard cancel"
	CheckExecArgv     = "exec argv"
	CheckBatchReap    = "batch reap"
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

// System is what doctor examines: the loader's own pre-checks and probes,
// the directory doctor's other files are read under, and the few system
// calls it makes, as functions. [Host] returns the real machine's. A nil
// function makes its checks report that they were not checked (and, for
// OpenBPF, that BPF is not available).
type System struct {
	// Root is the directory /proc and /sys are read under for what the
	// loader does not probe (mounts, LSMs); "" means "/".
	Root string
	// Host returns the loader's pre-checks (loader.ProbeHost).
	Host func() loader.Host
	// Features returns the loader's probes of the kernel's BPF features
	// (bpf.ProbeFeatures).
	Features func() (loader.Features, error)
	// PidfdOpen opens a pidfd on the calling process and closes it.
	PidfdOpen func() error
	// Subreaper makes the calling process a child subreaper and leaves its
	// setting as it was.
	Subreaper func() error
	// OpenBPF loads and attaches lineage's BPF tracker, says what loaded,
	// then closes it.
	OpenBPF func() (loader.Loaded, error)
}

// run holds what several checks share.
type run struct {
	sys      System
	host     *loader.Host
	features *loader.Features
	featErr  error
	loaded   *loader.Loaded
	loadErr  error
	mounts   []mount
	mntErr   error
}

// Run makes every check against sys and returns the report. It always
// returns a full report: what can't be read becomes a check's detail.
func Run(sys System) Report {
	r := &run{sys: sys}
	if sys.Host != nil {
		h := sys.Host()
		r.host = &h
	}
	if sys.Features != nil {
		f, err := sys.Features()
		r.features, r.featErr = &f, err
	}
	r.loadErr = errors.New("loading the tracker was not tried")
	if sys.OpenBPF != nil {
		if l, err := sys.OpenBPF(); err == nil {
			r.loaded, r.loadErr = &l, nil
		} else {
			r.loadErr = err
		}
	}
	r.mounts, r.mntErr = readMountinfo(r.path("proc/self/mountinfo"))

	checks := []Check{
		r.checkKernel(),
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
		r.checkTracking(),
		r.checkContainment(),
		r.checkHardCancel(),
		r.checkExecArgv(),
		r.checkBatchReap(),
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
