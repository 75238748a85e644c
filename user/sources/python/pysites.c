// SPDX-License-Identifier: MIT
/*
 * The monitor's Python call-site table (user/sources/python/pysites.h). Per process: an
 * array of at most cap sites (text, estimated calls and ns) with a hash
 * index on the text, and the counts of sites evicted, which are reported
 * under site="other" with the sites below the top N. Eviction takes the
 * site with the least time: a linear scan, done only when a new site
 * arrives at a full table (cap <= 1024).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "lib/hmap.h"
#include "sources/python/pysites.h"

struct psite {
	uint64_t calls, ns;
	uint64_t hash;
	char *text;
};

struct pproc {
	uint32_t pid;
	bool gone;			/* not alive at the last sweep */
	unsigned n;
	struct psite *sites;		/* cap of them */
	struct hmap index;		/* hash of text -> index + 1 */
	uint64_t other_calls, other_ns;	/* evicted sites */
	uint64_t evicted;
};

struct pysites {
	unsigned top, cap;
	struct hmap procs;		/* pid -> struct pproc * */
	uint64_t evicted;		/* of processes forgotten */
};

unsigned pysites__cap(unsigned top)
{
	unsigned c = top * 8;

	return c < PYSITES_CAP_MIN ? PYSITES_CAP_MIN : c > PYSITES_CAP_MAX ? PYSITES_CAP_MAX : c;
}

struct pysites *pysites__new(unsigned top)
{
	struct pysites *ps = calloc(1, sizeof(*ps));

	if (!ps)
		return NULL;
	ps->top = top;
	ps->cap = pysites__cap(top);
	return ps;
}

static void pproc_free(struct pproc *p)
{
	if (!p)
		return;
	for (unsigned i = 0; i < p->n; i++)
		free(p->sites[i].text);
	free(p->sites);
	hmap__free(&p->index);
	free(p);
}

void pysites__free(struct pysites *ps)
{
	uint64_t v;

	if (!ps)
		return;
	for (size_t it = 0; hmap__next(&ps->procs, &it, NULL, &v);)
		pproc_free((void *)(uintptr_t)v);
	hmap__free(&ps->procs);
	free(ps);
}

static struct pproc *pproc_of(struct pysites *ps, uint32_t pid)
{
	uint64_t *v = hmap__get(&ps->procs, pid);
	struct pproc *p;

	if (v)
		return (void *)(uintptr_t)*v;
	p = calloc(1, sizeof(*p));
	if (!p || !(p->sites = calloc(ps->cap, sizeof(*p->sites))) ||
	    hmap__put(&ps->procs, pid, (uintptr_t)p)) {
		if (p)
			free(p->sites);
		free(p);
		return NULL;
	}
	p->pid = pid;
	return p;
}

/* Makes room at a full table: the site of least time goes to "other". */
static unsigned evict(struct pproc *p)
{
	unsigned min = 0;

	for (unsigned i = 1; i < p->n; i++)
		if (p->sites[i].ns < p->sites[min].ns ||
		    (p->sites[i].ns == p->sites[min].ns && p->sites[i].calls < p->sites[min].calls))
			min = i;
	p->other_calls += p->sites[min].calls;
	p->other_ns += p->sites[min].ns;
	p->evicted++;
	if (p->sites[min].text)
		hmap__del(&p->index, p->sites[min].hash, NULL);
	free(p->sites[min].text);
	p->sites[min] = (struct psite){ 0 };
	return min;
}

int pysites__add(struct pysites *ps, uint32_t pid, const char *site, uint64_t calls,
		 uint64_t ns)
{
	struct pproc *p = pproc_of(ps, pid);
	uint64_t h, *v;
	struct psite *s;
	unsigned i;

	if (!p)
		return -ENOMEM;
	p->gone = false;
	if (!site) {
		p->other_calls += calls;
		p->other_ns += ns;
		return 0;
	}
	h = hash__bytes(site, strlen(site));
	v = hmap__get(&p->index, h);
	if (v) {
		s = &p->sites[*v - 1];
		/* Another text with the same 64-bit hash: counted, unnamed. */
		if (strcmp(s->text, site)) {
			p->other_calls += calls;
			p->other_ns += ns;
			return 0;
		}
		s->calls += calls;
		s->ns += ns;
		return 0;
	}
	i = p->n < ps->cap ? p->n : evict(p);
	s = &p->sites[i];
	if (!(s->text = strdup(site)) || hmap__put(&p->index, h, i + 1)) {
		/* An evicted slot stays empty (skipped, evicted first). */
		free(s->text);
		*s = (struct psite){ 0 };
		p->other_calls += calls;
		p->other_ns += ns;
		return -ENOMEM;
	}
	s->hash = h;
	s->calls = calls;
	s->ns = ns;
	if (i == p->n)
		p->n++;
	return 0;
}

void pysites__sweep(struct pysites *ps, bool (*alive)(uint32_t pid))
{
	uint64_t pid, v, *del = calloc(ps->procs.count + 1, sizeof(*del));
	size_t n = 0;

	if (!del)
		return;
	for (size_t it = 0; hmap__next(&ps->procs, &it, &pid, &v);) {
		struct pproc *p = (void *)(uintptr_t)v;

		if (alive(p->pid))
			p->gone = false;
		else if (p->gone)
			del[n++] = pid;
		else
			p->gone = true;
	}
	for (size_t i = 0; i < n; i++) {
		if (hmap__del(&ps->procs, del[i], &v)) {
			ps->evicted += ((struct pproc *)(uintptr_t)v)->evicted;
			pproc_free((void *)(uintptr_t)v);
		}
	}
	free(del);
}

/* A label value as the exposition format wants it: \\, \" and \n. */
static void escape(char *out, size_t len, const char *s)
{
	size_t o = 0;

	for (; *s && o + 3 < len; s++) {
		if (*s == '\\' || *s == '"' || *s == '\n') {
			out[o++] = '\\';
			out[o++] = *s == '\n' ? 'n' : *s;
		} else {
			out[o++] = *s;
		}
	}
	out[o] = 0;
}

static int cmp_ns(const void *a, const void *b)
{
	const struct psite *x = *(const struct psite *const *)a, *y = *(const struct psite *const *)b;

	if (x->ns != y->ns)
		return x->ns < y->ns ? 1 : -1;
	if (x->calls != y->calls)
		return x->calls < y->calls ? 1 : -1;
	return strcmp(x->text, y->text);
}

static int cmp_pid(const void *a, const void *b)
{
	const struct pproc *x = *(const struct pproc *const *)a, *y = *(const struct pproc *const *)b;

	return x->pid < y->pid ? -1 : x->pid > y->pid;
}

enum { M_CALLS, M_SECONDS };

static void render_proc(const struct pysites *ps, const struct pproc *p, int what,
			struct psite **rows, void (*out)(void *ctx, const char *line),
			void (*comm)(void *ctx, uint32_t pid, char *buf, size_t len), void *ctx)
{
	char c[64], label[2048], line[2304];
	uint64_t oc = p->other_calls, ons = p->other_ns;
	unsigned n = 0;

	for (unsigned i = 0; i < p->n; i++)
		if (p->sites[i].text)
			rows[n++] = &p->sites[i];
	qsort(rows, n, sizeof(*rows), cmp_ns);
	comm(ctx, p->pid, c, sizeof(c));
	for (unsigned i = 0; i < n; i++) {
		if (i >= ps->top) {
			oc += rows[i]->calls;
			ons += rows[i]->ns;
			continue;
		}
		escape(label, sizeof(label), rows[i]->text);
		if (what == M_CALLS)
			snprintf(line, sizeof(line), "cgbpf_python_site_calls_total{pid=\"%u\","
				 "comm=\"%s\",site=\"%s\"} %" PRIu64 "\n", p->pid, c, label,
				 rows[i]->calls);
		else
			snprintf(line, sizeof(line), "cgbpf_python_site_seconds_total{pid=\"%u\","
				 "comm=\"%s\",site=\"%s\"} %.9f\n", p->pid, c, label,
				 rows[i]->ns / 1e9);
		out(ctx, line);
	}
	if (oc || ons) {
		if (what == M_CALLS)
			snprintf(line, sizeof(line), "cgbpf_python_site_calls_total{pid=\"%u\","
				 "comm=\"%s\",site=\"other\"} %" PRIu64 "\n", p->pid, c, oc);
		else
			snprintf(line, sizeof(line), "cgbpf_python_site_seconds_total{pid=\"%u\","
				 "comm=\"%s\",site=\"other\"} %.9f\n", p->pid, c, ons / 1e9);
		out(ctx, line);
	}
}

void pysites__render(const struct pysites *ps,
		     void (*out)(void *ctx, const char *line),
		     void (*comm)(void *ctx, uint32_t pid, char *buf, size_t len), void *ctx)
{
	struct pproc **procs = calloc(ps->procs.count + 1, sizeof(*procs));
	struct psite **rows = calloc(ps->cap, sizeof(*rows));
	uint64_t v, evicted = ps->evicted;
	size_t np = 0;
	char line[256];

	if (!procs || !rows)
		goto out;
	for (size_t it = 0; hmap__next(&ps->procs, &it, NULL, &v);) {
		procs[np] = (void *)(uintptr_t)v;
		evicted += procs[np]->evicted;
		np++;
	}
	qsort(procs, np, sizeof(*procs), cmp_pid);
	out(ctx, "# HELP cgbpf_python_site_calls_total API calls per Python call site (file:line "
		 "function of the innermost user frame), estimated from sampled calls; the top "
		 "--python-sites sites by API time per process, the rest as site=\"other\".\n"
		 "# TYPE cgbpf_python_site_calls_total counter\n");
	for (size_t i = 0; i < np; i++)
		render_proc(ps, procs[i], M_CALLS, rows, out, comm, ctx);
	out(ctx, "# HELP cgbpf_python_site_seconds_total API time per Python call site, "
		 "estimated from sampled calls (as cgbpf_python_site_calls_total).\n"
		 "# TYPE cgbpf_python_site_seconds_total counter\n");
	for (size_t i = 0; i < np; i++)
		render_proc(ps, procs[i], M_SECONDS, rows, out, comm, ctx);
	snprintf(line, sizeof(line), "# HELP cgbpf_python_sites_tracked Python call sites held "
		 "for a process (at most %u).\n# TYPE cgbpf_python_sites_tracked gauge\n", ps->cap);
	out(ctx, line);
	for (size_t i = 0; i < np; i++) {
		char c[64];

		comm(ctx, procs[i]->pid, c, sizeof(c));
		snprintf(line, sizeof(line), "cgbpf_python_sites_tracked{pid=\"%u\",comm=\"%s\"} %u\n",
			 procs[i]->pid, c, procs[i]->n);
		out(ctx, line);
	}
	snprintf(line, sizeof(line), "# HELP cgbpf_python_sites_evicted_total Python call sites "
		 "dropped from a full table (their counts went to site=\"other\").\n"
		 "# TYPE cgbpf_python_sites_evicted_total counter\n"
		 "cgbpf_python_sites_evicted_total %" PRIu64 "\n", evicted);
	out(ctx, line);
out:
	free(procs);
	free(rows);
}
