/* SPDX-License-Identifier: MIT */
/*
 * NCCL bandwidth as nccl-tests counts it, one rule for every table that
 * shows it (record's and cgbpf stats's nccl_sum, the GPU-side table,
 * monitor's metrics): size = count x datatype size, x n for all-gather,
 * reduce-scatter and all-to-all (their count is per rank); algbw = size
 * / time; busbw = algbw x 2(n-1)/n (all-reduce), (n-1)/n (all-gather,
 * reduce-scatter, all-to-all), 1 (the others).
 *
 * And nccl_sum's GPU-side times: per NCCL function, the span of channel
 * 0 of each operation NCCL's profiler plugin reported, as drawn in the
 * trace (record adds them as it draws them, cgbpf stats as it reads them
 * back: one rule over one input).
 */
#ifndef CGBPF_NCCLBW_H
#define CGBPF_NCCLBW_H

#include <stdint.h>
#include "nccl_funcs.h"
#include "lib/stats.h"

/* coll: enum nccl_coll (bpf/nccl_funcs.h). */
double ncclbw__size_factor(int coll, int nranks);
double ncclbw__bus_factor(int coll, int nranks);

/* The collective (enum nccl_coll) of NCCL API function fn (enum nccl_fn). */
int ncclbw__coll(int fn);

/* One function's GPU-side operations. */
struct ncclbw_fn {
	struct stats time;	/* channel 0's span of each operation */
	uint64_t bytes;		/* of operations whose size came */
	uint64_t bw_time;	/* time of those on communicators of known size */
	double size, bus_size;
	uint64_t unknown_size;	/* timed, but left out of the bandwidths */
};
struct ncclbw_gpu {
	struct ncclbw_fn fn[NC_FN__COUNT];
	uint64_t ops;
};

/* The NCCL API function (enum nccl_fn) of NCCL's own operation name as
 * its profiler plugin gives it ("AllReduce", "Send"); -1: none. */
int ncclbw__fn_of_op(const char *op);
/* One operation of function fn (enum nccl_fn) that took dur ns on the
 * GPU; bytes 0: not known; nranks < 1: not known. 0 or -ENOMEM (the
 * accumulator is allocated at the first). */
int ncclbw__gpu_add(struct ncclbw_gpu **g, int fn, uint64_t dur, uint64_t bytes, int nranks);
void ncclbw__gpu_free(struct ncclbw_gpu *g);

#endif
