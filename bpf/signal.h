/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * signal.h: what lineage.c and inspect.c both need to signal a process from
 * the kernel: the bound kill(2) would put on the user lineage signals for,
 * and the way to reach a process whose leader has exited.
 */
#ifndef LINEAGE_SIGNAL_H
#define LINEAGE_SIGNAL_H

/*
 * Capabilities are not a licence. The kernel's own signals skip kill(2)'s
 * permission check, so when lineage runs with capabilities but not as root
 * (a setcap install), the programs apply that check themselves, for the
 * user who ran lineage: a process is signalled only if its real or saved
 * uid is that user's real or effective uid. Set by the loader before load;
 * off when lineage runs as root.
 */
const volatile bool kill_uid_bounded = false;
const volatile __u32 kill_uid_real = 0;
const volatile __u32 kill_uid_effective = 0;

/* Whether kill(2) would let the user lineage signals for signal t. */
static __always_inline bool may_kill(struct task_struct *t)
{
	const struct cred *c;
	__u32 uid, suid;

	if (!kill_uid_bounded)
		return true;
	c = t->real_cred;
	uid = c->uid.val;
	suid = c->suid.val;
	return uid == kill_uid_real || uid == kill_uid_effective ||
	       suid == kill_uid_real || suid == kill_uid_effective;
}

#ifndef LINEAGE_COMPAT
extern struct task_struct *bpf_task_acquire(struct task_struct *p) __ksym;
extern void bpf_task_release(struct task_struct *p) __ksym;
extern int bpf_send_signal_task(struct task_struct *task, int sig, enum pid_type type, __u64 value) __ksym;
extern int bpf_iter_task_new(struct bpf_iter_task *it, struct task_struct *task, unsigned int flags) __ksym;
extern struct task_struct *bpf_iter_task_next(struct bpf_iter_task *it) __ksym;
extern void bpf_iter_task_destroy(struct bpf_iter_task *it) __ksym;

#ifndef ESRCH
#define ESRCH 3
#endif

/*
 * The kernel refuses to signal an exiting task, and a leader thread that
 * exited stays, exiting, as the group's handle while its other threads run
 * on: signal_live_thread signals the group through one of those, and
 * returns -ESRCH when none lives. All share the leader's start, which the
 * caller checked. A program that runs outside RCU (a syscall program)
 * holds bpf_rcu_read_lock around it, for the walk of the threads.
 */
static __always_inline int signal_live_thread(struct task_struct *leader, int sig)
{
	struct bpf_iter_task it;
	struct task_struct *t;
	int err = -ESRCH;

	bpf_iter_task_new(&it, leader, BPF_TASK_ITER_PROC_THREADS);
	while ((t = bpf_iter_task_next(&it))) {
		if (t->flags & PF_EXITING)
			continue;
		t = bpf_task_acquire(t);
		if (!t)
			continue;
		err = bpf_send_signal_task(t, sig, PIDTYPE_TGID, 0);
		bpf_task_release(t);
		break;
	}
	bpf_iter_task_destroy(&it);
	return err;
}
#endif /* !LINEAGE_COMPAT */

#endif /* LINEAGE_SIGNAL_H */
