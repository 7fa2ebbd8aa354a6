/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * lineage.h: the records the BPF program shares with user space. bpf2go turns
 * each of them into a Go type (lineageEvent, lineageMember, ...), so this file
 * is their only definition. Fields run from widest to narrowest and every gap
 * is an explicit padding field: the Go and C layouts can't drift apart.
 */
#ifndef LINEAGE_H
#define LINEAGE_H

#define LINEAGE_COMM_LEN 16
#define LINEAGE_FILENAME_LEN 128
#define LINEAGE_ARGS_LEN 1024

enum event_kind {
	EVENT_FORK = 1,
	EVENT_EXEC = 2,
	EVENT_EXIT = 3,
};

/* event.flags */
enum event_flag {
	/* the process is a root: its lineage parent spawned it as one */
	EVENT_F_ROOT = 1 << 0,
	/* the membership map was full: the new process is not tracked */
	EVENT_F_UNTRACKED = 1 << 1,
	/* its root was being reaped: the new process was killed at birth */
	EVENT_F_CONTAINED = 1 << 2,
	/* argv was longer than LINEAGE_ARGS_LEN and was cut */
	EVENT_F_ARGS_TRUNCATED = 1 << 3,
	/* uid and euid hold the process's credentials after the exec */
	EVENT_F_CREDS = 1 << 4,
	/* the root was forked by an armed process: its roots entry names the arm */
	EVENT_F_ARMED = 1 << 5,
	/* the kernel spares the process for a keep rule: it exec'd a kept
	 * program (exec), or it inherits its forker's mark (fork) */
	EVENT_F_SPARED = 1 << 6,
	/* only the second fork hook saw the fork: the kernel skipped the first */
	EVENT_F_CAUGHT = 1 << 7,
};

/* root.flags */
enum root_flag {
	/* the root is being reaped: a member's new child is killed at birth,
	 * while the reaper's lease lasts (reap_lease_ns) */
	ROOT_F_REAPING = 1 << 0,
	/* when the supervisor's thread group dies, SIGKILL every member */
	ROOT_F_DIE_WITH_SUPERVISOR = 1 << 1,
	/* spawned by an armed thread that is still armed: user space keeps
	 * the root it meant to start and drops any other (the Go runtime may
	 * fork a probe process of its own during the same start) */
	ROOT_F_SPAWNING = 1 << 2,
	/* forked by an armed process (the arms map): cookie names the arm */
	ROOT_F_ARMED = 1 << 3,
	/* a keep rule keeps the whole lineage: every member it forks is born
	 * spared (MEMBER_F_SPARED), whatever it execs */
	ROOT_F_KEPT = 1 << 4,
};

/* member.flags */
enum member_flag {
	MEMBER_F_ROOT = 1 << 0,
	MEMBER_F_CONTAINED = 1 << 1,
	/* inserted from user space (a registered root or an adopted
	 * descendant), not by the fork hook: it may name a process that died
	 * before the insert, so user space checks it against /proc */
	MEMBER_F_ADOPTED = 1 << 2,
	/* spared by user space (a keep rule, or lineage's protected set),
	 * marked before anything is contained: the kernel kills neither it
	 * nor, by containment, the children it forks */
	MEMBER_F_SPARED = 1 << 3,
	/* with MEMBER_F_SPARED, set by the kernel: spared for the program it
	 * runs, which an exe keep rule of its root keeps (keep_exes). Its
	 * forks inherit both marks; its exec of another program clears both.
	 * A mark without this one spares the process whatever it execs. */
	MEMBER_F_SPARED_EXE = 1 << 4,
	/* inserted by the second fork hook: the kernel skipped the first */
	MEMBER_F_CAUGHT = 1 << 5,
};

/*
 * Start times are clock ticks since boot, exactly field 22 of /proc/PID/stat.
 * exit_status is the wait(2) status word: (code << 8) | signal.
 *
 * A fork or exit record in the ring buffer is one struct event. An exec
 * record is struct exec_event cut to what it carries: the event, then
 * filename_size bytes of the executed path (its NUL included) and
 * args_size bytes of argv, back to back. Layouts up to 3 wrote every exec
 * as the event with a fixed 128-byte filename and 1,024-byte argv slot
 * after it, and filename_size 0 (it was padding).
 */
struct event {
	__u64 time_ns; /* CLOCK_BOOTTIME when it happened */
	__u64 start;
	__u64 parent_start;
	__u64 root_start;
	enum event_kind kind;
	__u32 pid;
	__u32 parent_pid;
	__u32 root_pid;
	__s32 exit_status;
	enum event_flag flags;
	__u32 args_size;
	__u32 uid;  /* exec events, with EVENT_F_CREDS: real uid */
	__u32 euid; /* and effective uid, as the kernel sees them */
	__u32 filename_size; /* exec events: the path's bytes, NUL included */
	char comm[LINEAGE_COMM_LEN];
};

/* An exec event as the exec hook builds it, in a per-CPU scratch buffer,
 * before it writes the part in use to the ring buffer. */
struct exec_event {
	struct event e;
	char strings[LINEAGE_FILENAME_LEN + LINEAGE_ARGS_LEN];
};

/*
 * Events the ring buffer had no room for, per CPU (the drops map, struct drop_log): how
 * many, when the latest was, and the latest LINEAGE_LOST_LOG of them, so
 * that user space can say when a gap was and whose events fell in it.
 * Drop n (from 0) is at log[n % LINEAGE_LOST_LOG]; its seq, written last,
 * is n + 1 (mod 2^32): an entry whose seq is not is being written, or was
 * overwritten by a later drop.
 */
#define LINEAGE_LOST_LOG 512

struct lost {
	__u64 time_ns; /* CLOCK_BOOTTIME of the event that was dropped */
	__u64 start;
	__u64 root_start;
	__u32 pid;
	__u32 root_pid;
	enum event_kind kind;
	__u32 seq;
};

struct drop_log {
	__u64 count;   /* events this CPU dropped */
	__u64 last_ns; /* CLOCK_BOOTTIME of the latest */
	struct lost log[LINEAGE_LOST_LOG];
};

/* The value of the members map, keyed by the member's thread-group id. */
struct member {
	__u64 start;
	__u64 parent_start;
	__u64 root_start;
	__u32 parent_pid;
	__u32 root_pid;
	enum member_flag flags;
	__u32 _pad;
};

/* The value of the roots map, keyed by the root's pid. */
struct root {
	__u64 start;
	enum root_flag flags;
	__u32 cookie; /* ROOT_F_ARMED: the arm's cookie at the fork; 0 otherwise */
};

/*
 * The value of the arms map, keyed by the armed process's thread-group id:
 * whatever that process forks, from any of its threads, while it is not a
 * member, is a new root carrying cookie. start is the armed process's own,
 * so that an entry left for a process that is gone can't arm a stranger
 * that got its pid.
 */
struct arm {
	__u64 start;
	__u32 cookie;
	__u32 _pad;
};

/*
 * A program that an exe keep rule keeps, for one root: the file as the
 * kernel knows it (its inode number, and its superblock's s_dev in the
 * kernel's encoding, MAJOR << 20 | MINOR), keyed with the root's pid. The
 * value of the keep_exes map is the root's start time.
 */
struct keep_exe {
	__u64 ino;
	__u32 dev;
	__u32 root_pid;
};

/* Indexes of the per-CPU stats array. */
enum stat {
	STAT_EVENTS_LOST = 0,   /* ring buffer full: an event was dropped */
	STAT_MEMBERS_FULL = 1,  /* membership map full: a new process was not tracked */
	STAT_FORKS = 2,         /* members added by fork */
	STAT_EXECS = 3,
	STAT_EXITS = 4,         /* members removed by exit */
	STAT_CONTAINED = 5,     /* children of reaping members killed at birth */
	STAT_SUPERVISOR_KILLS = 6, /* members killed when the supervisor died */
	STAT_SIGNAL_FAILED = 7, /* a kill the program asked for was refused */
	STAT_STALE = 8,         /* entries whose start time no longer matched */
	STAT_UNTRACKED_KILLED = 9, /* untracked (map full) and so killed: fail closed */
	STAT_UID_SPARED = 10,   /* a kill skipped: the invoking user could not signal the process */
	STAT_FORKS_CAUGHT = 11, /* members the second fork hook added: the first was skipped */
	STAT_CAUGHT_EARLY = 12, /* of those, forks the second hook ran before the first for */
	STAT_KEPT_AT_EXEC = 13, /* members spared at exec for a kept program */
	STAT_MAX = 14,
};

#endif /* LINEAGE_H */
