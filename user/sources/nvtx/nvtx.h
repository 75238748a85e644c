/* SPDX-License-Identifier: MIT */
/*
 * NVTX: the records of cgbpf's injection library (bpf/nvtx.bpf.c) into
 * Perfetto slices, async slices and instants, thread and category names,
 * and the nvtx_sum summary table.
 */
#ifndef CGBPF_NVTX_H
#define CGBPF_NVTX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include "core/model.h"
#include "out/perfetto.h"

struct nvtx;
struct rec_nvtx;

/* NULL on ENOMEM; pt may be NULL (--summary-only). */
struct nvtx *nvtx__new(struct model *m, struct pftrace *pt);
void nvtx__free(struct nvtx *n);
/* A validated REC_NVTX record of size bytes. */
void nvtx__record(struct nvtx *n, const struct rec_nvtx *r, size_t size);
/* A process exited: its open ranges end with it. */
void nvtx__proc_exit(struct nvtx *n, uint32_t pid, uint64_t ts);
/* Ranges still open at the end of the capture end there. */
void nvtx__finish(struct nvtx *n, uint64_t ts);
/* "** NVTX Range Summary (nvtx_sum)"; ctx is the struct nvtx (a summary
 * section, user/out/summary.h). */
void nvtx__print(const void *ctx, const uint64_t *drops, FILE *f);

#endif
