// SPDX-License-Identifier: MIT
#include <inttypes.h>
#include <stdio.h>
#include "out/pfsink.h"
#include "sources/nccl/nccl.h"
#include "sources/nccl/ncclpf.h"

#define CAT "nccl"

uint64_t ncclpf__track_uuid(const struct nccl_comm *comm)
{
	return UUID_NCCL((uint64_t)comm->pid << 24 | comm->ordinal);
}

/* One track per communicator per process, under the process: the ranks'
 * tracks of one communicator share its short id, so they line up. */
static void describe(struct pftrace *pt, struct nccl_comm *comm)
{
	char name[80];

	if (comm->described && !comm->stale)
		return;
	snprintf(name, sizeof(name), "NCCL comm %s", comm->label);
	pftrace__track(pt, ncclpf__track_uuid(comm), UUID_PROCESS(comm->pid), name);
	comm->described = true;
	comm->stale = false;
}

static bool on_comm_track(const struct nccl_call *nc)
{
	return nc->comm && !nc->nested &&
	       (nccl_funcs[nc->func].cls == NC_C_COLL || nccl_funcs[nc->func].cls == NC_C_P2P);
}

/* Before the thread's own sink: the group slice must open before the
 * ncclGroupStart slice it encloses. */
static void on_begin(void *ctx, struct thread *t, struct call *c)
{
	const struct nccl_call *nc = c->lib == LIB_NCCL ? nccl__call(t, c) : NULL;
	struct pftrace *pt = ctx;
	struct pfseq *s;

	if (!nc || !(nc->group_open || on_comm_track(nc)))
		return;
	s = pfsink__seq(pt, t, c->ts);
	if (!s)
		return;
	if (nc->group_open)
		pftrace__begin_cat(pt, s, c->ts, CAT, "NCCL group", NULL, 0);
	if (on_comm_track(nc)) {
		describe(pt, nc->comm);
		pftrace__begin_on(pt, s, c->ts, ncclpf__track_uuid(nc->comm), CAT, c->name,
				  c->begin, c->nbegin);
	}
}

/* After the thread's own sink: the group slice closes after the
 * ncclGroupEnd slice it encloses. */
static void on_end(void *ctx, struct thread *t, struct call *c)
{
	const struct nccl_call *nc = c->lib == LIB_NCCL ? nccl__call(t, c) : NULL;
	struct pftrace *pt = ctx;
	struct pfseq *s;

	if (!nc)
		return;
	/* ncclCommCount / ncclCommUserRank taught us a rank or a size. */
	if (nc->comm && nc->comm->described && nc->comm->stale)
		describe(pt, nc->comm);
	if (!nc->group_close && !on_comm_track(nc))
		return;
	s = pfsink__seq(pt, t, c->end_ts);
	if (!s)
		return;
	if (on_comm_track(nc))
		pftrace__end_on(pt, s, c->end_ts, ncclpf__track_uuid(nc->comm), c->end, c->nend);
	if (nc->group_close) {
		struct pf_annot a[3] = {
			{ .name = "operations", .type = PA_UINT, .u = nc->group_ops },
			{ .name = "bytes", .type = PA_UINT, .u = nc->group_bytes },
			{ .name = "result", .type = PA_STR, .s = c->ret ? nccl__result_name(c->ret) : NULL },
		};

		pftrace__end(pt, s, c->end_ts, a, c->ret && a[2].s ? 3 : 2);
	}
}

struct sink ncclpf__sink_before(struct pftrace *pt)
{
	return (struct sink){ .ctx = pt, .call_begin = on_begin };
}

struct sink ncclpf__sink_after(struct pftrace *pt)
{
	return (struct sink){ .ctx = pt, .call_end = on_end };
}
