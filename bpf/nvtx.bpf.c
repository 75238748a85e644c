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

struct nvtx_scratch_v {
	__u64 busy;		/* scratch_take() */
	struct rec_nvtx r;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct nvtx_scratch_v);
} nvtx_scratch SEC(".maps");

/* The scratch record, or NULL (counted as lost) while another program
 * that was preempted on this CPU holds it. */
static __always_inline struct rec_nvtx *nvtx_take(void)
{
	__u32 zero = 0;
	struct nvtx_scratch_v *v = bpf_map_lookup_elem(&nvtx_scratch, &zero);

	if (!v)
		return NULL;
	if (!scratch_take(&v->busy)) {
		count_drop(REC_NVTX);
		return NULL;
	}
	return &v->r;
}

static __always_inline void nvtx_send(struct rec_nvtx *r, __u32 size)
{
	struct nvtx_scratch_v *v = (void *)((char *)r - __builtin_offsetof(struct nvtx_scratch_v, r));

	if (bpf_ringbuf_output(&events, r, size, wake_flag()))
		count_drop(REC_NVTX);
	scratch_give(&v->busy);
}

/*
 * --capture-range nvtx: the ranges that open the gate. Push/pop nest per
 * thread (as user/out/capwin.c counts them, whatever the domain): depth and
 * a bit per depth where a capture range was pushed. Start/end ranges by
 * id. A range whose name BPF cannot read (a page not touched yet) may be
 * one: it opens the gate too, and user space, which reads the name,
 * decides.
 */
struct nvtx_cap {
	__u32 depth;
	__u32 start_pending;	/* v2: a matching start whose id is not back yet */
	__u64 mask;
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct nvtx_cap);
} nvtx_cap SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, __u64);
	__type(value, __u8);
} nvtx_cap_ids SEC(".maps");

static __always_inline bool cap_name_eq(const char *str, long len)
{
	if (len != capture_name_len)
		return false;
	for (int i = 0; i < CAPTURE_NAME_MAX; i++) {
		if (i >= len)
			break;
		if (str[i] != capture_name[i])
			return false;
	}
	return true;
}

/* n: what bpf_probe_read_user_str returned for the name (had: there was one). */
static __always_inline void nvtx_gate(__u8 probe, __u64 id, const char *str, long n, bool had)
{
	struct nvtx_cap *c;
	bool cand;
	__u32 d;

	if (capture_kind != CAPTURE_K_NVTX)
		return;
	cand = had && (n <= 0 || cap_name_eq(str, n - 1));
	if (probe == NV_PUSH) {
		c = bpf_task_storage_get(&nvtx_cap, bpf_get_current_task_btf(), 0,
					 BPF_LOCAL_STORAGE_GET_F_CREATE);
		if (!c)
			return;
		d = c->depth++;
		if (cand && d < 64) {
			c->mask |= 1ull << (d & 63);
			gate_add(1);
		}
	} else if (probe == NV_POP) {
		c = bpf_task_storage_get(&nvtx_cap, bpf_get_current_task_btf(), 0, 0);
		if (!c || !c->depth)
			return;
		d = --c->depth;
		if (d < 64 && (c->mask & (1ull << (d & 63)))) {
			c->mask &= ~(1ull << (d & 63));
			gate_add(-1);
		}
	} else if (probe == NV_START && cand && id) {
		__u8 one = 1;

		if (!bpf_map_update_elem(&nvtx_cap_ids, &id, &one, BPF_NOEXIST))
			gate_add(1);
	} else if (probe == NV_END && id) {
		if (!bpf_map_delete_elem(&nvtx_cap_ids, &id))
			gate_add(-1);
	}
}

/*
 * NVTX v2 start/end: the id is the start's return value (NV_STARTED), so a
 * matching start opens the gate at its entry, its thread remembers it,
 * and the return files the id for the end (nvtx_gate's NV_END).
 */
static __always_inline void nvtx2_start_gate(__u8 probe, __u64 id, const char *str, long n,
					     bool had)
{
	struct nvtx_cap *c;
	__u8 one = 1;

	if (capture_kind != CAPTURE_K_NVTX)
		return;
	if (probe == NV_START) {
		if (!had || (n > 0 && !cap_name_eq(str, n - 1)))
			return;
		c = bpf_task_storage_get(&nvtx_cap, bpf_get_current_task_btf(), 0,
					 BPF_LOCAL_STORAGE_GET_F_CREATE);
		/* A start whose return was lost counts once. */
		if (c && !c->start_pending) {
			c->start_pending = 1;
			gate_add(1);
		}
		return;
	}
	c = bpf_task_storage_get(&nvtx_cap, bpf_get_current_task_btf(), 0, 0);
	if (!c || !c->start_pending)
		return;
	c->start_pending = 0;
	if (!id || bpf_map_update_elem(&nvtx_cap_ids, &id, &one, BPF_NOEXIST))
		gate_add(-1);
}

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
	__u32 size;
	long n = 0;

	if (!is_target(pid_tgid >> 32))
		return 0;
	/* Ranges, names and registrations pass: user space needs them. */
	if (capture_gated && probe == NV_MARK && !gate_open())
		return 0;
	r = nvtx_take();
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
	r->msg = 0;
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
		/* Its page not touched yet (a probe cannot fault it in), and
		 * the library never reads it: user space reads it from the
		 * process. */
		if (s && n <= 0)
			r->msg = (__u64)s;
		nvtx_gate(probe, r->id, r->str, n, s != 0);
	} else {
		nvtx_gate(probe, r->id, r->str, 0, false);
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
	nvtx_send(r, size);
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

/* ---------------------------------------------------------------- NVTX v2 */

/*
 * Legacy applications linked against libnvToolsExt.so.1: uprobes on its
 * exported functions (user/sources/nvtx/nvtx.c attaches them), the same records. An
 * nvtxEventAttributes_t is read whole: its fields' offsets are NVTX's ABI
 * (version 2 struct, 48 bytes).
 */
struct nvtx_attr {
	__u16 version, size;
	__u32 category;
	__s32 color_type;
	__u32 color;
	__s32 payload_type;
	__s32 reserved0;
	__u64 payload;
	__s32 message_type;
	__s32 pad;
	__u64 message;
};


/* A v2 record: a string (ascii, or wide when wide) or event attributes. */
static __always_inline int emit_v2(struct pt_regs *ctx, __u8 probe, __u64 domain, __u64 id,
				   const void *msg, int wide, const struct nvtx_attr *uattr)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	struct nvtx_attr at = {};
	struct rec_nvtx *r;
	__u32 size;
	long n = 0;

	if (!is_target(pid_tgid >> 32))
		return 0;
	if (capture_gated && probe == NV_MARK && !gate_open())
		return 0;
	r = nvtx_take();
	if (!r)
		return 0;
	r->probe = probe;
	r->domain = domain;
	r->id = id;
	r->category = 0;
	r->msg_kind = msg ? (wide ? NV_MSG_UTF32 : 1) : 0;
	r->color_type = 0;
	r->color = 0;
	r->payload_type = 0;
	r->payload = 0;
	if (uattr && !bpf_probe_read_user(&at, sizeof(at), uattr)) {
		r->category = at.category;
		r->color_type = at.color_type == 1;
		r->color = at.color;
		r->payload_type = at.payload_type;
		r->payload = at.payload;
		msg = (const void *)at.message;
		wide = at.message_type == 2;
		r->msg_kind = !msg ? 0 : at.message_type == 1 ? 1 : wide ? NV_MSG_UTF32 : 0;
		if (at.message_type == 3)
			msg = 0;	/* a registered handle: opaque in libnvToolsExt */
	}
	r->str[0] = 0;
	r->msg = 0;
	if (msg && !wide)
		n = bpf_probe_read_user_str(r->str, sizeof(r->str), msg);
	/* Wide, or a string whose page the program has not touched yet (a
	 * probe cannot fault it in): user space reads it from the process. */
	if (msg && (wide || n <= 0))
		r->msg = (__u64)msg;
	if (probe == NV_PUSH || probe == NV_POP || probe == NV_END)
		nvtx_gate(probe, id, r->str, n, msg != 0);
	else if (probe == NV_START || probe == NV_STARTED)
		nvtx2_start_gate(probe, id, r->str, n, msg != 0);
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
	nvtx_send(r, size);
	return 0;
}

#define V2_ATTR(x) ((const struct nvtx_attr *)(x))

SEC("uprobe") int BPF_KPROBE(nvtx2_push_a, const char *m) { return emit_v2(ctx, NV_PUSH, 0, 0, m, 0, 0); }
SEC("uprobe") int BPF_KPROBE(nvtx2_push_w, const void *m) { return emit_v2(ctx, NV_PUSH, 0, 0, m, 1, 0); }
SEC("uprobe") int BPF_KPROBE(nvtx2_push_ex, const void *a) { return emit_v2(ctx, NV_PUSH, 0, 0, 0, 0, V2_ATTR(a)); }
SEC("uprobe") int BPF_KPROBE(nvtx2_pop) { return emit_v2(ctx, NV_POP, 0, 0, 0, 0, 0); }
SEC("uprobe") int BPF_KPROBE(nvtx2_mark_a, const char *m) { return emit_v2(ctx, NV_MARK, 0, 0, m, 0, 0); }
SEC("uprobe") int BPF_KPROBE(nvtx2_mark_w, const void *m) { return emit_v2(ctx, NV_MARK, 0, 0, m, 1, 0); }
SEC("uprobe") int BPF_KPROBE(nvtx2_mark_ex, const void *a) { return emit_v2(ctx, NV_MARK, 0, 0, 0, 0, V2_ATTR(a)); }
SEC("uprobe") int BPF_KPROBE(nvtx2_start_a, const char *m) { return emit_v2(ctx, NV_START, 0, 0, m, 0, 0); }
SEC("uprobe") int BPF_KPROBE(nvtx2_start_w, const void *m) { return emit_v2(ctx, NV_START, 0, 0, m, 1, 0); }
SEC("uprobe") int BPF_KPROBE(nvtx2_start_ex, const void *a) { return emit_v2(ctx, NV_START, 0, 0, 0, 0, V2_ATTR(a)); }
SEC("uretprobe") int BPF_KRETPROBE(nvtx2_started, __u64 id) { return emit_v2(ctx, NV_STARTED, 0, id, 0, 0, 0); }
SEC("uprobe") int BPF_KPROBE(nvtx2_end, __u64 id) { return emit_v2(ctx, NV_END, 0, id, 0, 0, 0); }
SEC("uprobe") int BPF_KPROBE(nvtx2_name_thread_a, __u32 tid, const char *m) { return emit_v2(ctx, NV_NAME_THREAD, 0, tid, m, 0, 0); }
SEC("uprobe") int BPF_KPROBE(nvtx2_domain_create_a, const char *m) { return emit_v2(ctx, NV_DOMAIN_CREATE, 0, 0, m, 0, 0); }
SEC("uretprobe") int BPF_KRETPROBE(nvtx2_domain_created, __u64 h) { return emit_v2(ctx, NV_DOMAIN_CREATED, h, 0, 0, 0, 0); }
SEC("uprobe") int BPF_KPROBE(nvtx2_domain_push_ex, __u64 d, const void *a) { return emit_v2(ctx, NV_PUSH, d, 0, 0, 0, V2_ATTR(a)); }
SEC("uprobe") int BPF_KPROBE(nvtx2_domain_pop, __u64 d) { return emit_v2(ctx, NV_POP, d, 0, 0, 0, 0); }
SEC("uprobe") int BPF_KPROBE(nvtx2_domain_mark_ex, __u64 d, const void *a) { return emit_v2(ctx, NV_MARK, d, 0, 0, 0, V2_ATTR(a)); }
SEC("uprobe") int BPF_KPROBE(nvtx2_domain_start_ex, __u64 d, const void *a) { return emit_v2(ctx, NV_START, d, 0, 0, 0, V2_ATTR(a)); }
SEC("uprobe") int BPF_KPROBE(nvtx2_domain_end, __u64 d, __u64 id) { return emit_v2(ctx, NV_END, d, id, 0, 0, 0); }
