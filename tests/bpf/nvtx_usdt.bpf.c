// SPDX-License-Identifier: MIT
/* Test-only USDT checker: every cgbpf_nvtx probe copies its arguments,
 * its string argument and the domain name read through the domain handle
 * into a ring buffer. With count_only set it only counts (the "trivial
 * tracer" of the NVTX benchmark). */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/usdt.bpf.h>
#include "nvtx_usdt.h"

char LICENSE[] SEC("license") = "Dual MIT/GPL";

const volatile bool count_only = false;

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 25);
} events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 2);		/* [0] hits, [1] records lost (ring full) */
	__type(key, __u32);
	__type(value, __u64);
} hits SEC(".maps");

/* str_arg: index of the string argument, -1 for none; dom_arg likewise
 * for the domain handle. */
static __always_inline int record(struct pt_regs *ctx, unsigned int probe, int str_arg, int dom_arg)
{
	struct nvtx_usdt_rec *r;
	__u32 zero = 0;
	__u64 *n;
	long i, cnt;

	if (count_only) {
		n = bpf_map_lookup_elem(&hits, &zero);
		if (n)
			*n += 1;
		return 0;
	}
	r = bpf_ringbuf_reserve(&events, sizeof(*r), 0);
	if (!r) {
		__u32 one = 1;

		n = bpf_map_lookup_elem(&hits, &one);
		if (n)
			*n += 1;
		return 0;
	}
	r->probe = probe;
	r->tid = (__u32)bpf_get_current_pid_tgid();
	cnt = bpf_usdt_arg_cnt(ctx);
	r->nargs = cnt;
	r->pad = 0;
	for (i = 0; i < NU_MAX_ARGS; i++) {
		r->args[i] = 0;
		if (i < cnt)
			bpf_usdt_arg(ctx, i, (long *)&r->args[i]);
	}
	r->str[0] = 0;
	r->domain[0] = 0;
	if (str_arg >= 0 && r->args[str_arg & 7])
		bpf_probe_read_user_str(r->str, sizeof(r->str), (void *)r->args[str_arg & 7]);
	if (dom_arg >= 0 && r->args[dom_arg & 7])
		bpf_probe_read_user_str(r->domain, sizeof(r->domain), (void *)r->args[dom_arg & 7]);
	/* As cgbpf does (bpf/common.bpf.h): a wakeup per record costs more
	 * than the probe; the consumer polls with a timeout anyway. */
	bpf_ringbuf_submit(r, bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) > (1 << 20) ?
			   BPF_RB_FORCE_WAKEUP : BPF_RB_NO_WAKEUP);
	return 0;
}

SEC("usdt") int push(struct pt_regs *ctx) { return record(ctx, NU_PUSH, 2, 0); }
SEC("usdt") int pop(struct pt_regs *ctx) { return record(ctx, NU_POP, -1, 0); }
SEC("usdt") int start(struct pt_regs *ctx) { return record(ctx, NU_START, 3, 0); }
SEC("usdt") int end(struct pt_regs *ctx) { return record(ctx, NU_END, -1, 0); }
SEC("usdt") int mark(struct pt_regs *ctx) { return record(ctx, NU_MARK, 2, 0); }
SEC("usdt") int name_thread(struct pt_regs *ctx) { return record(ctx, NU_NAME_THREAD, 1, -1); }
SEC("usdt") int name_category(struct pt_regs *ctx) { return record(ctx, NU_NAME_CATEGORY, 2, 0); }
SEC("usdt") int domain_create(struct pt_regs *ctx) { return record(ctx, NU_DOMAIN_CREATE, 1, 0); }
SEC("usdt") int domain_destroy(struct pt_regs *ctx) { return record(ctx, NU_DOMAIN_DESTROY, -1, 0); }
SEC("usdt") int register_string(struct pt_regs *ctx) { return record(ctx, NU_REGISTER_STRING, 2, 0); }
