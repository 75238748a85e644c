/* SPDX-License-Identifier: MIT */
/*
 * NCCL hangs, live (record and monitor, --nccl-hang-after): an operation
 * that some ranks of a communicator entered and another has not entered
 * after the limit is said at once on stderr: the communicator, the
 * operation (name, sequence number, bytes), which ranks wait and since
 * when, which rank has not entered it and what that rank is doing now
 * (its threads' states and system calls from /proc, its open traced
 * calls, its last traced call from Python). Only communicators whose
 * every rank is on this host are watched: across hosts, a rank's progress
 * is a metric (docs/monitor.md).
 *
 * Two feeders, one watcher (session.hang): the NCCL source's host calls
 * (user/sources/nccl/ncclhang.c: cgbpf's communicator id and numbering)
 * and NCCL's profiler plugin's task starts (user/sources/gpu/gpunccl.c:
 * NCCL's commHash and its own numbering), which also cover communicators
 * created before the capture. A process's rank whose communicator the
 * host side watches is left to it: the plugin's copy of the same
 * communicator (same process, rank and size) is not watched twice.
 */
#ifndef CGBPF_HANGWATCH_H
#define CGBPF_HANGWATCH_H

#include <stdbool.h>
#include <stdint.h>
#include "core/model.h"

struct hangwatch;

enum hw_side {
	HW_HOST,	/* host calls: cgbpf's ids and numbers */
	HW_PLUGIN,	/* NCCL's profiler plugin: commHash, NCCL's numbers */
};

/* A watcher saying operations waiting past after_ns; m: the threads and
 * processes it describes. NULL on ENOMEM. */
struct hangwatch *hangwatch__new(const struct model *m, uint64_t after_ns);
void hangwatch__free(struct hangwatch *h);
/* Rank rank of the nranks-rank communicator id (side's ids) is in pid. */
void hangwatch__learn(struct hangwatch *h, enum hw_side side, uint64_t id, int nranks, int rank,
		      uint32_t pid);
/* That rank entered operation seq at ts (a, b: a send/receive pair's
 * sender and receiver, -1 -1 for a collective); name is kept (a static
 * string). */
void hangwatch__enter(struct hangwatch *h, enum hw_side side, uint64_t id, int nranks,
		      int rank, uint32_t pid, uint64_t seq, int a, int b, const char *name,
		      uint64_t bytes, uint64_t ts);
/* pid's latest traced call made from Python: site (copied), call (kept). */
void hangwatch__note_py(struct hangwatch *h, uint32_t pid, const char *site, const char *call,
			uint64_t ts);
/* Whether the host side watches rank rank of an nranks-rank communicator
 * in pid (its creation was traced). */
bool hangwatch__host_knows(const struct hangwatch *h, uint32_t pid, int rank, int nranks);
/* Looks at the open operations (at most every 500 ms of now, BOOTTIME
 * ns); returns how many were newly said (a monitor dumps then). */
unsigned hangwatch__tick(struct hangwatch *h, uint64_t now);
/* Operations said so far. */
uint64_t hangwatch__said(const struct hangwatch *h);

#endif
