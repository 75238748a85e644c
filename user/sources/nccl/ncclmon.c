// SPDX-License-Identifier: MIT
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "lib/hmap.h"
#include "lib/straggle.h"
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
	struct hmap local;	/* communicator id -> its ranks with a row here */
	/* Entries matched across the ranks of communicators whose every
	 * rank is here: who entered last, and the waiting it caused. */
	struct straggle *strag;
	uint64_t last_entry;	/* the latest entry seen (expiry of open instances) */
};

/* Instances some rank has not entered after this long are let go. */
#define OPEN_NS (60ull * 1000000000)

struct ncclmon *ncclmon__new(void)
{
	struct ncclmon *nm = calloc(1, sizeof(*nm));

	if (nm && !(nm->strag = straggle__new())) {
		free(nm);
		return NULL;
	}
	if (nm)
		straggle__no_gaps(nm->strag);
	return nm;
}

void ncclmon__free(struct ncclmon *nm)
{
	uint64_t v;

	if (!nm)
		return;
	for (size_t it = 0; hmap__next(&nm->rows, &it, NULL, &v);)
		free((void *)(uintptr_t)v);
	hmap__free(&nm->rows);
	hmap__free(&nm->local);
	straggle__free(nm->strag);
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
	if ((v = hmap__get(&nm->local, c->id)))
		++*v;
	else
		hmap__put(&nm->local, c->id, 1);
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

	struct ncclmon *nm = ctx;
	const uint64_t *local;
	char id[20];

	if (!nc || !is_op(c, nc) || !(r = row_of(nm, nc->comm)))
		return;
	if (nccl_funcs[c->func].cls == NC_C_COLL && nc->seq > r->last_seq)
		r->last_seq = nc->seq;
	/* Who entered last: only where every rank is here. */
	local = hmap__get(&nm->local, r->id);
	if (!local || (int)*local < r->nranks || !nc->seq)
		return;
	snprintf(id, sizeof(id), "%016" PRIx64, r->id);
	if (c->ts > nm->last_entry)
		nm->last_entry = c->ts;
	straggle__add(nm->strag, &(struct straggle_op){
		.host = "", .comm = id, .rank = r->rank, .nranks = r->nranks, .pid = r->pid,
		.name = c->name, .seq = nc->seq,
		.peer = nccl_funcs[c->func].cls == NC_C_P2P ? nc->root : -1,
		.recv = nccl_funcs[c->func].coll == NCOLL_RECV, .ts = c->ts, .end = c->ts });
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
			uint64_t *n = hmap__get(&nm->local, r->id);

			if (n && !--*n)
				hmap__del(&nm->local, r->id, NULL);
			straggle__forget_pid(nm->strag, r->pid);
			hmap__del(&nm->rows, k, NULL);
			free(r);
		} else {
			r->gone = true;
		}
	}
	if (nm->last_entry > OPEN_NS)
		straggle__expire(nm->strag, nm->last_entry - OPEN_NS);
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

struct strag_out {
	void (*out)(void *ctx, const char *line);
	void *ctx;
	enum straggle_series what;
};

static void strag_row(void *ctx, const struct straggle_row *r)
{
	const struct strag_out *o = ctx;
	char line[256];

	straggle__sample(r, "cgbpf_nccl", o->what, line, sizeof(line));
	o->out(o->ctx, line);
}

/* Matched operations, those entered last, the waiting caused: the
 * straggler rule's inputs. */
static void render_strag(const struct ncclmon *nm, void (*out)(void *ctx, const char *line),
			 void *ctx)
{
	static const char *const head[STRAG__SERIES] = {
		"# HELP cgbpf_nccl_matched_total NCCL operations matched across the ranks of a "
		"communicator whose every rank is traced here.\n"
		"# TYPE cgbpf_nccl_matched_total counter\n",
		"# HELP cgbpf_nccl_entered_last_total Of those, the ones this rank entered last.\n"
		"# TYPE cgbpf_nccl_entered_last_total counter\n",
		"# HELP cgbpf_nccl_others_waited_seconds_total How long the other ranks had been "
		"waiting when this rank entered, summed.\n"
		"# TYPE cgbpf_nccl_others_waited_seconds_total counter\n",
		"# HELP cgbpf_nccl_late_seconds_total How long after its communicator's first rank "
		"this rank entered its matched operations, summed (lateness; 0 when first).\n"
		"# TYPE cgbpf_nccl_late_seconds_total counter\n",
	};

	for (enum straggle_series i = 0; i < STRAG__SERIES; i++) {
		struct strag_out o = { out, ctx, i };

		out(ctx, head[i]);
		straggle__each(nm->strag, strag_row, &o);
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
	render_strag(nm, out, ctx);
}
