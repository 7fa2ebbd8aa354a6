//go:build ignore
// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * inspect.c: what /proc/PID/stat says of many processes, in one run.
 *
 * The reaper checks each member's identity at its signal (pidfd first, then
 * the start time, then the signal). Read from /proc, each check opens,
 * reads and closes a file, and the kernel builds its dentry and inode and
 * formats the whole stat line: tens of microseconds per member, most of a
 * wide reap's own cost. Run as a BPF_PROG_TYPE_SYSCALL program, this looks
 * every pid of a batch up with bpf_task_from_pid and writes the few fields
 * the check reads, in one system call.
 *
 * It shares no map with lineage.c (signal.h, the kill(2) bound and the
 * signal through a live thread, is all they share): its one map is the
 * batch, which user space fills and reads through mmap. It needs bpf_task_from_pid in
 * syscall programs (6.10+, within the full program's 6.13+); where the
 * kernel refuses it, the reaper reads /proc as before.
 */
#include "core.h"
#include <bpf/bpf_helpers.h>
#include "inspect.h"
#include "signal.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

enum {
	BPF_F_MMAPABLE = 1U << 10,
};

/* include/linux/sched.h: the task states /proc reports, and how it picks one */
#define TASK_REPORT 0x7f
#define TASK_IDLE 0x402 /* TASK_UNINTERRUPTIBLE | TASK_NOLOAD */
#define TASK_RTLOCK_WAIT 0x1000
#define SIG_IGN 1
/* include/linux/sched/signal.h */
#define SIGNAL_STOP_STOPPED 0x00000001

/*
 * The kernel's types as this file reads them. The ___inspect flavour keeps
 * them apart from core.h's: CO-RE matches them to the kernel's types by the
 * name before the suffix, and relocates each field, array index included.
 */
#pragma clang attribute push(__attribute__((preserve_access_index)), apply_to = record)

struct sigaction___inspect {
	void *sa_handler;
};

struct k_sigaction___inspect {
	struct sigaction___inspect sa;
};

struct sighand_struct___inspect {
	struct k_sigaction___inspect action[64];
};

struct signal_struct___inspect {
	int nr_threads;
	unsigned int flags;
	int group_exit_code;
};

struct mm_struct___inspect {
	unsigned long start_stack;
};

struct task_struct___inspect {
	unsigned int __state;
	int exit_state;
	int exit_code;
	unsigned int flags;
	int pid;
	int tgid;
	__u64 start_boottime;
	struct task_struct___inspect *real_parent;
	struct mm_struct___inspect *mm;
	struct signal_struct___inspect *signal;
	struct sighand_struct___inspect *sighand;
	char comm[16];
};

#pragma clang attribute pop

extern struct task_struct *bpf_task_from_pid(__s32 pid) __ksym;
extern void bpf_task_release(struct task_struct *p) __ksym;

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, struct batch);
} inspected SEC(".maps");

/* The state letter /proc shows (fs/proc/array.c's task_state_array, indexed
 * as task_state_index picks). */
static __always_inline char state_letter(struct task_struct___inspect *t)
{
	unsigned int raw = t->__state;
	unsigned int state = (raw | (unsigned int)t->exit_state) & TASK_REPORT;

	if ((raw & TASK_IDLE) == TASK_IDLE)
		return 'I';
	if (raw & TASK_RTLOCK_WAIT)
		return 'D';
	/* the highest bit set wins, as fls does */
	if (state & 0x40)
		return 'P';
	if (state & 0x20)
		return 'Z';
	if (state & 0x10)
		return 'X';
	if (state & 0x08)
		return 't';
	if (state & 0x04)
		return 'T';
	if (state & 0x02)
		return 'D';
	if (state & 0x01)
		return 'S';
	return 'R';
}

/* Signal i+1's disposition into the masks; i is a constant once unrolled,
 * so each access is one relocated field. */
#define DISPOSITION(i)                                                     \
	do {                                                               \
		void *h = sh->action[i].sa.sa_handler;                     \
		if (h == (void *)SIG_IGN)                                  \
			ign |= 1ULL << (i);                                \
		else if (h)                                                \
			catch |= 1ULL << (i);                              \
	} while (0)

/* bpf_loop's context lives on the stack: it carries the batch. */
struct inspect_ctx {
	struct batch *b;
};

/* fill writes what /proc/PID/stat shows of t into p. */
static __always_inline void fill(struct proc_stat *p, struct task_struct___inspect *t)
{
	struct sighand_struct___inspect *sh;
	struct mm_struct___inspect *mm;
	struct signal_struct___inspect *sig;
	__u64 ign = 0, catch = 0;

	p->flags = INSPECT_F_FOUND;
	if (t->flags & PF_KTHREAD)
		p->flags |= INSPECT_F_KERNEL;
	if (t->flags & PF_EXITING)
		p->flags |= INSPECT_F_EXITING;
	p->start = t->start_boottime / NSEC_PER_USER_TICK;
	p->state = state_letter(t);
	p->ppid = t->real_parent->tgid;
	sig = t->signal;
	p->threads = sig->nr_threads;
	/* A group stopped or exiting shows the group's code (5.16+). */
	if (sig->flags & (SIGNAL_GROUP_EXIT | SIGNAL_STOP_STOPPED))
		p->exit_code = sig->group_exit_code;
	else
		p->exit_code = t->exit_code;
	mm = t->mm;
	p->start_stack = mm ? mm->start_stack : 0;
	/* A process that has exited has no handlers: /proc shows none. */
	sh = t->sighand;
	if (sh) {
		DISPOSITION(0); DISPOSITION(1); DISPOSITION(2); DISPOSITION(3);
		DISPOSITION(4); DISPOSITION(5); DISPOSITION(6); DISPOSITION(7);
		DISPOSITION(8); DISPOSITION(9); DISPOSITION(10); DISPOSITION(11);
		DISPOSITION(12); DISPOSITION(13); DISPOSITION(14); DISPOSITION(15);
		DISPOSITION(16); DISPOSITION(17); DISPOSITION(18); DISPOSITION(19);
		DISPOSITION(20); DISPOSITION(21); DISPOSITION(22); DISPOSITION(23);
		DISPOSITION(24); DISPOSITION(25); DISPOSITION(26); DISPOSITION(27);
		DISPOSITION(28); DISPOSITION(29); DISPOSITION(30);
	}
	p->sig_ignore = ign;
	p->sig_catch = catch;
	__builtin_memcpy(p->comm, t->comm, sizeof(p->comm));
}

/*
 * inspect_pid fills p for p->pid. It is a global function: the verifier
 * checks it once, on its own, not at every step of the loop that calls it
 * (a callback's branches, checked per iteration, grow with every signal's
 * disposition past the verifier's limit on some kernels).
 */
__attribute__((noinline)) int inspect_pid(struct proc_stat *p)
{
	struct task_struct *task;

	if (!p)
		return 0;
	p->flags = 0;
	task = bpf_task_from_pid(p->pid);
	if (!task)
		return 0;
	fill(p, (void *)task);
	bpf_task_release(task);
	return 0;
}

static long inspect_one(__u32 i, struct inspect_ctx *c)
{
	if (i >= INSPECT_MAX)
		return 1;
	inspect_pid(&c->b->procs[i]);
	return 0;
}

SEC("syscall")
int inspect(void *ctx)
{
	__u32 zero = 0;
	struct inspect_ctx c = {.b = bpf_map_lookup_elem(&inspected, &zero)};
	__u32 n;

	if (!c.b)
		return 1;
	n = c.b->n;
	if (n > INSPECT_MAX)
		n = INSPECT_MAX;
	bpf_loop(n, inspect_one, &c, 0);
	return 0;
}

/*
 * signal_batch: each process of the batch that still is the identity user
 * space names (pid and want_start) gets sig, in this one run: the task is
 * held from the lookup to the signal, so a pid that came to name another
 * process is never signalled. It writes what /proc showed of the process
 * just before, and in err: 0 when sent; -ESRCH when no task has the pid
 * (or no thread of it lives to take the signal); -ESTALE when the pid names
 * another process now; -EPERM for a kernel thread; -EACCES when the user
 * lineage signals for (kill_uid_bounded) could not signal it by kill(2);
 * or the kernel's refusal.
 *
 * The signal comes from the kernel (si_code SI_KERNEL), not from lineage's
 * pid. It needs bpf_send_signal_task in syscall programs (6.13+), the
 * open-coded task iterator (6.7+) and bpf_rcu_read_lock (6.2+); the loader
 * loads it apart from inspect.
 */
extern void bpf_rcu_read_lock(void) __ksym;
extern void bpf_rcu_read_unlock(void) __ksym;

#define EPERM 1
#define EACCES 13
#define ESTALE 116

/* signal_pid signals p's identity as signal_batch says; global, as
 * inspect_pid is. */
__attribute__((noinline)) int signal_pid(struct proc_stat *p)
{
	struct task_struct *task;

	if (!p)
		return 0;
	p->flags = 0;
	p->err = -ESRCH;
	task = bpf_task_from_pid(p->pid);
	if (!task)
		return 0;
	fill(p, (void *)task);
	if (p->start != p->want_start)
		p->err = -ESTALE;
	else if (task->flags & PF_KTHREAD)
		p->err = -EPERM;
	else if (!may_kill(task))
		p->err = -EACCES;
	else if (task->flags & PF_EXITING) {
		/* A syscall program runs outside RCU: the walk of the threads needs it. */
		bpf_rcu_read_lock();
		p->err = signal_live_thread(task, p->sig);
		bpf_rcu_read_unlock();
	} else {
		p->err = bpf_send_signal_task(task, p->sig, PIDTYPE_TGID, 0);
	}
	bpf_task_release(task);
	return 0;
}

static long signal_one(__u32 i, struct inspect_ctx *c)
{
	if (i >= INSPECT_MAX)
		return 1;
	signal_pid(&c->b->procs[i]);
	return 0;
}

SEC("syscall")
int signal_batch(void *ctx)
{
	__u32 zero = 0;
	struct inspect_ctx c = {.b = bpf_map_lookup_elem(&inspected, &zero)};
	__u32 n;

	if (!c.b)
		return 1;
	n = c.b->n;
	if (n > INSPECT_MAX)
		n = INSPECT_MAX;
	bpf_loop(n, signal_one, &c, 0);
	return 0;
}
