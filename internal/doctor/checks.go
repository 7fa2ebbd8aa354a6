package doctor

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/lineage-dev/lineage/internal/loader"
)

// path returns the name of the file at rel (such as "proc/self/status")
// under the system's root.
func (r *run) path(rel string) string {
	root := r.sys.Root
	if root == "" {
		root = "/"
	}
	return filepath.Join(root, rel)
}

func notChecked(name string, required bool) Check {
	return Check{Name: name, Status: Info, Detail: "not checked", RequiredForBPF: required}
}

func (r *run) checkKernel() Check {
	c := Check{Name: CheckKernel, RequiredForBPF: true}
	switch {
	case r.sys.Release == nil:
		return notChecked(CheckKernel, true)
	case !r.known:
		c.Status = Warn
		c.Detail = fmt.Sprintf("can't tell the kernel version from %q: the bpf load below is the answer", r.release)
	case r.kernel.less(kernelBaseline):
		c.Status = Fail
		c.Detail = fmt.Sprintf("kernel %s is older than %s: the bpf backend needs the BPF ring buffer and tp_btf tracepoints", r.release, kernelBaseline)
	default:
		c.Status = OK
		c.Detail = fmt.Sprintf("%s: %s or later, so the BPF ring buffer and tp_btf tracepoints (the bpf backend's baseline) are there", r.release, kernelBaseline)
	}
	return c
}

func (r *run) checkKfuncs() Check {
	c := Check{Name: CheckKfuncs}
	switch {
	case !r.known || r.kernel.less(kernelBaseline):
		c.Status = Info
		c.Detail = fmt.Sprintf("bpf_task_from_pid and bpf_send_signal_task (%s+) let a reap kill a member's new child at birth and a lineage die with its supervisor; not known here", kernelKfuncs)
	case r.kernel.less(kernelKfuncs):
		c.Status = Warn
		c.Detail = fmt.Sprintf("before %s there is no bpf_task_from_pid or bpf_send_signal_task: a reap stops forks by killing the forking member instead of the new child, and a lineage does not die with a SIGKILLed supervisor", kernelKfuncs)
	default:
		c.Status = OK
		c.Detail = fmt.Sprintf("%s+: bpf_task_from_pid and bpf_send_signal_task, so a reap kills a member's new child at birth and a lineage can die with its supervisor", kernelKfuncs)
	}
	return c
}

func (r *run) checkGroupDead() Check {
	c := Check{Name: CheckGroupDead}
	switch {
	case !r.known || r.kernel.less(kernelBaseline):
		c.Status = Info
		c.Detail = fmt.Sprintf("sched_process_exit passes group_dead from %s; not known here", kernelGroupDead)
	case r.kernel.less(kernelGroupDead):
		c.Status = Info
		c.Detail = fmt.Sprintf("before %s sched_process_exit has no group_dead: the tracker reads signal->live instead, with the same result", kernelGroupDead)
	default:
		c.Status = OK
		c.Detail = fmt.Sprintf("%s+: sched_process_exit passes group_dead, so the tracker sees directly when a whole process has exited", kernelGroupDead)
	}
	return c
}

func (r *run) checkBTF() Check {
	c := Check{Name: CheckBTF, RequiredForBPF: true}
	_, err := os.Stat(r.path("sys/kernel/btf/vmlinux"))
	switch {
	case err == nil:
		c.Status = OK
		c.Detail = "/sys/kernel/btf/vmlinux is there: the tracker's CO-RE reads are relocated against this kernel"
	case errors.Is(err, os.ErrNotExist):
		c.Status = Fail
		c.Detail = "the kernel has no BTF: /sys/kernel/btf/vmlinux is missing (the kernel needs CONFIG_DEBUG_INFO_BTF=y)"
	default:
		c.Status = Fail
		c.Detail = fmt.Sprintf("can't read the kernel's BTF: %v", err)
	}
	return c
}

func (r *run) checkPrivileges() Check {
	if r.sys.Euid == nil || r.sys.EffectiveCaps == nil {
		return notChecked(CheckPrivileges, true)
	}
	c := Check{Name: CheckPrivileges, RequiredForBPF: true}
	euid := r.sys.Euid()
	caps, err := r.sys.EffectiveCaps()
	if err != nil {
		c.Status = Fail
		c.Detail = fmt.Sprintf("can't read this process's capabilities (euid %d): %v", euid, err)
		return c
	}
	has := func(n int) bool { return caps&(1<<n) != 0 }
	var names []string
	for _, k := range []struct {
		n    int
		name string
	}{{capBPF, "CAP_BPF"}, {capPerfmon, "CAP_PERFMON"}, {capSysAdmin, "CAP_SYS_ADMIN"}, {capSysResource, "CAP_SYS_RESOURCE"}} {
		if has(k.n) {
			names = append(names, k.name)
		}
	}
	held := "none of CAP_BPF, CAP_PERFMON, CAP_SYS_ADMIN, CAP_SYS_RESOURCE"
	if len(names) > 0 {
		held = strings.Join(names, ", ")
	}
	// The kernel's bpf_capable() and perfmon_capable() accept
	// CAP_SYS_ADMIN in place of either.
	bpfOK := has(capBPF) || has(capSysAdmin)
	perfOK := has(capPerfmon) || has(capSysAdmin)
	if !bpfOK || !perfOK {
		c.Status = Fail
		c.Detail = fmt.Sprintf("not privileged: euid %d, effective capabilities: %s; the bpf backend needs root, or CAP_BPF and CAP_PERFMON (run with sudo, or use --backend proc)", euid, held)
		return c
	}
	c.Status = OK
	c.Detail = fmt.Sprintf("euid %d, effective capabilities: %s", euid, held)
	switch {
	case has(capSysResource):
	case r.known && r.kernel.less(kernelMemcg):
		c.Status = Warn
		c.Detail += fmt.Sprintf("; without CAP_SYS_RESOURCE the memlock limit can't be lifted, which kernels before %s need for BPF maps", kernelMemcg)
	default:
		c.Detail += fmt.Sprintf("; CAP_SYS_RESOURCE is not needed from %s (BPF memory is charged to the cgroup, not the memlock limit)", kernelMemcg)
	}
	return c
}

// securityfs reports whether securityfs is mounted (false if unknown).
func (r *run) securityfs() bool {
	return slices.ContainsFunc(r.mounts, func(m mount) bool { return m.fstype == "securityfs" })
}

func (r *run) checkLockdown() Check {
	c := Check{Name: CheckLockdown, RequiredForBPF: true}
	raw, err := os.ReadFile(r.path("sys/kernel/security/lockdown"))
	if err != nil {
		c.Status = Info
		switch {
		case errors.Is(err, os.ErrNotExist) && r.securityfs():
			c.Status = OK
			c.Detail = "no lockdown LSM: lockdown restricts nothing"
		case errors.Is(err, os.ErrNotExist) && bootLockdown(r.path("proc/cmdline")) == "confidentiality":
			c.Status = Fail
			c.Detail = "kernel lockdown is confidentiality (lockdown= on the kernel command line), which refuses BPF programs that read kernel memory: the tracker can't load"
		case errors.Is(err, os.ErrNotExist):
			c.Detail = "unknown: securityfs is not mounted at /sys/kernel/security; lockdown=confidentiality would refuse BPF tracing, and the bpf load below tells"
			if mode := bootLockdown(r.path("proc/cmdline")); mode != "" {
				c.Detail = fmt.Sprintf("%s at boot (lockdown= on the kernel command line; securityfs is not mounted to show the current mode); only confidentiality refuses BPF tracing", mode)
			}
		default:
			c.Detail = fmt.Sprintf("unknown: %v", err)
		}
		return c
	}
	mode := lockdownMode(string(raw))
	switch mode {
	case "none":
		c.Status = OK
		c.Detail = "none: lockdown restricts nothing"
	case "integrity":
		c.Status = OK
		c.Detail = "integrity: BPF tracing is allowed (only confidentiality refuses it)"
	case "confidentiality":
		c.Status = Fail
		c.Detail = "kernel lockdown is confidentiality, which refuses BPF programs that read kernel memory: the tracker can't load"
	default:
		c.Status = Info
		c.Detail = fmt.Sprintf("unknown mode in /sys/kernel/security/lockdown: %q", strings.TrimSpace(string(raw)))
	}
	return c
}

// bootLockdown returns the lockdown= parameter of the kernel command line
// in the file name, or "".
func bootLockdown(name string) string {
	raw, err := os.ReadFile(name)
	if err != nil {
		return ""
	}
	for _, f := range strings.Fields(string(raw)) {
		if f == "--" {
			break // the rest is for init
		}
		if mode, ok := strings.CutPrefix(f, "lockdown="); ok {
			return mode
		}
	}
	return ""
}

// lockdownMode returns the bracketed mode in the lockdown file's text
// ("none integrity [confidentiality]"), or "".
func lockdownMode(s string) string {
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

func (r *run) checkBPFLSM() Check {
	c := Check{Name: CheckBPFLSM, Status: Info}
	raw, err := os.ReadFile(r.path("sys/kernel/security/lsm"))
	if err != nil {
		if errors.Is(err, os.ErrNotExist) && !r.securityfs() {
			c.Detail = "unknown: securityfs is not mounted; lineage doesn't need BPF-LSM (its programs are tracepoints)"
		} else {
			c.Detail = fmt.Sprintf("unknown (%v); lineage doesn't need BPF-LSM (its programs are tracepoints)", err)
		}
		return c
	}
	list := strings.TrimSpace(string(raw))
	if slices.Contains(strings.Split(list, ","), "bpf") {
		c.Detail = fmt.Sprintf("bpf is an active LSM (%s); lineage doesn't need it (its programs are tracepoints)", list)
	} else {
		c.Detail = fmt.Sprintf("bpf is not an active LSM (%s); lineage doesn't need it (its programs are tracepoints)", list)
	}
	return c
}

func (r *run) checkBPFFS() Check {
	c := Check{Name: CheckBPFFS, Status: Info}
	if r.mntErr != nil {
		c.Detail = fmt.Sprintf("unknown (%v); bpffs is only needed to pin the tracker (lineage serve)", r.mntErr)
		return c
	}
	at := r.mountpoints("bpf")
	switch {
	case slices.Contains(at, "/sys/fs/bpf"):
		c.Status = OK
		c.Detail = "mounted at /sys/fs/bpf: the tracker can be pinned (needed only by lineage serve, to survive a restart)"
	case len(at) > 0:
		c.Detail = fmt.Sprintf("mounted at %s, not /sys/fs/bpf; only needed to pin the tracker (lineage serve)", strings.Join(at, ", "))
	default:
		c.Detail = "not mounted at /sys/fs/bpf; not needed unless lineage serve pins the tracker (mount -t bpf bpf /sys/fs/bpf)"
	}
	return c
}

func (r *run) checkTracefs() Check {
	c := Check{Name: CheckTracefs, Status: Info}
	if r.mntErr != nil {
		c.Detail = fmt.Sprintf("unknown (%v); not needed: tp_btf tracepoints attach without tracefs", r.mntErr)
		return c
	}
	if at := r.mountpoints("tracefs"); len(at) > 0 {
		c.Detail = fmt.Sprintf("mounted at %s; not needed: tp_btf tracepoints attach without tracefs", strings.Join(at, ", "))
	} else {
		c.Detail = "not mounted; not needed: tp_btf tracepoints attach without tracefs"
	}
	return c
}

func (r *run) checkPidfd() Check {
	if r.sys.PidfdOpen == nil {
		return notChecked(CheckPidfd, false)
	}
	c := Check{Name: CheckPidfd}
	if err := r.sys.PidfdOpen(); err != nil {
		c.Status = Fail
		c.Detail = fmt.Sprintf("pidfd_open refused (%v; it needs Linux 5.3, and a seccomp filter may block it): lineage signals only through pidfds, so it can't reap here with either backend", err)
		return c
	}
	c.Status = OK
	c.Detail = "pidfd_open works: every signal goes through a pidfd, so a recycled pid is never hit"
	return c
}

func (r *run) checkSubreaper() Check {
	if r.sys.Subreaper == nil {
		return notChecked(CheckSubreaper, false)
	}
	c := Check{Name: CheckSubreaper}
	if err := r.sys.Subreaper(); err != nil {
		c.Status = Warn
		c.Detail = fmt.Sprintf("PR_SET_CHILD_SUBREAPER refused (%v): with the proc backend, a double-forked daemon reparents to init and can escape between two polls", err)
		return c
	}
	c.Status = OK
	c.Detail = "PR_SET_CHILD_SUBREAPER allowed: with the proc backend, orphans reparent to lineage and stay in view"
	return c
}

func (r *run) checkCgroup2() Check {
	c := Check{Name: CheckCgroup2, Status: Info}
	if r.mntErr != nil {
		c.Detail = fmt.Sprintf("unknown (%v); lineage doesn't depend on cgroups", r.mntErr)
		return c
	}
	at := r.mountpoints("cgroup2")
	switch {
	case len(at) == 0:
		c.Detail = "not mounted; lineage doesn't depend on cgroups"
	case r.hasV1():
		c.Status = OK
		c.Detail = fmt.Sprintf("mounted at %s, beside cgroup v1 hierarchies (hybrid); lineage doesn't depend on cgroups", strings.Join(at, ", "))
	default:
		c.Status = OK
		c.Detail = fmt.Sprintf("mounted at %s; lineage doesn't depend on cgroups", strings.Join(at, ", "))
	}
	return c
}

func (r *run) hasV1() bool {
	return slices.ContainsFunc(r.mounts, func(m mount) bool { return m.fstype == "cgroup" })
}

func (r *run) checkPIDNamespace() Check {
	c := Check{Name: CheckPIDNamespace, RequiredForBPF: true}
	link, err := os.Readlink(r.path("proc/self/ns/pid"))
	if err != nil {
		c.Status = Warn
		c.Detail = fmt.Sprintf("can't tell whether /proc shows the kernel's global pids: %v", err)
		return c
	}
	ino, ok := namespaceInode(link)
	if !ok {
		c.Status = Warn
		c.Detail = fmt.Sprintf("can't tell whether /proc shows the kernel's global pids: /proc/self/ns/pid reads %q", link)
		return c
	}
	nspid := readNSpid(r.path("proc/self/status"))
	if ino == initPIDNamespaceInode && len(nspid) <= 1 {
		c.Status = OK
		c.Detail = "initial PID namespace: /proc shows the global pids that the BPF side sees"
		return c
	}
	c.Status = Fail
	c.Detail = fmt.Sprintf("lineage runs in a nested PID namespace (%s), so the pids it knows are not the global pids the BPF side sees", link)
	if len(nspid) > 1 {
		c.Detail += fmt.Sprintf(" (this process is pid %s here, %s outside)", nspid[len(nspid)-1], nspid[0])
	}
	c.Detail += ": run lineage in the host's PID namespace (hostPID in Kubernetes, --pid=host in Docker)"
	return c
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

// readNSpid returns the NSpid field of a /proc/PID/status file: the
// process's pid in each PID namespace from /proc's own to the innermost. It
// returns nil if the field can't be read.
func readNSpid(name string) []string {
	f, err := os.Open(name)
	if err != nil {
		return nil
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "NSpid:"); ok {
			return strings.Fields(rest)
		}
	}
	return nil
}

func (r *run) checkBPFLoad() Check {
	c := Check{Name: CheckBPFLoad, RequiredForBPF: true}
	if r.sys.OpenBPF == nil {
		c.Status = Fail
		c.Detail = "loading the tracker was not tried"
		return c
	}
	err := r.sys.OpenBPF()
	if err != nil {
		c.Status = Fail
		msg := err.Error()
		if errors.Is(err, loader.ErrUnavailable) {
			msg = strings.TrimPrefix(msg, loader.ErrUnavailable.Error()+": ")
		}
		c.Detail = "the tracker did not load: " + msg
		return c
	}
	c.Status = OK
	c.Detail = "loaded and attached the BPF tracker, then closed it"
	return c
}

// mount is one line of /proc/self/mountinfo.
type mount struct {
	point  string
	fstype string
}

// readMountinfo reads the mount points and file-system types of a
// /proc/PID/mountinfo file.
func readMountinfo(name string) ([]mount, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, fmt.Errorf("read mounts: %w", err)
	}
	defer f.Close()
	var out []mount
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// id parent major:minor root point options [optional...] - type source super
		fields := strings.Fields(sc.Text())
		sep := slices.Index(fields, "-")
		if sep < 5 || sep+1 >= len(fields) {
			continue
		}
		out = append(out, mount{point: unescapeMount(fields[4]), fstype: fields[sep+1]})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read mounts: %w", err)
	}
	return out, nil
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// mountpoints returns where file systems of type fstype are mounted.
func (r *run) mountpoints(fstype string) []string {
	var at []string
	for _, m := range r.mounts {
		if m.fstype == fstype {
			at = append(at, m.point)
		}
	}
	return at
}
