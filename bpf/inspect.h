/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * inspect.h: the batch that inspect.c fills in, shared with user space
 * (bpf2go turns it into inspectBatch and inspectProcStat). Fields run from
 * widest to narrowest; every gap is an explicit padding field.
 */
#ifndef LINEAGE_INSPECT_H
#define LINEAGE_INSPECT_H

/* How many processes one run looks at: the batch is one array value. */
#define INSPECT_MAX 4096

/* proc_stat.flags */
enum proc_flag {
	/* a task had the pid: every other field describes it */
	INSPECT_F_FOUND = 1 << 0,
	INSPECT_F_KERNEL = 1 << 1,  /* PF_KTHREAD */
	INSPECT_F_EXITING = 1 << 2, /* PF_EXITING */
};

/*
 * One process, as /proc/PID/stat would show it read at the moment of the
 * run: user space writes pid (and, for signal_batch, want_start and sig),
 * the program the rest. start is field 22
 * (clock ticks since boot), state field 3, ppid field 4, threads field 20,
 * start_stack field 28, sig_ignore and sig_catch fields 33 and 34 (signals
 * 1 to 31, bit sig-1), exit_code field 52 (the group's code once the group
 * has stopped or is exiting, as since Linux 5.16).
 */
struct proc_stat {
	__u64 start;
	__u64 start_stack;
	__u64 sig_ignore;
	__u64 sig_catch;
	__u64 want_start; /* signal_batch: the identity's start (in) */
	__u32 pid;
	__u32 ppid;
	__u32 threads;
	__s32 exit_code;
	enum proc_flag flags;
	__s32 sig; /* signal_batch: the signal to send (in) */
	__s32 err; /* signal_batch: 0 when sent, else -errno (out) */
	char state; /* 'R', 'S', 'D', 'T', 't', 'X', 'Z', 'P' or 'I' */
	char _pad[3];
	char comm[16];
};

struct batch {
	__u32 n; /* how many of procs user space filled in */
	__u32 _pad;
	struct proc_stat procs[INSPECT_MAX];
};

#endif /* LINEAGE_INSPECT_H */
