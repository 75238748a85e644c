/* SPDX-License-Identifier: MIT */
/*
 * NCCL's own GPU-side timing, from NCCL's profiler plugin in the
 * injection library (inject/ncclprof.c; entries GPU_NCCL_* in
 * bpf/gpu_rec.h): each communicator a rank of this process belongs to
 * gets a track group under the process with a track per kernel channel
 * (the channel's GPU span of each operation) and per proxy channel and
 * direction (network operations, steps summed).
 */
#ifndef CGBPF_GPUNCCL_H
#define CGBPF_GPUNCCL_H

#include <stddef.h>
#include <stdio.h>
#include <stdint.h>
#include "sources/gpu/gpuproc.h"

/* One GPU_NCCL_* entry of process p (validated here); false: malformed. */
bool gpunccl__entry(struct gpu *g, struct gpu_proc *p, uint16_t kind, const uint8_t *e,
		    size_t size);
/* Frees p's NCCL state. */
void gpunccl__free(struct gpu_proc *p);

/* What the plugin gave, for the summary. */
struct gpunccl_totals {
	uint64_t comms, ops, channels, proxies, proxy_bytes;
	uint64_t clamped;	/* channel spans moved to start where the previous ended */
	uint64_t skew_max_ns;	/* the largest delay with which a GPU time was seen */
	uint64_t gpu_ns;	/* channel spans summed */
};
void gpunccl__totals(const struct gpu_proc *p, struct gpunccl_totals *t);

/* Each communicator rank of process p with a known size and a
 * collective seen: how many collectives it entered since the
 * communicator's creation, as NCCL numbers them (the sum over functions
 * of NCCL's per-function number of the latest seen, + 1). */
void gpunccl__each_comm(const struct gpu_proc *p,
			void (*fn)(void *ctx, uint32_t pid, uint64_t hash, int rank, int nranks,
				   uint64_t entered),
			void *ctx);

/* The "NCCL operations, GPU side" table of processes ps[0..np), then the
 * GPU-side straggler report when two ranks of a communicator came. */
void gpunccl__print(const struct gpu *g, const struct gpu_proc *const *ps, size_t np, FILE *f);

/* NCCL's function name for enum gpu_nccl_func ("AllReduce"), "?" if unknown. */
const char *gpunccl__func_name(unsigned func);
/* The enum gpu_nccl_func of NCCL's function name; GPU_NF_UNKNOWN if none. */
unsigned gpunccl__func_of(const char *name);
/* The GPU-side straggler report's instance number of NCCL's operation seq
 * of func (the plugin's seq: NCCL's per function from 0, a send's and its
 * receive's per peer and direction from 1); 0: not matchable. Record's
 * summary and cgbpf stats both number them so. */
uint64_t gpunccl__strag_seq(unsigned func, uint64_t seq);
/* The report's heading and its line on how lateness is measured. */
extern const char gpunccl__strag_title[], gpunccl__strag_basis[];

#endif
