/* SPDX-License-Identifier: MIT */
/*
 * The NCCL functions cgbpf probes: one line per exported ncclX symbol (the
 * pncclX alias at the same address is the same probe). Signatures are
 * nccl.h's; argument indexes count x86-64 SysV arguments, 6..8 being the
 * first three stack slots (PK_STACK3 reads them at entry).
 *
 * X(symbol, class, coll, count, dtype, redop, root, comm, stream)
 * coll is the nccl-tests collective (bytes and bus bandwidth, user/sources/nccl/ncclsum.c);
 * an index of -1 means the call has no such argument; root is the peer of
 * ncclSend/ncclRecv.
 */
#ifndef CGBPF_NCCL_FUNCS_H
#define CGBPF_NCCL_FUNCS_H

enum nccl_class {
	NC_C_COLL = 0,		/* a collective */
	NC_C_P2P,		/* ncclSend / ncclRecv */
	NC_C_GROUP_START,
	NC_C_GROUP_END,
	NC_C_INIT_RANK,		/* *a0 = comm out, a1 = nranks, a2 = rank, unique id at sp + 8 */
	NC_C_INIT_ALL,		/* *a0 = comms[0] out, a1 = ndev */
	NC_C_SPLIT,		/* a0 = comm, a1 = color, a2 = key, *a3 = new comm out */
	NC_C_FREE,		/* a0 = comm (destroy, abort) */
	NC_C_COUNT,		/* a0 = comm, *(int *)a1 = nranks out */
	NC_C_USER_RANK,		/* a0 = comm, *(int *)a1 = rank out */
};

/* The collective, as nccl-tests names and measures it. */
enum nccl_coll {
	NCOLL_NONE = 0,
	NCOLL_ALLREDUCE,
	NCOLL_BROADCAST,
	NCOLL_REDUCE,
	NCOLL_ALLGATHER,
	NCOLL_REDUCESCATTER,
	NCOLL_ALLTOALL,
	NCOLL_SEND,
	NCOLL_RECV,
};

#define NCCL_FUNCS(X) \
	X(ncclAllReduce,	NC_C_COLL, NCOLL_ALLREDUCE,	2, 3, 4, -1, 5, 6) \
	X(ncclBroadcast,	NC_C_COLL, NCOLL_BROADCAST,	2, 3, -1, 4, 5, 6) \
	X(ncclBcast,		NC_C_COLL, NCOLL_BROADCAST,	1, 2, -1, 3, 4, 5) \
	X(ncclReduce,		NC_C_COLL, NCOLL_REDUCE,	2, 3, 4, 5, 6, 7) \
	X(ncclAllGather,	NC_C_COLL, NCOLL_ALLGATHER,	2, 3, -1, -1, 4, 5) \
	X(ncclReduceScatter,	NC_C_COLL, NCOLL_REDUCESCATTER,	2, 3, 4, -1, 5, 6) \
	X(ncclAlltoAll,		NC_C_COLL, NCOLL_ALLTOALL,	2, 3, -1, -1, 4, 5) \
	X(ncclSend,		NC_C_P2P, NCOLL_SEND,		1, 2, -1, 3, 4, 5) \
	X(ncclRecv,		NC_C_P2P, NCOLL_RECV,		1, 2, -1, 3, 4, 5) \
	X(ncclGroupStart,	NC_C_GROUP_START, NCOLL_NONE,	-1, -1, -1, -1, -1, -1) \
	X(ncclGroupEnd,		NC_C_GROUP_END, NCOLL_NONE,	-1, -1, -1, -1, -1, -1) \
	X(ncclCommInitRank,	NC_C_INIT_RANK, NCOLL_NONE,	-1, -1, -1, -1, -1, -1) \
	X(ncclCommInitRankConfig, NC_C_INIT_RANK, NCOLL_NONE,	-1, -1, -1, -1, -1, -1) \
	X(ncclCommInitAll,	NC_C_INIT_ALL, NCOLL_NONE,	-1, -1, -1, -1, -1, -1) \
	X(ncclCommSplit,	NC_C_SPLIT, NCOLL_NONE,		-1, -1, -1, -1, 0, -1) \
	X(ncclCommDestroy,	NC_C_FREE, NCOLL_NONE,		-1, -1, -1, -1, 0, -1) \
	X(ncclCommAbort,	NC_C_FREE, NCOLL_NONE,		-1, -1, -1, -1, 0, -1) \
	X(ncclCommCount,	NC_C_COUNT, NCOLL_NONE,		-1, -1, -1, -1, 0, -1) \
	X(ncclCommUserRank,	NC_C_USER_RANK, NCOLL_NONE,	-1, -1, -1, -1, 0, -1)

#define NCCL_FUNC_ENUM(sym, cls, coll, cnt, dt, op, root, comm, st) NC_FN_##sym,
enum nccl_func_id {
	NCCL_FUNCS(NCCL_FUNC_ENUM)
	NC_FN__COUNT
};
#undef NCCL_FUNC_ENUM

#endif
