// SPDX-License-Identifier: MIT
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include "nccl.h"
#include "ncclsum.h"
#include "stats.h"

struct op_sum {
	uint64_t calls;		/* returned, not nested */
	uint64_t errors;
	uint64_t grouped;	/* enqueued in a group */
	uint64_t bytes;		/* successful calls, grouped ones included */
	struct stats time;	/* successful calls outside groups */
	/* Bandwidth over timed calls on communicators of known size. */
	uint64_t bw_time;
	double size, bus_size;
	uint64_t unknown_size;	/* timed calls left out of the bandwidth */
};

struct ncclsum {
	const struct model *m;
	struct op_sum ops[NC_FN__COUNT];
	struct stats groups;
	uint64_t group_ops, group_bytes;
	uint64_t nested;
};

struct ncclsum *ncclsum__new(const struct model *m)
{
	struct ncclsum *s = calloc(1, sizeof(*s));

	if (s)
		s->m = m;
	return s;
}

void ncclsum__free(struct ncclsum *s)
{
	if (!s)
		return;
	for (int i = 0; i < NC_FN__COUNT; i++)
		stats__free(&s->ops[i].time);
	stats__free(&s->groups);
	free(s);
}

double ncclsum__size_factor(int coll, int nranks)
{
	switch (coll) {
	case NCOLL_ALLGATHER:
	case NCOLL_REDUCESCATTER:
	case NCOLL_ALLTOALL:
		return nranks;
	}
	return 1;
}

double ncclsum__bus_factor(int coll, int nranks)
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

static void on_end(void *ctx, struct thread *t, struct call *c)
{
	struct ncclsum *s = ctx;
	const struct nccl_call *nc;
	const struct nccl_func *f;
	struct op_sum *o;
	bool ok;
	uint64_t dur;

	if (c->lib != LIB_NCCL || !c->ended || !(nc = nccl__call(t, c)))
		return;
	if (nc->nested) {
		s->nested++;
		return;
	}
	f = &nccl_funcs[c->func];
	o = &s->ops[c->func];
	ok = c->ret == 0;
	dur = c->end_ts - c->ts;
	o->calls++;
	if (c->ret)
		o->errors++;
	if (nc->group_close) {
		stats__add(&s->groups, c->end_ts - nc->group_ts);
		s->group_ops += nc->group_ops;
		s->group_bytes += nc->group_bytes;
	}
	if ((f->cls != NC_C_COLL && f->cls != NC_C_P2P) || !ok)
		return;
	o->bytes += nc->bytes;
	if (nc->grouped) {
		o->grouped++;
		return;
	}
	stats__add(&o->time, dur);
	if (!nc->comm || nc->comm->nranks < 1) {
		o->unknown_size++;
		return;
	}
	o->bw_time += dur;
	o->size += nc->bytes * ncclsum__size_factor(f->coll, nc->comm->nranks);
	o->bus_size += nc->bytes * ncclsum__size_factor(f->coll, nc->comm->nranks) *
		       ncclsum__bus_factor(f->coll, nc->comm->nranks);
}

struct sink ncclsum__sink(struct ncclsum *s)
{
	return (struct sink){ .ctx = s, .call_end = on_end };
}

static int cmp_comms(const void *a, const void *b)
{
	const struct nccl_comm *x = *(const struct nccl_comm *const *)a;
	const struct nccl_comm *y = *(const struct nccl_comm *const *)b;

	if (x->id != y->id)
		return x->id < y->id ? -1 : 1;
	if (x->rank != y->rank)
		return x->rank < y->rank ? -1 : 1;
	return x->pid < y->pid ? -1 : x->pid > y->pid;
}

/* Communicators grouped by id: the ranks of one communicator in all
 * traced processes on one line. */
static void print_comms(const struct ncclsum *s, FILE *f)
{
	const struct nccl_comm **all = NULL, *c;
	size_t n = 0, cap = 0, ncomms = 0;
	uint64_t v;

	for (size_t it = 0; hmap__next(&s->m->procs, &it, NULL, &v);)
		for (c = nccl__comms((const struct proc *)(uintptr_t)v); c; c = c->next) {
			if (n == cap) {
				size_t nc = cap ? cap * 2 : 16;
				const struct nccl_comm **a = realloc(all, nc * sizeof(*a));

				if (!a) {
					free(all);
					return;
				}
				all = a;
				cap = nc;
			}
			all[n++] = c;
		}
	if (!n) {
		fprintf(f, "\n   no communicator was seen\n");
		return;
	}
	qsort(all, n, sizeof(*all), cmp_comms);
	for (size_t i = 0; i < n; i++)
		if (!all[i]->id || i == 0 || all[i]->id != all[i - 1]->id)
			ncomms++;
	fprintf(f, "\n   %zu communicator(s), %zu rank(s) traced (rank r/n in process pid):\n",
		ncomms, n);
	for (size_t i = 0; i < n;) {
		size_t j = i + 1;

		if (all[i]->id) {
			while (j < n && all[j]->id == all[i]->id)
				j++;
			fprintf(f, "     %04x:", nccl__short_id(all[i]->id));
		} else {
			fprintf(f, "     (0x%" PRIx64 ", id unknown: created before attach or by "
				   "ncclCommInitAll after comms[0]):", all[i]->handle);
		}
		for (size_t k = i; k < j; k++) {
			char r[16], nr[16];

			snprintf(r, sizeof(r), all[k]->rank >= 0 ? "%d" : "?", all[k]->rank);
			snprintf(nr, sizeof(nr), all[k]->nranks >= 0 ? "%d" : "?", all[k]->nranks);
			fprintf(f, "%s rank %s/%s in %u", k > i ? "," : "", r, nr, all[k]->pid);
		}
		fputc('\n', f);
		i = j;
	}
	free(all);
}

void ncclsum__print(const void *ctx, FILE *f)
{
	/* Medians sort their samples in place. */
	struct ncclsum *s = (struct ncclsum *)ctx;
	uint64_t calls = 0, unknown = 0;
	bool others = false;
	char a[32], b[32];

	for (int i = 0; i < NC_FN__COUNT; i++)
		calls += s->ops[i].calls;
	if (!calls && !s->nested)
		return;
	fprintf(f, "\n** NCCL Summary (nccl_sum):\n\n"
		   "   Time is host-side: from a call's entry to its return, as the CPU saw it. On a GPU,\n"
		   "   NCCL calls are asynchronous (they return once the work is enqueued on the stream),\n"
		   "   so these times and the bandwidths from them measure the launch, not the transfer,\n"
		   "   unless the call blocked. GPU-side timing of the transfers will come with CUPTI.\n"
		   "   Calls between ncclGroupStart and ncclGroupEnd only enqueue: they are counted under\n"
		   "   Grouped and their times are left out; each group's time is under Groups below.\n"
		   "   As nccl-tests: algbw = size / time; busbw = algbw x 2(n-1)/n (all-reduce),\n"
		   "   (n-1)/n (all-gather, reduce-scatter, all-to-all), 1 (broadcast, reduce, send,\n"
		   "   recv); size = count x datatype size, x n for all-gather, reduce-scatter and\n"
		   "   all-to-all (their count is per rank); summed over timed calls (GB/s = 1e9 B/s).\n\n");
	fprintf(f, " %-18s %8s %8s %14s %8s %14s %12s %12s %12s %12s %12s\n", "Name", "Calls",
		"Grouped", "Bytes", "Timed", "Total (ns)", "Avg (ns)", "Med (ns)", "Max (ns)",
		"algbw (GB/s)", "busbw (GB/s)");
	for (int i = 0; i < NC_FN__COUNT; i++) {
		struct op_sum *o = &s->ops[i];
		struct stats *st = &o->time;

		if (nccl_funcs[i].cls != NC_C_COLL && nccl_funcs[i].cls != NC_C_P2P) {
			others |= o->calls > 0;
			continue;
		}
		if (!o->calls)
			continue;
		if (o->bw_time) {
			snprintf(a, sizeof(a), "%.6g", o->size / o->bw_time);
			snprintf(b, sizeof(b), "%.6g", o->bus_size / o->bw_time);
		} else {
			snprintf(a, sizeof(a), "-");
			snprintf(b, sizeof(b), "-");
		}
		unknown += o->unknown_size;
		fprintf(f, " %-18s %8" PRIu64 " %8" PRIu64 " %14" PRIu64 " %8" PRIu64 " %14" PRIu64
			   " %12.1f %12" PRIu64 " %12" PRIu64 " %12s %12s\n",
			nccl_funcs[i].name, o->calls, o->grouped, o->bytes, st->n, st->total,
			st->mean, stats__median(st), st->max, a, b);
	}
	if (unknown)
		fprintf(f, "   %" PRIu64 " timed calls on communicators of unknown size (created before "
			   "attach) are left out of the bandwidths\n", unknown);
	fprintf(f, "\n   Groups (outermost ncclGroupStart entry to ncclGroupEnd return): %" PRIu64
		   " groups, %" PRIu64 " operations, %" PRIu64 " bytes",
		s->groups.n, s->group_ops, s->group_bytes);
	if (s->groups.n)
		fprintf(f, "; time total %" PRIu64 " ns, avg %.1f, med %" PRIu64 ", max %" PRIu64,
			s->groups.total, s->groups.mean, stats__median(&s->groups),
			s->groups.max);
	fputc('\n', f);
	if (others) {
		bool first = true;

		fprintf(f, "   Other calls:");
		for (int i = 0; i < NC_FN__COUNT; i++) {
			const struct op_sum *o = &s->ops[i];

			if (nccl_funcs[i].cls == NC_C_COLL || nccl_funcs[i].cls == NC_C_P2P ||
			    !o->calls)
				continue;
			fprintf(f, "%s %s %" PRIu64, first ? "" : ",", nccl_funcs[i].name, o->calls);
			first = false;
		}
		fputc('\n', f);
	}
	for (int i = 0; i < NC_FN__COUNT; i++)
		if (s->ops[i].errors) {
			uint64_t e = 0;

			for (int j = 0; j < NC_FN__COUNT; j++)
				e += s->ops[j].errors;
			fprintf(f, "   %" PRIu64 " calls returned an error\n", e);
			break;
		}
	if (s->nested)
		fprintf(f, "   %" PRIu64 " calls NCCL made to its own API from inside another "
			   "(ncclBcast -> ncclBroadcast) are not counted\n", s->nested);
	print_comms(s, f);
}
