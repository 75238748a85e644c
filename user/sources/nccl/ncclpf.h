/* SPDX-License-Identifier: MIT */
/*
 * NCCL in the Perfetto trace: a "NCCL group" slice on the thread around
 * each outermost ncclGroupStart .. ncclGroupEnd, and one track per
 * communicator per process carrying its collectives and send/recv, named
 * "NCCL comm <id> rank <r>/<n>" with the id every rank shares. The thread's
 * own slices come from user/out/pfsink.c.
 */
#ifndef CGBPF_NCCLPF_H
#define CGBPF_NCCLPF_H

#include "core/model.h"
#include "out/perfetto.h"

struct nccl_comm;

/* Two sinks around user/out/pfsink.c's (slices on one track must nest): add
 * the "before" one before it and the "after" one after it. */
struct sink ncclpf__sink_before(struct pftrace *pt);
struct sink ncclpf__sink_after(struct pftrace *pt);
/* The uuid of a communicator's track: UUID_NCCL(pid << 24 | ordinal). */
uint64_t ncclpf__track_uuid(const struct nccl_comm *comm);

#endif
