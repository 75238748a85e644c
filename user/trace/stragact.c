// SPDX-License-Identifier: MIT
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include "lib/hmap.h"
#include "trace/stragact.h"
#include "trace/tread.h"

#define TOP 8

struct item {
	char *name;
	uint64_t v;		/* ns (calls) or samples */
};

struct items {
	struct hmap ix;		/* hash(name) (+ probe) -> index + 1 */
	struct item *v;
	size_t n, cap;
	uint64_t total;
};

struct act {
	const struct straggle_named *who;
	int file;
	struct hmap threads;	/* key(file, machine, uuid) -> struct items *: its process's threads */
	struct hmap mine;	/* the same keys -> 1: threads that called NCCL as the rank */
	struct hmap hosts_ok;	/* file << 32 | machine -> 1: the rank's host */
	char label[80];		/* "3fa2 rank 2/": its calls' comm argument starts so */
	struct items calls, samples;
	uint64_t gap_ns;
};

static uint64_t track_key(int file, uint32_t machine, uint64_t uuid)
{
	return hash__u64(uuid ^ hash__u64((uint64_t)file << 32 | machine));
}

static int items_add(struct items *it, const char *name, uint64_t v)
{
	uint64_t h = hash__bytes(name, strlen(name)), *x;

	it->total += v;
	for (; (x = hmap__get(&it->ix, h)); h++)
		if (!strcmp(it->v[*x - 1].name, name)) {
			it->v[*x - 1].v += v;
			return 0;
		}
	if (it->n == it->cap) {
		size_t nc = it->cap ? it->cap * 2 : 32;
		struct item *n = realloc(it->v, nc * sizeof(*n));

		if (!n)
			return -ENOMEM;
		it->v = n;
		it->cap = nc;
	}
	it->v[it->n].name = strdup(name);
	it->v[it->n].v = v;
	if (!it->v[it->n].name || hmap__put(&it->ix, h, it->n + 1)) {
		free(it->v[it->n].name);
		return -ENOMEM;
	}
	it->n++;
	return 0;
}

static void items_free(struct items *it)
{
	for (size_t i = 0; i < it->n; i++)
		free(it->v[i].name);
	free(it->v);
	hmap__free(&it->ix);
}

static int by_v(const void *x, const void *y)
{
	const struct item *a = x, *b = y;

	if (a->v != b->v)
		return a->v < b->v ? 1 : -1;
	return strcmp(a->name, b->name);
}

/* The first gap ending after ts. */
static size_t gap_after(const struct straggle_named *w, uint64_t ts)
{
	size_t lo = 0, hi = w->ngaps;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (w->gaps[mid].to <= ts)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static int on_track(void *ctx, const struct tread_track *t)
{
	struct act *a = ctx;
	uint64_t k = track_key(a->file, t->machine, t->uuid);

	struct items *it;

	if (t->kind != TREAD_TRACK_THREAD || (uint32_t)t->pid != a->who->pid ||
	    hmap__get(&a->threads, k))
		return 0;
	it = calloc(1, sizeof(*it));
	if (!it || hmap__put(&a->threads, k, (uintptr_t)it)) {
		free(it);
		return -ENOMEM;
	}
	return 0;
}

static int on_attr(void *ctx, uint32_t machine, const char *key, const char *value)
{
	struct act *a = ctx;

	if (!strcmp(key, "cgbpf.hostname") && !strcmp(value, a->who->host))
		return hmap__put(&a->hosts_ok, (uint64_t)a->file << 32 | machine, 1);
	return 0;
}

static bool host_ok(const struct act *a, uint32_t machine)
{
	return !*a->who->host || hmap__get(&a->hosts_ok, (uint64_t)a->file << 32 | machine);
}

/* An outermost slice of the rank's threads: its time inside the gaps. */
static int on_slice(void *ctx, const struct tread_slice *s)
{
	struct act *a = ctx;
	const char *name = s->name;
	uint64_t in = 0, k = track_key(a->file, s->machine, s->track), *v;

	if (!s->ended || !host_ok(a, s->machine) || !(v = hmap__get(&a->threads, k)))
		return 0;
	/* The thread that makes the rank's NCCL calls (ranks may be threads
	 * of one process). */
	for (int i = 0; i < s->nargs; i++)
		if (!strcmp(s->args[i].name, "comm") && s->args[i].type == TREAD_A_STR &&
		    !strncmp(s->args[i].s, a->label, strlen(a->label)) &&
		    hmap__put(&a->mine, k, 1))
			return -ENOMEM;
	if (s->depth || !strcmp(s->category, "nccl"))
		return 0;
	for (size_t g = gap_after(a->who, s->ts); g < a->who->ngaps &&
	     a->who->gaps[g].from < s->end_ts; g++) {
		uint64_t lo = s->ts > a->who->gaps[g].from ? s->ts : a->who->gaps[g].from;
		uint64_t hi = s->end_ts < a->who->gaps[g].to ? s->end_ts : a->who->gaps[g].to;

		if (hi > lo)
			in += hi - lo;
	}
	if (!in)
		return 0;
	for (int i = 0; i < s->nargs; i++)
		if (!strcmp(s->args[i].name, "py") && s->args[i].type == TREAD_A_STR)
			name = s->args[i].s;
	return items_add((struct items *)(uintptr_t)*v, *name ? name : "(unnamed)", in);
}

/* The calls of the rank's threads (of every thread of its process when
 * none could be told). */
static int merge_calls(struct act *a)
{
	uint64_t k, v;
	bool any = a->mine.count > 0;

	for (size_t it = 0; hmap__next(&a->threads, &it, &k, &v);) {
		struct items *t = (struct items *)(uintptr_t)v;

		if (any && !hmap__get(&a->mine, k))
			continue;
		for (size_t i = 0; i < t->n; i++)
			if (items_add(&a->calls, t->v[i].name, t->v[i].v))
				return -ENOMEM;
	}
	return 0;
}

static int on_sample(void *ctx, const struct tread_sample *s)
{
	struct act *a = ctx;
	size_t g;

	if (s->pid != a->who->pid || !host_ok(a, s->machine))
		return 0;
	g = gap_after(a->who, s->ts);
	if (g >= a->who->ngaps || a->who->gaps[g].from > s->ts)
		return 0;
	return items_add(&a->samples, s->has_stack ? s->leaf : "[unknown]", 1);
}

static void print_items(struct items *it, const char *what, enum sumtab_fmt fmt, FILE *f,
			bool *first)
{
	static const char *const cols[] = { "kind", "name", "value", "pct" };

	/* Nothing to sort is a NULL array, which qsort must not be given. */
	if (it->n > 1)
		qsort(it->v, it->n, sizeof(*it->v), by_v);
	for (size_t i = 0; i < it->n && i < TOP; i++) {
		double pct = it->total ? 100.0 * it->v[i].v / it->total : 0;

		if (fmt == SUMTAB_TEXT) {
			if (!strcmp(what, "call"))
				fprintf(f, "     %12.3f ms %5.1f%%  %s\n", it->v[i].v / 1e6, pct,
					it->v[i].name);
			else
				fprintf(f, "     %12" PRIu64 "    %5.1f%%  %s\n", it->v[i].v, pct,
					it->v[i].name);
			continue;
		}
		{
			const struct sumtab_cell c[] = { { SC_STR, .s = what }, { SC_STR, .s = it->v[i].name },
							 { SC_U64, .u = it->v[i].v }, { SC_DOUBLE, .d = pct } };

			sumtab__row(f, fmt, cols, c, 4, *first);
			*first = false;
		}
	}
}

static void print_act(struct act *a, enum sumtab_fmt fmt, FILE *f)
{
	static const char *const cols[] = { "kind", "name", "value", "pct" };
	const struct straggle_named *w = a->who;
	bool first = true;

	if (fmt != SUMTAB_TEXT) {
		sumtab__begin(f, fmt, cols, 4);
		print_items(&a->calls, "call", fmt, f, &first);
		print_items(&a->samples, "sample", fmt, f, &first);
		sumtab__end(f, fmt);
		return;
	}
	fprintf(f, "   rank %d of communicator %s (pid %u%s%s): %zu stretch(es) before its late "
		   "entries, from the return of its previous operation to the entry, %.3f ms in all\n",
		w->rank, w->comm, w->pid, *w->host ? " on " : "", w->host, w->ngaps, a->gap_ns / 1e6);
	fprintf(f, "   its outermost traced calls in them (by Python call site, else name): "
		   "%.3f ms\n", a->calls.total / 1e6);
	print_items(&a->calls, "call", fmt, f, &first);
	fprintf(f, "   its CPU samples in them: %" PRIu64 "%s\n", a->samples.total,
		a->samples.total ? " (by innermost function)" : " (none: --sample-hz 0, or off-CPU)");
	print_items(&a->samples, "sample", fmt, f, &first);
}

int stragact__print(const struct straggle_named *named, char *const *paths, int npaths,
		    enum sumtab_fmt fmt, FILE *f)
{
	static const struct tread_ops ops = { .track = on_track, .attr = on_attr,
					      .slice = on_slice, .sample = on_sample };
	struct act a = { .who = named };
	int err = 0;

	if (fmt == SUMTAB_TEXT)
		fprintf(f, "\n** NCCL straggler: what it did before its late entries "
			   "(nccl_straggler_activity):\n\n");
	if (!named || !paths) {
		static const char *const cols[] = { "kind", "name", "value", "pct" };

		if (fmt == SUMTAB_TEXT) {
			fprintf(f, "   %s\n", named ? "needs the trace files" :
				"no rank named by nccl_stragglers: nothing to look at");
		} else {
			sumtab__begin(f, fmt, cols, 4);
			sumtab__end(f, fmt);
		}
		return 0;
	}
	snprintf(a.label, sizeof(a.label), "%s rank %d/", named->comm, named->rank);
	for (size_t g = 0; g < named->ngaps; g++)
		a.gap_ns += named->gaps[g].to - named->gaps[g].from;
	for (int i = 0; i < npaths && !err; i++) {
		a.file = i;
		err = tread__run(paths[i], &ops, &a, NULL);
	}
	if (!err)
		err = merge_calls(&a);
	if (!err)
		print_act(&a, fmt, f);
	items_free(&a.calls);
	items_free(&a.samples);
	{
		uint64_t v;

		for (size_t it = 0; hmap__next(&a.threads, &it, NULL, &v);) {
			items_free((struct items *)(uintptr_t)v);
			free((void *)(uintptr_t)v);
		}
	}
	hmap__free(&a.threads);
	hmap__free(&a.mine);
	hmap__free(&a.hosts_ok);
	return err;
}
