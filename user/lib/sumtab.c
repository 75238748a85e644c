// SPDX-License-Identifier: MIT
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "lib/ncclbw.h"
#include "lib/sumtab.h"

static int cmp_rows(const void *a, const void *b)
{
	const struct sumtab_row *x = a, *y = b;
	int c;

	if (x->st->total != y->st->total)
		return x->st->total < y->st->total ? 1 : -1;
	c = strcmp(x->name, y->name);
	if (c || !x->style || !y->style)
		return c;
	return strcmp(x->style, y->style);
}

void sumtab__sort(struct sumtab_row *rows, int n)
{
	if (n > 1)
		qsort(rows, n, sizeof(*rows), cmp_rows);
}

void sumtab__json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (*p == '"' || *p == '\\')
			fprintf(f, "\\%c", *p);
		else if (*p < 0x20 || *p == 0x7f)
			fprintf(f, "\\u%04x", *p);
		else
			fputc(*p, f);
	}
	fputc('"', f);
}

void sumtab__csv_str(FILE *f, const char *s)
{
	if (!strpbrk(s, ",\"\r\n")) {
		fputs(s, f);
		return;
	}
	fputc('"', f);
	for (; *s; s++) {
		if (*s == '"')
			fputc('"', f);
		fputc(*s, f);
	}
	fputc('"', f);
}

/* JSON has no NaN or infinity. */
static void json_double(FILE *f, double d, const char *fmt)
{
	if (isfinite(d))
		fprintf(f, fmt, d);
	else
		fputs("null", f);
}

void sumtab__begin(FILE *f, enum sumtab_fmt fmt, const char *const *cols, int ncols)
{
	if (fmt == SUMTAB_JSON) {
		fputc('[', f);
		return;
	}
	for (int i = 0; i < ncols; i++) {
		if (i)
			fputc(',', f);
		sumtab__csv_str(f, cols[i]);
	}
	fputc('\n', f);
}

void sumtab__row(FILE *f, enum sumtab_fmt fmt, const char *const *cols,
		 const struct sumtab_cell *cells, int ncols, bool first)
{
	if (fmt == SUMTAB_JSON)
		fputs(first ? "\n  {" : ",\n  {", f);
	for (int i = 0; i < ncols; i++) {
		const struct sumtab_cell *c = &cells[i];

		if (fmt == SUMTAB_JSON) {
			fputs(i ? ", " : "", f);
			sumtab__json_str(f, cols[i]);
			fputs(": ", f);
		} else if (i) {
			fputc(',', f);
		}
		switch (c->type) {
		case SC_U64:
			fprintf(f, "%" PRIu64, c->u);
			break;
		case SC_DOUBLE:
			/* Full precision: scripts compare, people read the text. */
			if (fmt == SUMTAB_JSON)
				json_double(f, c->d, "%.17g");
			else
				fprintf(f, "%.17g", c->d);
			break;
		case SC_STR:
			if (fmt == SUMTAB_JSON)
				sumtab__json_str(f, c->s);
			else
				sumtab__csv_str(f, c->s);
			break;
		}
	}
	fputs(fmt == SUMTAB_JSON ? "}" : "\n", f);
}

void sumtab__end(FILE *f, enum sumtab_fmt fmt)
{
	if (fmt == SUMTAB_JSON)
		fputs("\n]", f);
}

static double pct(uint64_t part, uint64_t total)
{
	return total ? 100.0 * part / total : 0.0;
}

void sumtab__time(FILE *f, enum sumtab_fmt fmt, const struct sumtab_time *t,
		  struct sumtab_row *rows, int n)
{
	const char *cols[] = { "Time (%)", "Total Time (ns)", t->count, "Avg (ns)", "Med (ns)",
			       "Min (ns)", "Max (ns)", "StdDev (ns)", "Style", t->name };
	uint64_t total = t->total;
	int nc = 10;

	if (!total)
		for (int i = 0; i < n; i++)
			total += rows[i].st->total;
	sumtab__sort(rows, n);
	if (!t->style) {
		cols[8] = t->name;
		nc = 9;
	}
	if (fmt != SUMTAB_TEXT) {
		sumtab__begin(f, fmt, cols, nc);
		for (int i = 0; i < n; i++) {
			struct stats *st = rows[i].st;
			struct sumtab_cell c[10] = {
				{ .type = SC_DOUBLE, .d = pct(st->total, total) },
				{ .type = SC_U64, .u = st->total },
				{ .type = SC_U64, .u = st->n },
				{ .type = SC_DOUBLE, .d = st->mean },
				{ .type = SC_U64, .u = stats__median(st) },
				{ .type = SC_U64, .u = st->min },
				{ .type = SC_U64, .u = st->max },
				{ .type = SC_DOUBLE, .d = stats__stddev(st) },
				{ .type = SC_STR, .s = rows[i].style ? rows[i].style : "" },
				{ .type = SC_STR, .s = rows[i].name },
			};

			if (!t->style)
				c[8] = c[9];
			sumtab__row(f, fmt, cols, c, nc, i == 0);
		}
		sumtab__end(f, fmt);
		return;
	}
	if (t->style)
		fprintf(f, " %8s %16s %10s %12s %12s %10s %12s %12s  %-9s %s\n", cols[0], cols[1],
			cols[2], cols[3], cols[4], cols[5], cols[6], cols[7], cols[8], cols[9]);
	else
		fprintf(f, " %8s %16s %10s %12s %12s %10s %12s %12s  %s\n", cols[0], cols[1],
			cols[2], cols[3], cols[4], cols[5], cols[6], cols[7], cols[8]);
	for (int i = 0; i < n; i++) {
		struct stats *st = rows[i].st;

		fprintf(f, " %8.1f %16" PRIu64 " %10" PRIu64 " %12.1f %12" PRIu64 " %10" PRIu64
			   " %12" PRIu64 " %12.1f  ",
			pct(st->total, total), st->total, st->n, st->mean, stats__median(st), st->min,
			st->max, stats__stddev(st));
		if (t->style)
			fprintf(f, "%-9s ", rows[i].style ? rows[i].style : "");
		fprintf(f, "%s\n", rows[i].name);
	}
}

void sumtab__size(FILE *f, enum sumtab_fmt fmt, struct sumtab_row *rows, int n)
{
	static const char *const cols[] = { "Total (MB)", "Count", "Avg (MB)", "Med (MB)",
					    "Min (MB)", "Max (MB)", "StdDev (MB)", "Operation" };

	sumtab__sort(rows, n);
	if (fmt != SUMTAB_TEXT) {
		sumtab__begin(f, fmt, cols, 8);
		for (int i = 0; i < n; i++) {
			struct stats *st = rows[i].st;
			struct sumtab_cell c[8] = {
				{ .type = SC_DOUBLE, .d = st->total / 1e6 },
				{ .type = SC_U64, .u = st->n },
				{ .type = SC_DOUBLE, .d = st->mean / 1e6 },
				{ .type = SC_DOUBLE, .d = stats__median(st) / 1e6 },
				{ .type = SC_DOUBLE, .d = st->min / 1e6 },
				{ .type = SC_DOUBLE, .d = st->max / 1e6 },
				{ .type = SC_DOUBLE, .d = stats__stddev(st) / 1e6 },
				{ .type = SC_STR, .s = rows[i].name },
			};

			sumtab__row(f, fmt, cols, c, 8, i == 0);
		}
		sumtab__end(f, fmt);
		return;
	}
	/* nsys's MB: 10^6 bytes. */
	fprintf(f, " %12s %10s %12s %12s %12s %12s %12s  %s\n", cols[0], cols[1], cols[2], cols[3],
		cols[4], cols[5], cols[6], cols[7]);
	for (int i = 0; i < n; i++) {
		struct stats *st = rows[i].st;

		fprintf(f, " %12.3f %10" PRIu64 " %12.3f %12.3f %12.3f %12.3f %12.3f  %s\n",
			st->total / 1e6, st->n, st->mean / 1e6, stats__median(st) / 1e6,
			st->min / 1e6, st->max / 1e6, stats__stddev(st) / 1e6, rows[i].name);
	}
}

/* ---------------------------------------------------------------- sections */

static const struct sumtab_time api_cols = { .count = "Num Calls", .name = "Name" };

void sumtab__api(FILE *f, enum sumtab_fmt fmt, struct sumtab_row *rows, int n,
		 struct sumtab_row *inner, int ninner)
{
	struct sumtab_time t = api_cols;

	if (fmt != SUMTAB_TEXT) {
		sumtab__time(f, fmt, &t, rows, n);
		return;
	}
	fprintf(f, "\n** CUDA API Summary (cuda_api_sum):\n\n");
	if (!n) {
		fprintf(f, "   no CUDA API calls were traced\n");
		return;
	}
	for (int i = 0; i < n; i++)
		t.total += rows[i].st->total;
	sumtab__time(f, fmt, &t, rows, n);
	if (ninner) {
		fprintf(f, "\n   Made inside the calls above (the runtime's driver calls), not counted"
			   " in them again;\n   Time (%%) of the same total:\n\n");
		sumtab__time(f, fmt, &t, inner, ninner);
	}
}

void sumtab__api_inner(FILE *f, enum sumtab_fmt fmt, struct sumtab_row *rows, int n,
		       struct sumtab_row *inner, int ninner)
{
	struct sumtab_time t = api_cols;

	/* Time (%) of the outer calls' total, as under cuda_api_sum. */
	for (int i = 0; i < n; i++)
		t.total += rows[i].st->total;
	if (!t.total)
		t.total = 1;
	if (fmt == SUMTAB_TEXT) {
		fprintf(f, "\n** CUDA API calls made inside other CUDA API calls "
			   "(cuda_api_inner_sum):\n\n");
		if (!ninner) {
			fprintf(f, "   none\n");
			return;
		}
	}
	sumtab__time(f, fmt, &t, inner, ninner);
}

static int cmp_kernels(const void *a, const void *b)
{
	const struct sumtab_kernel *x = a, *y = b;

	if (x->launches != y->launches)
		return x->launches < y->launches ? 1 : -1;
	return strcmp(x->name, y->name);
}

#define TOP_KERNELS 15

static int cmp_site_time(const void *a, const void *b)
{
	const struct sumtab_pysite *x = a, *y = b;

	if (x->ns != y->ns)
		return x->ns < y->ns ? 1 : -1;
	return strcmp(x->site, y->site);
}

static int cmp_site_launches(const void *a, const void *b)
{
	const struct sumtab_pysite *x = a, *y = b;

	if (x->launches != y->launches)
		return x->launches < y->launches ? 1 : -1;
	return cmp_site_time(a, b);
}

#define TOP_SITES 15

static void site_rows(FILE *f, const struct sumtab_pysite *s, size_t n, uint64_t total,
		      bool launches)
{
	fprintf(f, " %8s %16s %10s %10s  %s\n", "Time (%)", "Total Time (ns)", "Calls",
		"Launches", "Call site (file:line function)");
	for (size_t i = 0; i < n && i < TOP_SITES; i++) {
		if (launches && !s[i].launches)
			break;
		fprintf(f, " %8.1f %16" PRIu64 " %10" PRIu64 " %10" PRIu64 "  %s\n",
			pct(s[i].ns, total), s[i].ns, s[i].calls, s[i].launches, s[i].site);
	}
}

static int cmp_self(const void *a, const void *b)
{
	const struct sumtab_self *x = a, *y = b;

	if (x->n != y->n)
		return x->n < y->n ? 1 : -1;
	return strcmp(x->name, y->name);
}

void sumtab__cpu_self(FILE *f, enum sumtab_fmt fmt, struct sumtab_self *s, size_t n,
		      uint64_t samples)
{
	static const char *const cols[] = { "Self", "(%)", "Function" };

	if (n > 1)
		qsort(s, n, sizeof(*s), cmp_self);
	if (fmt != SUMTAB_TEXT) {
		sumtab__begin(f, fmt, cols, 3);
		for (size_t i = 0; i < n; i++) {
			struct sumtab_cell c[3] = {
				{ .type = SC_U64, .u = s[i].n },
				{ .type = SC_DOUBLE, .d = pct(s[i].n, samples) },
				{ .type = SC_STR, .s = s[i].name },
			};

			sumtab__row(f, fmt, cols, c, 3, i == 0);
		}
		sumtab__end(f, fmt);
		return;
	}
	if (!n)
		return;
	fprintf(f, "\n   %8s %6s  %s\n", "Self", "%", "Function");
	for (size_t i = 0; i < n && i < 10; i++)
		fprintf(f, "   %8" PRIu64 " %5.1f%%  %s\n", s[i].n, pct(s[i].n, samples), s[i].name);
}

void sumtab__pysites(FILE *f, enum sumtab_fmt fmt, struct sumtab_pysite *s, size_t n)
{
	static const char *const cols[] = { "Time (%)", "Total Time (ns)", "Calls", "Launches",
					    "Call site" };
	uint64_t total = 0;

	for (size_t i = 0; i < n; i++)
		total += s[i].ns;
	if (n > 1)
		qsort(s, n, sizeof(*s), cmp_site_time);
	if (fmt != SUMTAB_TEXT) {
		sumtab__begin(f, fmt, cols, 5);
		for (size_t i = 0; i < n; i++) {
			struct sumtab_cell c[5] = {
				{ .type = SC_DOUBLE, .d = pct(s[i].ns, total) },
				{ .type = SC_U64, .u = s[i].ns },
				{ .type = SC_U64, .u = s[i].calls },
				{ .type = SC_U64, .u = s[i].launches },
				{ .type = SC_STR, .s = s[i].site },
			};

			sumtab__row(f, fmt, cols, c, 5, i == 0);
		}
		sumtab__end(f, fmt);
		return;
	}
	if (!n)
		return;
	fprintf(f, "\n** Python call sites (python_sites):\n\n");
	fprintf(f, "   Top call sites by API time (outermost API calls):\n");
	site_rows(f, s, n, total, false);
	if (n > 1)
		qsort(s, n, sizeof(*s), cmp_site_launches);
	if (s[0].launches) {
		fprintf(f, "\n   Top call sites by launches:\n");
		site_rows(f, s, n, total, true);
	}
}

void sumtab__kernels(FILE *f, enum sumtab_fmt fmt, struct sumtab_kernel *ks, size_t n,
		     uint64_t launches, uint64_t unnamed)
{
	static const char *const cols[] = { "Launches", "(%)", "Avg API (ns)", "Kernel" };

	if (n > 1)
		qsort(ks, n, sizeof(*ks), cmp_kernels);
	if (fmt != SUMTAB_TEXT) {
		sumtab__begin(f, fmt, cols, 4);
		for (size_t i = 0; i < n; i++) {
			struct sumtab_cell c[4] = {
				{ .type = SC_U64, .u = ks[i].launches },
				{ .type = SC_DOUBLE, .d = pct(ks[i].launches, launches) },
				{ .type = SC_DOUBLE, .d = ks[i].avg_api },
				{ .type = SC_STR, .s = ks[i].name },
			};

			sumtab__row(f, fmt, cols, c, 4, i == 0);
		}
		sumtab__end(f, fmt);
		return;
	}
	fprintf(f, "\n** Top kernels by launches:\n\n");
	if (!n) {
		fprintf(f, "   no kernel launches were traced\n");
		return;
	}
	fprintf(f, " %10s %8s %14s  %s\n", cols[0], cols[1], cols[2], cols[3]);
	for (size_t i = 0; i < n && i < TOP_KERNELS; i++)
		fprintf(f, " %10" PRIu64 " %8.1f %14.1f  %s\n", ks[i].launches,
			pct(ks[i].launches, launches), ks[i].avg_api, ks[i].name);
	if (n > TOP_KERNELS)
		fprintf(f, "   ... and %zu more kernels\n", n - TOP_KERNELS);
	fprintf(f, "   %" PRIu64 " launches of %zu kernels; %" PRIu64
		   " unnamed (function handle looked up before cgbpf attached)\n",
		launches, n, unnamed);
}

void sumtab__human_bytes(uint64_t b, char *buf, size_t len)
{
	static const char *const unit[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	double v = b;
	int u = 0;

	while (v >= 1024 && u < 4) {
		v /= 1024;
		u++;
	}
	if (u == 0)
		snprintf(buf, len, "%" PRIu64 " B", b);
	else
		snprintf(buf, len, "%.1f %s", v, unit[u]);
}

void sumtab__api_mem(FILE *f, enum sumtab_fmt fmt, const uint64_t copies[SUMTAB_DIRS],
		     const uint64_t bytes[SUMTAB_DIRS], uint64_t memsets, uint64_t memset_bytes)
{
	static const char *const dirs[SUMTAB_DIRS] = {
		"", "Host to Device", "Device to Host", "Device to Device",
		"Unified (cuMemcpy, direction by address)", "Host to Host"
	};
	static const char *const cols[] = { "Count", "Total (bytes)", "Operation" };
	bool first = true;
	char b1[32];

	if (fmt != SUMTAB_TEXT) {
		sumtab__begin(f, fmt, cols, 3);
		for (int d = 1; d <= SUMTAB_DIRS; d++) {
			bool ms = d == SUMTAB_DIRS;
			struct sumtab_cell c[3] = {
				{ .type = SC_U64, .u = ms ? memsets : copies[d] },
				{ .type = SC_U64, .u = ms ? memset_bytes : bytes[d] },
				{ .type = SC_STR, .s = ms ? "Memset" : dirs[d] },
			};

			if (!c[0].u)
				continue;
			sumtab__row(f, fmt, cols, c, 3, first);
			first = false;
		}
		sumtab__end(f, fmt);
		return;
	}
	fprintf(f, "\n** Memory copies (cuda_gpu_mem_size_sum, API side):\n\n");
	{
		uint64_t any = memsets;

		for (int d = 1; d < SUMTAB_DIRS; d++)
			any |= copies[d];
		if (!any) {
			fprintf(f, "   no memory copies or memsets were traced\n");
			return;
		}
	}
	fprintf(f, " %10s %16s %12s  %s\n", "Count", "Total (bytes)", "", "Operation");
	for (int d = 1; d < SUMTAB_DIRS; d++) {
		if (!copies[d])
			continue;
		sumtab__human_bytes(bytes[d], b1, sizeof(b1));
		fprintf(f, " %10" PRIu64 " %16" PRIu64 " %12s  %s\n", copies[d], bytes[d], b1,
			dirs[d]);
	}
	if (memsets) {
		sumtab__human_bytes(memset_bytes, b1, sizeof(b1));
		fprintf(f, " %10" PRIu64 " %16" PRIu64 " %12s  %s\n", memsets, memset_bytes, b1,
			"Memset");
	}
}

static int cmp_peak(const void *a, const void *b)
{
	const struct sumtab_peak *x = a, *y = b;

	return x->pid < y->pid ? -1 : x->pid > y->pid;
}

/* Whether ps[i] is among the SUMTAB_PROC_ROWS largest peaks (ties: the
 * lower index). */
static bool among_largest(const struct sumtab_peak *ps, size_t n, size_t i)
{
	uint64_t v = ps[i].gpu + ps[i].pinned;
	size_t above = 0;

	for (size_t k = 0; k < n && above < SUMTAB_PROC_ROWS; k++) {
		uint64_t w = ps[k].gpu + ps[k].pinned;

		above += w > v || (w == v && k < i);
	}
	return above < SUMTAB_PROC_ROWS;
}

void sumtab__peak(FILE *f, enum sumtab_fmt fmt, struct sumtab_peak *ps, size_t n)
{
	static const char *const cols[] = { "PID", "Process", "GPU (bytes)", "Pinned host (bytes)" };
	char b1[32], b2[32];

	if (n > 1)
		qsort(ps, n, sizeof(*ps), cmp_peak);
	if (fmt != SUMTAB_TEXT) {
		sumtab__begin(f, fmt, cols, 4);
		for (size_t i = 0; i < n; i++) {
			struct sumtab_cell c[4] = {
				{ .type = SC_U64, .u = ps[i].pid },
				{ .type = SC_STR, .s = ps[i].comm },
				{ .type = SC_U64, .u = ps[i].gpu },
				{ .type = SC_U64, .u = ps[i].pinned },
			};

			sumtab__row(f, fmt, cols, c, 4, i == 0);
		}
		sumtab__end(f, fmt);
		return;
	}
	fprintf(f, "\n** Peak memory allocated per process (since attach):\n\n");
	fprintf(f, " %8s %-16s %18s %18s\n", "PID", "Process", "GPU (cuMemAlloc*)", "Pinned host");
	/* Hours of -a churn would list every process: the SUMTAB_PROC_ROWS of
	 * largest peaks, by pid. */
	for (size_t i = 0; i < n; i++) {
		if (n > SUMTAB_PROC_ROWS && !among_largest(ps, n, i))
			continue;
		sumtab__human_bytes(ps[i].gpu, b1, sizeof(b1));
		sumtab__human_bytes(ps[i].pinned, b2, sizeof(b2));
		fprintf(f, " %8u %-16s %18s %18s\n", ps[i].pid, ps[i].comm, b1, b2);
	}
	if (n > SUMTAB_PROC_ROWS)
		fprintf(f, " ... and %zu more process(es) with smaller peaks (--format csv lists every "
			   "one)\n", n - SUMTAB_PROC_ROWS);
}

void sumtab__nvtx(FILE *f, enum sumtab_fmt fmt, struct sumtab_row *rows, int n, uint64_t marks,
		  int64_t unmatched)
{
	const struct sumtab_time t = { .count = "Instances", .name = "Range", .style = true };

	if (fmt != SUMTAB_TEXT) {
		sumtab__time(f, fmt, &t, rows, n);
		return;
	}
	fprintf(f, "\n** NVTX Range Summary (nvtx_sum):\n\n");
	if (!n) {
		fprintf(f, "   no NVTX ranges were traced%s\n",
			marks ? " (marks only)" : " (run the application with "
			"NVTX_INJECTION64_PATH set to libcgbpf-inject.so: docs/injection.md)");
		return;
	}
	sumtab__time(f, fmt, &t, rows, n);
	if (unmatched >= 0)
		fprintf(f, "   %" PRIu64 " marks; %" PRId64 " pops/ends whose push/start came before "
			   "cgbpf attached\n", marks, unmatched);
	else
		fprintf(f, "   %" PRIu64 " marks\n", marks);
}

void sumtab__osrt(FILE *f, enum sumtab_fmt fmt, struct sumtab_row *rows, int n,
		  uint64_t threshold_ns)
{
	const struct sumtab_time t = { .count = "Num Calls", .name = "Name" };

	if (fmt != SUMTAB_TEXT) {
		sumtab__time(f, fmt, &t, rows, n);
		return;
	}
	fprintf(f, "\n** OS Runtime Summary (osrt_sum): syscalls of traced threads\n\n");
	if (threshold_ns == UINT64_MAX) {
		fprintf(f, "   syscalls were not traced (--syscall-threshold off)\n");
		return;
	}
	if (threshold_ns != SUMTAB_UNKNOWN)
		fprintf(f, "   only syscalls lasting >= %" PRIu64 " ns are recorded and counted "
			   "(--syscall-threshold); median exact up to %d calls per syscall, "
			   "within 1.6%% beyond\n\n", threshold_ns, STATS_EXACT);
	if (!n) {
		fprintf(f, "   no syscalls were recorded\n");
		return;
	}
	sumtab__time(f, fmt, &t, rows, n);
}

void sumtab__gpu_kern(FILE *f, enum sumtab_fmt fmt, struct sumtab_row *rows, int n)
{
	const struct sumtab_time t = { .count = "Instances", .name = "Name" };

	if (fmt == SUMTAB_TEXT) {
		fprintf(f, "\n** CUDA GPU Kernel Summary (cuda_gpu_kern_sum):\n\n");
		if (!n) {
			fprintf(f, "   no GPU kernels were recorded\n");
			return;
		}
	}
	sumtab__time(f, fmt, &t, rows, n);
}

void sumtab__gpu_mem_time(FILE *f, enum sumtab_fmt fmt, struct sumtab_row *rows, int n)
{
	const struct sumtab_time t = { .count = "Count", .name = "Operation" };

	if (fmt == SUMTAB_TEXT) {
		fprintf(f, "\n** CUDA GPU MemOps Summary (by Time) (cuda_gpu_mem_time_sum):\n\n");
		if (!n) {
			fprintf(f, "   no GPU memory operations were recorded\n");
			return;
		}
	}
	sumtab__time(f, fmt, &t, rows, n);
}

void sumtab__gpu_mem_size(FILE *f, enum sumtab_fmt fmt, struct sumtab_row *rows, int n)
{
	/* record prints nothing of it without memory operations. */
	if (fmt == SUMTAB_TEXT) {
		if (!n)
			return;
		fprintf(f, "\n** CUDA GPU MemOps Summary (by Size) (cuda_gpu_mem_size_sum):\n\n");
	}
	sumtab__size(f, fmt, rows, n);
}

static int cmp_comms(const void *a, const void *b)
{
	const struct sumtab_nccl_comm *x = a, *y = b;

	if (x->id != y->id)
		return x->id < y->id ? -1 : 1;
	if (x->rank != y->rank)
		return x->rank < y->rank ? -1 : 1;
	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	return x->handle < y->handle ? -1 : x->handle > y->handle;
}

/* Communicators grouped by id: the ranks of one communicator in all
 * traced processes on one line. */
static void nccl_comms(FILE *f, struct sumtab_nccl_comm *all, size_t n)
{
	size_t ncomms = 0;

	if (!n) {
		fprintf(f, "\n   no communicator was seen\n");
		return;
	}
	qsort(all, n, sizeof(*all), cmp_comms);
	for (size_t i = 0; i < n; i++)
		if (!all[i].id || i == 0 || all[i].id != all[i - 1].id)
			ncomms++;
	fprintf(f, "\n   %zu communicator(s), %zu rank(s) traced (rank r/n in process pid):\n",
		ncomms, n);
	for (size_t i = 0; i < n;) {
		size_t j = i + 1;

		if (all[i].id) {
			while (j < n && all[j].id == all[i].id)
				j++;
			fprintf(f, "     %04x:", (unsigned)(all[i].id >> 48));
		} else {
			fprintf(f, "     (0x%" PRIx64 ", id unknown: created before attach or "
				   "unseen at its creation):", all[i].handle);
		}
		for (size_t k = i; k < j; k++) {
			char r[16], nr[16];

			snprintf(r, sizeof(r), all[k].rank >= 0 ? "%d" : "?", all[k].rank);
			snprintf(nr, sizeof(nr), all[k].nranks >= 0 ? "%d" : "?", all[k].nranks);
			fprintf(f, "%s rank %s/%s in %u", k > i ? "," : "", r, nr, all[k].pid);
		}
		fputc('\n', f);
		i = j;
	}
}

/* The numbers of one row of nccl_sum: the GPU's where the plugin timed
 * any of its operations, else the host's. */
struct nccl_row {
	struct stats *time;
	uint64_t bw_time, unknown;
	double size, bus_size;
	const char *source;
};

static struct nccl_row nccl_row(const struct sumtab_nccl_op *o)
{
	if (o->gpu && o->gpu->time.n)
		return (struct nccl_row){ (struct stats *)&o->gpu->time, o->gpu->bw_time,
					  o->gpu->unknown_size, o->gpu->size, o->gpu->bus_size,
					  "gpu" };
	return (struct nccl_row){ o->time, o->bw_time, o->unknown_size, o->size, o->bus_size,
				  "host" };
}

void sumtab__nccl(FILE *f, enum sumtab_fmt fmt, struct sumtab_nccl *s)
{
	static const char *const cols[] = { "Name", "Calls", "Grouped", "Bytes", "Timed",
					    "Total (ns)", "Avg (ns)", "Med (ns)", "Max (ns)",
					    "algbw (GB/s)", "busbw (GB/s)", "Time" };
	uint64_t calls = 0, unknown = 0, errors = 0, gpu_rows = 0, host_rows = 0;
	bool others = false, first = true;
	char a[32], b[32];

	for (int i = 0; i < s->nops; i++) {
		calls += s->ops[i].calls;
		errors += s->ops[i].errors;
	}
	if (fmt != SUMTAB_TEXT) {
		sumtab__begin(f, fmt, cols, 12);
		for (int i = 0; i < s->nops; i++) {
			const struct sumtab_nccl_op *o = &s->ops[i];
			struct nccl_row r = nccl_row(o);
			struct sumtab_cell c[12] = {
				{ .type = SC_STR, .s = o->name },
				{ .type = SC_U64, .u = o->calls },
				{ .type = SC_U64, .u = o->grouped },
				{ .type = SC_U64, .u = o->bytes },
				{ .type = SC_U64, .u = r.time->n },
				{ .type = SC_U64, .u = r.time->total },
				{ .type = SC_DOUBLE, .d = r.time->mean },
				{ .type = SC_U64, .u = stats__median(r.time) },
				{ .type = SC_U64, .u = r.time->max },
				{ .type = SC_DOUBLE, .d = r.bw_time ? r.size / r.bw_time : 0 },
				{ .type = SC_DOUBLE, .d = r.bw_time ? r.bus_size / r.bw_time : 0 },
				{ .type = SC_STR, .s = r.source },
			};

			if (!o->transfer || (!o->calls && !r.time->n))
				continue;
			sumtab__row(f, fmt, cols, c, 12, first);
			first = false;
		}
		sumtab__end(f, fmt);
		return;
	}
	for (int i = 0; i < s->nops; i++) {
		if (!s->ops[i].transfer)
			continue;
		if (!strcmp(nccl_row(&s->ops[i]).source, "gpu"))
			gpu_rows++;
		else if (s->ops[i].calls)
			host_rows++;
	}
	if (!calls && !s->nested && !gpu_rows)
		return;
	fprintf(f, "\n** NCCL Summary (nccl_sum):\n\n");
	if (gpu_rows)
		fprintf(f, "   Time gpu: on the GPU, from NCCL's profiler plugin (docs/injection.md): each\n"
			   "   operation's span on its channel 0, its kernel's start to its end there;\n"
			   "   Timed counts the operations the plugin reported, grouped ones included.\n");
	if (host_rows)
		fprintf(f, "   Time host: from a call's entry to its return, as the CPU saw it. On a GPU,\n"
			   "   NCCL calls are asynchronous (they return once the work is enqueued on the\n"
			   "   stream), so these times and the bandwidths from them measure the launch,\n"
			   "   not the transfer, unless the call blocked. Calls between ncclGroupStart and\n"
			   "   ncclGroupEnd only enqueue: they are counted under Grouped and their times\n"
			   "   are left out; each group's time is under Groups below.%s\n",
			gpu_rows ? "" : "\n   NCCL's profiler plugin times them on the GPU (docs/injection.md).");
	fprintf(f, "   As nccl-tests: algbw = size / time; busbw = algbw x 2(n-1)/n (all-reduce),\n"
		   "   (n-1)/n (all-gather, reduce-scatter, all-to-all), 1 (broadcast, reduce, send,\n"
		   "   recv); size = count x datatype size, x n for all-gather, reduce-scatter and\n"
		   "   all-to-all (their count is per rank); summed over timed calls (GB/s = 1e9 B/s).\n\n");
	fprintf(f, " %-18s %8s %8s %14s %8s %14s %12s %12s %12s %12s %12s %5s\n", cols[0], cols[1],
		cols[2], cols[3], cols[4], cols[5], cols[6], cols[7], cols[8], cols[9], cols[10],
		cols[11]);
	for (int i = 0; i < s->nops; i++) {
		const struct sumtab_nccl_op *o = &s->ops[i];
		struct nccl_row r = nccl_row(o);
		struct stats *st = r.time;

		if (!o->transfer) {
			others |= o->calls > 0;
			continue;
		}
		if (!o->calls && !st->n)
			continue;
		if (r.bw_time) {
			snprintf(a, sizeof(a), "%.6g", r.size / r.bw_time);
			snprintf(b, sizeof(b), "%.6g", r.bus_size / r.bw_time);
		} else {
			snprintf(a, sizeof(a), "-");
			snprintf(b, sizeof(b), "-");
		}
		unknown += r.unknown;
		fprintf(f, " %-18s %8" PRIu64 " %8" PRIu64 " %14" PRIu64 " %8" PRIu64 " %14" PRIu64
			   " %12.1f %12" PRIu64 " %12" PRIu64 " %12s %12s %5s\n",
			o->name, o->calls, o->grouped, o->bytes, st->n, st->total, st->mean,
			stats__median(st), st->max, a, b, r.source);
	}
	for (int i = 0; gpu_rows && i < s->nops; i++)
		if (!strcmp(s->ops[i].name, "ncclBcast") && s->ops[i].calls)
			fprintf(f, "   ncclBcast is NCCL's Broadcast on the GPU: the plugin's times of its "
				   "operations are in the ncclBroadcast row\n");
	if (unknown)
		fprintf(f, "   %" PRIu64 " timed operations of unknown size (communicators created "
			   "before attach, or GPU spans whose operation's size was not reported) are "
			   "left out of the bandwidths\n", unknown);
	fprintf(f, "\n   Groups (outermost ncclGroupStart entry to ncclGroupEnd return): %" PRIu64
		   " groups, %" PRIu64 " operations, %" PRIu64 " bytes",
		s->groups->n, s->group_ops, s->group_bytes);
	if (s->groups->n)
		fprintf(f, "; time total %" PRIu64 " ns, avg %.1f, med %" PRIu64 ", max %" PRIu64,
			s->groups->total, s->groups->mean, stats__median(s->groups), s->groups->max);
	fputc('\n', f);
	if (others) {
		fprintf(f, "   Other calls:");
		for (int i = 0; i < s->nops; i++) {
			const struct sumtab_nccl_op *o = &s->ops[i];

			if (o->transfer || !o->calls)
				continue;
			fprintf(f, "%s %s %" PRIu64, first ? "" : ",", o->name, o->calls);
			first = false;
		}
		fputc('\n', f);
	}
	if (errors)
		fprintf(f, "   %" PRIu64 " calls returned an error\n", errors);
	if (s->nested)
		fprintf(f, "   %" PRIu64 " calls NCCL made to its own API from inside another "
			   "(ncclBcast -> ncclBroadcast) are not counted\n", s->nested);
	nccl_comms(f, s->comms, s->ncomms);
}
