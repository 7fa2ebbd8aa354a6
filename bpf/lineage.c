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
 * may be lost when the ring buffer is full; that loss is counted and logged,
 * per CPU, with when and whose (dropped), and membership stays exact
 * regardless.
 *
 * The file builds twice (internal/loader/gen.go), and the loader probes the
 * kernel for the build it accepts. Membership, events and counters are the
 * same in both; what differs is whom the program may kill:
 *
 *   lineage         needs the kfuncs bpf_task_from_pid and bpf_send_signal_task
 *                   (6.13+) and the callbacks of bpf_loop (5.17+) and
 *                   bpf_for_each_map_elem (5.13+): containment kills a reaping
 *                   member's new child at birth, and, where the exit hook may
 *                   signal, a lineage dies with its supervisor. A second fork
 *                   hook inserts the forks the kernel skipped the first for
 *                   (catch_fork).
 *   lineage_compat  -DLINEAGE_COMPAT: helpers of 5.8, no callback, no kfunc (a
 *                   5.10 verifier sees callbacks in the BTF but not as
 *                   subprograms, and refuses the object): containment kills
 *                   the forking member, and nothing dies with the supervisor.
 *
 * In both, whatever user space spares (MEMBER_F_SPARED) the kernel spares
 * too, and the kernel marks what keep rules spare as soon as they apply: at
 * a member's exec of a kept program (keep_exes), at the forks of a kept
 * root and of a member spared for its program (spared_at_fork). A process
 * the full map can't hold is killed (kill_untracked): at
 * birth where the program may signal it, else at its first exec or fork.
 * Every kill, in both, is one the user who ran lineage could send with
 * kill(2) (kill_uid_bounded).
 */
#include "core.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include "lineage.h"
#include "signal.h"


char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* Set by the loader before load. The compat build reads none of
 * supervisor_tgid, exit_has_group_dead and kill_with_supervisor; both
 * declare all, so that one Go type holds either. */
const volatile __u32 supervisor_tgid = 0;         /* the process that loaded us */
const volatile bool exit_has_group_dead = false;  /* sched_process_exit(p, group_dead): 6.16+ */
const volatile bool kill_with_supervisor = false; /* the exit hook may signal others: 6.16+ */
const volatile __u32 wakeup_bytes = 0;            /* wake the reader past this fill level */
/* Fail closed: a process the full membership map can't hold is killed, not
 * let go. Off only when the user asked for today's escape. */
const volatile bool kill_untracked = false;

/*
 * Spawning a root without a gap: the supervisor arms one of its threads, and
 * every process that thread forks while armed is inserted as a new root
 * before it can run a single instruction. User space disarms the thread.
 */
volatile __u32 spawn_tid = 0;
volatile __u32 spawn_root_flags = 0;

/*
 * Arms per process: a test runner (each pytest-xdist worker its own) arms
 * itself, and whatever it forks from any thread while armed is a new root
 * carrying the arm's cookie, which user space maps to a session (the test
 * running then). arms_count, kept by user space, lets every other process
 * skip the lookup while nothing is armed.
 */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32); /* tgid */
	__type(value, struct arm);
} arms SEC(".maps");

volatile __u32 arms_count = 0;

/*
 * Kill-at-birth lasts only while a reaper lives. The tracker's holder
 * extends reap_lease_ns (CLOCK_BOOTTIME) while it runs, and a reaping
 * root's new children are killed at birth only before it passes: a holder
 * that dies mid-reap (a daemon's kill -9) leaves, within the lease, a
 * lineage that can fork again, for the holder's own death must kill
 * nothing. The next holder renews the lease as it takes over.
 */
volatile __u64 reap_lease_ns = 0;

static __always_inline bool reaper_lives(void)
{
	return bpf_ktime_get_boot_ns() < reap_lease_ns;
}

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

/*
 * Untracked processes still to be killed: where the fork hook could not kill
 * one at birth (compat can signal only the current task), it dies at its
 * first exec or fork, when it is current. doomed_count lets every other
 * process skip the lookup: the untracked path stays one hash lookup while
 * nothing is doomed.
 */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);   /* tgid */
	__type(value, __u64); /* start */
} doomed SEC(".maps");

volatile __u32 doomed_count = 0;

/*
 * The programs that exe keep rules keep, per root (struct keep_exe): a
 * member that execs one is spared in the exec hook itself, before it runs
 * an instruction of it, however late user space reads the event.
 */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, struct keep_exe);
	__type(value, __u64); /* the root's start */
} keep_exes SEC(".maps");

/* How many keep_exes entries wait under root pid 0 for the root the armed
 * thread spawns: its pid is known only at its fork, and it execs its first
 * program before user space can name it. */
volatile __u32 spawn_keeps = 0;

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

/* Where the exec hook builds its event, to write only what it fills. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct exec_event);
} exec_scratch SEC(".maps");

/* The events each CPU dropped, and whose (struct drop_log). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct drop_log);
} drops SEC(".maps");

static __always_inline void count(enum stat stat)
{
	__u64 *v = bpf_map_lookup_elem(&stats, &stat);
	if (v)
		__sync_fetch_and_add(v, 1);
}

/* A kill skipped because the user lineage kills for could not send it. */
#define KILL_NOT_THE_USERS 1

/* Count the outcome of a kill the program asked for. */
static __always_inline void count_kill(int err, enum stat done)
{
	if (err == 0)
		count(done);
	else if (err == KILL_NOT_THE_USERS)
		count(STAT_UID_SPARED);
	else
		count(STAT_SIGNAL_FAILED);
}

/*
 * The start time of a task in clock ticks since boot, as the kernel turns
 * start_boottime into /proc/PID/stat's field 22 (nsec_to_clock_t).
 */
static __always_inline __u64 task_ticks(struct task_struct *task)
{
	return task->start_boottime / NSEC_PER_USER_TICK;
}

/* The start time of a process (its thread group's leader) as /proc shows it. */
static __always_inline __u64 start_ticks(struct task_struct *task)
{
	return task_ticks(task->group_leader);
}

/*
 * An event the ring buffer had no room for: counted, and logged on this
 * CPU with its time and whose it was (struct drop_log). The compat build's
 * kernels run every tracepoint with preemption disabled, so no other hook
 * runs on this CPU meanwhile; elsewhere one may, and the slot is taken
 * atomically.
 */
static __always_inline void dropped(enum event_kind kind, __u32 pid, const struct member *m)
{
	__u32 zero = 0;
	struct drop_log *d = bpf_map_lookup_elem(&drops, &zero);
	__u64 now = bpf_ktime_get_boot_ns();
	struct lost *l;
	__u64 n;

	count(STAT_EVENTS_LOST);
	if (!d)
		return;
#ifdef LINEAGE_COMPAT
	n = d->count++;
#else
	n = __sync_fetch_and_add(&d->count, 1);
#endif
	d->last_ns = now;
	l = &d->log[n & (LINEAGE_LOST_LOG - 1)];
	l->time_ns = now;
	l->pid = pid;
	l->start = m->start;
	l->root_pid = m->root_pid;
	l->root_start = m->root_start;
	l->kind = kind;
	asm volatile("" ::: "memory");
	l->seq = n + 1;
}

/* Fill in the header of an event about member m (pid), cleared first. */
static __always_inline void fill(struct event *e, enum event_kind kind, __u32 pid, const struct member *m)
{
	__builtin_memset(e, 0, offsetof(struct event, comm));
	e->time_ns = bpf_ktime_get_boot_ns();
	e->kind = kind;
	e->pid = pid;
	e->start = m->start;
	e->parent_pid = m->parent_pid;
	e->parent_start = m->parent_start;
	e->root_pid = m->root_pid;
	e->root_start = m->root_start;
}

/*
 * A new fork or exit event about member m (pid), its header filled in; the
 * caller adds what its kind carries and submits it. Exec events carry a
 * path and argv, and are written apart (handle_exec).
 */
static __always_inline struct event *reserve(enum event_kind kind, __u32 pid, const struct member *m)
{
	struct event *e = bpf_ringbuf_reserve(&events, sizeof(struct event), 0);

	if (!e) {
		dropped(kind, pid, m);
		return 0;
	}
	fill(e, kind, pid, m);
	return e;
}

/* Wake the reader only past a fill level: a wakeup per event would cost the
 * tracked workload a large share of its fork rate. The reader polls too. */
static __always_inline __u64 wakeup(void)
{
	if (bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) >= wakeup_bytes)
		return BPF_RB_FORCE_WAKEUP;
	return BPF_RB_NO_WAKEUP;
}

static __always_inline void submit(struct event *e)
{
	bpf_ringbuf_submit(e, wakeup());
}

static __always_inline void emit_fork(struct task_struct *child, __u32 pid, const struct member *m,
				      enum event_flag flags)
{
	struct event *e = reserve(EVENT_FORK, pid, m);

	if (!e)
		return;
	e->flags = flags;
	bpf_probe_read_kernel_str(e->comm, sizeof(e->comm), child->comm);
	submit(e);
}

#define EBUSY 16

/*
 * SIGKILL the current task self, the forking member. Tracepoints run with
 * preemption disabled, so the kernel defers the signal to a per-CPU irq_work
 * that holds one signal at a time and answers -EBUSY until that has run:
 * retry, boundedly.
 */
static __always_inline int kill_current(struct task_struct *self)
{
	int err = -EBUSY;

	if (!may_kill(self))
		return KILL_NOT_THE_USERS;
	for (int i = 0; i < 4096 && err == -EBUSY; i++)
		err = bpf_send_signal(SIGKILL);
	return err;
}

#ifndef LINEAGE_COMPAT
extern struct task_struct *bpf_task_from_pid(__s32 pid) __ksym;

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
	if ((t->flags & PF_KTHREAD) || task_ticks(t) != k->start) {
		bpf_task_release(t);
		k->err = -1; /* gone, and the pid is a stranger's now */
		return 1;
	}
	if (!may_kill(t)) {
		bpf_task_release(t);
		k->err = KILL_NOT_THE_USERS;
		return 1;
	}
	if (t->flags & PF_EXITING)
		k->err = signal_live_thread(t, SIGKILL);
	else
		k->err = bpf_send_signal_task(t, SIGKILL, PIDTYPE_TGID, 0);
	bpf_task_release(t);
	if (k->err != -EBUSY)
		return 1;
	return bpf_ktime_get_ns() > k->deadline_ns;
}

/*
 * SIGKILL the process pid if it is still the one that started at start,
 * retrying on -EBUSY (see kill_current) until deadline_ns, so that a run of
 * kills (a lineage whose supervisor died, a fork storm being contained)
 * loses none.
 */
static __always_inline int kill_identity(__u32 pid, __u64 start, __u64 deadline_ns)
{
	struct kill_ctx k = {.pid = pid, .start = start, .deadline_ns = deadline_ns, .err = -1};

	bpf_loop(1 << 20, try_kill, &k, 0);
	return k.err;
}

/* As cgroup.kill does: a reaping lineage can't outgrow the reaper. Kill the
 * new child at birth; if that fails, the forker (whose uids the child has). */
static __always_inline int contain(struct task_struct *forker, __u32 pid, __u64 start)
{
	int err = kill_identity(pid, start, bpf_ktime_get_ns() + KILL_PATIENCE_NS);

	if (err == 0 || err == KILL_NOT_THE_USERS)
		return err;
	return kill_current(forker);
}
#else
/* No kfuncs: the only task the program may signal is the forker itself. */
static __always_inline int contain(struct task_struct *forker, __u32 pid, __u64 start)
{
	return kill_current(forker);
}
#endif /* LINEAGE_COMPAT */

/*
 * Doom an untracked process (pid, start) to die at its first exec or fork,
 * when it is the current task. If even that can't be recorded, kill the
 * forker, unless user space spares it: nothing untracked runs on unseen.
 */
static __always_inline void doom(__u32 pid, __u64 start, struct task_struct *forker, bool forker_spared)
{
	if (bpf_map_update_elem(&doomed, &pid, &start, BPF_ANY) == 0) {
		__sync_fetch_and_add(&doomed_count, 1);
		return;
	}
	if (forker_spared)
		count(STAT_SIGNAL_FAILED);
	else
		count_kill(kill_current(forker), STAT_UNTRACKED_KILLED);
}

/* Fail closed: a new process the map can't hold is killed at birth (full),
 * or doomed (compat, or when the kill at birth failed). */
static __always_inline void shut_out(__u32 pid, __u64 start, struct task_struct *forker, bool forker_spared)
{
#ifndef LINEAGE_COMPAT
	int err = kill_identity(pid, start, bpf_ktime_get_ns() + KILL_PATIENCE_NS);

	if (err == 0 || err == KILL_NOT_THE_USERS) {
		count_kill(err, STAT_UNTRACKED_KILLED);
		return;
	}
#endif
	doom(pid, start, forker, forker_spared);
}

/* If the current task p (tgid) is doomed, kill it; true if it was. */
static __always_inline bool kill_if_doomed(__u32 tgid, struct task_struct *p)
{
	__u64 *start = bpf_map_lookup_elem(&doomed, &tgid);

	if (!start || *start != start_ticks(p))
		return false;
	count_kill(kill_current(p), STAT_UNTRACKED_KILLED);
	return true;
}

static __always_inline void forget_doomed(__u32 tgid, struct task_struct *p)
{
	__u64 *start = bpf_map_lookup_elem(&doomed, &tgid);

	if (start && *start == start_ticks(p) && bpf_map_delete_elem(&doomed, &tgid) == 0)
		__sync_fetch_and_sub(&doomed_count, 1);
}

/* Insert child as a new root, born with root_flags and cookie. */
static __always_inline int spawn_root(struct task_struct *parent, struct task_struct *child, __u32 pid,
				      enum root_flag root_flags, __u32 cookie, enum event_flag flags)
{
	struct member m = {};
	struct root r = {};

	m.start = task_ticks(child);
	m.parent_pid = parent->tgid;
	m.parent_start = start_ticks(parent);
	m.root_pid = pid;
	m.root_start = m.start;
	m.flags = MEMBER_F_ROOT;
	if (root_flags & ROOT_F_KEPT)
		m.flags |= MEMBER_F_SPARED;
	r.start = m.start;
	r.flags = root_flags;
	r.cookie = cookie;
	if (bpf_map_update_elem(&roots, &pid, &r, BPF_ANY)) {
		count(STAT_MEMBERS_FULL);
		flags |= EVENT_F_UNTRACKED;
	} else if (bpf_map_update_elem(&members, &pid, &m, BPF_ANY)) {
		/* A root without its member entry would read, to user space, as
		 * one that already exited: leave no root, and Spawn says why. */
		bpf_map_delete_elem(&roots, &pid);
		count(STAT_MEMBERS_FULL);
		flags |= EVENT_F_UNTRACKED;
	} else {
		count(STAT_FORKS);
	}
	emit_fork(child, pid, &m, flags);
	return 0;
}

/*
 * Whether child (pid) is a member already: both fork hooks run for every
 * fork, one after the other, and whichever runs first inserts it. When the
 * second hook was first (another user of the tracepoint registered its
 * probe earlier), the first says so, so that only skipped runs count as
 * caught.
 */
static __always_inline bool seen_already(__u32 pid, struct task_struct *child, bool caught)
{
	struct member *cm = bpf_map_lookup_elem(&members, &pid);

	if (!cm || cm->start != task_ticks(child))
		return false;
	if (!caught && (cm->flags & MEMBER_F_CAUGHT)) {
		cm->flags &= ~MEMBER_F_CAUGHT;
		count(STAT_CAUGHT_EARLY);
	}
	return true;
}

/*
 * The spare marks a new member inherits from its forker pm. A kept root's
 * lineage is spared whole. A member spared for the program it runs passes
 * its marks on: the child runs that program too until it execs (a kept
 * redis's background save), and the exec hook then judges what it runs. A
 * mark user space gave alone (an identity rule, the protected set) spares
 * that one process: user space judges its children by the rules.
 */
static __always_inline enum member_flag spared_at_fork(const struct member *pm, const struct root *r, __u64 root_start)
{
	if (r && r->start == root_start && (r->flags & ROOT_F_KEPT))
		return MEMBER_F_SPARED;
	if (pm->flags & MEMBER_F_SPARED_EXE)
		return MEMBER_F_SPARED | MEMBER_F_SPARED_EXE;
	return 0;
}

/*
 * One fork, as either fork hook sees it: parent is the forking thread,
 * child the new task; caught is set in the second hook.
 */
static __always_inline int track_fork(struct task_struct *parent, struct task_struct *child, bool caught)
{
	__u32 pid = child->pid;
	__u32 forker = parent->tgid;
	struct member *pm, m = {};
	struct root *r;
	enum event_flag flags = 0;
	bool not_the_users = false;

	if (pid != (__u32)child->tgid)
		return 0; /* a new thread, not a new process */

	pm = bpf_map_lookup_elem(&members, &forker);
	if (!pm) {
		struct arm *a;

		/* A new root, unless the other fork hook inserted it already. */
		if (spawn_tid && (__u32)parent->pid == spawn_tid) {
			if (seen_already(pid, child, caught))
				return 0;
			return spawn_root(parent, child, pid, spawn_root_flags | ROOT_F_SPAWNING, 0, EVENT_F_ROOT);
		}
		if (arms_count && (a = bpf_map_lookup_elem(&arms, &forker)) && a->start == start_ticks(parent)) {
			if (seen_already(pid, child, caught))
				return 0;
			return spawn_root(parent, child, pid, ROOT_F_ARMED, a->cookie, EVENT_F_ROOT | EVENT_F_ARMED);
		}
		/* A doomed process's children are as untracked as it is. */
		if (doomed_count && kill_if_doomed(forker, parent))
			shut_out(pid, task_ticks(child), parent, false);
		return 0;
	}
	if (pm->start != start_ticks(parent)) {
		/* An entry for a process that is gone; this pid is a stranger's now. */
		bpf_map_delete_elem(&members, &forker);
		count(STAT_STALE);
		return 0;
	}
	if (seen_already(pid, child, caught))
		return 0;

	m.start = task_ticks(child);
	m.parent_pid = forker;
	m.parent_start = pm->start;
	m.root_pid = pm->root_pid;
	m.root_start = pm->root_start;

	/* A spared member's children are born alive even while its lineage is
	 * reaped (a kept redis forks its background save); user space decides
	 * their fate by the keep rules. So are those of a member the user who
	 * ran lineage could not kill (the child has the forker's uids): the
	 * event says they live, and the skipped kill is counted once. */
	r = bpf_map_lookup_elem(&roots, &m.root_pid);
	if (r && r->start == m.root_start && (r->flags & ROOT_F_REAPING) &&
	    !(pm->flags & MEMBER_F_SPARED) && reaper_lives()) {
		if (may_kill(child)) {
			m.flags |= MEMBER_F_CONTAINED;
			flags |= EVENT_F_CONTAINED;
		} else {
			not_the_users = true;
		}
	}

	m.flags |= spared_at_fork(pm, r, m.root_start);
	if (m.flags & MEMBER_F_SPARED)
		flags |= EVENT_F_SPARED;
	if (caught) {
		m.flags |= MEMBER_F_CAUGHT;
		flags |= EVENT_F_CAUGHT;
	}

	if (bpf_map_update_elem(&members, &pid, &m, BPF_ANY)) {
		count(STAT_MEMBERS_FULL);
		flags |= EVENT_F_UNTRACKED;
		if (kill_untracked && may_kill(child)) {
			shut_out(pid, m.start, parent, pm->flags & MEMBER_F_SPARED);
			flags |= EVENT_F_CONTAINED;
			emit_fork(child, pid, &m, flags);
			return 0;
		}
		if (kill_untracked)
			not_the_users = true;
	} else {
		count(STAT_FORKS);
		if (caught)
			count(STAT_FORKS_CAUGHT);
	}
	if (not_the_users)
		count(STAT_UID_SPARED);

	if (flags & EVENT_F_CONTAINED)
		count_kill(contain(parent, pid, m.start), STAT_CONTAINED);
	emit_fork(child, pid, &m, flags);
	return 0;
}

SEC("tp_btf/sched_process_fork")
int BPF_PROG(handle_fork, struct task_struct *parent, struct task_struct *child)
{
	return track_fork(parent, child, false);
}

#ifndef LINEAGE_COMPAT
/*
 * The second fork hook. Where tracepoints run preemptible (newer kernels
 * call their probes under SRCU: Debian's 7.3 does), a task can be
 * preempted inside handle_fork, and the kernel then skips handle_fork for
 * every other fork on that CPU until the task runs again (per program,
 * counted as its recursion_misses): a member's child that never enters
 * the map. This program is a classic
 * tracepoint: the kernel's perf probe runs it with preemption disabled, so
 * no task is ever preempted inside it, and its guard is another one (the
 * per-CPU bpf_prog_active). It inserts what handle_fork did not, and
 * nothing twice: for a fork handle_fork saw, it costs two hash lookups.
 * The compat build has none: the kernels it runs on disable preemption in
 * every tracepoint, and skip no fork.
 */
SEC("tracepoint/sched/sched_process_fork")
int catch_fork(struct trace_event_raw_sched_process_fork *ctx)
{
	struct task_struct *parent = bpf_get_current_task_btf();
	struct task_struct *child;
	__u32 forker = parent->tgid;

	if (!bpf_map_lookup_elem(&members, &forker) && !doomed_count && !arms_count &&
	    !(spawn_tid && (__u32)parent->pid == spawn_tid))
		return 0;
	child = bpf_task_from_pid(ctx->child_pid);
	if (!child)
		return 0;
	track_fork(parent, child, true);
	bpf_task_release(child);
	return 0;
}
#endif /* LINEAGE_COMPAT */

/* Whether an exe rule of m's root keeps the program k names (k.root_pid
 * is filled in here): the root's own rules, or, while the root is being
 * spawned, those waiting for it under pid 0. */
static __always_inline bool kept_program(const struct member *m, struct keep_exe *k)
{
	__u64 *root_start;
	struct root *r;

	k->root_pid = m->root_pid;
	root_start = bpf_map_lookup_elem(&keep_exes, k);
	if (root_start)
		return *root_start == m->root_start;
	if (!spawn_keeps)
		return false;
	r = bpf_map_lookup_elem(&roots, &k->root_pid);
	if (!r || r->start != m->root_start || !(r->flags & ROOT_F_SPAWNING))
		return false;
	k->root_pid = 0;
	return bpf_map_lookup_elem(&keep_exes, k) != 0;
}

/*
 * The kernel's part of the exe keep rules, in the exec hook's own run:
 * a member that execs a program an exe rule of its root keeps is spared
 * for it (MEMBER_F_SPARED | MEMBER_F_SPARED_EXE) before that program runs;
 * one spared for the program it ran, that now execs another, is spared no
 * more. A mark user space gave alone stays. It returns EVENT_F_SPARED
 * when the member is spared for its new program.
 */
static __always_inline enum event_flag spare_at_exec(struct member *m, struct linux_binprm *bprm)
{
	struct inode *ino = bprm->file->f_inode;
	struct keep_exe k = {};

	k.ino = ino->i_ino;
	k.dev = ino->i_sb->s_dev;
	if (kept_program(m, &k)) {
		m->flags |= MEMBER_F_SPARED | MEMBER_F_SPARED_EXE;
		count(STAT_KEPT_AT_EXEC);
		return EVENT_F_SPARED;
	}
	if (m->flags & MEMBER_F_SPARED_EXE)
		m->flags &= ~(MEMBER_F_SPARED | MEMBER_F_SPARED_EXE);
	return 0;
}

/*
 * The exec event of member m (tgid), built in this CPU's scratch buffer
 * and written to the ring buffer only as long as it is: a path and argv
 * of a few hundred bytes take that, not the whole slot.
 */
static __always_inline void emit_exec(struct task_struct *p, __u32 tgid, const struct member *m,
				      struct linux_binprm *bprm, enum event_flag flags)
{
	__u32 zero = 0;
	struct exec_event *x = bpf_map_lookup_elem(&exec_scratch, &zero);
	__u64 arg_start, size;
	long name;

	if (!x)
		return;
	fill(&x->e, EVENT_EXEC, tgid, m);
	x->e.flags = flags;
	bpf_get_current_comm(x->e.comm, sizeof(x->e.comm));
	name = bpf_probe_read_kernel_str(x->strings, LINEAGE_FILENAME_LEN, bprm->filename);
	if (name < 1) {
		x->strings[0] = 0;
		name = 1;
	}
	if (name > LINEAGE_FILENAME_LEN)
		name = LINEAGE_FILENAME_LEN;
	x->e.filename_size = name;

	arg_start = p->mm->arg_start;
	size = p->mm->arg_end - arg_start;
	if (size > LINEAGE_ARGS_LEN) {
		size = LINEAGE_ARGS_LEN;
		x->e.flags |= EVENT_F_ARGS_TRUNCATED;
	}
	if (bpf_probe_read_user(x->strings + name, size, (void *)arg_start))
		size = 0;
	x->e.args_size = size;
	/* After the exec: a set-uid program shows the euid it runs with. */
	x->e.uid = p->cred->uid.val;
	x->e.euid = p->cred->euid.val;
	x->e.flags |= EVENT_F_CREDS;
	if (bpf_ringbuf_output(&events, x, sizeof(struct event) + name + size, wakeup()))
		dropped(EVENT_EXEC, tgid, m);
}

SEC("tp_btf/sched_process_exec")
int BPF_PROG(handle_exec, struct task_struct *p, int old_pid, struct linux_binprm *bprm)
{
	__u32 tgid = p->tgid;
	struct member *m;
	enum event_flag spared;

	m = bpf_map_lookup_elem(&members, &tgid);
	if (!m) {
		if (doomed_count)
			kill_if_doomed(tgid, p);
		return 0;
	}
	if (m->start != start_ticks(p))
		return 0;
	count(STAT_EXECS);
	spared = spare_at_exec(m, bprm);
	emit_exec(p, tgid, m, bprm, spared);
	return 0;
}

#ifndef LINEAGE_COMPAT
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
	if (m->flags & MEMBER_F_SPARED)
		return 0;
	count_kill(kill_identity(*pid, m->start, c->deadline_ns), STAT_SUPERVISOR_KILLS);
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

	/* The kernel is the reaper now, of an unpinned program whose links
	 * close with the supervisor: containment holds until they do. */
	reap_lease_ns = ~0ULL;
	bpf_for_each_map_elem(&roots, mark_orphaned_root, &c, 0);
	bpf_for_each_map_elem(&members, kill_orphaned_member, &c, 0);
}
#endif /* LINEAGE_COMPAT */

/*
 * Whether the exiting task p is the last of its thread group: not when the
 * leader thread alone exits, for the last thread out may be another. Before
 * 6.16 the tracepoint has no group_dead, and live reaches 0 in the last
 * thread before the hook runs.
 */
static __always_inline bool group_dead(__u64 *ctx, struct task_struct *p)
{
#ifndef LINEAGE_COMPAT
	if (exit_has_group_dead)
		return (bool)ctx[1];
#endif
	return p->signal->live.counter == 0;
}

/* The wait(2) status word the process ends with. */
static __always_inline int exit_status(struct task_struct *p)
{
	struct signal_struct *sig = p->signal;

	if (sig->flags & SIGNAL_GROUP_EXIT)
		return sig->group_exit_code;
	return p->exit_code;
}

SEC("tp_btf/sched_process_exit")
int handle_exit(__u64 *ctx)
{
	struct task_struct *p = (struct task_struct *)ctx[0];
	struct member *entry, m;
	struct event *e;
	__u32 tgid;

	if (!group_dead(ctx, p))
		return 0; /* a thread, or a leader whose other threads run on */

	tgid = p->tgid;
#ifndef LINEAGE_COMPAT
	if (kill_with_supervisor && supervisor_tgid && tgid == supervisor_tgid)
		supervisor_died();
#endif

	entry = bpf_map_lookup_elem(&members, &tgid);
	if (!entry) {
		if (doomed_count)
			forget_doomed(tgid, p);
		return 0;
	}
	if (entry->start != start_ticks(p)) {
		bpf_map_delete_elem(&members, &tgid);
		count(STAT_STALE);
		return 0;
	}
	/* Copied first: once deleted, the entry may be reused by another CPU. */
	m = *entry;
	/* Delete only once: with the pre-6.16 test two exiting threads can both
	 * see live == 0, and only the first is the process's exit. */
	if (bpf_map_delete_elem(&members, &tgid))
		return 0;
	count(STAT_EXITS);

	e = reserve(EVENT_EXIT, tgid, &m);
	if (!e)
		return 0;
	e->exit_status = exit_status(p);
	bpf_probe_read_kernel_str(e->comm, sizeof(e->comm), p->comm);
	submit(e);
	return 0;
}
