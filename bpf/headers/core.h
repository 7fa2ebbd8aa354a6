/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * core.h: the few kernel types and constants lineage.c uses, written by hand
 * instead of a multi-megabyte vmlinux.h.
 *
 * Every struct carries preserve_access_index, so clang records each field
 * access as a CO-RE relocation and the loader rewrites the offsets against
 * the running kernel's BTF (/sys/kernel/btf/vmlinux). Only the fields named
 * here are read; their order and the missing fields do not matter.
 *
 * The numeric constants are the kernel's UAPI values (include/uapi/linux/bpf.h,
 * include/uapi/asm-generic/signal.h) and internal flags that have not changed
 * since they were introduced.
 */
#ifndef LINEAGE_CORE_H
#define LINEAGE_CORE_H

typedef unsigned char __u8;
typedef signed char __s8;
typedef unsigned short __u16;
typedef short __s16;
typedef unsigned int __u32;
typedef int __s32;
typedef unsigned long long __u64;
typedef long long __s64;
typedef __u16 __be16;
typedef __u32 __be32;
typedef __u32 __wsum;
typedef _Bool bool;
#define true 1
#define false 0

/* include/uapi/linux/bpf.h */
enum bpf_map_type {
	BPF_MAP_TYPE_HASH = 1,
	BPF_MAP_TYPE_ARRAY = 2,
	BPF_MAP_TYPE_PERCPU_ARRAY = 6,
	BPF_MAP_TYPE_RINGBUF = 27,
};

enum {
	BPF_ANY = 0,
	BPF_NOEXIST = 1,
	BPF_EXIST = 2,
};

enum {
	BPF_F_NO_PREALLOC = 1U << 0,
};

/* bpf_ringbuf_submit flags and bpf_ringbuf_query selectors. */
enum {
	BPF_RB_NO_WAKEUP = 1ULL << 0,
	BPF_RB_FORCE_WAKEUP = 1ULL << 1,
};

enum {
	BPF_RB_AVAIL_DATA = 0,
	BPF_RB_RING_SIZE = 1,
};

/* include/linux/pid.h */
enum pid_type {
	PIDTYPE_PID = 0,
	PIDTYPE_TGID = 1,
};

#define SIGKILL 9

/* include/linux/sched/signal.h */
#define SIGNAL_GROUP_EXIT 0x00000004

/* include/linux/sched.h */
#define PF_EXITING 0x00000004
#define PF_KTHREAD 0x00200000

/* clock ticks as /proc reports them: USER_HZ is 100 on every architecture */
#define NSEC_PER_USER_TICK 10000000ULL

#pragma clang attribute push(__attribute__((preserve_access_index)), apply_to = record)

typedef struct {
	int counter;
} atomic_t;

struct signal_struct {
	atomic_t live;
	int group_exit_code;
	unsigned int flags;
};

struct mm_struct {
	unsigned long arg_start;
	unsigned long arg_end;
};

typedef struct {
	__u32 val;
} kuid_t;

struct cred {
	kuid_t uid;
	kuid_t suid;
	kuid_t euid;
};

struct task_struct {
	unsigned int flags;
	int exit_code;
	int pid;
	int tgid;
	__u64 start_boottime;
	struct task_struct *group_leader;
	struct mm_struct *mm;
	struct signal_struct *signal;
	const struct cred *real_cred; /* objective: what kill(2) checks */
	const struct cred *cred;
	char comm[16];
};

struct super_block {
	__u32 s_dev; /* dev_t: MAJOR << 20 | MINOR */
};

struct inode {
	unsigned long i_ino;
	struct super_block *i_sb;
};

struct file {
	struct inode *f_inode;
};

struct linux_binprm {
	struct file *file; /* what runs: for a script, its interpreter */
	const char *filename;
};

/* sched_process_fork's record for a classic tracepoint program. Its layout
 * changed (the comms became __data_loc in 6.x): the offset of child_pid is
 * relocated like any other field. */
struct trace_event_raw_sched_process_fork {
	int child_pid;
};

#pragma clang attribute pop

/* kernel/bpf/helpers.c: the open-coded task iterator (6.7+) */
struct bpf_iter_task {
	__u64 __opaque[3];
} __attribute__((aligned(8)));

enum {
	BPF_TASK_ITER_PROC_THREADS = 2,
};

/* bpf_helper_defs.h names these types in prototypes it does not use here. */
struct bpf_map;
struct pt_regs;
struct __sk_buff;
struct sk_buff;
struct xdp_md;
struct sock;

#endif /* LINEAGE_CORE_H */
