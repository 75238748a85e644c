/* SPDX-License-Identifier: MIT */
/*
 * Scheduler records (sched_rec.h, not sched.h: that name is libc's),
 * written by bpf/sched.bpf.c into the `sched_events` ring buffer and
 * turned into Perfetto ftrace bundles by user/sources/sched/schedtrace.c.
 * The common header's pid/tid are the task the record is about (prev for
 * a switch), cpu is where it happened.
 */
#ifndef CGBPF_SCHED_REC_H
#define CGBPF_SCHED_REC_H

#include "events.h"

#define SCHED_COMM 16

/* Scope knob of sched.bpf.c (mirrors enum sched_scope of user/core/opts.h). */
enum { SCHED_SCOPE_ALL = 0, SCHED_SCOPE_TARGETS = 1 };

/*
 * A context switch: hdr.pid/tid is prev. prev_state is the value the
 * sched_switch tracepoint prints (__trace_sched_switch_state: one bit per
 * reported state, TASK_REPORT_MAX = 0x100 for a preempted task).
 */
struct rec_switch {
	struct rec_hdr hdr;
	__u32 next_tid;
	__u32 next_pid;		/* next's tgid */
	__u32 prev_state;
	__s16 prev_prio;
	__s16 next_prio;
	char prev_comm[SCHED_COMM];
	char next_comm[SCHED_COMM];
};

#define WAKING_NEW 1		/* sched_wakeup_new: a new task's first wakeup */

/* Context of the waker, as ftrace's common_flags encodes it
 * (include/linux/trace_events.h TRACE_FLAG_*): Perfetto marks a waking
 * with HARDIRQ or SOFTIRQ as woken from interrupt (thread_state.irq_context)
 * instead of by the task that happened to be running. */
#define WAKING_HARDIRQ 0x08
#define WAKING_SOFTIRQ 0x10
#define WAKING_NMI 0x40

/* A task made runnable: hdr.pid/tid is the waker (current), tid/pid the woken. */
struct rec_waking {
	struct rec_hdr hdr;
	__u32 tid;
	__u32 pid;
	__s32 target_cpu;
	__s16 prio;
	__u8 flags;		/* WAKING_* */
	__u8 irq_flags;		/* ftrace common_flags bits WAKING_HARDIRQ/SOFTIRQ/NMI */
	char comm[SCHED_COMM];
};

/*
 * Task life: hdr.pid/tid is current (the parent for NEWTASK, the renamed
 * or exiting task otherwise); tid/pid is the task concerned.
 */
struct rec_task {
	struct rec_hdr hdr;
	__u32 tid;
	__u32 pid;
	__u64 clone_flags;	/* NEWTASK */
	__s16 prio;
	__u8 group_dead;	/* EXIT: last thread of its process */
	__u8 pad[5];
	char comm[SCHED_COMM];	/* NEWTASK: child's; RENAME: old; EXIT: comm */
	char newcomm[SCHED_COMM];	/* RENAME only */
};

#endif
