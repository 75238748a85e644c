/* SPDX-License-Identifier: MIT */
/*
 * Python frames (issue 12): the current thread's CPython frames, read from
 * the interpreter's own structures with the per-version offsets user space
 * put in py_procs (bpf/py_rec.h), sent as a REC_PY_FRAMES record right
 * before the record they belong to (bpf/pyframes_rec.h), or, for a
 * --python leaf call from known user code, in the call's own record
 * (py_leaf(), struct rec_call_enter_py). Included by
 * calls.bpf.c (API calls, slow-call backtraces) and stacks.bpf.c (CPU
 * samples); the maps are __weak, linked into one copy. The maps the code
 * describer (bpf/pycode.bpf.c) shares are in bpf/pymaps.bpf.h.
 *
 * Fail closed: a process without a py_procs entry gets nothing; any read
 * that fails drops the whole record and counts why (py_stat). User space
 * checks every code address it gets (its ob_type must be PyCode_Type)
 * before it believes a frame.
 */
#ifndef CGBPF_PYTHON_BPF_H
#define CGBPF_PYTHON_BPF_H

#include "common.bpf.h"
#include "py_rec.h"
#include "pyframes_rec.h"
#include "pymaps.bpf.h"

/* --python: enum py_mode. Off, the verifier removes every reader. */
const volatile __u8 py_mode __weak = PY_MODE_OFF;

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

#define PY_MISS_NS	(20ull * 1000 * 1000)
#define PY_INTERP_MAX	4	/* interpreters walked (subinterpreters) */
#define PY_THREADS_MAX	256	/* thread states walked per interpreter */
#define PY_SHIMS_MAX	32	/* 3.12+ C-stack shim frames skipped per walk */

/*
 * py_leaf()'s per-thread cache, kept by the caller in its own task
 * storage (bpf/calls.bpf.c: one lookup per call serves the call stack and
 * this): the thread state py_tstate gave (checked again on every use, as
 * py_tstate's), a copy of the process's py_procs offsets, and the last
 * leaf code object found PY_CODE_USER in py_codes; all valid while
 * py_codes_gen is gen (user space bumps it when it changes py_procs or a
 * class in py_codes), so that a repeated call site needs neither the
 * py_procs nor the py_codes lookup. tstate is emptied when it fails its
 * check. nopy: at gen, the process had no py_procs entry (no interpreter
 * found, or not yet): its calls stop at the cache, with no map lookup and
 * no read of user memory.
 */
struct py_leaf_tc {
	__u64 tstate;
	__u64 code;
	__u64 gen;
	__u32 tgid;		/* whose offsets (a thread that exec'd keeps its storage) */
	__u8 nopy;
	__u8 pad[3];
	struct py_offsets off;
};

/*
 * The generation the leaf caches are valid for, the sum of two counts that
 * only go up (slots: bpf/pyframes_rec.h): PY_GEN_FREES, bumped atomically by BPF when a process
 * frees a code object (py_code_free), and slot PY_GEN_USER, written only
 * by user space (one thread) when it changes the class of a code object in
 * py_codes or a process's py_procs entry. One shared word would not do:
 * user space's read-add-write could write back a value from before two
 * frees, and a cache filled between them (a freed address as its last
 * user code) would look valid again.
 */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, __u64);
} py_codes_gen SEC(".maps") __weak;

#define PY_BUF 256	/* bytes of a frame (or thread state window) read at once */

/* Slot 0: uprobes (calls, backtraces), with the lock word; slot 1: the
 * sampler, which runs in NMI context and never nests with itself, but
 * may interrupt a uprobe holding slot 0. */
struct py_scratch_v {
	__u64 busy;		/* scratch_take() */
	__u64 next;		/* the frame py_frame_one() reads next */
	__u32 n;		/* frames in r so far */
	__u16 stop;		/* the walk stopped at a user frame (leaf) */
	__u16 unknown;		/* a frame's code object is not in py_codes */
	struct py_offsets off;	/* the process's, copied once per walk */
	__u8 buf[PY_BUF + 16];
	struct rec_py_frames r;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, struct py_scratch_v);
} py_scratch SEC(".maps") __weak;

/* What py_emit() sends and how far it walks, in one word. */
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
 * entry, a thread without Python frames, or on any failed read.
 *
 * Defined in bpf/python.bpf.c as a global BPF function: the verifier
 * checks it once, on its own, not once per path of every caller.
 */
extern int py_emit(__u32 slot, __u64 pid_tgid, __u64 spec);

#define PY_LEAF_BUF 256	/* py_leaf()'s buffer: a thread-state window, then a frame */

/* The u64 at off of a py_leaf() buffer; off is 8-aligned (pointer fields),
 * which the mask tells the verifier (stack loads must be aligned). */
static __always_inline __u64 leaf64(const __u8 *buf, __u32 off)
{
	return *(const __u64 *)(buf + (off & (PY_LEAF_BUF - 8)));
}

/*
 * --python leaf for a call's entry probe (bpf/python.bpf.h): the common
 * case in one pass, with no scratch, no lock word and no record of its
 * own. It takes the thread's cached thread state and offsets (*c, the
 * caller's task storage, filled from py_tstate and py_procs while
 * py_codes_gen stays the same;
 * the thread state is checked again: its thread_id must be the fs base),
 * so a steady call site looks up no hash map at all. It reads
 * the thread-state fields it needs in one read, the innermost frame in a
 * second (a third for 3.11/3.12's cframe), and when that frame's code
 * object is marked PY_CODE_USER in py_codes (or is the thread's last
 * such one, py_codes_gen unchanged),
 * the frame is the whole answer: it goes into *out (the call record
 * carries it: struct rec_call_enter_py) and 1 comes back. Anything else
 * (no cached state, a shim frame, a code object that is not known user
 * code, a failed read) leaves the call to py_emit(), which
 * does the full walk and counts whatever fails: -1 (walk). 0: a process
 * without a py_procs entry, nothing to do (said by the cache once known).
 */
static __always_inline int py_leaf(__u64 pid_tgid, struct py_leaf_tc *c, struct py_rec_frame *out)
{
	__u32 tgid = pid_tgid >> 32;
	struct task_struct *task = bpf_get_current_task_btf();
	struct py_code_key k = { .tgid = tgid };
	__u64 frame, code, back, gen = 0, *g;
	__u32 o_id, o_fr, lo, len, fr, zero = PY_GEN_FREES, one = PY_GEN_USER;
	const struct py_offsets *o;
	struct py_tcache *lc;
	struct py_proc *pp;
	__u8 buf[PY_LEAF_BUF] __attribute__((aligned(8)));
	__u8 *cls, ok, lk;

	if (!out || !c)
		return 0;
	/* Array lookups: inlined by the verifier, no helper call. */
	g = bpf_map_lookup_elem(&py_codes_gen, &zero);
	if (g)
		gen = *(volatile __u64 *)g;
	g = bpf_map_lookup_elem(&py_codes_gen, &one);
	if (g)
		gen += *(volatile __u64 *)g;
	if (c->gen != gen || c->tgid != tgid || (!c->tstate && !c->nopy)) {
		/* The offsets, the thread state and the code again. */
		c->gen = gen;
		c->tgid = tgid;
		c->tstate = 0;
		c->code = 0;
		pp = bpf_map_lookup_elem(&py_procs, &tgid);
		c->nopy = !pp;
		if (!pp)
			return 0;
		/* What the last walk found, if it did. */
		lc = bpf_map_lookup_elem(&py_tstate, &pid_tgid);
		if (!lc || !lc->tstate)
			return -1;
		c->tstate = lc->tstate;
		c->off = pp->off;
	}
	if (c->nopy)
		return 0;
	py_count_read();
	o = &c->off;
	/* thread_id and the frame (or cframe) pointer: one window. */
	o_id = o->ts_thread_id;
	o_fr = o->frame_kind == PY_FRAME_CFRAME ? o->ts_cframe : o->ts_frame;
	lo = o_id < o_fr ? o_id : o_fr;
	len = (o_id < o_fr ? o_fr : o_id) + 8 - lo;
	if (len > PY_LEAF_BUF)
		return -1;
	if (bpf_probe_read_user(buf, len, (const void *)(c->tstate + lo)))
		return -1;
	if (leaf64(buf, o_id - lo) != task->thread.fsbase) {
		c->tstate = 0;
		return -1;
	}
	frame = leaf64(buf, o_fr - lo);
	if (o->frame_kind == PY_FRAME_CFRAME && frame &&
	    bpf_probe_read_user(&frame, sizeof(frame),
				(const void *)(frame + o->cframe_current_frame)))
		return -1;
	fr = o->frame_read;
	if (!frame || !fr || fr > PY_LEAF_BUF - 8)
		return -1;
	if (bpf_probe_read_user(buf, fr, (const void *)frame))
		return -1;
	ok = o->owner_kind;
	/* A 3.12+ C-stack shim: the walk skips it. */
	if (ok == 2 && buf[o->frame_owner & (PY_LEAF_BUF - 1)] == 3)
		return -1;
	code = leaf64(buf, o->frame_code);
	if (code != c->code) {
		k.code = code;
		cls = bpf_map_lookup_elem(&py_codes, &k);
		if (!cls || *cls != PY_CODE_USER)
			return -1;
		c->code = code;
	}
	back = leaf64(buf, o->frame_back);
	lk = o->lasti_kind;
	out->code = code;
	if (lk == PY_LASTI_BYTES || lk == PY_LASTI_UNITS)
		out->lasti = *(const __s32 *)(buf + (o->frame_lasti & (PY_LEAF_BUF - 4)));
	else
		out->lasti = (__s32)(leaf64(buf, o->frame_lasti) -
				     (code + o->code_adaptive));
	out->flags = !back || ok == 0 ||
		     (ok == 1 && buf[o->frame_owner & (PY_LEAF_BUF - 1)]) ? PYF_ENTRY : 0;
	return 1;
}

#endif
