// SPDX-License-Identifier: MIT
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include "core/apilib.h"
#include "lib/hmap.h"
#include "lib/log.h"
#include "lib/stats.h"
#include "lib/sumtab.h"
#include "out/summary.h"

struct kernel_count {
	char *name;
	uint64_t launches;
	struct stats api;	/* launch call durations */
};

struct summary {
	struct stats *funcs[LIB__COUNT];	/* per function, lazily allocated */
	struct stats *inner[LIB__COUNT];	/* CUDA API calls made inside another one */
	uint16_t nfuncs[LIB__COUNT];
	const char **names[LIB__COUNT];		/* per function: its name in the trace */
	bool (*is_memset[LIB__COUNT])(uint16_t func);	/* the libraries' (core/apilib.h) */
	struct hmap kernels;			/* hash(name) -> struct kernel_count * */
	struct kernel_count *last_kernel;	/* the latest launch's, checked by name */
	uint64_t unnamed_launches;
	uint64_t launches;
	uint64_t copies[DIR__COUNT], copy_bytes[DIR__COUNT];
	uint64_t memsets, memset_bytes;
	uint64_t errors;
};

struct summary *summary__new(void)
{
	struct summary *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	for (unsigned l = 0; l < LIB__COUNT; l++) {
		const struct api_lib *lib = apilib__get(l);

		if (!lib || !lib->nfuncs)
			continue;
		s->nfuncs[l] = lib->nfuncs;
		s->is_memset[l] = lib->is_memset;
		s->funcs[l] = calloc(lib->nfuncs, sizeof(struct stats));
		s->names[l] = calloc(lib->nfuncs, sizeof(char *));
		if (!s->funcs[l] || !s->names[l])
			goto fail;
		if (l == LIB_CUDA || l == LIB_CUDART) {
			s->inner[l] = calloc(lib->nfuncs, sizeof(struct stats));
			if (!s->inner[l])
				goto fail;
		}
	}
	return s;
fail:
	summary__free(s);
	return NULL;
}

void summary__free(struct summary *s)
{
	uint64_t v;

	if (!s)
		return;
	for (int l = 0; l < LIB__COUNT; l++) {
		for (int f = 0; s->funcs[l] && f < s->nfuncs[l]; f++)
			stats__free(&s->funcs[l][f]);
		for (int f = 0; s->inner[l] && f < s->nfuncs[l]; f++)
			stats__free(&s->inner[l][f]);
		free(s->funcs[l]);
		free(s->inner[l]);
		free(s->names[l]);
	}
	for (size_t it = 0; hmap__next(&s->kernels, &it, NULL, &v);) {
		struct kernel_count *k = (void *)(uintptr_t)v;

		stats__free(&k->api);
		free(k->name);
		free(k);
	}
	hmap__free(&s->kernels);
	free(s);
}

uint64_t summary__calls(const struct summary *s, uint8_t lib, uint16_t func)
{
	if (lib >= LIB__COUNT || func >= s->nfuncs[lib])
		return 0;
	return s->funcs[lib][func].n;
}

static void count_kernel(struct summary *s, const char *name, uint64_t dur)
{
	uint64_t h, *v;
	struct kernel_count *k = s->last_kernel;

	/* A loop launches the same kernel again and again: no hash then. */
	if (k && !strcmp(k->name, name))
		goto found;
	/* Linear probing on the hash keeps distinct names apart. */
	for (h = hash__bytes(name, strlen(name)); (v = hmap__get(&s->kernels, h)); h++) {
		k = (void *)(uintptr_t)*v;
		if (!strcmp(k->name, name))
			goto found;
	}
	k = calloc(1, sizeof(*k));
	if (!k)
		return;
	k->name = strdup(name);
	if (!k->name || hmap__put(&s->kernels, h, (uintptr_t)k)) {
		free(k->name);
		free(k);
		return;
	}
found:
	s->last_kernel = k;
	k->launches++;
	stats__add(&k->api, dur);
}

static void on_end(void *ctx, struct thread *t, struct call *c)
{
	struct summary *s = ctx;
	uint64_t dur;

	/* A call whose return was never seen has no duration to report. */
	if (!c->ended || c->lib >= LIB__COUNT || c->func >= s->nfuncs[c->lib] ||
	    !s->funcs[c->lib])
		return;
	dur = c->end_ts - c->ts;
	s->names[c->lib][c->func] = c->name;
	if (c->ret)
		s->errors++;
	/* One user action, counted once: a CUDA API call made inside another
	 * (the runtime's driver calls) has its own rows, and its launch, copy
	 * or memset was counted with the outer call. */
	if (s->inner[c->lib] && model__inside_cuda_api(t, c)) {
		stats__add(&s->inner[c->lib][c->func], dur);
		return;
	}
	stats__add(&s->funcs[c->lib][c->func], dur);
	if (c->is_launch) {
		s->launches++;
		if (!c->kernel)
			s->unnamed_launches++;
		count_kernel(s, c->kernel ? c->kernel : "(unnamed: loaded before cgbpf attached)",
			     dur);
	}
	if (c->dir != DIR_NONE && c->ret == 0) {
		s->copies[c->dir]++;
		s->copy_bytes[c->dir] += c->bytes;
	} else if (s->is_memset[c->lib] && s->is_memset[c->lib](c->func) && c->ret == 0) {
		s->memsets++;
		s->memset_bytes += c->bytes;
	}
}

struct sink summary__sink(struct summary *s)
{
	return (struct sink){ .ctx = s, .call_end = on_end };
}

struct row {
	const char *name;
	struct stats *st;
};

static int cmp_rows(const void *a, const void *b)
{
	const struct row *x = a, *y = b;

	return x->st->total < y->st->total ? 1 : x->st->total > y->st->total ? -1 : 0;
}

/* The rows of the runtime and driver functions with calls in tab (funcs
 * or inner); their total time in *total. NULL on ENOMEM. */
static struct row *api_rows(struct summary *s, struct stats *const tab[LIB__COUNT], int *nrows,
			    uint64_t *total)
{
	static const uint8_t api_libs[] = { LIB_CUDART, LIB_CUDA };
	struct row *rows;
	int n = 0, cap = 0;

	*total = 0;
	for (size_t j = 0; j < sizeof(api_libs); j++)
		cap += s->nfuncs[api_libs[j]];
	rows = calloc(cap ? cap : 1, sizeof(*rows));
	if (!rows)
		return NULL;
	for (size_t j = 0; j < sizeof(api_libs); j++) {
		int l = api_libs[j];

		for (int i = 0; tab[l] && i < s->nfuncs[l]; i++)
			if (tab[l][i].n) {
				rows[n].name = s->names[l][i];
				rows[n].st = &tab[l][i];
				*total += rows[n].st->total;
				n++;
			}
	}
	qsort(rows, n, sizeof(rows[0]), cmp_rows);
	*nrows = n;
	return rows;
}

static struct sumtab_row *tab_rows(const struct row *rows, int n)
{
	struct sumtab_row *r = calloc(n ? n : 1, sizeof(*r));

	for (int i = 0; r && i < n; i++)
		r[i] = (struct sumtab_row){ .name = rows[i].name, .st = rows[i].st };
	return r;
}

/*
 * nsys's cuda_api_sum: the runtime and driver APIs in one table, each
 * user action once. Calls made inside another CUDA API call of the same
 * thread (the driver calls of a runtime call) are left out of it and
 * listed below it, their Time (%) relative to the same total, so no time
 * is counted twice.
 */
static void print_api(struct summary *s, FILE *f)
{
	struct row *rows, *inner;
	struct sumtab_row *r = NULL, *ri = NULL;
	uint64_t total, inner_total;
	int n = 0, ninner = 0;

	rows = api_rows(s, s->funcs, &n, &total);
	inner = api_rows(s, s->inner, &ninner, &inner_total);
	if (rows && inner) {
		r = tab_rows(rows, n);
		ri = tab_rows(inner, ninner);
	}
	if (!r || !ri)
		n = ninner = 0;
	sumtab__api(f, SUMTAB_TEXT, r, n, ri, ninner);
	free(r);
	free(ri);
	free(rows);
	free(inner);
}

static void print_kernels(struct summary *s, FILE *f)
{
	struct sumtab_kernel *ks = calloc(s->kernels.count ? s->kernels.count : 1, sizeof(*ks));
	size_t n = 0;
	uint64_t v;

	if (!ks)
		return;
	for (size_t it = 0; hmap__next(&s->kernels, &it, NULL, &v);) {
		const struct kernel_count *k = (void *)(uintptr_t)v;

		ks[n++] = (struct sumtab_kernel){ .name = k->name, .launches = k->launches,
						  .avg_api = k->api.mean };
	}
	sumtab__kernels(f, SUMTAB_TEXT, ks, n, s->launches, s->unnamed_launches);
	free(ks);
}

static void print_memory(struct summary *s, const struct model *m, FILE *f)
{
	struct sumtab_peak *ps;
	size_t n = 0;
	uint64_t v;

	sumtab__api_mem(f, SUMTAB_TEXT, s->copies, s->copy_bytes, s->memsets, s->memset_bytes);
	ps = calloc(m->procs.count ? m->procs.count : 1, sizeof(*ps));
	if (!ps)
		return;
	for (size_t it = 0; hmap__next(&m->procs, &it, NULL, &v);) {
		const struct proc *p = (void *)(uintptr_t)v;

		ps[n++] = (struct sumtab_peak){ .pid = p->pid, .comm = p->comm,
						.gpu = p->mem_peak[CTR_GPU_MEM],
						.pinned = p->mem_peak[CTR_HOST_PINNED] };
	}
	sumtab__peak(f, SUMTAB_TEXT, ps, n);
	free(ps);
}

void summary__print(struct summary *s, const struct model *m, const struct capture_info *ci,
		    FILE *f)
{
	static const char *const rec_names[REC__COUNT] = {
		[REC_CALL_ENTER] = "call entries", [REC_CALL_EXIT] = "call returns",
		[REC_STRING] = "string arguments", [REC_PROC_FORK] = "forks",
		[REC_PROC_EXEC] = "execs", [REC_PROC_EXIT] = "process exits",
		[REC_THREAD_EXIT] = "thread exits", [REC_MMAP] = "library mappings",
		[REC_STACK_SAMPLE] = "CPU samples", [REC_STACK_BT] = "backtraces",
		[REC_SYSCALL] = "syscalls", [REC_NVTX] = "NVTX events",
		[REC_GPU_BATCH] = "GPU activity batches",
		[REC_OUT_ARRAY] = "out arrays (ncclCommInitAll's comms)",
	};
	uint64_t dropped = 0;
	char b[32];

	print_api(s, f);
	print_kernels(s, f);
	print_memory(s, m, f);
	for (int p = 0; p < SUMMARY__PLACES; p++)
		for (size_t i = 0; i < ci->nsections; i++)
			if (ci->sections[i].place == (enum summary_place)p)
				ci->sections[i].print(ci->sections[i].ctx, ci->drops, f);
	fprintf(f, "\n** Capture:\n\n");
	fprintf(f, "   duration %.3f s, %" PRIu64 " records, %zu library file(s), %zu probes\n",
		ci->duration_ns / 1e9, ci->records, ci->lib_files, ci->probes);
	if (ci->trace_path) {
		sumtab__human_bytes(ci->trace_bytes, b, sizeof(b));
		fprintf(f, "   trace %s (%s)\n", ci->trace_path, b);
	}
	for (int i = 0; i < REC__COUNT; i++)
		dropped += ci->drops[i];
	if (dropped) {
		fprintf(f, "   LOST %" PRIu64 " records (ring buffer full; raise --ring-size):", dropped);
		for (int i = 0; i < REC__COUNT; i++)
			if (ci->drops[i])
				fprintf(f, " %s %" PRIu64, rec_names[i] ? rec_names[i] : "?",
					ci->drops[i]);
		fputc('\n', f);
	} else {
		fprintf(f, "   no records lost\n");
	}
	if (ci->invalid)
		fprintf(f, "   %" PRIu64 " malformed records rejected\n", ci->invalid);
	if (m->unmatched_exits || m->lost_exits)
		fprintf(f, "   %" PRIu64 " returns of calls entered before attach, %" PRIu64
			   " calls whose return was not seen\n",
			m->unmatched_exits, m->lost_exits);
	if (ci->nlate) {
		fprintf(f, "   %zu window(s) before probes (a library mapped, or a child forked, "
			   "before its probes were in place): calls made in them may be missing, "
			   "%.3f ms in all:\n", ci->nlate, ci->late_ns / 1e6);
		fprintf(f, "   %8s  %-16s %-28s %12s\n", "PID", "Process", "Library", "Probed after");
		for (size_t i = 0; i < ci->nlate_rows; i++)
			fprintf(f, "   %8u  %-16.16s %-28.64s %9.3f ms\n", ci->late[i].pid,
				ci->late[i].comm, ci->late[i].file, ci->late[i].window_ns / 1e6);
		if (ci->nlate > ci->nlate_rows)
			fprintf(f, "   ... and %zu more (each said on stderr and on its process's "
				   "track)\n", ci->nlate - ci->nlate_rows);
	}
	if (ci->forks_unprobed) {
		fprintf(f, "   %" PRIu64 " forked child(ren) exited before their probes were in place "
			"(a few ms after the fork): their calls, if any, are missing\n",
			ci->forks_unprobed);
	}
	if (m->strings_unreadable)
		fprintf(f, "   %" PRIu64 " string arguments could not be read (shown as "
			   "\"(unreadable at 0x...)\")\n", m->strings_unreadable);
	if (m->strings_late)
		fprintf(f, "   %" PRIu64 " string arguments read after their call's entry (their page "
			   "was not resident yet)\n", m->strings_late);
	if (m->strings_orphaned)
		fprintf(f, "   %" PRIu64 " string arguments without their call (entry lost)\n",
			m->strings_orphaned);
	if (s->errors)
		fprintf(f, "   %" PRIu64 " calls returned an error\n", s->errors);
}

void summary__add_section(struct capture_info *ci, enum summary_place place,
			  void (*print)(const void *ctx, const uint64_t *drops, FILE *f),
			  const void *ctx)
{
	size_t max = sizeof(ci->sections) / sizeof(ci->sections[0]);

	if (ci->nsections == max) {
		warn("summary: more than %zu source sections; one is left out", max);
		return;
	}
	ci->sections[ci->nsections].place = place;
	ci->sections[ci->nsections].print = print;
	ci->sections[ci->nsections++].ctx = ctx;
}
