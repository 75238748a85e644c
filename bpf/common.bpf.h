/* SPDX-License-Identifier: MIT */
/*
 * Maps and helpers shared by every BPF domain file. The maps are __weak so
 * that each .bpf.c can include this header and `bpftool gen object` links
 * them into one object with one copy of each map.
 */
#ifndef CGBPF_COMMON_BPF_H
#define CGBPF_COMMON_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "events.h"

/* libbpf 1.1 stops at the fifth argument. */
#ifndef PT_REGS_PARM6
#if defined(__TARGET_ARCH_x86)
#define PT_REGS_PARM6(x) ((x)->r9)
#elif defined(__TARGET_ARCH_arm64)
#define PT_REGS_PARM6(x) (((const struct user_pt_regs *)(x))->regs[5])
#else
#error "PT_REGS_PARM6 not defined for this architecture"
#endif
#endif

/* Knobs set by user space between open and load. */
const volatile __u32 self_tgid __weak = 0;	/* cgbpf itself: never traced */
const volatile __u64 wakeup_bytes __weak = 1 << 20; /* wake the consumer above this fill */
const volatile __u8 trace_all __weak = 0;	/* every process, not only targets */
const volatile __u8 follow_children __weak = 1;	/* forks of a target become targets */

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 64 << 20);		/* resized by user space */
} events SEC(".maps") __weak;

/*
 * Copies of the REC_PROC_FORK records of targets' children and of the
 * REC_MMAP records of watched library files, which user space reads ahead
 * of the events ring's backlog: a forked child, or a file mapped by a path
 * no search named, runs unprobed until user space attaches its probes,
 * and behind millions of call records that took seconds. The copy in the
 * events ring keeps the model's order; a record that does not fit here
 * takes that slower path.
 */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 64 << 10);
} ctl SEC(".maps") __weak;

/* Records lost because the ring was full, per record type, per CPU. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, REC__COUNT);
	__type(key, __u32);
	__type(value, __u64);
} drops SEC(".maps") __weak;

/*
 * Traced processes: one byte per pid, indexed by tgid. An array lookup is
 * inlined by the verifier and costs a few ns on the hot path, where a hash
 * lookup cost ~50 ns per probe here. User space sizes it to the kernel's
 * pid_max before load.
 */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 4194304);
	__type(key, __u32);
	__type(value, __u8);
} targets SEC(".maps") __weak;

static __always_inline int is_target(__u32 tgid)
{
	__u8 *t;

	if (tgid == self_tgid)
		return 0;
	if (trace_all)
		return 1;
	t = bpf_map_lookup_elem(&targets, &tgid);
	return t && *t;
}

static __always_inline void set_target(__u32 tgid, __u8 on)
{
	__u8 *t = bpf_map_lookup_elem(&targets, &tgid);

	if (t)
		*t = on;
}

static __always_inline void count_drop(__u32 type)
{
	__u64 *n = bpf_map_lookup_elem(&drops, &type);

	/* Atomic although per CPU: a preempted program may be in the middle
	 * of the same increment (see scratch_take below). */
	if (n)
		__sync_fetch_and_add(n, 1);
}

/* The fill level (in sixteenths of wakeup_bytes) of the last wakeup, 0
 * once the ring went below wakeup_bytes again: see wake_flag. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} wake_level SEC(".maps") __weak;

/*
 * Submit without waking the consumer unless the ring is filling up: a
 * wakeup per record costs more than the probe itself. The consumer also
 * drains on every poll timeout. Above wakeup_bytes, one wakeup per
 * sixteenth of it the fill moves, not one per record: each is an
 * irq_work, a self-IPI (on a VM an APIC write that exits to the
 * hypervisor), and a consumer already woken needs no more of them; they
 * took 42% of a GPU producer's time while the ring was over half full.
 * CPUs race on the level harmlessly: a wakeup too many, or one a
 * sixteenth later.
 */
static __always_inline __u64 wake_flag(void)
{
	__u64 avail = bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA), level;
	__u32 zero = 0;
	__u64 *last = bpf_map_lookup_elem(&wake_level, &zero);

	if (avail <= wakeup_bytes) {
		/* Read before written: no cache line bouncing between CPUs
		 * on the common path. */
		if (last && *last)
			*last = 0;
		return BPF_RB_NO_WAKEUP;
	}
	level = avail / ((wakeup_bytes >> 4) + 1);
	if (!last)
		return BPF_RB_FORCE_WAKEUP;
	if (*last == level)
		return BPF_RB_NO_WAKEUP;
	*last = level;
	return BPF_RB_FORCE_WAKEUP;
}

/*
 * Scratch buffers: a record too big for the BPF stack is built in a
 * per-CPU array value, then copied into a ring. A uprobe program runs with
 * migration disabled but, on a kernel with full or lazy preemption, not
 * with preemption disabled: the next task on the CPU can run a program
 * that takes the same buffer while the first is half-way through its
 * record, and one thread's record would go out with another's bytes (a
 * wrong kernel name). So each buffer starts with a lock word taken with an
 * atomic exchange; a program that finds it taken leaves the buffer alone
 * and its record is counted as lost (or, for a string, tried again at the
 * return). Only a preempted program holds it, so it is never held for long.
 */
static __always_inline bool scratch_take(__u64 *busy)
{
	return __sync_lock_test_and_set(busy, 1) == 0;
}

static __always_inline void scratch_give(__u64 *busy)
{
	*(volatile __u64 *)busy = 0;
}

static __always_inline void fill_hdr(struct rec_hdr *h, __u16 type, __u16 size,
				     __u64 pid_tgid)
{
	h->type = type;
	h->size = size;
	h->cpu = bpf_get_smp_processor_id();
	h->pid = pid_tgid >> 32;
	h->tid = (__u32)pid_tgid;
	h->ts = bpf_ktime_get_boot_ns();
}

/* The capture gate: after the helpers above, which it uses. */
#include "capture.bpf.h"

#endif
