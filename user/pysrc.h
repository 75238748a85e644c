/* SPDX-License-Identifier: MIT */
/*
 * The Python source (user/pysrc.c) as the stacks source sees it: the
 * resolved Python frames sent right before a backtrace or a CPU sample,
 * for mixed stacks.
 */
#ifndef CGBPF_PYSRC_H
#define CGBPF_PYSRC_H

#include <stdbool.h>
#include <stdint.h>

struct pysrc;

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

#endif
