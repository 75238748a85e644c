/* SPDX-License-Identifier: MIT */
/*
 * GPU activity in the Perfetto trace (user/sources/gpu/gpupf.c): the
 * tracks of each process's GPUs, streams, synchronizations and status,
 * written as user/sources/gpu/gpu.c releases operations in start order.
 */
#ifndef CGBPF_GPUPF_H
#define CGBPF_GPUPF_H

#include <stdint.h>
#include "sources/gpu/gpuproc.h"

/* Track uuid kinds under UUID_GPU (user/out/tracks.h). */
enum gpu_track {
	GT_DEVICE = 0,		/* idx: device */
	GT_LANE = 1,		/* idx: lane number in the process */
	GT_EST_STREAM = 2,	/* idx: estimated stream number in the process */
	GT_INFO = 3,		/* the process's "GPU activity" track (status) */
	GT_SYNC = 4,		/* idx: lane of the synchronization track */
	GT_EST_GROUP = 5,	/* the process's estimate group */
	GT_LOST = 6,		/* counter: records lost by the library */
	GT_NCCL_GROUP = 7,	/* idx: communicator (gpunccl.c) */
	GT_NCCL_CH = 8,		/* idx: communicator << 9 | lane << 7 | channel */
	GT_NCCL_PROXY = 9,	/* idx: communicator << 8 | channel << 1 | send */
};
/* The uuid of a track of pid's (idx: which one of its kind). */
uint64_t gpupf__track_uuid(enum gpu_track kind, uint32_t pid, uint32_t idx);

/* Writes a released op on its stream's (or the synchronization) track. */
void gpupf__op(struct gpu *g, struct gpu_proc *p, const struct gpu_op *op,
	       const struct gpu_corr *c);
/* An instant on the process's "GPU activity" track. */
void gpupf__status(struct gpu *g, struct gpu_proc *p, uint64_t ts, const char *what,
		   const char *detail);
/* The same with args of the caller's. */
void gpupf__status_args(struct gpu *g, struct gpu_proc *p, uint64_t ts, const char *what,
			const struct pf_annot *a, int n);
/* The running count of records the process's library lost. */
void gpupf__lost(struct gpu *g, struct gpu_proc *p, uint64_t ts);
/* A device's track (again, renamed, when it got described). */
void gpupf__device(struct gpu *g, struct gpu_proc *p, struct gpu_dev *d);

#endif
