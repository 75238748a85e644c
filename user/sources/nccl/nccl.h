/* SPDX-License-Identifier: MIT */
/*
 * The NCCL domain: its function table, the decoding of its calls and what
 * the decoder learns per process (communicators) and per thread (groups),
 * shared with the NCCL Perfetto sink (user/sources/nccl/ncclpf.c) and summary
 * (user/sources/nccl/ncclsum.c).
 */
#ifndef CGBPF_NCCL_H
#define CGBPF_NCCL_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include "nccl_funcs.h"
#include "core/model.h"

struct nccl_func {
	const char *name;
	uint8_t cls;		/* enum nccl_class */
	uint8_t coll;		/* enum nccl_coll */
	int8_t count, dtype, redop, root, comm, stream;	/* argument indexes, -1: none */
};

extern const struct nccl_func nccl_funcs[NC_FN__COUNT];

/*
 * A communicator as one process sees it. Objects live until the model is
 * freed (a destroyed one leaves the handle map only), so sinks may keep
 * pointers to them until then.
 */
struct nccl_comm {
	uint64_t handle;	/* ncclComm_t */
	uint64_t id;		/* the same in every rank's process; 0: unknown */
	uint32_t pid;
	uint32_t ordinal;	/* per process, from 1 */
	int rank, nranks;	/* -1: unknown */
	uint32_t splits;	/* ncclCommSplit calls made on it */
	/* Operations entered on it in this process, numbered from 1 as they
	 * enter: collectives on the communicator, sends and receives per
	 * peer and direction (peer << 1 | recv -> count). The n-th of each
	 * is the n-th of every other rank's, for a communicator seen from
	 * its creation. */
	uint64_t coll_seq;
	struct hmap p2p_seq;
	uint64_t created_ts;	/* its creating call's entry; 0: before the capture */
	bool destroyed;
	bool older;		/* first seen in use: created before the capture */
	bool seeded;		/* its identity came from nccl__seed */
	bool described;		/* its Perfetto track is written */
	bool stale;		/* rank or size learned after the track was written */
	char label[64];		/* "3fa2 rank 1/4" */
	struct nccl_comm *next;	/* the process's list */
};

/* What the decoder made of one call, for the sinks. */
struct nccl_call {
	uint64_t ts;		/* with func: which call this is */
	uint16_t func;
	bool nested;		/* NCCL calling its own API (ncclBcast -> ncclBroadcast) */
	bool grouped;		/* enqueued inside ncclGroupStart/End */
	bool group_open;	/* this ncclGroupStart opened the outermost group */
	bool group_close;	/* this ncclGroupEnd closed it */
	uint64_t count, bytes;	/* count and count x datatype size */
	int dtype, redop, root;	/* -1: none */
	struct nccl_comm *comm;	/* NULL: the call has none */
	uint64_t seq;		/* collective / send / receive: its number on comm (0: none) */
	/* group_close: the group, from its ncclGroupStart's entry. */
	uint64_t group_ts;
	uint32_t group_ops;
	uint64_t group_bytes;
};

/* The decoded form of NCCL call c of thread t, from its entry until its
 * call_end event; NULL for other calls or on ENOMEM. */
const struct nccl_call *nccl__call(const struct thread *t, const struct call *c);
/* Bytes of one element of a ncclDataType_t; 0 when unknown. */
unsigned nccl__dtype_size(int dtype);
/* "float32", or NULL when unknown. */
const char *nccl__dtype_name(int dtype);
/* "ncclInvalidArgument", or NULL when unknown. */
const char *nccl__result_name(int64_t code);
/* The short id shown in track names: 4 hex digits of the 64-bit id. */
static inline unsigned nccl__short_id(uint64_t id)
{
	return (unsigned)(id >> 48);
}
/* The first communicator of process p's list (creation order). */
struct nccl_comm *nccl__comms(const struct proc *p);

/*
 * Communicators carried from one model to another: a flight-recorder
 * dump replays the monitor's ring, which may start after a communicator
 * was created, into a model of its own. The live model's communicators
 * (nccl__seeds) are given to the dump's (nccl__seed): a handle the
 * replay meets in use, not created, becomes that communicator (id, rank,
 * size) instead of "rank ?/?". Its operations are numbered on from where
 * the ring's first one was in the live model: a first replay counts them
 * and nccl__seeds_rebase sets each base, so that the dump's numbers are
 * the live ones, the same in every rank for a communicator the monitor
 * saw created. A handle met in use before its seed's creation time is
 * another communicator's that a destroy freed inside the ring: it stays
 * unknown, and the seed waits for the handle's creation, which the ring
 * then holds.
 */
struct nccl_seed {
	uint32_t pid;
	bool older;
	int rank, nranks;
	uint64_t handle, id;
	uint64_t created_ts;	/* its creating call's entry; 0: before the capture */
	uint64_t coll_seq;	/* live: collectives entered; after rebase: the base */
	size_t np2p;
	uint64_t (*p2p)[2];	/* peer << 1 | recv, count (then base) */
};
/* The live communicators of m; n set. NULL with n 0: none (or ENOMEM). */
struct nccl_seed *nccl__seeds(const struct model *m, size_t *n);
void nccl__seeds_free(struct nccl_seed *s, size_t n);
/* Gives the seeds to m (before any record). The seeds outlive m's use. */
void nccl__seed(struct model *m, const struct nccl_seed *s, size_t n);
/* After a first replay into counted (seeded alike): live counts become
 * the bases to number on from. */
void nccl__seeds_rebase(struct nccl_seed *s, size_t n, const struct model *counted);

#endif
