/* SPDX-License-Identifier: MIT */
/*
 * The Python source (user/sources/python/pysrc.c) as the stacks source sees it: the
 * resolved Python frames sent right before a backtrace or a CPU sample,
 * for mixed stacks.
 */
#ifndef CGBPF_PYSRC_H
#define CGBPF_PYSRC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct pysrc;
struct rec_call_enter;
struct rec_py_frames;

/* A resolved Python frame: "function (file:line)", living as long as the
 * capture; entry: the outermost frame of one run of the eval loop
 * (_PyEval_EvalFrameDefault), where it joins the native stack. */
struct pysrc_frame {
	const char *name;
	bool entry;
};

/* The Python frames of tid's stack record being decoded now (a sample, or
 * the backtrace of call lib/func), innermost first, taken once: their
 * count (0: none) and *frames. ps may be NULL (--python off). */
int pysrc__take_stack(struct pysrc *ps, uint32_t tid, bool sample, uint8_t lib, uint16_t func,
		      const struct pysrc_frame **frames);

/*
 * A REC_CALL_ENTER that carries its leaf frame (struct rec_call_enter_py,
 * --python leaf; size bytes at data, checked by ingest__check): the
 * REC_PY_FRAMES record it stands for (that one frame, as if sent before
 * the call) into *fr and the plain call record into *call. Returns fr's
 * size, 0 (nothing written) for any other record.
 */
size_t pysrc__split_call(const void *data, size_t size, struct rec_py_frames *fr,
			 struct rec_call_enter *call);

#endif
