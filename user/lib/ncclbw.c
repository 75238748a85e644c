// SPDX-License-Identifier: MIT
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "lib/ncclbw.h"

double ncclbw__size_factor(int coll, int nranks)
{
	switch (coll) {
	case NCOLL_ALLGATHER:
	case NCOLL_REDUCESCATTER:
	case NCOLL_ALLTOALL:
		return nranks;
	}
	return 1;
}

double ncclbw__bus_factor(int coll, int nranks)
{
	double n = nranks;

	if (nranks < 1)
		return 0;
	switch (coll) {
	case NCOLL_ALLREDUCE:
		return 2 * (n - 1) / n;
	case NCOLL_ALLGATHER:
	case NCOLL_REDUCESCATTER:
	case NCOLL_ALLTOALL:
		return (n - 1) / n;
	}
	return 1;
}

#define FN_NAME(sym, cls, coll, cnt, dt, op, root, comm, st) #sym,
#define FN_COLL(sym, cls, coll, cnt, dt, op, root, comm, st) coll,
static const char *const fn_names[NC_FN__COUNT] = { NCCL_FUNCS(FN_NAME) };
static const int fn_colls[NC_FN__COUNT] = { NCCL_FUNCS(FN_COLL) };
#undef FN_NAME
#undef FN_COLL

int ncclbw__coll(int fn)
{
	return fn >= 0 && fn < NC_FN__COUNT ? fn_colls[fn] : NCOLL_NONE;
}

int ncclbw__fn_of_op(const char *op)
{
	if (!op || !*op)
		return -1;
	/* "AllReduce" is ncclAllReduce; ncclBcast (the older name of
	 * ncclBroadcast) is never NCCL's own operation name. */
	for (int i = 0; i < NC_FN__COUNT; i++)
		if (fn_colls[i] != NCOLL_NONE && i != NC_FN_ncclBcast &&
		    !strcmp(fn_names[i] + 4, op))
			return i;
	return -1;
}

int ncclbw__gpu_add(struct ncclbw_gpu **g, int fn, uint64_t dur, uint64_t bytes, int nranks)
{
	struct ncclbw_fn *f;
	double size;

	if (fn < 0 || fn >= NC_FN__COUNT)
		return 0;
	if (!*g && !(*g = calloc(1, sizeof(**g))))
		return -ENOMEM;
	f = &(*g)->fn[fn];
	(*g)->ops++;
	stats__add(&f->time, dur);
	f->bytes += bytes;
	if (!bytes || nranks < 1) {
		f->unknown_size++;
		return 0;
	}
	size = (double)bytes * ncclbw__size_factor(fn_colls[fn], nranks);
	f->bw_time += dur;
	f->size += size;
	f->bus_size += size * ncclbw__bus_factor(fn_colls[fn], nranks);
	return 0;
}

void ncclbw__gpu_free(struct ncclbw_gpu *g)
{
	if (!g)
		return;
	for (int i = 0; i < NC_FN__COUNT; i++)
		stats__free(&g->fn[i].time);
	free(g);
}
