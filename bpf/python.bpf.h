/* SPDX-License-Identifier: MIT */
/*
 * Python frames (issue 12): the current thread's CPython frames, read from
 * the interpreter's own structures with the per-version offsets user space
 * put in py_procs (bpf/py_rec.h), sent as a REC_PY_FRAMES record right
 * before the record they belong to (bpf/pyframes_rec.h), or, for a
 * --python leaf call from known user code, in the call's own record
 * (py_leaf(), struct rec_call_enter_py). Included by
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

#define PY_MISS_NS	(20ull * 1000 * 1000)
#define PY_INTERP_MAX	4	/* interpreters walked (subinterpreters) */
#define PY_THREADS_MAX	256	/* thread states walked per interpreter */
#define PY_SHIMS_MAX	32	/* 3.12+ C-stack shim frames skipped per walk */

/*
 * Code objects user space has resolved, per process: PY_CODE_USER for the
 * user's own code (user/pycode.c's rule), PY_CODE_OTHER for the rest. The
 * leaf walk stops at the first PY_CODE_USER frame; until user space has
 * seen a code object, walks go up to PY_LEAF_MAX frames and user space
 * picks the user frame itself. A record with a code object user space has
 * not seen wakes it up at once, so that it reads the object while the
 * process still lives (a program that exits within the consumer's 50 ms
 * poll would otherwise take its code objects with it). An entry made
 * stale by a freed code object whose address was reused only makes a walk
 * stop early or late; user space corrects it when it resolves the frame.
 */
struct py_code_key {
	__u32 tgid;
	__u32 pad;
	__u64 code;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, struct py_code_key);
	__type(value, __u8);
} py_codes SEC(".maps") __weak;

/*
 * py_leaf()'s per-thread cache (task storage: cheaper than a hash lookup
 * per call): the thread state py_tstate gave (checked again on every use,
 * as py_tstate's), and the last leaf code object found PY_CODE_USER in
 * py_codes while py_codes_gen was gen (a repeated call site skips the
 * py_codes lookup). Emptied when the thread state fails its check.
 */
struct py_leaf_tc {
	__u64 tstate;
	__u64 code;
	__u64 gen;
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct py_leaf_tc);
} py_leafc SEC(".maps") __weak;

/* Bumped by user space whenever it changes the class of a code object in
 * py_codes (an address freed and reused): py_leafc's code goes stale. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} py_codes_gen SEC(".maps") __weak;

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

static __always_inline void py_count(__u32 what)
{
	__u64 *n = bpf_map_lookup_elem(&py_stat, &what);

	if (n)
		__sync_fetch_and_add(n, 1);
}

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

/*
 * --python leaf at a call's entry, the fast path: 1 with *out the call's
 * innermost frame when it is known user code (the whole answer: the call
 * record carries it, struct rec_call_enter_py); -1 when the caller must
 * call py_emit() (the full walk, its own record); 0 for a process without
 * Python (nothing to send). Reads no scratch, sends nothing, counts
 * nothing: whatever it cannot vouch for goes to py_emit(), which counts.
 */
extern int py_leaf(__u64 pid_tgid, struct py_rec_frame *out);

#endif
