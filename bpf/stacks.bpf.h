/* SPDX-License-Identifier: MIT */
/*
 * Stack capture shared by the sampler (stacks.bpf.c) and the return probe
 * of API calls (calls.bpf.c): a record is built in a per-CPU scratch and
 * sent with its real size (the stack copy is most of it).
 */
#ifndef CGBPF_STACKS_BPF_H
#define CGBPF_STACKS_BPF_H

#include "common.bpf.h"
#include "stack_rec.h"

/* Bytes of user stack copied per record (--stack-copy); 0: none. */
const volatile __u32 stack_copy __weak = 8192;

/*
 * Samples go to their own ring so that a burst of big sample records can
 * never crowd API records out of `events`. Backtraces stay in `events`:
 * they must arrive right before their call's return record.
 */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 8 << 20);		/* resized by user space */
} samples SEC(".maps") __weak;

/* The CPU sample's record under construction (bpf/stacks.bpf.c). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct rec_stack);
} stack_scratch SEC(".maps") __weak;

/*
 * The slow call's backtrace under construction (bpf/calls.bpf.c): not
 * stack_scratch, since the sampling perf event fires in NMI context, on
 * the same CPU, in the middle of a return probe filling it (seen: a
 * backtrace that ended in the return probe's own kernel frames).
 */
struct bt_scratch_v {
	__u64 busy;		/* scratch_take() */
	struct rec_stack r;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct bt_scratch_v);
} bt_scratch SEC(".maps") __weak;

/* fill_hdr() with a timestamp the caller has read already. */
static __always_inline void fill_hdr_at(struct rec_hdr *h, __u16 type, __u16 size,
					__u64 pid_tgid, __u64 ts)
{
	h->type = type;
	h->size = size;
	h->cpu = bpf_get_smp_processor_id();
	h->pid = pid_tgid >> 32;
	h->tid = (__u32)pid_tgid;
	h->ts = ts;
}

/*
 * Fills r (everything but hdr) for the current task. uregs are the task's
 * user registers; ctx the program's context; kernel: also the kernel
 * stack (samples). Returns the record's size, at most sizeof(*r).
 */
static __always_inline __u32 fill_stack(struct rec_stack *r, void *ctx, struct pt_regs *uregs,
					bool kernel)
{
	__u32 len = stack_copy;
	long n;

	r->flags = 0;
	r->ip = BPF_CORE_READ(uregs, ip);
	r->sp = BPF_CORE_READ(uregs, sp);
	r->bp = BPF_CORE_READ(uregs, bp);
	n = bpf_get_stack(ctx, r->user, sizeof(r->user), BPF_F_USER_STACK);
	r->nuser = n > 0 ? (__u64)n / 8 : 0;
	r->nkernel = 0;
	if (kernel) {
		n = bpf_get_stack(ctx, r->kernel, sizeof(r->kernel), 0);
		r->nkernel = n > 0 ? (__u64)n / 8 : 0;
	}
	r->pad[0] = r->pad[1] = r->pad[2] = 0;
	if (len > STACK_COPY_MAX)
		len = STACK_COPY_MAX;
	/*
	 * A read that crosses the end of the stack's mapping fails as a
	 * whole: halve until it fits (a shallow main thread has little
	 * stack above sp).
	 */
	for (int i = 0; i < 6 && len; i++) {
		__u32 l = len;

		if (l > STACK_COPY_MAX)
			l = STACK_COPY_MAX;
		if (!bpf_probe_read_user(r->data, l, (void *)r->sp))
			break;
		r->flags |= STACK_F_COPY_SHORT;
		len >>= 1;
		if (len < 256)
			len = 0;
	}
	r->copy_len = len;
	return offsetof(struct rec_stack, data) + len;
}

#endif
