// SPDX-License-Identifier: MIT
#include <stdbool.h>
#include "sources/nccl/nccl.h"
#include "sources/nccl/ncclhang.h"

static void on_begin(void *ctx, struct thread *t, struct call *c)
{
	struct hangwatch *h = ctx;
	const struct nccl_call *nc = c->lib == LIB_NCCL ? nccl__call(t, c) : NULL;
	const struct nccl_func *f;
	int a = -1, b = -1;

	/* What a rank that has not entered an operation did last. */
	if (c->py_site && t->proc)
		hangwatch__note_py(h, t->proc->pid, c->py_user ? c->py_user : c->py_site, c->name,
				   c->ts);
	if (!nc || nc->nested || !nc->comm || !nc->seq)
		return;
	f = &nccl_funcs[c->func];
	if (f->cls != NC_C_COLL && f->cls != NC_C_P2P)
		return;
	if (f->cls == NC_C_P2P) {
		if (nc->root < 0)
			return;
		a = f->coll == NCOLL_RECV ? nc->root : nc->comm->rank;
		b = f->coll == NCOLL_RECV ? nc->comm->rank : nc->root;
	}
	hangwatch__enter(h, HW_HOST, nc->comm->id, nc->comm->nranks, nc->comm->rank, nc->comm->pid,
			 nc->seq, a, b, c->name, nc->bytes, c->ts);
}

/* The creation of a communicator tells where its rank lives. */
static void on_end(void *ctx, struct thread *t, struct call *c)
{
	const struct nccl_call *nc = c->lib == LIB_NCCL ? nccl__call(t, c) : NULL;

	if (nc && nc->comm && nccl_funcs[c->func].cls == NC_C_INIT_RANK)
		hangwatch__learn(ctx, HW_HOST, nc->comm->id, nc->comm->nranks, nc->comm->rank,
				 nc->comm->pid);
}

struct sink ncclhang__sink(struct hangwatch *h)
{
	return (struct sink){ .ctx = h, .call_begin = on_begin, .call_end = on_end };
}
