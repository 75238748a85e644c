// SPDX-License-Identifier: MIT
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "lib/hmap.h"
#include "sources/nccl/nccl.h"
#include "sources/nccl/ncclmon.h"

/* One rank of one communicator in one process. */
struct row {
	uint32_t pid;
	uint64_t id;		/* the communicator's id (its short form is the label) */
	int rank, nranks;
	uint64_t last_seq;	/* the last collective entered */
	uint64_t ops, bytes, ns;
	bool gone;		/* its process was gone at the last sweep */
};

struct ncclmon {
	struct hmap rows;	/* hash(pid, id, rank) (+ probe) -> struct row * */
};

struct ncclmon *ncclmon__new(void)
{
	return calloc(1, sizeof(struct ncclmon));
}

void ncclmon__free(struct ncclmon *nm)
{
	uint64_t v;

	if (!nm)
		return;
	for (size_t it = 0; hmap__next(&nm->rows, &it, NULL, &v);)
		free((void *)(uintptr_t)v);
	hmap__free(&nm->rows);
	free(nm);
}

size_t ncclmon__rows(const struct ncclmon *nm)
{
	return nm ? nm->rows.count : 0;
}

/* The row of the call's communicator and rank; NULL when either is not
 * known (a communicator created before the monitor saw it) or on ENOMEM. */
static struct row *row_of(struct ncclmon *nm, const struct nccl_comm *c)
{
	uint64_t h, *v;
	struct row *r;

	if (!c || !c->id || c->rank < 0)
		return NULL;
	for (h = hash__u64(c->id ^ hash__u64((uint64_t)c->pid << 32 | (uint32_t)c->rank));
	     (v = hmap__get(&nm->rows, h)); h++) {
		r = (struct row *)(uintptr_t)*v;
		if (r->pid == c->pid && r->id == c->id && r->rank == c->rank)
			return r;
	}
	r = calloc(1, sizeof(*r));
	if (!r || hmap__put(&nm->rows, h, (uintptr_t)r)) {
		free(r);
		return NULL;
	}
	r->pid = c->pid;
	r->id = c->id;
	r->rank = c->rank;
	r->nranks = c->nranks;
	return r;
}

static bool is_op(const struct call *c, const struct nccl_call *nc)
{
	uint8_t cls = nccl_funcs[c->func].cls;

	return !nc->nested && (cls == NC_C_COLL || cls == NC_C_P2P);
}

/* On entry: the collective's number, what "behind" compares. */
static void on_begin(void *ctx, struct thread *t, struct call *c)
{
	const struct nccl_call *nc = c->lib == LIB_NCCL ? nccl__call(t, c) : NULL;
	struct row *r;

	if (!nc || !is_op(c, nc) || nccl_funcs[c->func].cls != NC_C_COLL ||
	    !(r = row_of(ctx, nc->comm)))
		return;
	if (nc->seq > r->last_seq)
		r->last_seq = nc->seq;
}

static void on_end(void *ctx, struct thread *t, struct call *c)
{
	const struct nccl_call *nc = c->lib == LIB_NCCL ? nccl__call(t, c) : NULL;
	struct row *r;

	if (!nc || !is_op(c, nc) || !(r = row_of(ctx, nc->comm)))
		return;
	r->ops++;
	if (!c->ret)
		r->bytes += nc->bytes;
	if (c->end_ts > c->ts)
		r->ns += c->end_ts - c->ts;
}

struct sink ncclmon__sink(struct ncclmon *nm)
{
	return (struct sink){ .ctx = nm, .call_begin = on_begin, .call_end = on_end };
}

void ncclmon__sweep(struct ncclmon *nm, bool (*alive)(uint32_t pid))
{
	uint64_t k, v;

	if (!nm)
		return;
	for (size_t it = 0; hmap__next(&nm->rows, &it, &k, &v);) {
		struct row *r = (struct row *)(uintptr_t)v;

		if (alive(r->pid)) {
			r->gone = false;
		} else if (r->gone) {
			hmap__del(&nm->rows, k, NULL);
			free(r);
		} else {
			r->gone = true;
		}
	}
}

static void series(const struct ncclmon *nm, void (*out)(void *, const char *), void *ctx,
		   const char *name, int what)
{
	char line[256];
	uint64_t v;

	for (size_t it = 0; hmap__next(&nm->rows, &it, NULL, &v);) {
		const struct row *r = (const struct row *)(uintptr_t)v;
		char val[32];

		if (what == 0 && !r->last_seq)
			continue;
		switch (what) {
		case 0: snprintf(val, sizeof(val), "%" PRIu64, r->last_seq); break;
		case 1: snprintf(val, sizeof(val), "%" PRIu64, r->ops); break;
		case 2: snprintf(val, sizeof(val), "%" PRIu64, r->bytes); break;
		default: snprintf(val, sizeof(val), "%.9f", r->ns / 1e9); break;
		}
		snprintf(line, sizeof(line), "%s{comm=\"%04x\",rank=\"%d\",nranks=\"%d\",pid=\"%u\"} %s\n",
			 name, nccl__short_id(r->id), r->rank, r->nranks, r->pid, val);
		out(ctx, line);
	}
}

void ncclmon__render(const struct ncclmon *nm, void (*out)(void *ctx, const char *line),
		     void *ctx)
{
	static const char *const head[4][2] = {
		{ "cgbpf_nccl_last_seq", "# HELP cgbpf_nccl_last_seq The number of the last collective "
		  "the rank entered on the communicator (seq, counted from its creation).\n"
		  "# TYPE cgbpf_nccl_last_seq gauge\n" },
		{ "cgbpf_nccl_ops_total", "# HELP cgbpf_nccl_ops_total NCCL collectives, sends and "
		  "receives that returned, per communicator and rank.\n"
		  "# TYPE cgbpf_nccl_ops_total counter\n" },
		{ "cgbpf_nccl_op_bytes_total", "# HELP cgbpf_nccl_op_bytes_total Bytes of those "
		  "that succeeded (count x datatype size).\n# TYPE cgbpf_nccl_op_bytes_total counter\n" },
		{ "cgbpf_nccl_op_seconds_total", "# HELP cgbpf_nccl_op_seconds_total Host-side time in "
		  "them, entry to return.\n# TYPE cgbpf_nccl_op_seconds_total counter\n" },
	};

	if (!nm)
		return;
	for (int i = 0; i < 4; i++) {
		out(ctx, head[i][1]);
		series(nm, out, ctx, head[i][0], i);
	}
}
