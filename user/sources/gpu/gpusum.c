// SPDX-License-Identifier: MIT
/*
 * GPU activity in the summary: nsys stats' cuda_gpu_kern_sum,
 * cuda_gpu_mem_time_sum and cuda_gpu_mem_size_sum (same names, columns
 * and units), a utilization line per device, and what Holistic Trace
 * Analysis computes from a trace, here online as operations are written:
 * idle time split into waiting for the host and other, kernel launch
 * delay, short kernels, communication / computation overlap, and the
 * longest launch-bound stretches.
 *
 * Memory is bounded: per kernel name and per operation kind one online
 * series (user/lib/stats.c: exact median up to 65536 values, a histogram
 * beyond), at most KERNEL_ROWS names; per device a few sums; the
 * timeline analyses consume operations in start order and keep only the
 * merged interval in progress.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include "lib/sumtab.h"
#include "sources/gpu/gpuest.h"
#include "sources/gpu/gpunccl.h"
#include "sources/gpu/gpusum.h"

#define KERNEL_ROWS 4096
#define PROC_ROWS SUMTAB_PROC_ROWS	/* process rows in text */
#define SHORT_NS 10000
#define TOP_STRETCHES 5
#define STRETCH_MIN_OPS 3

struct krow {
	char *name;
	struct stats st;
};

/* nsys's memory operations: the copy kinds, then memset. */
#define MEM_OPS (GPU_COPY_PTOP + 2)
#define MEM_MEMSET (GPU_COPY_PTOP + 1)

struct stretch {
	uint32_t pid, tid;
	uint8_t device;
	uint64_t start, end, busy, wait;
	uint32_t ops;
};

struct gpusum {
	struct hmap kernels;		/* hash(name) -> struct krow * */
	struct krow other;		/* names past KERNEL_ROWS */
	uint64_t other_names;
	struct stats mem_time[MEM_OPS], mem_size[MEM_OPS];
	struct stats delay;		/* kernel start - launch call start */
	uint64_t delay_negative;
	uint64_t nkernels, kernel_time, short_kernels, short_time;
	uint64_t syncs;
	struct stretch top[TOP_STRETCHES];
	int ntop;
};

void *gpusum__new(void)
{
	return calloc(1, sizeof(struct gpusum));
}

void gpusum__free(void *sum)
{
	struct gpusum *s = sum;
	uint64_t v;

	if (!s)
		return;
	for (size_t it = 0; hmap__next(&s->kernels, &it, NULL, &v);) {
		struct krow *r = (void *)(uintptr_t)v;

		stats__free(&r->st);
		free(r->name);
		free(r);
	}
	hmap__free(&s->kernels);
	stats__free(&s->other.st);
	for (int i = 0; i < MEM_OPS; i++) {
		stats__free(&s->mem_time[i]);
		stats__free(&s->mem_size[i]);
	}
	stats__free(&s->delay);
	free(s);
}

static struct stats *kernel_row(struct gpusum *s, const char *name)
{
	uint64_t h = hash__bytes(name, strlen(name));
	struct krow *r;
	uint64_t *v;

	for (; (v = hmap__get(&s->kernels, h)); h++) {
		r = (void *)(uintptr_t)*v;
		if (!strcmp(r->name, name))
			return &r->st;
	}
	if (s->kernels.count >= KERNEL_ROWS)
		goto other;
	r = calloc(1, sizeof(*r));
	if (!r)
		goto other;
	r->name = strdup(name);
	if (!r->name || hmap__put(&s->kernels, h, (uintptr_t)r)) {
		free(r->name);
		free(r);
		goto other;
	}
	return &r->st;
other:
	s->other_names++;
	return &s->other.st;
}

/* Adds [a, b] to a union of intervals fed in start order: (*s, *e) is
 * the merged interval in progress, *tot what ended before it. */
static void merge(uint64_t *s, uint64_t *e, uint64_t *tot, uint64_t a, uint64_t b)
{
	if (!*s && !*e) {
		*s = a;
		*e = b;
	} else if (a > *e) {
		*tot += *e - *s;
		*s = a;
		*e = b;
	} else if (b > *e) {
		*e = b;
	}
}

static void merge_end(uint64_t *s, uint64_t *e, uint64_t *tot)
{
	*tot += *e - *s;
	*s = *e = 0;
}

static uint64_t len_of(const struct stretch *x)
{
	return x->end - x->start;
}

/* Keeps the TOP_STRETCHES longest, longest first. */
static void top_add(struct gpusum *s, const struct stretch *x)
{
	int i;

	if (s->ntop < TOP_STRETCHES)
		i = s->ntop++;
	else if (len_of(x) > len_of(&s->top[TOP_STRETCHES - 1]))
		i = TOP_STRETCHES - 1;
	else
		return;
	s->top[i] = *x;
	for (; i > 0 && len_of(&s->top[i]) > len_of(&s->top[i - 1]); i--) {
		struct stretch t = s->top[i];

		s->top[i] = s->top[i - 1];
		s->top[i - 1] = t;
	}
}

static void run_end(struct gpusum *s, struct gpu_proc *p, struct gpu_dev *d)
{
	if (d->run_ops >= STRETCH_MIN_OPS) {
		struct stretch x = {
			.pid = p->pid, .tid = d->run_tid, .device = d->index,
			.start = d->run_start, .end = d->run_end, .busy = d->run_busy,
			.wait = d->run_wait, .ops = d->run_ops,
		};

		top_add(s, &x);
	}
	d->run_ops = 0;
}

/* One operation of a device's timeline, in start order. */
static void timeline(struct gpusum *s, struct gpu_proc *p, struct gpu_dev *d,
		     const struct gpu_op *op, const struct gpu_corr *c, bool nccl)
{
	uint64_t launch = c && c->call_ts ? c->call_ts : 0;
	uint64_t wait = 0, busy;

	if (!d->ops) {
		d->first = op->start;
		d->busy_end = op->start;
	}
	d->ops++;
	d->last_start = op->start;
	if (op->start > d->busy_end) {
		uint64_t g0 = d->busy_end, g1 = op->start;

		/* Idle: the host had not asked for this yet (its launch call
		 * began after the GPU ran dry), or something else. */
		if (launch > g0)
			wait = (launch < g1 ? launch : g1) - g0;
		d->idle_host += wait;
		d->idle_other += g1 - g0 - wait;
	}
	busy = op->end > d->busy_end ? op->end - (op->start > d->busy_end ? op->start : d->busy_end)
				     : 0;
	/* A launch-bound stretch: operations each waiting for its launch. */
	if (wait) {
		if (!d->run_ops) {
			d->run_start = d->busy_end;
			d->run_busy = d->run_wait = 0;
			d->run_tid = c ? c->tid : 0;
		}
		d->run_ops++;
		d->run_busy += busy;
		d->run_wait += wait;
		d->run_end = op->end > d->busy_end ? op->end : d->busy_end;
	} else if (d->run_ops) {
		run_end(s, p, d);
	}
	d->busy += busy;
	if (op->end > d->busy_end)
		d->busy_end = op->end;
	if (op->kind == GPU_KERNEL) {
		d->kernels++;
		if (nccl)
			merge(&d->comm_s, &d->comm_e, &d->comm, op->start, op->end);
		else
			merge(&d->comp_s, &d->comp_e, &d->comp, op->start, op->end);
		merge(&d->all_s, &d->all_e, &d->all, op->start, op->end);
	}
}

void gpusum__op(struct gpu *g, struct gpu_proc *p, const struct gpu_op *op,
		const struct gpu_corr *c, bool late, const char *kernel)
{
	struct gpusum *s = g->sum;
	uint64_t dur = op->end - op->start;
	bool nccl = false;
	struct gpu_dev *d;

	p->ops++;
	switch (op->kind) {
	case GPU_KERNEL: {
		char buf[64];
		const char *name = kernel ? kernel : gpuproc__kernel_name(p, op, buf, sizeof(buf));

		p->kernels++;
		nccl = !strncmp(name, "nccl", 4);
		stats__add(kernel_row(s, name), dur);
		s->nkernels++;
		s->kernel_time += dur;
		if (dur < SHORT_NS) {
			s->short_kernels++;
			s->short_time += dur;
		}
		/* A launch's delay is its first operation's: the later nodes
		 * of a graph launch wait for the earlier ones, not the host. */
		if (c && c->call_ts && !c->ops) {
			if (op->start >= c->call_ts)
				stats__add(&s->delay, op->start - c->call_ts);
			else
				s->delay_negative++;
		}
		break;
	}
	case GPU_MEMCPY:
	case GPU_MEMSET: {
		int k = op->kind == GPU_MEMSET ? MEM_MEMSET : op->copy_kind;

		if (op->kind == GPU_MEMSET)
			p->memsets++;
		else
			p->copies++;
		stats__add(&s->mem_time[k], dur);
		stats__add(&s->mem_size[k], op->m.bytes);
		break;
	}
	default:
		p->syncs++;
		s->syncs++;
		return;
	}
	d = gpuproc__dev(p, op->device);
	if (!d)
		return;
	if (late)
		d->late++;
	else
		timeline(s, p, d, op, c, nccl);
}

void gpusum__dev_end(struct gpu *g, struct gpu_proc *p, struct gpu_dev *d)
{
	struct gpusum *s = g->sum;

	if (d->run_ops)
		run_end(s, p, d);
	merge_end(&d->comm_s, &d->comm_e, &d->comm);
	merge_end(&d->comp_s, &d->comp_e, &d->comp);
	merge_end(&d->all_s, &d->all_e, &d->all);
}

/* ---------------------------------------------------------------- printing */

static const char *const mem_op_names[MEM_OPS] = {
	"[CUDA memcpy Unknown]", "[CUDA memcpy Host-to-Device]", "[CUDA memcpy Device-to-Host]",
	"[CUDA memcpy Host-to-Array]", "[CUDA memcpy Array-to-Host]",
	"[CUDA memcpy Array-to-Array]", "[CUDA memcpy Array-to-Device]",
	"[CUDA memcpy Device-to-Array]", "[CUDA memcpy Device-to-Device]",
	"[CUDA memcpy Host-to-Host]", "[CUDA memcpy Peer-to-Peer]", "[CUDA memset]",
};

static void print_kernels(struct gpusum *s, FILE *f)
{
	struct sumtab_row *rows;
	int n = 0;
	uint64_t v;

	rows = calloc(s->kernels.count + 1, sizeof(*rows));
	if (!rows)
		return;
	for (size_t it = 0; hmap__next(&s->kernels, &it, NULL, &v);) {
		struct krow *r = (void *)(uintptr_t)v;

		rows[n++] = (struct sumtab_row){ .name = r->name, .st = &r->st };
	}
	if (s->other.st.n)
		rows[n++] = (struct sumtab_row){
			.name = "(other kernels: more names than the summary keeps)",
			.st = &s->other.st };
	sumtab__gpu_kern(f, SUMTAB_TEXT, rows, n);
	free(rows);
}

static void print_mem(struct gpusum *s, FILE *f)
{
	struct sumtab_row rows[MEM_OPS];
	int n = 0;

	for (int i = 0; i < MEM_OPS; i++)
		if (s->mem_time[i].n)
			rows[n++] = (struct sumtab_row){ .name = mem_op_names[i], .st = &s->mem_time[i] };
	sumtab__gpu_mem_time(f, SUMTAB_TEXT, rows, n);
	n = 0;
	for (int i = 0; i < MEM_OPS; i++)
		if (s->mem_size[i].n)
			rows[n++] = (struct sumtab_row){ .name = mem_op_names[i], .st = &s->mem_size[i] };
	sumtab__gpu_mem_size(f, SUMTAB_TEXT, rows, n);
}

static double pct(uint64_t a, uint64_t b)
{
	return b ? 100.0 * a / b : 0.0;
}

static int cmp_proc(const void *a, const void *b)
{
	const struct gpu_proc *x = *(const struct gpu_proc *const *)a;
	const struct gpu_proc *y = *(const struct gpu_proc *const *)b;

	return x->pid < y->pid ? -1 : x->pid > y->pid;
}

/* The processes by pid (cgbpf stats prints them in the same order); NULL
 * on ENOMEM. */
static const struct gpu_proc **procs_by_pid(const struct gpu *g, size_t *n)
{
	const struct gpu_proc **ps = malloc((g->procs.count + 1) * sizeof(*ps));
	uint64_t v;

	*n = 0;
	if (!ps)
		return NULL;
	for (size_t it = 0; hmap__next(&g->procs, &it, NULL, &v);)
		ps[(*n)++] = (const void *)(uintptr_t)v;
	qsort(ps, *n, sizeof(*ps), cmp_proc);
	return ps;
}

static void print_devices(const struct gpu *g, FILE *f)
{
	size_t np;
	const struct gpu_proc **ps = procs_by_pid(g, &np);

	for (size_t j = 0; ps && j < np; j++) {
		const struct gpu_proc *p = ps[j];

		for (int i = 0; i < GPU_DEVS; i++) {
			const struct gpu_dev *d = gpuproc__dev_at(p, i);
			uint64_t span, idle;

			if (!d || !d->ops)
				continue;
			span = d->busy_end - d->first;
			idle = d->idle_host + d->idle_other;
			fprintf(f, "   pid %u GPU %d%s%s%s: busy %.1f%% of %.6f s (its first to its "
				   "last operation), %" PRIu64 " operations\n",
				p->pid, i, d->known ? " (" : "", d->known ? d->name : "",
				d->known ? ")" : "",
				pct(d->busy, span), span / 1e9, d->ops);
			fprintf(f, "      idle %.6f s: waiting for the host %.6f s (%.1f%%), other "
				   "%.6f s (%.1f%%)\n", idle / 1e9, d->idle_host / 1e9,
				pct(d->idle_host, idle), d->idle_other / 1e9, pct(d->idle_other, idle));
			if (d->comm)
				fprintf(f, "      communication (nccl* kernels) %.6f s, overlapped with "
					   "computation %.6f s (%.1f%%)\n", d->comm / 1e9,
					(d->comm + d->comp - d->all) / 1e9,
					pct(d->comm + d->comp - d->all, d->comm));
			if (d->late)
				fprintf(f, "      %" PRIu64 " operations came after later ones (beyond the "
					   "reorder window): in the tables, not in this timeline\n",
					d->late);
		}
	}
	free(ps);
}

/* The devices' lines as CSV or JSON rows. */
void gpusum__timeline_rows(const struct gpu *g, int fmt, FILE *f)
{
	static const char *const cols[] = {
		"PID", "GPU", "Name", "Busy (%)", "Span (ns)", "Operations", "Idle (ns)",
		"Waiting for host (ns)", "Other idle (ns)", "Communication (ns)",
		"Overlapped (ns)", "Late",
	};
	int nc = sizeof(cols) / sizeof(cols[0]);
	size_t np;
	const struct gpu_proc **ps = procs_by_pid(g, &np);
	bool first = true;

	sumtab__begin(f, fmt, cols, nc);
	for (size_t j = 0; ps && j < np; j++) {
		for (int i = 0; i < GPU_DEVS; i++) {
			const struct gpu_dev *d = gpuproc__dev_at(ps[j], i);
			uint64_t span = d ? d->busy_end - d->first : 0;
			const struct sumtab_cell c[] = {
				{ SC_U64, .u = ps[j]->pid }, { SC_U64, .u = (uint64_t)i },
				{ SC_STR, .s = d && d->known ? d->name : "" },
				{ SC_DOUBLE, .d = d ? pct(d->busy, span) : 0 }, { SC_U64, .u = span },
				{ SC_U64, .u = d ? d->ops : 0 },
				{ SC_U64, .u = d ? d->idle_host + d->idle_other : 0 },
				{ SC_U64, .u = d ? d->idle_host : 0 },
				{ SC_U64, .u = d ? d->idle_other : 0 }, { SC_U64, .u = d ? d->comm : 0 },
				{ SC_U64, .u = d ? d->comm + d->comp - d->all : 0 },
				{ SC_U64, .u = d ? d->late : 0 },
			};

			if (!d || !d->ops)
				continue;
			sumtab__row(f, fmt, cols, c, nc, first);
			first = false;
		}
	}
	sumtab__end(f, fmt);
	free(ps);
}

void gpusum__print_timeline(const struct gpu *g, FILE *f)
{
	struct gpusum *s = g->sum;

	fprintf(f, "\n** GPU utilization and idle time:\n\n");
	print_devices(g, f);
	fprintf(f, "   idle \"waiting for the host\": from the end of the GPU's last work to the "
		   "start of the launch call of its next (nothing was queued); other idle: the "
		   "rest of each gap\n");
	if (s->nkernels)
		fprintf(f, "\n   kernels shorter than 10 us: %" PRIu64 " of %" PRIu64 " (%.1f%%), "
			   "%.1f%% of kernel time\n", s->short_kernels, s->nkernels,
			pct(s->short_kernels, s->nkernels), pct(s->short_time, s->kernel_time));
	if (s->delay.n || s->delay_negative) {
		fprintf(f, "\n   kernel launch delay (kernel start - launch call start), %" PRIu64
			   " kernels:\n", s->delay.n);
		fprintf(f, "      p50 %" PRIu64 " ns, p90 %" PRIu64 " ns, p99 %" PRIu64 " ns, max %" PRIu64
			   " ns, mean %.1f ns\n", stats__quantile(&s->delay, 0.5),
			stats__quantile(&s->delay, 0.9), stats__quantile(&s->delay, 0.99),
			s->delay.max, s->delay.mean);
		if (s->delay_negative)
			fprintf(f, "      %" PRIu64 " kernels started before their launch call "
				   "began: the GPU's and the host's clocks disagree\n",
				s->delay_negative);
	}
	if (s->ntop) {
		fprintf(f, "\n   longest launch-bound stretches (each operation waited for its "
			   "launch call):\n");
		fprintf(f, "   %12s %12s %8s %8s %8s  %s\n", "Start (ns)", "Length (ns)", "Ops",
			"Busy %", "Wait %", "Where");
		for (int i = 0; i < s->ntop; i++) {
			const struct stretch *x = &s->top[i];
			uint64_t len = x->end - x->start;

			fprintf(f, "   %12" PRIu64 " %12" PRIu64 " %8" PRIu32 " %8.1f %8.1f  pid %u GPU %u, "
				   "launched by tid %u\n", x->start - g->first_ts, len, x->ops,
				pct(x->busy, len), pct(x->wait, len), x->pid, x->device, x->tid);
		}
		fprintf(f, "   (Start: from the capture's first GPU operation)\n");
	}
}

static const char *const st_names[GPU_ST__COUNT] = {
	[GPU_ST_COLLECTING] = "collecting", [GPU_ST_STOPPED] = "stopped",
	[GPU_ST_NO_CUPTI] = "no CUPTI library found", [GPU_ST_CUPTI_FAILED] = "a CUPTI call failed",
	[GPU_ST_HELD] = "another tool holds CUPTI", [GPU_ST_NO_DEVICE] = "no GPU",
	[GPU_ST_FLUSHED] = "flushed", [GPU_ST_TAKEN] = "another tool took CUPTI",
	[GPU_ST_WAITED] = "cuInit held for the driver's probes",
};

/* GPU_ST_WAITED's line: how long the injection library held cuInit for
 * the driver file's probes ("<us> <file>"), and whether they came. */
static void print_waited(const struct gpu_proc *p, FILE *f)
{
	const char *t = p->status_text[GPU_ST_WAITED], *file;
	unsigned long long us;
	char *end;

	if (!t)
		return;
	us = strtoull(t, &end, 10);
	file = *end == ' ' ? end + 1 : "the driver";
	if (!p->status_err[GPU_ST_WAITED])
		fprintf(f, "      cuInit held %.3f ms until %s was probed (the injection library; "
			   "CGBPF_MAP_WAIT_MS): no call after cuInit missed\n", us / 1e3, file);
	else
		fprintf(f, "      cuInit held %.3f ms, then let go: %s was not probed by then "
			   "(CGBPF_MAP_WAIT_MS): calls until it was may be missing\n", us / 1e3, file);
}

/* Why a process's GPU activity is not measured, in a few words. */
static void why_not(const struct gpu_proc *p, FILE *f)
{
	static const int order[] = { GPU_ST_HELD, GPU_ST_NO_CUPTI, GPU_ST_CUPTI_FAILED,
				     GPU_ST_NO_DEVICE };

	for (size_t i = 0; i < sizeof(order) / sizeof(order[0]); i++) {
		int c = order[i];

		if (!p->status_n[c])
			continue;
		fprintf(f, "not measured: %s", st_names[c]);
		if (p->status_text[c] && *p->status_text[c])
			fprintf(f, " (%s%s)", c == GPU_ST_NO_CUPTI ? "looked in " : "",
				p->status_text[c]);
		if (p->status_err[c])
			fprintf(f, ", error %" PRId32, p->status_err[c]);
		return;
	}
	if (p->lib_silent)
		fprintf(f, "not measured: the injection library was loaded but had not started "
			"collecting when the process or the capture ended");
	else
		fprintf(f, "no injection library (GPU activity not measured; --inject loads it "
			"into a running process)");
}

void gpusum__procs_rows(const struct gpu *g, int fmt, FILE *f)
{
	static const char *const cols[] = {
		"PID", "Process", "Measured", "CUPTI", "Kernels", "Copies", "Memsets",
		"Synchronizations", "Lost", "Without launch", "Estimated spans",
	};
	int nc = sizeof(cols) / sizeof(cols[0]);
	size_t np;
	const struct gpu_proc **ps = procs_by_pid(g, &np);

	sumtab__begin(f, fmt, cols, nc);
	for (size_t j = 0; ps && j < np; j++) {
		const struct gpu_proc *p = ps[j];
		uint64_t *pv = hmap__get(&g->m->procs, p->pid), lost = 0;
		const struct proc *mp = pv ? (const void *)(uintptr_t)*pv : NULL;
		const char *cupti = p->status_text[GPU_ST_COLLECTING];

		for (int i = 0; i < GPU_DROP__COUNT; i++)
			lost += p->dropped[i];
		const struct sumtab_cell c[] = {
			{ SC_U64, .u = p->pid }, { SC_STR, .s = mp ? mp->comm : p->comm },
			{ SC_U64, .u = p->measured }, { SC_STR, .s = cupti ? cupti : "" },
			{ SC_U64, .u = p->kernels }, { SC_U64, .u = p->copies },
			{ SC_U64, .u = p->memsets }, { SC_U64, .u = p->syncs }, { SC_U64, .u = lost },
			{ SC_U64, .u = p->no_launch }, { SC_U64, .u = p->est_spans },
		};

		sumtab__row(f, fmt, cols, c, nc, j == 0);
	}
	sumtab__end(f, fmt);
	free(ps);
}

/* How much a process's row says: measured work first, then estimates,
 * then API calls. */
static uint64_t interest(const struct gpu_proc *p)
{
	if (p->measured)
		return (3ull << 62) | (p->kernels + p->copies + p->memsets);
	if (gpuest__spans(p))
		return (2ull << 62) | gpuest__spans(p);
	return (1ull << 62) | p->api_calls;
}

static int by_interest(const void *x, const void *y)
{
	uint64_t a = interest(*(const struct gpu_proc *const *)x);
	uint64_t b = interest(*(const struct gpu_proc *const *)y);

	if (a != b)
		return a < b ? 1 : -1;
	return cmp_proc(x, y);
}

/* More processes than PROC_ROWS (hours of -a churn): the rows of the
 * PROC_ROWS that say most, in pid order, and a count of the rest (the CSV
 * and JSON tables keep every process). *only: their pids, or empty. */
static void pick_rows(const struct gpu_proc **ps, size_t np, struct hmap *only)
{
	const struct gpu_proc **by;

	if (np <= PROC_ROWS || !(by = malloc(np * sizeof(*by))))
		return;
	memcpy(by, ps, np * sizeof(*by));
	qsort(by, np, sizeof(*by), by_interest);
	for (size_t i = 0; i < PROC_ROWS; i++)
		hmap__put(only, by[i]->pid, 1);
	free(by);
}

void gpusum__print_procs(const struct gpu *g, FILE *f)
{
	size_t np, left = 0, left_measured = 0;
	const struct gpu_proc **ps = procs_by_pid(g, &np);
	struct hmap only = { 0 };

	fprintf(f, "\n** GPU activity per process:\n\n");
	if (ps)
		pick_rows(ps, np, &only);
	for (size_t j = 0; ps && j < np; j++) {
		const struct gpu_proc *p = ps[j];
		struct proc *mp = NULL;
		uint64_t *pv = hmap__get(&g->m->procs, p->pid);
		uint64_t lost = 0;

		if (only.count && !hmap__get(&only, p->pid)) {
			left++;
			left_measured += p->measured;
			continue;
		}
		if (pv)
			mp = (void *)(uintptr_t)*pv;
		fprintf(f, "   pid %u (%s): ", p->pid, mp ? mp->comm : p->comm[0] ? p->comm : "?");
		if (p->measured) {
			fprintf(f, "measured (CUPTI %s): %" PRIu64 " kernels, %" PRIu64 " copies, %" PRIu64
				   " memsets, %" PRIu64 " synchronizations\n",
				p->status_text[GPU_ST_COLLECTING] ? p->status_text[GPU_ST_COLLECTING] : "",
				p->kernels, p->copies, p->memsets, p->syncs);
			if (p->how == GPU_HOW_INJECTED)
				fprintf(f, "      from the injection on: the library was loaded into the "
					   "running process by this capture (--inject)\n");
			else if (p->how == GPU_HOW_AT_START)
				fprintf(f, "      library at start: CUDA_INJECTION64_PATH named it when "
					   "the process started\n");
			else
				fprintf(f, "      library loaded before this capture (an earlier "
					   "--inject, or by the program itself)\n");
			if (p->taken)
				fprintf(f, "      GPU activity stopped at +%.3f s (after collection began): "
					   "%s took CUPTI; the counts above are until then (the "
					   "injection library noticed %.3f s later)\n",
					(double)(p->stop_ts - p->collect_ts) / 1e9,
					p->status_text[GPU_ST_TAKEN] ? p->status_text[GPU_ST_TAKEN] :
								       "another tool",
					(double)(p->taken_ts - p->stop_ts) / 1e9);
		} else {
			why_not(p, f);
			fputc('\n', f);
		}
		print_waited(p, f);
		for (int i = 0; i < GPU_DROP__COUNT; i++)
			lost += p->dropped[i];
		if (lost)
			fprintf(f, "      LOST %" PRIu64 " GPU activity records in the process "
				   "(CUPTI's buffers %" PRIu64 ", the injection library's queue %" PRIu64
				   ", other %" PRIu64 ")\n", lost, p->dropped[GPU_DROP_CUPTI],
				p->dropped[GPU_DROP_QUEUE], p->dropped[GPU_DROP_OTHER]);
		if (p->no_launch)
			fprintf(f, "      %" PRIu64 " GPU operations without their launch call (made "
				   "before attach, untraced, or its API record was lost): no flow\n",
				p->no_launch);
		if (p->unfinished)
			fprintf(f, "      %" PRIu64 " GPU operations were still running when "
				   "collection stopped: cut by the window's end, not drawn (CUPTI "
				   "gives them no times)\n", p->unfinished);
		if (p->before_launch)
			fprintf(f, "      %" PRIu64 " GPU operations start before their launch call "
				   "began: the clocks disagree\n", p->before_launch);
		if (p->unflowed_calls)
			fprintf(f, "      %" PRIu64 " calls queued GPU work before collection was "
				   "known: no flow from them\n", p->unflowed_calls);
		if (p->lane_overflow)
			fprintf(f, "      %" PRIu64 " operations overlapped more than %d others on "
				   "their stream: drawn clamped (true times in the tables)\n",
				p->lane_overflow, GPU_LANES);
		if (p->unknown_names)
			fprintf(f, "      %" PRIu64 " kernels came before their name\n",
				p->unknown_names);
	}
	free(ps);
	if (left)
		fprintf(f, "   ... and %zu more process(es) (%zu of them measured): `cgbpf stats "
			   "--report cuda_gpu_procs --format csv` lists every one\n", left, left_measured);
	gpuest__print(g, only.count ? &only : NULL, f);
	hmap__free(&only);
	if (g->bad_batches || g->bad_entries || g->unknown_kinds || g->names_dropped)
		fprintf(f, "   GPU batches: %" PRIu64 " rejected as malformed, %" PRIu64
			   " bad entries skipped, %" PRIu64 " entries of unknown kinds, %" PRIu64
			   " kernel names over the bound\n",
			g->bad_batches, g->bad_entries, g->unknown_kinds, g->names_dropped);
}

static void print_nccl(const struct gpu *g, FILE *f)
{
	size_t np;
	const struct gpu_proc **ps = procs_by_pid(g, &np);

	if (ps)
		gpunccl__print(g, ps, np, f);
	free(ps);
}

void gpusum__print(const struct gpu *g, FILE *f)
{
	struct gpusum *s = g->sum;

	if (!g->procs.count)
		return;
	print_kernels(s, f);
	print_mem(s, f);
	if (g->first_ts)
		gpusum__print_timeline(g, f);
	gpusum__print_procs(g, f);
	print_nccl(g, f);
}
