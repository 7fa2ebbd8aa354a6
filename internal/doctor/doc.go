// Package doctor examines what a machine allows lineage to do, and says in
// plain words what will work, what won't, and why.
//
// [Run] makes every check against a [System] and returns a [Report]: one
// [Check] per concern. The kernel, BTF, privileges, lockdown and PID
// namespace rows word the bpf backend's own pre-checks (loader.Host) and
// probes (loader.Features): doctor re-derives none of them. BPF-LSM, bpffs,
// tracefs, pidfd, child subreaper and cgroup v2 are doctor's own. Then the
// authoritative one: loading the BPF tracker for real and closing it again,
// and, from what loaded (loader.Loaded), a row per feature: exact tracking
// (the program variant), containment, hard cancel, exec argv and the batch reap. The
// report's verdict names the backend lineage will use: bpf when the tracker
// loads and /proc agrees with the kernel about pids, otherwise the /proc
// fallback and why.
//
// Everything doctor reads or asks of the kernel goes through [System]: the
// loader's probes, the file-system root that mounts and LSMs are read under,
// and the few system calls, as function fields. [Host] returns the real
// machine's; tests build fakes in which the kernel refuses whatever they
// like.
//
// Doctor changes nothing on the machine it examines: the subreaper probe
// restores the process's own setting, and the BPF tracker is closed again
// before Run returns. Loading the tracker needs what the bpf backend needs
// (root, or CAP_BPF with CAP_PERFMON); without it that check fails, which is
// the answer, not an error.
package doctor
