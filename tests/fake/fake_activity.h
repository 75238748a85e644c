/* SPDX-License-Identifier: MIT */
/*
 * What the fake libcuda tells the fake libcupti (tests/fake/libcupti.c)
 * about the simulated GPU: a private interface between the two fakes, not
 * NVIDIA's. The fake CUPTI, when activity is first enabled, looks up
 * fakecuda_activity_hook in the process (dlsym(RTLD_DEFAULT)) and installs
 * its function; from then on every kernel launch, copy, memset and
 * synchronization the fake driver performs calls it once, on the calling
 * thread, as the call returns. Times are CLOCK_MONOTONIC ns: the API call's
 * own interval, and the work's interval on its simulated stream.
 *
 * A graph launch is one call (FA_GRAPH) that ran several operations: its
 * nodes, each a kernel or a memset with graph_id and graph_node_id set,
 * all with the launch's correlation id. A launch or memset made on a
 * capturing stream ran nothing: captured is set and only the call counts.
 */
#ifndef FAKE_ACTIVITY_H
#define FAKE_ACTIVITY_H

#include <stdint.h>

enum fa_kind { FA_KERNEL = 1, FA_MEMCPY, FA_MEMSET, FA_SYNC, FA_GRAPH };
/* Copy directions, numbered as CUpti_ActivityMemcpyKind. */
enum fa_copy { FA_HTOD = 1, FA_DTOH = 2, FA_DTOD = 8, FA_HTOH = 9 };
/* Synchronizations, numbered as CUpti_ActivitySynchronizationType. */
enum fa_sync { FA_SYNC_EVENT = 1, FA_SYNC_STREAM = 3, FA_SYNC_CONTEXT = 4 };

struct fake_activity {
	int kind;		/* enum fa_kind */
	uint32_t corr;		/* unique per API call, as CUPTI's correlation id */
	const char *api;	/* the exported function called */
	uint64_t api_start, api_end;
	uint32_t tid;		/* gettid() of the calling thread */
	uint32_t ptid;		/* (uint32_t)pthread_self(): CUPTI's default thread id */
	uint32_t stream;	/* stream id, unique in the process */
	uint32_t context;
	uint32_t device;
	uint64_t start, end;	/* the work on the GPU; the wait for FA_SYNC */
	const char *name;	/* FA_KERNEL */
	uint32_t grid[3], block[3];
	uint32_t smem_dynamic;
	uint64_t bytes;		/* FA_MEMCPY, FA_MEMSET */
	int copy_kind;		/* enum fa_copy */
	int async;
	uint32_t value;		/* FA_MEMSET */
	int sync_type;		/* enum fa_sync */
	int captured;		/* FA_KERNEL, FA_MEMSET: made a graph node, ran nothing */
	uint32_t graph_id;	/* a node of a graph launch: the executable graph's id */
	uint64_t graph_node_id;	/* and the node's, unique in the process */
	const struct fake_activity *nodes;	/* FA_GRAPH: what the launch ran, */
	uint32_t nnodes;			/* in stream order */
};

typedef void (*fake_activity_fn)(const struct fake_activity *a);

/* Exported by the fake libcuda: installs fn (NULL: none). */
void fakecuda_activity_hook(fake_activity_fn fn);

#endif
