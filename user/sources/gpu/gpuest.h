/* SPDX-License-Identifier: MIT */
/*
 * GPU activity estimated from API calls (user/sources/gpu/gpuest.c), for
 * processes whose GPU activity is not measured.
 */
#ifndef CGBPF_GPUEST_H
#define CGBPF_GPUEST_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include "sources/gpu/gpuproc.h"

/* A call ended (outermost CUDA calls only). */
void gpuest__call(struct gpu *g, struct gpu_proc *p, struct thread *t, const struct call *c);
/* Collection started (what is open is dropped: measured data takes over)
 * or the process ended (open spans end at their last evidence). */
void gpuest__stop(struct gpu *g, struct gpu_proc *p, bool write_open);
void gpuest__free(struct gpu_proc *p);
/* Summary lines of the estimated processes. */
/* The spans estimated for process p (0: none). */
struct gpu_proc;
uint64_t gpuest__spans(const struct gpu_proc *p);
/* only: the pids to print (a set), or NULL for every process. */
struct hmap;
void gpuest__print(const struct gpu *g, const struct hmap *only, FILE *f);
/* cgbpf stats: an estimated span read back (stream: its track). */
void gpuest__replay_span(struct gpu_proc *p, uint64_t stream, uint64_t ns, uint64_t launches);

#endif
