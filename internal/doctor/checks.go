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

// securityfs reports whether securityfs is mounted (false if unknown).
func (r *run) securityfs() bool {
	return slices.ContainsFunc(r.mounts, func(m mount) bool { return m.fstype == "securityfs" })
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
		c.Detail = fmt.Sprintf("unknown (%v); lineage serve pins its tracker on bpffs (--pin-dir) and mounts it at /sys/fs/bpf when it is missing; lineage run pins nothing", r.mntErr)
		return c
	}
	at := r.mountpoints("bpf")
	switch {
	case slices.Contains(at, "/sys/fs/bpf"):
		c.Status = OK
		c.Detail = "mounted at /sys/fs/bpf, where lineage serve pins its tracker (--pin-dir), so that a restarted daemon takes it over; lineage run pins nothing"
	case len(at) > 0:
		c.Detail = fmt.Sprintf("mounted at %s, not /sys/fs/bpf; lineage serve mounts it at /sys/fs/bpf when it pins its tracker there (the default --pin-dir); lineage run pins nothing", strings.Join(at, ", "))
	default:
		c.Detail = "not mounted at /sys/fs/bpf; lineage serve mounts it there when it pins its tracker (the default --pin-dir); lineage run pins nothing"
	}
	return c
}

func (r *run) checkTracefs() Check {
	c := Check{Name: CheckTracefs, Status: Info}
	// The tp_btf hooks need none; the second fork hook is a classic
	// tracepoint, found through tracefs.
	const why = "the second fork hook (full program), which inserts the forks a kernel with preemptible tracepoints skips the first for, attaches through it; the tp_btf hooks need none"
	if r.mntErr != nil {
		c.Detail = fmt.Sprintf("unknown (%v); %s", r.mntErr, why)
		return c
	}
	if at := r.mountpoints("tracefs"); len(at) > 0 {
		c.Detail = fmt.Sprintf("mounted at %s: %s", strings.Join(at, ", "), why)
	} else {
		c.Detail = "not mounted: " + why + "; without it, forks the first hook skips are adopted from /proc, while their parent lives"
	}
	return c
}

// tryCheck is a check that tries something: ok says what it allows,
// refused (with the error) what is lost when it fails, at status failed.
func tryCheck(name string, try func() error, failed Status, refused, ok string) Check {
	if try == nil {
		return notChecked(name, false)
	}
	if err := try(); err != nil {
		return Check{Name: name, Status: failed, Detail: fmt.Sprintf(refused, err)}
	}
	return Check{Name: name, Status: OK, Detail: ok}
}

func (r *run) checkPidfd() Check {
	return tryCheck(CheckPidfd, r.sys.PidfdOpen, Fail,
		"pidfd_open refused (%v; it needs Linux 5.3, and a seccomp filter may block it): lineage signals only through pidfds, so it can't reap here with either backend",
		"pidfd_open works: every signal goes through a pidfd, so a recycled pid is never hit")
}

func (r *run) checkSubreaper() Check {
	return tryCheck(CheckSubreaper, r.sys.Subreaper, Warn,
		"PR_SET_CHILD_SUBREAPER refused (%v): with the proc backend, a double-forked daemon reparents to init and can escape between two polls",
		"PR_SET_CHILD_SUBREAPER allowed: with the proc backend, orphans reparent to lineage and stay in view")
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
