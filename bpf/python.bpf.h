/* SPDX-License-Identifier: MIT */
/*
 * Python frames (issue 12): the current thread's CPython frames, read from
 * the interpreter's own structures with the per-version offsets user space
 * put in py_procs (bpf/py_rec.h), sent as a REC_PY_FRAMES record right
 * before the record they belong to (bpf/pyframes_rec.h). Included by
 * calls.bpf.c (API calls, slow-call backtraces) and stacks.bpf.c (CPU
 * samples); the maps are __weak, linked into one copy.
 *
 * Fail closed: a process without a py_procs entry gets nothing; any read
 * that fails drops the whole record and counts why (py_stat). User space
 * checks every code address it gets (its ob_type must be PyCode_Type)
 * before it believes a frame.
 */
#ifndef CGBPF_PYTHON_BPF_H
#define CGBPF_PYTHON_BPF_H

#include "common.bpf.h"
#include "stacks.bpf.h"
#include "py_rec.h"
#include "pyframes_rec.h"

/* --python: enum py_mode. Off, the verifier removes every reader. */
const volatile __u8 py_mode __weak = PY_MODE_OFF;

/* tgid -> its interpreter, filled by user space (user/pysrc.c). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, struct py_proc);
} py_procs SEC(".maps") __weak;

/*
 * pid_tgid -> the thread's PyThreadState, found by walking the
 * interpreters' thread lists for the one whose thread_id is the thread's
 * pthread_self() (its fs base on x86-64). Checked again on every use (the
 * cached state's thread_id must still be the fs base: a thread state is
 * freed when its thread ends and its memory reused). A thread that has
 * none (a C++ worker thread of a Python process) is remembered as such
 * for PY_MISS_NS, so that its calls do not walk the list every time.
 */
struct py_tcache {
	__u64 tstate;		/* 0: none found at miss_ts */
	__u64 miss_ts;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u64);
	__type(value, struct py_tcache);
} py_tstate SEC(".maps") __weak;

#define PY_MISS_NS	(100ull * 1000 * 1000)
#define PY_INTERP_MAX	4	/* interpreters walked (subinterpreters) */
#define PY_THREADS_MAX	256	/* thread states walked per interpreter */
#define PY_SHIMS_MAX	32	/* 3.12+ C-stack shim frames skipped per walk */

/*
 * --python leaf: code objects user space found to be the user's own code
 * (user/pycode.c's rule), per process. The leaf walk stops at the first
 * such frame; until user space has seen a code object, walks go up to
 * PY_LEAF_MAX frames and user space picks the user frame itself. An entry
 * made stale by a freed code object whose address was reused only makes
 * a walk stop early; user space then deletes it.
 */
struct py_user_key {
	__u32 tgid;
	__u32 pad;
	__u64 code;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, struct py_user_key);
	__type(value, __u8);
} py_user SEC(".maps") __weak;

/* Counts per enum py_stat, per CPU. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, PYS__COUNT);
	__type(key, __u32);
	__type(value, __u64);
} py_stat SEC(".maps") __weak;

#define PY_BUF 256	/* bytes of a frame (or thread state window) read at once */

/* Slot 0: uprobes (calls, backtraces), with the lock word; slot 1: the
 * sampler, which runs in NMI context and never nests with itself, but
 * may interrupt a uprobe holding slot 0. */
struct py_scratch_v {
	__u64 busy;		/* scratch_take() */
	__u8 buf[PY_BUF + 16];
	struct rec_py_frames r;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, struct py_scratch_v);
} py_scratch SEC(".maps") __weak;

static __always_inline void py_count(__u32 what)
{
	__u64 *n = bpf_map_lookup_elem(&py_stat, &what);

	if (n)
		__sync_fetch_and_add(n, 1);
}

static __always_inline __u64 py_buf64(const __u8 *buf, __u32 off)
{
	return *(const __u64 *)(buf + (off & (PY_BUF - 1)));
}

static __always_inline __u32 py_buf32(const __u8 *buf, __u32 off)
{
	return *(const __u32 *)(buf + (off & (PY_BUF - 1)));
}

static __always_inline __u8 py_buf8(const __u8 *buf, __u32 off)
{
	return buf[off & (PY_BUF - 1)];
}

static __always_inline int py_read64(__u64 *v, __u64 addr)
{
	return bpf_probe_read_user(v, sizeof(*v), (const void *)addr);
}

/* The thread state whose thread_id is fsbase, walking every interpreter's
 * list; 0 with *stat set when there is none or a read failed. */
static __always_inline __u64 py_tstate_walk(const struct py_offsets *o, __u64 runtime,
					    __u64 fsbase, __u32 *stat)
{
	__u64 interp = 0, ts, id;

	py_count(PYS_TSTATE_WALKS);
	*stat = PYS_READ_TSTATE;
	if (py_read64(&interp, runtime + o->runtime_interp_head))
		return 0;
	for (int i = 0; i < PY_INTERP_MAX && interp; i++) {
		ts = 0;
		if (py_read64(&ts, interp + o->interp_threads_head))
			return 0;
		for (int j = 0; j < PY_THREADS_MAX && ts; j++) {
			if (py_read64(&id, ts + o->ts_thread_id))
				return 0;
			if (id == fsbase) {
				*stat = PYS_FRAMES;
				return ts;
			}
			if (py_read64(&ts, ts + o->ts_next))
				return 0;
		}
		if (py_read64(&interp, interp + o->interp_next))
			return 0;
	}
	*stat = PYS_NO_TSTATE;
	return 0;
}

/* The current thread's thread state, from the cache when still valid. */
static __always_inline __u64 py_tstate_of(const struct py_proc *pp, __u64 pid_tgid, __u32 *stat)
{
	const struct py_offsets *o = &pp->off;
	struct task_struct *task = bpf_get_current_task_btf();
	__u64 fsbase = task->thread.fsbase, id = 0, ts, now;
	struct py_tcache *c = bpf_map_lookup_elem(&py_tstate, &pid_tgid), nc = {};

	if (c) {
		if (c->tstate) {
			if (!py_read64(&id, c->tstate + o->ts_thread_id) && id == fsbase) {
				*stat = PYS_FRAMES;
				return c->tstate;
			}
		} else {
			now = bpf_ktime_get_boot_ns();
			if (now - c->miss_ts < PY_MISS_NS) {
				*stat = PYS_NO_TSTATE;
				return 0;
			}
		}
	}
	ts = py_tstate_walk(o, pp->runtime, fsbase, stat);
	nc.tstate = ts;
	if (!ts)
		nc.miss_ts = bpf_ktime_get_boot_ns();
	/* A failed read is not remembered as "no Python here". */
	if (ts || *stat == PYS_NO_TSTATE)
		bpf_map_update_elem(&py_tstate, &pid_tgid, &nc, BPF_ANY);
	return ts;
}

/* What py_emit() sends and how far it walks, in one word (a BPF
 * function takes five arguments at most). */
#define PY_SPEC(what, lib, func, max, leaf) \
	((__u64)(what) | (__u64)(lib) << 8 | (__u64)(func) << 16 | (__u64)(max) << 32 | \
	 ((leaf) ? 1ull << 48 : 0))

/*
 * Sends the current thread's Python frames, innermost first, as a
 * REC_PY_FRAMES record before the record it belongs to: slot 0 (uprobes:
 * calls, backtraces) to the events ring, slot 1 (the sampler) to the
 * samples ring. spec (PY_SPEC): whose record it is (what, lib, func), at
 * most max frames, and with leaf, stop at the first frame user space
 * marked as user code. Nothing is sent for a process without a py_procs
 * entry, a thread without Python frames, or on any failed read. Not
 * inlined: it has a BPF stack frame of its own.
 */
static __noinline void py_emit(__u32 slot, __u64 pid_tgid, __u64 spec)
{
	__u32 tgid = pid_tgid >> 32, stat = PYS_FRAMES, fr, n = 0;
	struct py_proc *pp = bpf_map_lookup_elem(&py_procs, &tgid);
	struct py_scratch_v *v;
	struct rec_py_frames *r;
	const struct py_offsets *o;
	__u64 ts, frame = 0, size;
	__u32 max = (__u32)(spec >> 32) & 0xffff;
	bool stop = false, leaf = (spec >> 48) & 1;

	if (!pp)
		return;
	slot = slot ? 1 : 0;
	v = bpf_map_lookup_elem(&py_scratch, &slot);
	if (!v)
		return;
	if (slot == 0 && !scratch_take(&v->busy)) {
		py_count(PYS_BUSY);
		return;
	}
	o = &pp->off;
	r = &v->r;
	ts = py_tstate_of(pp, pid_tgid, &stat);
	if (!ts)
		goto out;
	stat = PYS_READ_TSTATE;
	if (o->frame_kind == PY_FRAME_CFRAME) {
		__u64 cf = 0;

		if (py_read64(&cf, ts + o->ts_cframe) || !cf ||
		    py_read64(&frame, cf + o->cframe_current_frame))
			goto out;
	} else if (py_read64(&frame, ts + o->ts_frame)) {
		goto out;
	}
	stat = PYS_NO_FRAME;
	if (!frame)
		goto out;
	fr = o->frame_read;
	stat = PYS_READ_FRAME;
	if (!fr || fr > PY_BUF)
		goto out;
	for (int i = 0; i < PY_FRAMES_MAX + PY_SHIMS_MAX && frame && !stop; i++) {
		struct py_frame *f;
		__u64 code, back;

		if (n >= max || n >= PY_FRAMES_MAX)
			break;
		if (bpf_probe_read_user(v->buf, fr, (const void *)frame))
			goto out;
		code = py_buf64(v->buf, o->frame_code);
		back = py_buf64(v->buf, o->frame_back);
		/* 3.12+: a frame owned by the C stack is the shim an eval loop
		 * pushes under the frames it runs: not Python code; the frame
		 * above it is that eval loop's entry frame. */
		if (o->owner_kind == 2 && py_buf8(v->buf, o->frame_owner) == 3) {
			if (n > 0)
				r->frames[(n - 1) & (PY_FRAMES_MAX - 1)].flags |= PYF_ENTRY;
			frame = back;
			continue;
		}
		f = &r->frames[n & (PY_FRAMES_MAX - 1)];
		f->code = code;
		f->flags = 0;
		if (o->lasti_kind == PY_LASTI_BYTES || o->lasti_kind == PY_LASTI_UNITS)
			f->lasti = (__s32)py_buf32(v->buf, o->frame_lasti);
		else
			f->lasti = (__s32)(py_buf64(v->buf, o->frame_lasti) -
					   (code + o->code_adaptive));
		if (o->owner_kind == 0 || (o->owner_kind == 1 && py_buf8(v->buf, o->frame_owner)))
			f->flags = PYF_ENTRY;
		n++;
		if (leaf) {
			struct py_user_key k = { .tgid = tgid, .code = code };

			stop = bpf_map_lookup_elem(&py_user, &k) != NULL;
		}
		frame = back;
	}
	stat = PYS_NO_FRAME;
	if (!n)
		goto out;
	if (!frame)
		r->frames[(n - 1) & (PY_FRAMES_MAX - 1)].flags |= PYF_ENTRY;
	r->truncated = frame && !stop;
	if (r->truncated)
		py_count(PYS_TRUNCATED);
	r->nframes = n;
	r->what = spec & 0xff;
	r->lib = (spec >> 8) & 0xff;
	r->func = (spec >> 16) & 0xffff;
	r->mode = leaf ? PY_MODE_LEAF : PY_MODE_STACK;
	size = offsetof(struct rec_py_frames, frames) + (__u64)n * sizeof(struct py_frame);
	if (size > sizeof(*r))
		size = sizeof(*r);
	fill_hdr(&r->hdr, REC_PY_FRAMES, size, pid_tgid);
	stat = PYS_FRAMES;
	if (slot ? bpf_ringbuf_output(&samples, r, size, BPF_RB_NO_WAKEUP) :
		   bpf_ringbuf_output(&events, r, size, wake_flag())) {
		count_drop(REC_PY_FRAMES);
		stat = PYS_RING_FULL;
	}
out:
	py_count(stat);
	if (slot == 0)
		scratch_give(&v->busy);
}

#endif
