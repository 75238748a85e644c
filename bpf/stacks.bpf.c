// SPDX-License-Identifier: MIT
/*
 * CPU sampling: user space opens a CPU-clock perf event per CPU at
 * --sample-hz and attaches this program to each; it records a stack of
 * target threads only.
 */
#include "stacks.bpf.h"
#include "python.bpf.h"

char LICENSE[] SEC("license") = "Dual MIT/GPL";

SEC("perf_event")
int sample(struct bpf_perf_event_data *ctx)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	struct task_struct *task;
	struct pt_regs *uregs;
	struct rec_stack *r;
	__u32 zero = 0, size;
	__u64 flags;

	if (!(pid_tgid >> 32) || !is_target(pid_tgid >> 32) || !gate_open())
		return 0;
	r = bpf_map_lookup_elem(&stack_scratch, &zero);
	if (!r)
		return 0;
	task = bpf_get_current_task_btf();
	/* The user registers, also when the sample hit kernel code. */
	uregs = (struct pt_regs *)bpf_task_pt_regs(task);
	size = fill_stack(r, ctx, uregs, true);
	/* The kernel stack is empty when the sample interrupted user code. */
	if (r->nkernel)
		r->flags |= STACK_F_KERNEL_MODE;
	r->lib = 0;
	r->func = 0;
	fill_hdr(&r->hdr, REC_STACK_SAMPLE, size, pid_tgid);
	if (size > sizeof(*r))
		return 0;
	/* The Python frames of the mixed stack go first, in the same ring. */
	if (py_mode != PY_MODE_OFF)
		py_emit(1, pid_tgid, PY_SPEC(PYR_SAMPLE, 0, 0, PY_FRAMES_MAX, false));
	flags = bpf_ringbuf_query(&samples, BPF_RB_AVAIL_DATA) >
			bpf_ringbuf_query(&samples, BPF_RB_RING_SIZE) / 2 ?
		BPF_RB_FORCE_WAKEUP : BPF_RB_NO_WAKEUP;
	if (bpf_ringbuf_output(&samples, r, size, flags))
		count_drop(REC_STACK_SAMPLE);
	return 0;
}
