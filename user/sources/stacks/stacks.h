/* SPDX-License-Identifier: MIT */
/*
 * CPU stacks: the per-CPU sampling perf events, and the decoding of stack
 * records (samples and backtraces of slow calls) into symbolized stacks
 * for the model. Frames are unwound and symbolized as records arrive, so a
 * process that exits or unmaps a file later still has its names.
 */
#ifndef CGBPF_STACKS_H
#define CGBPF_STACKS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "stack_rec.h"
#include "core/model.h"

struct bpf_program;
struct stacks;

/* What the decoder saw, for the summary. */
struct stacks_stats {
	uint64_t samples, backtraces;
	uint64_t truncated;		/* stacks whose unwind stopped early */
	uint64_t dwarf;			/* user stacks unwound from the stack copy */
	uint64_t frames, unsymbolized;	/* user + kernel frames, and those without a name */
	uint64_t python_frames;		/* Python frames mixed in (sources/python) */
	int cpus;			/* perf events opened for sampling */
	uint32_t hz;
};

/* A decoder feeding m; NULL with errno set. */
struct stacks *stacks__new(struct model *m);
/* Closes the perf events and frees; accepts NULL. */
/* Reads the kernel's symbols on a thread of their own now (samples will
 * need them; symbolizer__kernel_prefetch). */
void stacks__prefetch_kernel(struct stacks *s);
void stacks__free(struct stacks *s);
/* Opens a CPU-clock perf event per online CPU at hz and attaches prog to
 * each. 0 or -errno (with a message printed). */
int stacks__start_sampling(struct stacks *s, struct bpf_program *prog, uint32_t hz);
/* Decodes a REC_STACK_SAMPLE / REC_STACK_BT record of size bytes (header
 * already checked); 0, or -EINVAL for a malformed one. */
int stacks__record(struct stacks *s, const struct rec_stack *r, size_t size);
/* The process exec'ed or mapped files (its maps are read again now) /
 * made an API call (its maps are read if they never were) / exited. */
void stacks__proc_changed(struct stacks *s, uint32_t pid);
void stacks__proc_seen(struct stacks *s, uint32_t pid);
/* Every ring was drained: exits seen before are passed to the symbolizer. */
void stacks__drained(struct stacks *s);
void stacks__proc_exit(struct stacks *s, uint32_t pid);
const struct stacks_stats *stacks__stats(const struct stacks *s);
/* The capture's symbolizer (shared with the kernel-name lookups of
 * user/sources/cuda/cudart.c). */
struct symbolizer *stacks__symbolizer(struct stacks *s);
/* Prints the "CPU samples" summary section (top functions by self
 * samples); backtrace_ns is the threshold, UINT64_MAX when off. Call once,
 * after the last record. */
void stacks__summary(struct stacks *s, uint64_t backtrace_ns, FILE *f);


#endif
