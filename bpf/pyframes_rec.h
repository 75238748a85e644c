/* SPDX-License-Identifier: MIT */
/*
 * REC_PY_FRAMES (issue 12): the Python frames of the thread that made a
 * traced call, hit a slow call's return or was sampled, read by
 * bpf/python.bpf.h from the interpreter's own structures with the offsets
 * of bpf/py_rec.h.
 *
 * Sent right BEFORE the record it belongs to, on the same thread and in
 * the same ring: the REC_CALL_ENTER of the call (so the call's begin event
 * carries its call site and nothing waits), the REC_STACK_BT of a slow
 * call, the REC_STACK_SAMPLE of a CPU sample (samples ring). what, lib and
 * func say which; a record whose owner never came (the ring was full) is
 * dropped by user space when the next record of the thread is not it.
 *
 * With --python leaf, a call whose innermost frame is known user code
 * carries that frame in its REC_CALL_ENTER instead (struct
 * rec_call_enter_py, below).
 *
 * A frame is the code object's address and where the frame is in it; user
 * space (user/sources/python/pycode.c) turns that into file, function and line and
 * checks that the address is a code object. Innermost frame first.
 */
#ifndef CGBPF_PYFRAMES_REC_H
#define CGBPF_PYFRAMES_REC_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif
#include "events.h"

#define PY_FRAMES_MAX 128	/* --python stack, backtraces and samples */
#define PY_LEAF_MAX 16		/* --python leaf: frames walked to find the user's */

/* --python */
enum py_mode {
	PY_MODE_OFF = 0,
	PY_MODE_LEAF,		/* calls: the leaf frame up to the innermost user frame */
	PY_MODE_STACK,		/* calls: the whole stack (up to PY_FRAMES_MAX) */
};

/* Values of the py_codes map (bpf/pymaps.bpf.h): what user space found a
 * code object to be. */
#define PY_CODE_USER	1	/* the user's own code: a leaf walk stops there */
#define PY_CODE_OTHER	2	/* stdlib, site-packages, frozen */
#define PY_CODE_SENT	3	/* BPF sent its REC_PY_CODE (bpf/pycode.bpf.c); user space has
				 * not classified it yet: a leaf walk goes on as for no entry */
/* 4 was PY_CODE_FREED: a free now deletes the entry (py_code_free). */

/* py_codes_gen's slots (bpf/python.bpf.h): frees counted by BPF, changes
 * made by user space. */
#define PY_GEN_FREES	0
#define PY_GEN_USER	1

/* rec_py_frames.what */
enum py_for {
	PYR_CALL = 0,		/* the REC_CALL_ENTER that follows */
	PYR_BT,			/* the REC_STACK_BT that follows */
	PYR_SAMPLE,		/* the REC_STACK_SAMPLE that follows (samples ring) */
	PYR_SITE,		/* the REC_PY_SITE that follows (monitor --python-sites) */
};

/* py_frame.flags */
#define PYF_ENTRY	0x01	/* the outermost frame one _PyEval_EvalFrameDefault runs:
				 * every frame before 3.11; 3.11 is_entry; 3.12+
				 * the frame under a C-stack shim, and the outermost */

/*
 * lasti per py_offsets.lasti_kind: PY_LASTI_BYTES and PY_LASTI_UNITS as
 * the frame holds it; PY_LASTI_PREV_INSTR and PY_LASTI_INSTR_PTR as the
 * pointer's byte offset from the code object's co_code_adaptive (code +
 * code_adaptive), which may be -2 for a frame that has not started.
 */
struct py_rec_frame {
	__u64 code;
	__s32 lasti;
	__u32 flags;		/* PYF_* */
};

/*
 * Why a thread's frames were not read (BPF map py_stat, per CPU, user
 * space sums them for the summary). PYS_NO_TSTATE and PYS_NO_FRAME are
 * normal (a thread that never ran Python, an idle Python thread); the
 * others are failures: the record is not sent (fail closed).
 */
enum py_stat {
	PYS_FRAMES = 0,		/* REC_PY_FRAMES records sent (leaves carried by their
				 * call record, struct rec_call_enter_py, not counted) */
	PYS_NO_TSTATE,		/* no thread state for this thread (not a Python thread) */
	PYS_NO_FRAME,		/* a thread state without a current frame */
	PYS_READ_TSTATE,	/* a read in the thread state list failed */
	PYS_READ_FRAME,		/* a frame could not be read */
	PYS_BUSY,		/* the per-CPU scratch was in use (preempted program) */
	PYS_RING_FULL,		/* the ring had no room */
	PYS_TRUNCATED,		/* more frames than the walk may read: the outer ones cut */
	PYS_TSTATE_WALKS,	/* thread-state list walks (cache misses) */
	PYS_CODES,		/* REC_PY_CODE records sent (bpf/pycode.bpf.c) */
	PYS_CODE_FAIL,		/* a code object not described: unreadable, not a code
				 * object, scratch busy or ring full (user space reads it) */
	PYS_CODE_FREED,		/* code objects the process freed (py_code_free) */
	PYS_READERS,		/* frame readers that went on to read user memory
				 * (py_leaf, py_tstate_find): 0 without an interpreter */
	PYS__COUNT,
};

struct rec_py_frames {
	struct rec_hdr hdr;
	__u16 nframes;
	__u8 what;		/* enum py_for */
	__u8 lib;		/* PYR_CALL, PYR_BT: the call's library and function */
	__u16 func;
	__u8 truncated;		/* the walk stopped before the outermost frame (stack walks) */
	__u8 mode;		/* enum py_mode of the walk: PY_MODE_LEAF may stop at a user frame */
	struct py_rec_frame frames[PY_FRAMES_MAX];	/* only nframes are sent */
};

/*
 * REC_CALL_ENTER with --python leaf when the call's innermost frame is a
 * code object user space marked as user code (py_codes): the common case
 * needs that one frame only, so it rides in the call record's tail (hdr.size
 * says so) instead of a REC_PY_FRAMES of its own: one ring record per
 * call, not two. User space (user/sources/python/pysrc.c) turns it back into the
 * REC_PY_FRAMES record (one frame, PYR_CALL, PY_MODE_LEAF, not truncated)
 * that would have come before the call.
 */
struct rec_call_enter_py {
	struct rec_call_enter call;
	struct py_rec_frame py;
};

#endif
