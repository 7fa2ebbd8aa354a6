//go:build ignore
// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * lineage.c: keeps, in the kernel, the exact set of descendants of every
 * registered root.
 *
 * A process is a member exactly when the thread group that forked it is a
 * member, whichever of its threads forked. Threads are not processes: they
 * are never inserted. A member leaves when its whole thread group is dead.
 * For every other process on the machine, each hook costs one hash lookup.
 *
 * The members map is the source of truth. Events are a record for people and
 * may be lost when the ring buffer is full; that loss is counted, and
 * membership stays exact regardless.
 */
#include "core.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include "lineage.h"

#ifndef bpf_ksym_exists
/* libbpf >= 1.2 defines it; Debian 12 ships 1.1. */
#define bpf_ksym_exists(sym) (!!(sym))
#endif

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* Set by the loader before load. */
const volatile __u32 supervisor_tgid = 0;       /* the process that loaded us */
const volatile bool exit_has_group_dead = false; /* sched_process_exit(p, group_dead): 6.16+ */
const volatile __u32 wakeup_bytes = 0;          /* wake the reader past this fill level */

/*
 * Spawning a root without a gap: the supervisor arms one of its threads, and
 * every process that thread forks while armed is inserted as a new root
 * before it can run a single instruction. User space disarms the thread.
 */
volatile __u32 spawn_tid = 0;
volatile __u32 spawn_root_flags = 0;

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536); /* resized by the loader */
	__type(key, __u32);          /* tgid */
	__type(value, struct member);
} members SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096); /* resized by the loader */
	__type(key, __u32);         /* root pid */
	__type(value, struct root);
} roots SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 20); /* resized by the loader */
	__type(value, struct event);
} events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, STAT_MAX);
	__type(key, enum stat);
	__type(value, __u64);
} stats SEC(".maps");

/* Kernel 6.13+. Weak: on older kernels the loader leaves them out and
 * containment falls back to signalling the forking task itself. */
extern struct task_struct *bpf_task_from_pid(__s32 pid) __ksym __weak;
extern void bpf_task_release(struct task_struct *p) __ksym __weak;
extern int bpf_send_signal_task(struct task_struct *task, int sig, enum pid_type type, __u64 value) __ksym __weak;

static __always_inline void count(enum stat stat)
{
	__u64 *v = bpf_map_lookup_elem(&stats, &stat);
	if (v)
		__sync_fetch_and_add(v, 1);
}

/* The start time of a process as /proc/PID/stat field 22 shows it. */
static __always_inline __u64 start_ticks(struct task_struct *task)
{
	return task->group_leader->start_boottime / NSEC_PER_USER_TICK;
}

static __always_inline struct event *reserve(__u32 kind, __u32 pid, __u64 start)
{
	struct event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count(STAT_EVENTS_LOST);
		return 0;
	}
	e->time_ns = bpf_ktime_get_boot_ns();
	e->kind = kind;
	e->pid = pid;
	e->start = start;
	e->parent_start = 0;
	e->root_start = 0;
	e->parent_pid = 0;
	e->root_pid = 0;
	e->exit_status = 0;
	e->flags = 0;
	e->args_size = 0;
	e->_pad = 0;
	e->filename[0] = 0;
	e->args[0] = 0;
	return e;
}

/* Wake the reader only past a fill level: a wakeup per event would cost the
 * tracked workload a large share of its fork rate. The reader polls too. */
static __always_inline void submit(struct event *e)
{
	__u64 flags = BPF_RB_NO_WAKEUP;
	if (bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) >= wakeup_bytes)
		flags = BPF_RB_FORCE_WAKEUP;
	bpf_ringbuf_submit(e, flags);
}

#define EBUSY 16
/* How long kills may wait for the CPU's signal slot: per contained child,
 * and in all when the supervisor dies. */
#define KILL_PATIENCE_NS (10ULL * 1000 * 1000)
#define SUPERVISOR_PATIENCE_NS (1000ULL * 1000 * 1000)

struct kill_ctx {
	__u64 start;
	__u64 deadline_ns; /* give up retrying past this (bpf_ktime_get_ns) */
	__u32 pid;
	int err;
};

static long try_kill(__u32 i, struct kill_ctx *k)
{
	struct task_struct *t = bpf_task_from_pid(k->pid);

	if (!t) {
		k->err = -1;
		return 1;
	}
	if ((t->flags & PF_KTHREAD) || t->start_boottime / NSEC_PER_USER_TICK != k->start) {
		bpf_task_release(t);
		k->err = -1; /* gone, and the pid is a stranger's now */
		return 1;
	}
	k->err = bpf_send_signal_task(t, SIGKILL, PIDTYPE_TGID, 0);
	bpf_task_release(t);
	if (k->err != -EBUSY)
		return 1;
	return bpf_ktime_get_ns() > k->deadline_ns;
}

/*
 * SIGKILL the process pid if it is still the one that started at start.
 *
 * Tracepoints run with preemption disabled, so the kernel defers the signal
 * to a per-CPU irq_work that holds one signal at a time, and answers -EBUSY
 * until that has run, on a self-interrupt. Retry until then, up to
 * deadline_ns, so that a run of kills (a lineage whose supervisor died, a
 * fork storm being contained) loses none.
 */
static __always_inline int kill_identity(__u32 pid, __u64 start, __u64 deadline_ns)
{
	struct kill_ctx k = {.pid = pid, .start = start, .deadline_ns = deadline_ns, .err = -1};

	if (!bpf_ksym_exists(bpf_task_from_pid) || !bpf_ksym_exists(bpf_send_signal_task) ||
	    !bpf_ksym_exists(bpf_task_release))
		return -1;
	bpf_loop(1 << 20, try_kill, &k, 0);
	return k.err;
}

static __always_inline int spawn_root(struct task_struct *parent, struct task_struct *child, __u32 pid)
{
	struct member m = {};
	struct root r = {};
	struct event *e;
	enum event_flag flags = EVENT_F_ROOT;

	m.start = child->start_boottime / NSEC_PER_USER_TICK;
	m.parent_pid = parent->tgid;
	m.parent_start = start_ticks(parent);
	m.root_pid = pid;
	m.root_start = m.start;
	m.flags = MEMBER_F_ROOT;
	r.start = m.start;
	r.flags = spawn_root_flags | ROOT_F_SPAWNING;
	if (bpf_map_update_elem(&roots, &pid, &r, BPF_ANY) ||
	    bpf_map_update_elem(&members, &pid, &m, BPF_ANY)) {
		count(STAT_MEMBERS_FULL);
		flags |= EVENT_F_UNTRACKED;
	} else {
		count(STAT_FORKS);
	}
	e = reserve(EVENT_FORK, pid, m.start);
	if (!e)
		return 0;
	e->parent_pid = m.parent_pid;
	e->parent_start = m.parent_start;
	e->root_pid = pid;
	e->root_start = m.start;
	e->flags = flags;
	bpf_probe_read_kernel_str(e->comm, sizeof(e->comm), child->comm);
	submit(e);
	return 0;
}

SEC("tp_btf/sched_process_fork")
int BPF_PROG(handle_fork, struct task_struct *parent, struct task_struct *child)
{
	__u32 pid = child->pid;
	__u32 forker = parent->tgid;
	struct member *pm, m = {};
	struct root *r;
	struct event *e;
	enum event_flag flags = 0;

	if (pid != (__u32)child->tgid)
		return 0; /* a new thread, not a new process */

	pm = bpf_map_lookup_elem(&members, &forker);
	if (!pm) {
		if (spawn_tid && (__u32)parent->pid == spawn_tid)
			return spawn_root(parent, child, pid);
		return 0;
	}
	if (pm->start != start_ticks(parent)) {
		/* An entry for a process that is gone; this pid is a stranger's now. */
		bpf_map_delete_elem(&members, &forker);
		count(STAT_STALE);
		return 0;
	}

	m.start = child->start_boottime / NSEC_PER_USER_TICK;
	m.parent_pid = forker;
	m.parent_start = pm->start;
	m.root_pid = pm->root_pid;
	m.root_start = pm->root_start;

	r = bpf_map_lookup_elem(&roots, &m.root_pid);
	if (r && r->start == m.root_start && (r->flags & ROOT_F_REAPING)) {
		m.flags |= MEMBER_F_CONTAINED;
		flags |= EVENT_F_CONTAINED;
	}

	if (bpf_map_update_elem(&members, &pid, &m, BPF_ANY)) {
		count(STAT_MEMBERS_FULL);
		flags |= EVENT_F_UNTRACKED;
	} else {
		count(STAT_FORKS);
	}

	if (flags & EVENT_F_CONTAINED) {
		/* As cgroup.kill does: a reaping lineage can't outgrow the reaper. */
		if (kill_identity(pid, m.start, bpf_ktime_get_ns() + KILL_PATIENCE_NS) == 0) {
			count(STAT_CONTAINED);
		} else {
			/* No kfuncs: the only task we may signal is the forker itself. */
			int err = -EBUSY;
			for (int i = 0; i < 4096 && err == -EBUSY; i++)
				err = bpf_send_signal(SIGKILL);
			if (err == 0)
				count(STAT_CONTAINED);
			else
				count(STAT_SIGNAL_FAILED);
		}
	}

	e = reserve(EVENT_FORK, pid, m.start);
	if (!e)
		return 0;
	e->parent_pid = forker;
	e->parent_start = m.parent_start;
	e->root_pid = m.root_pid;
	e->root_start = m.root_start;
	e->flags = flags;
	bpf_probe_read_kernel_str(e->comm, sizeof(e->comm), child->comm);
	submit(e);
	return 0;
}

SEC("tp_btf/sched_process_exec")
int BPF_PROG(handle_exec, struct task_struct *p, int old_pid, struct linux_binprm *bprm)
{
	__u32 tgid = p->tgid;
	struct member *m;
	struct event *e;
	__u64 arg_start, arg_end, size;

	m = bpf_map_lookup_elem(&members, &tgid);
	if (!m)
		return 0;
	if (m->start != start_ticks(p))
		return 0;
	count(STAT_EXECS);

	e = reserve(EVENT_EXEC, tgid, m->start);
	if (!e)
		return 0;
	e->parent_pid = m->parent_pid;
	e->parent_start = m->parent_start;
	e->root_pid = m->root_pid;
	e->root_start = m->root_start;
	bpf_get_current_comm(e->comm, sizeof(e->comm));
	bpf_probe_read_kernel_str(e->filename, sizeof(e->filename), bprm->filename);

	arg_start = p->mm->arg_start;
	arg_end = p->mm->arg_end;
	size = arg_end - arg_start;
	if (size > LINEAGE_ARGS_LEN) {
		size = LINEAGE_ARGS_LEN;
		e->flags |= EVENT_F_ARGS_TRUNCATED;
	}
	if (bpf_probe_read_user(e->args, size, (void *)arg_start) == 0)
		e->args_size = size;
	submit(e);
	return 0;
}

struct supervisor_ctx {
	__u64 deadline_ns;
};

static long mark_orphaned_root(struct bpf_map *map, __u32 *pid, struct root *r, void *ctx)
{
	if (r->flags & ROOT_F_DIE_WITH_SUPERVISOR)
		__sync_fetch_and_or(&r->flags, ROOT_F_REAPING);
	return 0;
}

static long kill_orphaned_member(struct bpf_map *map, __u32 *pid, struct member *m, struct supervisor_ctx *c)
{
	struct root *r = bpf_map_lookup_elem(&roots, &m->root_pid);

	if (!r || r->start != m->root_start || !(r->flags & ROOT_F_DIE_WITH_SUPERVISOR))
		return 0;
	if (kill_identity(*pid, m->start, c->deadline_ns) == 0)
		count(STAT_SUPERVISOR_KILLS);
	else
		count(STAT_SIGNAL_FAILED);
	return 0;
}

/*
 * The supervisor is gone (killed, most likely, with its whole process group),
 * and with it everything in user space that could reap. Its file descriptors,
 * and so this program, live until after this hook: end the lineages that asked
 * to die with it, identity-checked, and contain them first so that a member's
 * fork racing with the walk is killed at birth.
 */
static __always_inline void supervisor_died(void)
{
	/* Bounded: this runs with preemption disabled. */
	struct supervisor_ctx c = {.deadline_ns = bpf_ktime_get_ns() + SUPERVISOR_PATIENCE_NS};

	bpf_for_each_map_elem(&roots, mark_orphaned_root, &c, 0);
	bpf_for_each_map_elem(&members, kill_orphaned_member, &c, 0);
}

SEC("tp_btf/sched_process_exit")
int handle_exit(__u64 *ctx)
{
	struct task_struct *p = (struct task_struct *)ctx[0];
	struct signal_struct *sig;
	struct member *m;
	struct event *e;
	__u32 tgid;
	__u64 start;
	bool group_dead;
	int status;

	if (exit_has_group_dead)
		group_dead = (bool)ctx[1];
	else
		group_dead = p->signal->live.counter == 0;
	if (!group_dead)
		return 0; /* a thread, or a leader whose other threads run on */

	tgid = p->tgid;
	if (supervisor_tgid && tgid == supervisor_tgid)
		supervisor_died();

	m = bpf_map_lookup_elem(&members, &tgid);
	if (!m)
		return 0;
	start = start_ticks(p);
	if (m->start != start) {
		bpf_map_delete_elem(&members, &tgid);
		count(STAT_STALE);
		return 0;
	}

	sig = p->signal;
	if (sig->flags & SIGNAL_GROUP_EXIT)
		status = sig->group_exit_code;
	else
		status = p->exit_code;

	e = reserve(EVENT_EXIT, tgid, start);
	if (e) {
		e->parent_pid = m->parent_pid;
		e->parent_start = m->parent_start;
		e->root_pid = m->root_pid;
		e->root_start = m->root_start;
		e->exit_status = status;
		bpf_probe_read_kernel_str(e->comm, sizeof(e->comm), p->comm);
	}
	/* Delete only once: with the fallback test two exiting threads can both
	 * see live == 0, and only the first is the process's exit. */
	if (bpf_map_delete_elem(&members, &tgid) == 0) {
		count(STAT_EXITS);
		if (e)
			submit(e);
	} else if (e) {
		bpf_ringbuf_discard(e, BPF_RB_NO_WAKEUP);
	}
	return 0;
}
