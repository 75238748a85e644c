// SPDX-License-Identifier: MIT
/*
 * Entry and return probes for library API calls (libcuda today; libcudart,
 * libnccl and NVTX later). The programs are generic: the attach cookie says
 * which function fired and how to read its arguments (see events.h), so a
 * new function is a table line in user space, never a new program here.
 */
#include "common.bpf.h"
#include "stacks.bpf.h"
#include "agg.bpf.h"
#include "python.bpf.h"
#include "pysites.bpf.h"
#include "nccl_hash.h"

char LICENSE[] SEC("license") = "Dual MIT/GPL";

/* Out pointer (argument 0) of a call in flight, for its return probe. */
struct stash_key {
	__u32 tid;
	__u32 func;		/* lib << 16 | func */
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, struct stash_key);
	__type(value, __u64);
} stash SEC(".maps");

/* Calls slower than this get a backtrace (--backtrace-threshold); 0: off. */
const volatile __u64 backtrace_ns = 0;

#define BT_DEPTH 8	/* a power of two: indexes are masked for the verifier */

/* Entry times of the calls in flight on a thread, for backtraces and the
 * monitor's aggregates (with the bytes each call moves). */
struct call_ts {
	__u64 ts[BT_DEPTH];
	__u64 bytes[BT_DEPTH];
	__u64 ptr[BT_DEPTH];	/* monitor: the pointer an (de)allocation is about */
	__u8 lib[BT_DEPTH];
	__u8 nranks[BT_DEPTH];	/* monitor: NCCL communicator size */
	__u32 depth;
	__u32 pad;
};

/*
 * What the call probes keep per thread, in one task storage, so that a
 * call's entry looks it up once for both its users: the call stack
 * (backtraces, the monitor) and --python leaf's cache (bpf/python.bpf.h).
 * A task storage lookup is a helper call; a hash lookup per call would
 * cost more.
 */
struct thread_calls {
	struct call_ts c;
	struct py_leaf_tc py;
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct thread_calls);
} thread_calls SEC(".maps");

/* The current thread's, created at its first call. */
static __always_inline struct thread_calls *thread_calls_get(__u64 flags)
{
	return bpf_task_storage_get(&thread_calls, bpf_get_current_task_btf(), 0, flags);
}

/* Pushes a call on t's stack; bytes, ptr and nranks are the monitor's. */
static __always_inline void bt_enter(struct thread_calls *t, __u64 ts, __u64 bytes, __u64 ptr,
				     __u8 lib, __u8 nranks)
{
	struct call_ts *c;
	__u32 d;

	if (!t)
		return;
	c = &t->c;
	d = c->depth;
	if (d < BT_DEPTH) {
		c->ts[d] = ts;
		c->lib[d] = lib;
		/* Off, the verifier drops the stores (aggregate is read-only). */
		if (aggregate) {
			c->bytes[d] = bytes;
			c->ptr[d] = ptr;
			c->nranks[d] = nranks;
		}
	}
	c->depth = d + 1;
}

/* The call_ts stack is kept for backtraces and for the monitor. */
#define NEED_CALL_TS (backtrace_ns || aggregate)

static __always_inline void emit_trigger(__u64 pid_tgid, __u64 cookie, __u64 now, __u64 dur,
					 __s64 ret)
{
	struct rec_trigger *t = bpf_ringbuf_reserve(&events, sizeof(*t), 0);

	if (!t) {
		count_drop(REC_TRIGGER);
		return;
	}
	fill_hdr_at(&t->hdr, REC_TRIGGER, sizeof(*t), pid_tgid, now);
	t->func = CK_FUNC(cookie);
	t->lib = CK_LIB(cookie);
	__builtin_memset(t->pad, 0, sizeof(t->pad));
	t->dur_ns = dur;
	t->ret = ret;
	bpf_ringbuf_submit(t, BPF_RB_FORCE_WAKEUP);
}

/*
 * At the return probe the callee's frame is gone and ip is the return
 * address: the stack is the call site's, which is what a backtrace of
 * the call should show.
 */
static __always_inline __u64 bt_exit(struct pt_regs *ctx, __u64 pid_tgid, __u64 cookie)
{
	struct thread_calls *t = thread_calls_get(0);
	struct call_ts *c = t ? &t->c : NULL;
	struct bt_scratch_v *v;
	struct rec_stack *r;
	__u32 d, zero = 0, size;
	__u64 now, dur;

	if (!c || !c->depth)
		return 0;
	d = --c->depth;
	if (d >= BT_DEPTH)
		return 0;
	now = bpf_ktime_get_boot_ns();
	/* The slot of a call whose entry the capture gate dropped. */
	if (!c->ts[d])
		return now;
	dur = now - c->ts[d];
	/* A call made by a call of the same library (NVIDIA's ncclBcast calls
	 * ncclBroadcast) is that call's work: counted once, as the outer one. */
	if (aggregate && !(d > 0 && c->lib[(d - 1) & (BT_DEPTH - 1)] == CK_LIB(cookie))) {
		if (agg_add(pid_tgid >> 32, cookie, c->nranks[d], dur, c->bytes[d], PT_REGS_RC(ctx)))
			emit_trigger(pid_tgid, cookie, now, dur, PT_REGS_RC(ctx));
		py_site(pid_tgid, cookie, dur);
		if (PT_REGS_RC(ctx) == 0) {
			agg_memory(pid_tgid >> 32, cookie, c->ptr[d], c->bytes[d]);
			agg_comm_init(cookie, c->ptr[d], c->bytes[d]);
		}
	}
	if (!backtrace_ns || !emit_records || dur < backtrace_ns)
		return now;
	v = bpf_map_lookup_elem(&bt_scratch, &zero);
	if (!v)
		return now;
	if (!scratch_take(&v->busy)) {
		count_drop(REC_STACK_BT);
		return now;
	}
	/* The Python frames of the mixed stack go first. */
	if (py_mode != PY_MODE_OFF)
		py_emit(0, pid_tgid,
			PY_SPEC(PYR_BT, CK_LIB(cookie), CK_FUNC(cookie), PY_FRAMES_MAX, false));
	r = &v->r;
	size = fill_stack(r, ctx, ctx, false);
	r->lib = CK_LIB(cookie);
	r->func = CK_FUNC(cookie);
	fill_hdr(&r->hdr, REC_STACK_BT, size, pid_tgid);
	/* Rare and slow anyway: wake the consumer, which symbolizes best
	 * while the process still lives. */
	if (size <= sizeof(*r) && bpf_ringbuf_output(&events, r, size, BPF_RB_FORCE_WAKEUP))
		count_drop(REC_STACK_BT);
	scratch_give(&v->busy);
	return now;
}

/* Scratch space for variable-length string records. */
struct str_scratch_v {
	__u64 busy;		/* scratch_take() */
	struct rec_string r;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct str_scratch_v);
} str_scratch SEC(".maps");

/* A string argument the entry probe could not read, for the return probe
 * to read again once the library has (docs/design.md, "Strings"). */
struct str_retry {
	__u64 addr;
	__u32 arg;
	__u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, struct stash_key);
	__type(value, struct str_retry);
} str_retry SEC(".maps");

/*
 * Sends the string at ustr as argument arg of the call. flags has
 * STR_LATE at the return probe. A string that cannot be read goes with
 * STR_PENDING at the entry (the return probe tries again: returns false
 * so that the caller remembers it), with STR_UNREAD and its address at the
 * return (user space reads it from the process).
 */
static __always_inline bool emit_string(__u64 pid_tgid, __u64 cookie, __u32 arg,
					const char *ustr, __u8 flags)
{
	__u32 zero = 0;
	struct str_scratch_v *v = bpf_map_lookup_elem(&str_scratch, &zero);
	struct rec_string *r;
	long n = -1;
	bool done;

	if (!v)
		return true;
	if (!scratch_take(&v->busy)) {
		/* At the entry the return probe tries again; at the return
		 * the string is lost, and counted. */
		if (!(flags & STR_LATE))
			return false;
		count_drop(REC_STRING);
		return true;
	}
	r = &v->r;
	if (ustr)
		n = bpf_probe_read_user_str(r->str, sizeof(r->str), ustr);
	r->flags = flags;
	if (n <= 0) {
		n = 1;
		r->str[0] = 0;
		/* NULL has nothing to wait for. */
		r->flags |= ustr && !(flags & STR_LATE) ? STR_PENDING : STR_UNREAD;
	}
	/* n counts the NUL; a full buffer means the string may go on. */
	r->len = n - 1;
	r->truncated = n == sizeof(r->str);
	r->func = CK_FUNC(cookie);
	r->lib = CK_LIB(cookie);
	r->arg = arg;
	r->addr = (__u64)ustr;
	n = offsetof(struct rec_string, str) + n;
	if (n > sizeof(*r))
		n = sizeof(*r);
	fill_hdr(&r->hdr, REC_STRING, n, pid_tgid);
	if (bpf_ringbuf_output(&events, r, n, wake_flag()))
		count_drop(REC_STRING);
	done = !(r->flags & STR_PENDING);
	scratch_give(&v->busy);
	return done;
}

/* The return of a call whose record the gate drops: its call_ts slot
 * goes, so that the stack stays paired across window edges. */
static __always_inline void bt_pop(void)
{
	struct thread_calls *t = thread_calls_get(0);

	if (t && t->c.depth)
		t->c.depth--;
}

static __always_inline int enter(struct pt_regs *ctx)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u64 cookie;
	struct py_rec_frame pyf = {};
	struct rec_call_enter_py *rp = NULL;
	struct thread_calls *t = NULL;
	struct rec_call_enter *r;
	__u32 kind, str;
	bool emit;

	if (!is_target(pid_tgid >> 32))
		return 0;
	cookie = bpf_get_attach_cookie(ctx);
	emit = emit_records || (nccl_records && CK_LIB(cookie) == LIB_NCCL);
	if (capture_gated) {
		if (cookie & CK_TRIG_ON)
			gate_profiler(pid_tgid >> 32, true);
		else if (!(cookie & CK_PASS) && !gate_open()) {
			/* A slot (time 0: no backtrace) for the return to pop. */
			if (NEED_CALL_TS)
				bt_enter(thread_calls_get(BPF_LOCAL_STORAGE_GET_F_CREATE), 0, 0, 0,
					 CK_LIB(cookie), 0);
			return 0;
		}
	}
	/* One lookup serves the call stack and the Python leaf cache. */
	if (NEED_CALL_TS || (py_mode == PY_MODE_LEAF && emit))
		t = thread_calls_get(BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!emit) {
		/* Monitor without a flight recorder: aggregates only. */
		if (aggregate) {
			__u64 a[6] = { PT_REGS_PARM1(ctx), PT_REGS_PARM2(ctx), PT_REGS_PARM3(ctx),
				       PT_REGS_PARM4(ctx), PT_REGS_PARM5(ctx), PT_REGS_PARM6(ctx) };

			bt_enter(t, bpf_ktime_get_boot_ns(), agg_bytes(cookie, a),
				 agg_ptr_arg(cookie, a), CK_LIB(cookie),
				 agg_nranks(cookie, a, PT_REGS_SP(ctx)));
		}
		return 0;
	}
	/* The call's begin event carries its Python call site: a known
	 * user leaf in the entry record's tail, else a REC_PY_FRAMES
	 * record before it (bpf/pyframes_rec.h). */
	if (py_mode == PY_MODE_LEAF && py_leaf(pid_tgid, t ? &t->py : NULL, &pyf) < 0)
		py_emit(0, pid_tgid,
			PY_SPEC(PYR_CALL, CK_LIB(cookie), CK_FUNC(cookie), PY_LEAF_MAX, true));
	else if (py_mode == PY_MODE_STACK)
		py_emit(0, pid_tgid,
			PY_SPEC(PYR_CALL, CK_LIB(cookie), CK_FUNC(cookie), PY_FRAMES_MAX, false));
	if (pyf.code) {
		rp = bpf_ringbuf_reserve(&events, sizeof(*rp), 0);
		r = rp ? &rp->call : NULL;
	} else {
		r = bpf_ringbuf_reserve(&events, sizeof(*r), 0);
	}
	if (!r) {
		/* Pushed even so, for the return to pop the right slot. */
		if (NEED_CALL_TS)
			bt_enter(t, bpf_ktime_get_boot_ns(), 0, 0, CK_LIB(cookie), 0);
		count_drop(REC_CALL_ENTER);
		return 0;
	}
	fill_hdr(&r->hdr, REC_CALL_ENTER, rp ? sizeof(*rp) : sizeof(*r), pid_tgid);
	if (rp)
		rp->py = pyf;
	kind = CK_KIND(cookie);
	r->func = CK_FUNC(cookie);
	r->lib = CK_LIB(cookie);
	r->kind = kind;
	r->pad = 0;
	r->args[0] = PT_REGS_PARM1(ctx);
	r->args[1] = PT_REGS_PARM2(ctx);
	r->args[2] = PT_REGS_PARM3(ctx);
	r->args[3] = PT_REGS_PARM4(ctx);
	r->args[4] = PT_REGS_PARM5(ctx);
	r->args[5] = PT_REGS_PARM6(ctx);
	r->args[9] = r->args[10] = 0;
	if (NEED_CALL_TS)
		bt_enter(t, r->hdr.ts, aggregate ? agg_bytes(cookie, r->args) : 0,
			 aggregate ? agg_ptr_arg(cookie, r->args) : 0, CK_LIB(cookie),
			 aggregate ? agg_nranks(cookie, r->args, PT_REGS_SP(ctx)) : 0);
	/*
	 * User memory is read into the BPF stack, then copied: reading straight
	 * into ring memory (vmalloc'ed) makes hardened usercopy look the
	 * destination up in the vmap tree on every call (~150 ns here).
	 */
	if (kind == PK_STACK3) {
		__u64 st[3] = {};

		/* x86-64: at entry the return address is at sp, argument 7 at sp + 8. */
		bpf_probe_read_user(st, sizeof(st), (void *)(PT_REGS_SP(ctx) + 8));
		r->args[6] = st[0];
		r->args[7] = st[1];
		r->args[8] = st[2];
	} else if (kind == PK_NCCL_UID) {
		struct nccl_hacc h = nccl_hash_init();
		bool whole = true;

		/* Chunk by chunk: no 128-byte buffer on the BPF stack. Once
		 * per communicator's creation. */
		nccl_hash_piece(&h, NCCL_UNIQUE_ID_BYTES);
		r->args[7] = r->args[8] = 0;
		for (int i = 0; i < NCCL_UNIQUE_ID_BYTES / 8; i++) {
			__u64 w = 0;

			if (bpf_probe_read_user(&w, sizeof(w), (void *)(PT_REGS_SP(ctx) + 8 + 8 * i)))
				whole = false;
			nccl_hash_chunk(&h, w);
			if (i == 0)
				r->args[7] = w;
			else if (i == 1)
				r->args[8] = w;
		}
		r->args[6] = whole ? nccl_hash_digest(&h) : 0;
	} else if (kind == PK_DEREF_A0) {
		__u64 cfg[5] = {};

		bpf_probe_read_user(cfg, sizeof(cfg), (void *)r->args[0]);
		r->args[6] = cfg[0];
		r->args[7] = cfg[1];
		r->args[8] = cfg[2];
		r->args[9] = cfg[3];
		r->args[10] = cfg[4];
	} else {
		r->args[6] = r->args[7] = r->args[8] = 0;
	}
	if (cookie & CK_STASH) {
		struct stash_key k = { .tid = (__u32)pid_tgid,
				       .func = CK_LIB(cookie) << 16 | CK_FUNC(cookie) };
		__u64 out = r->args[CK_OUT_ARG(cookie)];

		if (cookie & CK_OUT_ARRAY) {
			__u64 len = (__u32)r->args[1];

			out = OUT_ARRAY_PTR(out) | (len > 0xffff ? 0xffffull : len) << 48;
		}
		bpf_map_update_elem(&stash, &k, &out, BPF_ANY);
	}
	/* No wakeup from the entry: the exit's record follows within the
	 * call and checks the ring's fill (about 15 ns a check here); a call
	 * that never returns is read at the consumer's next poll timeout. */
	str = CK_STR(cookie);
	if (str >= 1 && str <= 6) {
		const char *s = (const char *)r->args[str - 1];

		bpf_ringbuf_submit(r, BPF_RB_NO_WAKEUP);
		if (!emit_string(pid_tgid, cookie, str - 1, s, 0)) {
			struct stash_key k = { .tid = (__u32)pid_tgid,
					       .func = CK_LIB(cookie) << 16 | CK_FUNC(cookie) };
			struct str_retry v = { .addr = (__u64)s, .arg = str - 1 };

			bpf_map_update_elem(&str_retry, &k, &v, BPF_ANY);
		}
		return 0;
	}
	bpf_ringbuf_submit(r, BPF_RB_NO_WAKEUP);
	return 0;
}

/* A CK_OUT_ARRAY call's array (ncclCommInitAll's comms), sent before its
 * exit record. Read straight into the ring: once per call of a rare
 * function. */
static __always_inline void emit_out_array(__u64 pid_tgid, __u64 cookie)
{
	struct stash_key k = { .tid = (__u32)pid_tgid,
			       .func = CK_LIB(cookie) << 16 | CK_FUNC(cookie) };
	__u64 *p = bpf_map_lookup_elem(&stash, &k), v;
	struct rec_out_array *r;
	__u32 len, n;

	if (!p || !OUT_ARRAY_PTR(*p))
		return;
	v = *p;
	len = OUT_ARRAY_LEN(v);
	n = len < OUT_ARRAY_MAX ? len : OUT_ARRAY_MAX;
	r = bpf_ringbuf_reserve(&events, sizeof(*r), 0);
	if (!r) {
		count_drop(REC_OUT_ARRAY);
		return;
	}
	fill_hdr(&r->hdr, REC_OUT_ARRAY, sizeof(*r), pid_tgid);
	r->func = CK_FUNC(cookie);
	r->lib = CK_LIB(cookie);
	r->pad = 0;
	r->len = len;
	r->n = 0;
	if (n && n <= OUT_ARRAY_MAX &&
	    !bpf_probe_read_user(r->v, n * sizeof(r->v[0]), (void *)OUT_ARRAY_PTR(v)))
		r->n = n;
	bpf_ringbuf_submit(r, wake_flag());
}

static __always_inline int exit(struct pt_regs *ctx)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u64 cookie, now = 0;
	struct rec_call_exit *r;

	if (!is_target(pid_tgid >> 32))
		return 0;
	cookie = bpf_get_attach_cookie(ctx);
	if (capture_gated) {
		/* cuProfilerStop returned: this process's window is over
		 * (others may be open); its own record passes with CK_TRIG_OFF. */
		if (cookie & CK_TRIG_OFF)
			gate_profiler(pid_tgid >> 32, false);
		else if (!(cookie & CK_PASS) && !gate_open()) {
			if (NEED_CALL_TS)
				bt_pop();
			return 0;
		}
	}
	/* Before the exit record: the model attaches it to the call ending next. */
	if (NEED_CALL_TS)
		now = bt_exit(ctx, pid_tgid, cookie);
	if (!emit_records && !(nccl_records && CK_LIB(cookie) == LIB_NCCL))
		return 0;
	/* Before the exit record: the string belongs to the call ending next. */
	if (CK_STR(cookie)) {
		struct stash_key k = { .tid = (__u32)pid_tgid,
				       .func = CK_LIB(cookie) << 16 | CK_FUNC(cookie) };
		struct str_retry *v = bpf_map_lookup_elem(&str_retry, &k);

		if (v) {
			emit_string(pid_tgid, cookie, v->arg, (const char *)v->addr, STR_LATE);
			bpf_map_delete_elem(&str_retry, &k);
		}
	}
	if ((cookie & CK_STASH) && (cookie & CK_OUT_ARRAY))
		emit_out_array(pid_tgid, cookie);
	r = bpf_ringbuf_reserve(&events, sizeof(*r), 0);
	if (!r) {
		count_drop(REC_CALL_EXIT);
		return 0;
	}
	/* One clock read serves both when the knob read it already. */
	if (now)
		fill_hdr_at(&r->hdr, REC_CALL_EXIT, sizeof(*r), pid_tgid, now);
	else
		fill_hdr(&r->hdr, REC_CALL_EXIT, sizeof(*r), pid_tgid);
	r->func = CK_FUNC(cookie);
	r->lib = CK_LIB(cookie);
	r->has_out = 0;
	r->pad = 0;
	r->ret = PT_REGS_RC(ctx);
	r->out = 0;
	if (cookie & CK_STASH) {
		struct stash_key k = { .tid = (__u32)pid_tgid,
				       .func = CK_LIB(cookie) << 16 | CK_FUNC(cookie) };
		__u64 *p = bpf_map_lookup_elem(&stash, &k);

		if (p) {
			__u64 out = 0, ptr = *p;

			if (cookie & CK_OUT_ARRAY)
				ptr = OUT_ARRAY_PTR(ptr);
			if (ptr && (cookie & CK_OUT32)) {
				__u32 o32 = 0;

				/* An int: 8 bytes could run off its page. */
				if (!bpf_probe_read_user(&o32, sizeof(o32), (void *)ptr)) {
					r->out = o32;
					r->has_out = 1;
				}
			} else if (ptr && !bpf_probe_read_user(&out, sizeof(out), (void *)ptr)) {
				r->out = out;
				r->has_out = 1;
			}
			bpf_map_delete_elem(&stash, &k);
		}
	}
	bpf_ringbuf_submit(r, wake_flag());
	return 0;
}

/*
 * Two attachments of the same code: per-probe perf-event uprobes work on
 * every kernel; uprobe_multi links (Linux >= 6.6) attach all functions of
 * a library in one syscall and detach them with one RCU grace period
 * instead of one per probe (about 100 ms each here). User space loads the
 * _multi pair with expected_attach_type BPF_TRACE_UPROBE_MULTI when the
 * kernel has it, and does not load it otherwise.
 */
SEC("uprobe")
int BPF_KPROBE(call_enter)
{
	return enter(ctx);
}

SEC("uretprobe")
int BPF_KRETPROBE(call_exit)
{
	return exit(ctx);
}

/*
 * A file's last probe (struct api_lib's probed_last, bpf/gpu_rec.h): it
 * records nothing; its int3 tells the process the file's other probes are
 * live.
 */
SEC("uprobe")
int BPF_KPROBE(probes_live)
{
	return 0;
}

SEC("uprobe")
int BPF_KPROBE(call_enter_multi)
{
	return enter(ctx);
}

SEC("uretprobe")
int BPF_KRETPROBE(call_exit_multi)
{
	return exit(ctx);
}

/*
 * Capture windows (bpf/capture.bpf.h): the functions that wait for the
 * gate (no CK_PASS, no trigger) are attached to programs of their own,
 * loaded only when records are gated. They test the gate before anything
 * else, so that outside a window a call costs the trap pair and a load of
 * the gate word: no helper call, no target lookup, no cookie.
 */
static __always_inline int enter_gated(struct pt_regs *ctx)
{
	if (!gate_open()) {
		/* A slot (time 0: no backtrace) for the return to pop. */
		if (NEED_CALL_TS && is_target(bpf_get_current_pid_tgid() >> 32))
			bt_enter(thread_calls_get(BPF_LOCAL_STORAGE_GET_F_CREATE), 0, 0, 0,
				 CK_LIB(bpf_get_attach_cookie(ctx)), 0);
		return 0;
	}
	return enter(ctx);
}

static __always_inline int exit_gated(struct pt_regs *ctx)
{
	if (!gate_open()) {
		if (NEED_CALL_TS && is_target(bpf_get_current_pid_tgid() >> 32))
			bt_pop();
		return 0;
	}
	return exit(ctx);
}

SEC("uprobe")
int BPF_KPROBE(call_enter_gated)
{
	return enter_gated(ctx);
}

SEC("uretprobe")
int BPF_KRETPROBE(call_exit_gated)
{
	return exit_gated(ctx);
}

SEC("uprobe")
int BPF_KPROBE(call_enter_gated_multi)
{
	return enter_gated(ctx);
}

SEC("uretprobe")
int BPF_KRETPROBE(call_exit_gated_multi)
{
	return exit_gated(ctx);
}
