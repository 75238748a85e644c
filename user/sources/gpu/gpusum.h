/* SPDX-License-Identifier: MIT */
/*
 * GPU activity in the summary (user/sources/gpu/gpusum.c), fed with every
 * op in start order (late ones flagged) and the launch call it came from
 * (c NULL or c->call_ts 0: not known).
 */
#ifndef CGBPF_GPUSUM_H
#define CGBPF_GPUSUM_H

#include <stdbool.h>
#include <stdio.h>
#include "sources/gpu/gpuproc.h"

void *gpusum__new(void);
void gpusum__free(void *sum);
/* One op; kernel: its name (cgbpf stats), NULL: looked up in p. */
void gpusum__op(struct gpu *g, struct gpu_proc *p, const struct gpu_op *op,
		const struct gpu_corr *c, bool late, const char *kernel);
/* The end of a device's timeline (capture end, process exit). */
void gpusum__dev_end(struct gpu *g, struct gpu_proc *p, struct gpu_dev *d);
/* The summary's GPU sections, nothing when no process used CUDA. */
void gpusum__print(const struct gpu *g, FILE *f);
/* The "GPU activity per process" section. */
void gpusum__print_procs(const struct gpu *g, FILE *f);
/* Its CSV / JSON rows (fmt: enum sumtab_fmt). */
void gpusum__procs_rows(const struct gpu *g, int fmt, FILE *f);
/* The "GPU utilization and idle time" section (there was GPU activity). */
void gpusum__print_timeline(const struct gpu *g, FILE *f);
/* Its CSV / JSON rows, one per GPU of a process (fmt: enum sumtab_fmt). */
void gpusum__timeline_rows(const struct gpu *g, int fmt, FILE *f);

#endif
