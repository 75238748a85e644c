// SPDX-License-Identifier: MIT
/*
 * NVTX ranges, marks and names from cgbpf's injection library
 * (inject/nvtx.c): one USDT program per probe of provider cgbpf_nvtx, each
 * copying the probe's arguments and its string into one record. The
 * library's semaphores make an unprobed call cost nothing; attaching here
 * (bpf_program__attach_usdt with every pid) turns them on.
 */
#include "common.bpf.h"
#include <bpf/usdt.bpf.h>
#include "nvtx_rec.h"

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct rec_nvtx);
} nvtx_scratch SEC(".maps");

static __always_inline long arg(struct pt_regs *ctx, __u64 i)
{
	long v = 0;

	bpf_usdt_arg(ctx, i, &v);
	return v;
}

/* str_arg: the argument holding the string (-1: none); attr: index of
 * msg_kind when the probe carries event attributes (-1: none). */
static __always_inline int emit(struct pt_regs *ctx, __u8 probe, int id_arg, int str_arg,
				int attr, int cat_arg, int dom_arg)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	struct rec_nvtx *r;
	__u32 zero = 0, size;
	long n = 0;

	if (!is_target(pid_tgid >> 32))
		return 0;
	r = bpf_map_lookup_elem(&nvtx_scratch, &zero);
	if (!r)
		return 0;
	r->probe = probe;
	r->domain = dom_arg >= 0 ? arg(ctx, dom_arg) : 0;
	r->id = id_arg >= 0 ? arg(ctx, id_arg) : 0;
	r->category = cat_arg >= 0 ? arg(ctx, cat_arg) : 0;
	r->msg_kind = 0;
	r->color_type = 0;
	r->color = 0;
	r->payload_type = 0;
	r->payload = 0;
	if (attr >= 0) {
		/* msg_kind, msg, color_type, color, category, payload_type, payload */
		r->msg_kind = arg(ctx, attr);
		r->color_type = arg(ctx, attr + 2);
		r->color = arg(ctx, attr + 3);
		r->category = arg(ctx, attr + 4);
		r->payload_type = arg(ctx, attr + 5);
		r->payload = arg(ctx, attr + 6);
	}
	r->str[0] = 0;
	if (str_arg >= 0) {
		const char *s = (const char *)arg(ctx, str_arg);

		if (s)
			n = bpf_probe_read_user_str(r->str, sizeof(r->str), s);
	}
	if (n <= 0) {
		n = 1;
		r->str[0] = 0;
	}
	r->len = n - 1;
	r->truncated = n == sizeof(r->str);
	__builtin_memset(r->pad, 0, sizeof(r->pad));
	size = offsetof(struct rec_nvtx, str) + n;
	if (size > sizeof(*r))
		size = sizeof(*r);
	fill_hdr(&r->hdr, REC_NVTX, size, pid_tgid);
	if (bpf_ringbuf_output(&events, r, size, wake_flag()))
		count_drop(REC_NVTX);
	return 0;
}

/* Argument positions: inject/cgbpf_nvtx_probes.h. */
SEC("usdt") int nvtx_push(struct pt_regs *ctx) { return emit(ctx, NV_PUSH, -1, 2, 1, -1, 0); }
SEC("usdt") int nvtx_pop(struct pt_regs *ctx) { return emit(ctx, NV_POP, -1, -1, -1, -1, 0); }
SEC("usdt") int nvtx_start(struct pt_regs *ctx) { return emit(ctx, NV_START, 1, 3, 2, -1, 0); }
SEC("usdt") int nvtx_end(struct pt_regs *ctx) { return emit(ctx, NV_END, 1, -1, -1, -1, 0); }
SEC("usdt") int nvtx_mark(struct pt_regs *ctx) { return emit(ctx, NV_MARK, -1, 2, 1, -1, 0); }
SEC("usdt") int nvtx_name_thread(struct pt_regs *ctx) { return emit(ctx, NV_NAME_THREAD, 0, 1, -1, -1, -1); }
SEC("usdt") int nvtx_name_category(struct pt_regs *ctx) { return emit(ctx, NV_NAME_CATEGORY, -1, 2, -1, 1, 0); }
SEC("usdt") int nvtx_domain_create(struct pt_regs *ctx) { return emit(ctx, NV_DOMAIN_CREATE, -1, 1, -1, -1, 0); }
SEC("usdt") int nvtx_domain_destroy(struct pt_regs *ctx) { return emit(ctx, NV_DOMAIN_DESTROY, -1, -1, -1, -1, 0); }
SEC("usdt") int nvtx_register_string(struct pt_regs *ctx) { return emit(ctx, NV_REGISTER_STRING, 1, 2, -1, -1, 0); }
