/* SPDX-License-Identifier: MIT */
/*
 * What a test binary of tests/stacks sends its parent from level_c: the
 * registers at one instruction and a copy of its stack from there up to the
 * top of the stack mapping, the way the profiler's BPF side copies a slice
 * of a sampled thread's stack.
 */
#ifndef CGBPF_STACKS_CAPTURE_H
#define CGBPF_STACKS_CAPTURE_H

#include <stdint.h>

#define CAPTURE_MAGIC 0x63677374u	/* "cgst" */

struct capture_hdr {
	uint32_t magic;
	uint32_t pid;
	uint64_t ip, sp, bp;
	uint64_t len;		/* bytes of stack that follow */
};

#endif
