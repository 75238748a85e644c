// SPDX-License-Identifier: MIT
/*
 * GPU activity: the injection library's batches (bpf/gpu_rec.h) checked
 * entry by entry, the per-process model they build (its tables:
 * user/sources/gpu/gpuproc.c), the link from each GPU operation to the
 * API call that queued it, and the order operations are written in
 * (user/sources/gpu/gpupf.c) and counted (user/sources/gpu/gpusum.c).
 *
 * Flows. The API slice of a launch is written when the call begins, long
 * before CUPTI's records of it arrive, and at that time cgbpf does not
 * know CUPTI's correlation id. So the call gets its flow id then: the
 * next of a counter per capture (1, 2, ...: a 1 to 3 byte varint in the
 * trace; ids are unique in the trace, and cgbpf merge moves each further
 * machine's ids apart). The begin of every outermost call that queues GPU
 * work (launch, copy, memset, graph launch) carries it
 * (TrackEvent.flow_ids) in a process whose GPU activity is collected, and
 * the thread's window of recent calls remembers it. CUPTI's GPU_API entry
 * then says which thread made the call with a correlation id, and when,
 * inside the uprobe's slice: the slice on that thread that contains
 * [start, end] is the one (the window, or the call still open), and every
 * GPU operation with that correlation id ends the flow (user/sources/gpu/gpupf.c).
 *
 * Order. CUPTI delivers records in buffers, per kind and context, not in
 * time order; a stream's track must get its slices in order. Operations
 * wait in a heap per process and are written in start order once they
 * are older than the newest one seen minus the reorder window, or older
 * than the wall clock minus it (gpu__tick), or when the library flushed
 * or the process ended.
 */
#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include "lib/elf/symbolize.h"
#include "lib/log.h"
#include "lib/outname.h"
#include "lib/sumtab.h"
#include "lib/straggle.h"
#include "sources/gpu/gpu.h"
#include "sources/gpu/gpuest.h"
#include "sources/gpu/gpunccl.h"
#include "sources/gpu/gpupf.h"
#include "sources/gpu/gpuproc.h"
#include "sources/gpu/gpusum.h"

#define REORDER_NS (2000ull * 1000000)	/* how late a record may come and still be in order */
#define PENDING_MAX (1u << 17)		/* operations waiting per process */
#define CORR_MAX (1u << 18)		/* correlation ids remembered per process */
#define CALLS_MAX (1u << 16)		/* calls remembered per thread */
#define CALLS_KEEP_NS (60ull * 1000000000)
#define NAMES_MAX (1u << 16)		/* kernel names per process */
#define NAME_BYTES_MAX (16u << 20)
#define MAX_DURATION_NS (24ull * 3600 * 1000000000)

/* ---------------------------------------------------------------- processes */

/* Frees all that is kept of a process, its estimate too. */
static void free_proc(struct gpu_proc *p)
{
	gpuest__free(p);
	gpunccl__free(p);
	gpuproc__free(p);
}

/* ---------------------------------------------------------------- names */

static void set_name(struct gpu *g, struct gpu_proc *p, uint32_t id, const char *text)
{
	size_t len = strlen(text);
	uint64_t old;
	char *d;

	if (!hmap__get(&p->names, id) &&
	    (p->names.count >= NAMES_MAX || p->name_bytes + len > NAME_BYTES_MAX)) {
		g->names_dropped++;
		return;
	}
	d = symbolizer__demangle_dup(text);
	if (!d)
		return;
	if (hmap__del(&p->names, id, &old))
		free((void *)(uintptr_t)old);
	if (hmap__put(&p->names, id, (uintptr_t)d)) {
		free(d);
		return;
	}
	p->name_bytes += strlen(d) + 1;
}

/* ---------------------------------------------------------------- calls and correlation */

static bool queues_work(const struct call *c)
{
	return c->gpu == GC_LAUNCH || c->gpu == GC_COPY || c->gpu == GC_MEMSET || c->gpu == GC_GRAPH;
}

/* The model's call_flow hook: the begin of an outermost CUDA call that
 * queues GPU work in a process whose activity is collected. */
static uint64_t call_flow(void *ctx, const struct thread *t, const struct call *c)
{
	struct gpu *g = ctx;
	struct gpu_proc *p;

	if (!queues_work(c) || !(p = gpuproc__find(g, t->proc->pid)) || !p->collecting ||
	    model__inside_cuda_api(t, c))
		return 0;
	return ++g->flows;
}

static struct gpu_thread *gthread(struct gpu_proc *p, uint32_t tid, bool create)
{
	uint64_t *v = hmap__get(&p->threads, tid);
	struct gpu_thread *t;

	if (v || !create)
		return v ? (void *)(uintptr_t)*v : NULL;
	t = calloc(1, sizeof(*t));
	if (!t || hmap__put(&p->threads, tid, (uintptr_t)t)) {
		free(t);
		return NULL;
	}
	t->tid = tid;
	return t;
}

static struct gcall *call_at(const struct gpu_thread *t, uint32_t i)
{
	return &t->calls[(t->head + i) & (t->cap - 1)];
}

/* Remembers a call that queued work, for the GPU_API entries to come. */
static void window_add(struct gpu_thread *t, uint64_t ts, uint64_t end, uint64_t flow)
{
	/* Older than any record still on its way. */
	while (t->n && call_at(t, 0)->end + CALLS_KEEP_NS < ts) {
		t->head = (t->head + 1) & (t->cap - 1);
		t->n--;
	}
	/* Outermost calls of one thread follow each other; the search
	 * below relies on it. */
	if (t->n && call_at(t, t->n - 1)->ts >= ts)
		return;
	if (t->n == t->cap) {
		if (t->cap < CALLS_MAX) {
			uint32_t nc = t->cap ? t->cap * 2 : 64;
			struct gcall *n = malloc(nc * sizeof(*n));

			if (!n)
				return;
			for (uint32_t i = 0; i < t->n; i++)
				n[i] = *call_at(t, i);
			free(t->calls);
			t->calls = n;
			t->cap = nc;
			t->head = 0;
		} else {
			t->head = (t->head + 1) & (t->cap - 1);
			t->n--;
		}
	}
	*call_at(t, t->n) = (struct gcall){ .ts = ts, .end = end, .flow = flow };
	t->n++;
}

/* The remembered call of t that contains [start, end], else the one that
 * [start, end] contains, or NULL. */
static const struct gcall *window_find(const struct gpu_thread *t, uint64_t start, uint64_t end)
{
	uint32_t lo = 0, hi = t->n;
	const struct gcall *c;

	/* The last call that began at or before start. */
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (call_at(t, mid)->ts <= start)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo) {
		c = call_at(t, lo - 1);
		if (c->end >= end)
			return c;
	}
	/*
	 * A call inside [start, end]: the record is of a runtime call cgbpf
	 * does not see (a CUDA runtime linked statically, with hidden
	 * symbols, into a library: cuBLASLt's cudaLaunchKernelExC), and the
	 * call seen is the driver call it made (cuLaunchKernelEx), which
	 * queued the work.
	 */
	if (lo < t->n) {
		c = call_at(t, lo);
		/* Only one: with two inside, which queued the work is not
		 * known, and no flow is better than a wrong one. */
		if (c->ts >= start && c->end <= end &&
		    (lo + 1 >= t->n || call_at(t, lo + 1)->ts > end))
			return c;
	}
	return NULL;
}

/*
 * Correlation ids. Every GPU_API entry puts one and every operation looks
 * one up, so this is the consumer's hottest map: an open-addressing table
 * of the entries themselves (one memory access where a hmap index into a
 * ring took three), at most half full, deleted from by backward shift (no
 * tombstones to wade through under constant churn). An id's home slot is
 * the id plus a per-capture offset: CUPTI's ids increase, so consecutive
 * puts and lookups walk the table in order (the prefetcher's case; a
 * scattering hash cost a cache miss per access) and ids less than the
 * table's size apart never collide. The process chooses the ids: one that
 * finds no free slot within CORR_PROBES of its home is not remembered
 * (its operations count as without their launch call), so ids aimed at
 * one slot cost a bounded search, never a long one.
 */
#define CORR_PROBES 64

static uint32_t corr_home(const struct gpu_proc *p, uint32_t corr)
{
	return (corr + (uint32_t)p->corr_seed) & (p->corr_slots - 1);
}

static struct gpu_corr *corr_find(const struct gpu_proc *p, uint32_t corr)
{
	uint32_t mask = p->corr_slots - 1, i;

	if (!corr || !p->corr_slots)
		return NULL;
	i = corr_home(p, corr);
	for (int n = 0; n < CORR_PROBES; n++, i = (i + 1) & mask) {
		struct gpu_corr *e = &p->corr_tab[i];

		if (e->corr == corr)
			return e;
		if (!e->corr)
			return NULL;
	}
	return NULL;
}

/* The free slot a new id corr goes to; NULL: none near its home. */
static struct gpu_corr *corr_slot(const struct gpu_proc *p, uint32_t corr)
{
	uint32_t mask = p->corr_slots - 1, i = corr_home(p, corr);

	for (int n = 0; n < CORR_PROBES; n++, i = (i + 1) & mask)
		if (!p->corr_tab[i].corr)
			return &p->corr_tab[i];
	return NULL;
}

static void corr_del(struct gpu_proc *p, struct gpu_corr *e)
{
	uint32_t mask = p->corr_slots - 1, i = (uint32_t)(e - p->corr_tab), j = i;

	/* Backward shift: an entry further on moves into the hole unless
	 * its home lies cyclically in (hole, its slot]. Entries only move
	 * nearer their home and each lies within CORR_PROBES of it, so none
	 * further than that from the hole can move (consecutive ids fill
	 * long runs of slots: the scan must not walk them to their end). */
	for (;;) {
		uint32_t h;

		j = (j + 1) & mask;
		if (!p->corr_tab[j].corr || ((j - i) & mask) >= CORR_PROBES)
			break;
		h = corr_home(p, p->corr_tab[j].corr);
		if (((j - h) & mask) < ((j - i) & mask))
			continue;
		p->corr_tab[i] = p->corr_tab[j];
		i = j;
	}
	p->corr_tab[i].corr = 0;
	p->corr_count--;
}

static int corr_grow(struct gpu_proc *p)
{
	uint32_t slots = p->corr_slots ? p->corr_slots * 2 : 2048, old = p->corr_slots;
	struct gpu_corr *tab = calloc(slots, sizeof(*tab)), *ot = p->corr_tab;

	if (!tab)
		return -ENOMEM;
	p->corr_tab = tab;
	p->corr_slots = slots;
	p->corr_count = 0;
	for (uint32_t i = 0; i < old; i++) {
		struct gpu_corr *e;

		if (ot[i].corr && (e = corr_slot(p, ot[i].corr))) {
			*e = ot[i];
			p->corr_count++;
		}
	}
	free(ot);
	return 0;
}

/* Remembers c; past CORR_MAX ids the oldest put is forgotten (its
 * operations came long ago), unless its id was put again since. */
static void corr_put(struct gpu_proc *p, const struct gpu_corr *c)
{
	struct gpu_corr *e;

	if (p->corr_n == p->corr_cap) {
		if (p->corr_cap < CORR_MAX) {
			uint32_t nc = p->corr_cap ? p->corr_cap * 2 : 1024;
			uint32_t *n = malloc(nc * sizeof(*n));

			if (!n)
				return;
			for (uint32_t i = 0; i < p->corr_n; i++)
				n[i] = p->corr_fifo[(p->corr_head + i) & (p->corr_cap - 1)];
			free(p->corr_fifo);
			p->corr_fifo = n;
			p->corr_cap = nc;
			p->corr_head = 0;
		} else {
			struct gpu_corr *old = corr_find(p, p->corr_fifo[p->corr_head]);

			if (old && old->gen == p->corr_seq - p->corr_n)
				corr_del(p, old);
			p->corr_head = (p->corr_head + 1) & (p->corr_cap - 1);
			p->corr_n--;
		}
	}
	e = corr_find(p, c->corr);
	if (!e) {
		if ((p->corr_count + 1) * 2 > p->corr_slots && corr_grow(p))
			return;
		e = corr_slot(p, c->corr);
		if (!e)
			return;
		p->corr_count++;
	}
	*e = *c;
	e->gen = p->corr_seq++;
	p->corr_fifo[(p->corr_head + p->corr_n) & (p->corr_cap - 1)] = c->corr;
	p->corr_n++;
}

/* A GPU_API entry: which call of which thread a correlation id is. */
static void on_api(struct gpu *g, struct gpu_proc *p, const struct gpu_api *a)
{
	struct gpu_corr c = { .corr = a->corr, .tid = a->tid, .api_ts = a->start };
	struct gpu_thread *t = gthread(p, a->tid, false);
	const struct gcall *call = t ? window_find(t, a->start, a->end) : NULL;
	uint64_t *v;

	if (!a->corr)
		return;
	p->api_entries++;
	if (call) {
		c.call_ts = call->ts;
		c.flow = call->flow;
	} else if ((v = hmap__get(&g->m->threads, a->tid))) {
		/* Not returned yet (the record came while the outermost
		 * call was still open): its begin is known already. */
		const struct thread *mt = (void *)(uintptr_t)*v;

		if (mt->proc->pid == p->pid && mt->depth && mt->stack[0].begun &&
		    mt->stack[0].flow && mt->stack[0].ts <= a->start) {
			c.call_ts = mt->stack[0].ts;
			c.flow = mt->stack[0].flow;
		}
	}
	if (c.flow) {
		p->api_matched++;
	} else if (p->api_entries - p->api_matched <= 5 && log_verbosity >= LOG_DEBUG) {
		/* -v: why, for the first few (what a new CUPTI or driver
		 * does differently shows here first). */
		const struct gcall *near = NULL;

		for (uint32_t i = 0; t && i < t->n; i++)
			if (!near || call_at(t, i)->ts <= a->start)
				near = call_at(t, i);
		dbg("pid %u: CUPTI %s API record (cbid %u, correlation %u) of thread %u at "
		    "[%" PRIu64 ", %" PRIu64 "] is in no call of that thread: %s%s "
		    "[%" PRIu64 ", %" PRIu64 "]", p->pid, a->runtime ? "runtime" : "driver",
		    a->cbid, a->corr, a->tid, a->start, a->end,
		    t ? "its calls that queued work are known; the nearest began before it:" :
		    "no call that queued work is known of that thread",
		    near ? "" : " (none)", near ? near->ts : 0, near ? near->end : 0);
	}
	corr_put(p, &c);
}

/* ---------------------------------------------------------------- order */

static bool op_before(const struct gpu_op *a, const struct gpu_op *b)
{
	return a->start < b->start || (a->start == b->start && a->seq < b->seq);
}

static void heap_pop(struct gpu_proc *p, struct gpu_op *out)
{
	uint32_t i = 0;

	*out = p->heap[0];
	p->heap[0] = p->heap[--p->heap_n];
	for (;;) {
		uint32_t l = 2 * i + 1, r = l + 1, m = i;
		struct gpu_op tmp;

		if (l < p->heap_n && op_before(&p->heap[l], &p->heap[m]))
			m = l;
		if (r < p->heap_n && op_before(&p->heap[r], &p->heap[m]))
			m = r;
		if (m == i)
			break;
		tmp = p->heap[i];
		p->heap[i] = p->heap[m];
		p->heap[m] = tmp;
		i = m;
	}
}

/* The first waiting operation in (start, seq) order: the run's head or
 * the heap's top. NULL: none. */
static const struct gpu_op *first_op(const struct gpu_proc *p)
{
	const struct gpu_op *r = p->run_n ? &p->run[p->run_head] : NULL;

	if (p->heap_n && (!r || op_before(&p->heap[0], r)))
		return &p->heap[0];
	return r;
}

/* Takes the first waiting operation out (there is one). */
static void pop_op(struct gpu_proc *p, struct gpu_op *out)
{
	/* p->heap, not &p->heap[0]: NULL until the heap is first used. */
	if (p->heap_n && first_op(p) == p->heap) {
		heap_pop(p, out);
	} else {
		*out = p->run[p->run_head];
		p->run_head = (p->run_head + 1) & (p->run_cap - 1);
		p->run_n--;
	}
	p->nheap--;
}

/* Capture windows: an operation belongs to the window its launch call
 * began in (by the uprobe's slice, else CUPTI's API record, else, with
 * neither, by when it ran). */
static uint64_t launch_ts(const struct gpu_corr *c, const struct gpu_op *op)
{
	return c && c->call_ts ? c->call_ts : c && c->api_ts ? c->api_ts : op->start;
}

/* Writes and counts one operation, now in start order. */
static void release_one(struct gpu *g, struct gpu_proc *p, const struct gpu_op *op)
{
	struct gpu_corr *c = corr_find(p, op->corr);
	struct gpu_dev *d;
	bool late = false;

	if (g->keep && !g->keep(g->keep_ctx, p->pid, launch_ts(c, op)))
		return;
	d = op->kind == GPU_SYNC ? NULL : gpuproc__dev(p, op->device);
	if (d) {
		late = d->ops && op->start < d->last_start;
		if (!d->described)
			gpupf__device(g, p, d);
	}
	if (op->kind != GPU_SYNC) {
		if (!c || !c->call_ts)
			p->no_launch++;
		else if (op->start < c->call_ts)
			p->before_launch++;
	}
	if (!g->first_ts || op->start < g->first_ts)
		g->first_ts = op->start;
	if (op->end > g->last_ts)
		g->last_ts = op->end;
	gpupf__op(g, p, op, c);
	gpusum__op(g, p, op, c, late, NULL);
	if (c)
		c->ops++;
}

/* Writes the waiting operations that start before t (all: UINT64_MAX). */
static void release_before(struct gpu *g, struct gpu_proc *p, uint64_t t)
{
	const struct gpu_op *f;
	struct gpu_op op;

	while ((f = first_op(p)) && f->start < t) {
		pop_op(p, &op);
		release_one(g, p, &op);
	}
}

/* Room for one more in the run (a ring); false: none. */
static bool run_room(struct gpu_proc *p)
{
	uint32_t nc;
	struct gpu_op *n;

	if (p->run_n < p->run_cap)
		return true;
	nc = p->run_cap ? p->run_cap * 2 : 256;
	n = malloc(nc * sizeof(*n));
	if (!n)
		return false;
	for (uint32_t i = 0; i < p->run_n; i++)
		n[i] = p->run[(p->run_head + i) & (p->run_cap - 1)];
	free(p->run);
	p->run = n;
	p->run_cap = nc;
	p->run_head = 0;
	return true;
}

/*
 * Queues op for writing in (start, seq) order. CUPTI hands most records
 * over in start order: those go to the end of the run, O(1) in and out,
 * and only one that starts before the run's last goes into the heap (a
 * heap of all of them cost the consumer a sift through 17 levels of
 * operations per record once PENDING_MAX waited). The two give the same
 * order a single heap gave: (start, seq) is unique.
 */
static void push_op(struct gpu *g, struct gpu_proc *p, struct gpu_op *op)
{
	uint32_t i;

	if (g->arrived)
		g->arrived(g->keep_ctx, p->pid, launch_ts(corr_find(p, op->corr), op),
			   op->kind == GPU_KERNEL);
	op->seq = g->seq++;
	if (op->end > p->last_op_end)
		p->last_op_end = op->end;
	if (p->nheap >= PENDING_MAX) {
		/* Bounded: the oldest goes out now. */
		struct gpu_op old;

		pop_op(p, &old);
		release_one(g, p, &old);
	}
	if (!p->run_n ||
	    !op_before(op, &p->run[(p->run_head + p->run_n - 1) & (p->run_cap - 1)])) {
		if (!run_room(p))
			return;
		p->run[(p->run_head + p->run_n) & (p->run_cap - 1)] = *op;
		p->run_n++;
		p->nheap++;
		goto out;
	}
	if (p->heap_n == p->capheap) {
		uint32_t nc = p->capheap ? p->capheap * 2 : 256;
		struct gpu_op *n = realloc(p->heap, nc * sizeof(*n));

		if (!n)
			return;
		p->heap = n;
		p->capheap = nc;
	}
	i = p->heap_n++;
	p->nheap++;
	p->heap[i] = *op;
	while (i) {
		uint32_t up = (i - 1) / 2;
		struct gpu_op tmp;

		if (!op_before(&p->heap[i], &p->heap[up]))
			break;
		tmp = p->heap[i];
		p->heap[i] = p->heap[up];
		p->heap[up] = tmp;
		i = up;
	}
out:
	if (op->start > p->max_start)
		p->max_start = op->start;
}

/* ---------------------------------------------------------------- entries */

static bool sane_times(uint64_t start, uint64_t end)
{
	return start && end >= start && end - start <= MAX_DURATION_NS;
}

static const char *const status_what[GPU_ST__COUNT] = {
	[GPU_ST_COLLECTING] = "GPU activity: collecting",
	[GPU_ST_STOPPED] = "GPU activity: stopped",
	[GPU_ST_NO_CUPTI] = "GPU activity not measured: no CUPTI library found",
	[GPU_ST_CUPTI_FAILED] = "GPU activity not measured: a CUPTI call failed",
	[GPU_ST_HELD] = "GPU activity not measured: another tool holds CUPTI",
	[GPU_ST_NO_DEVICE] = "GPU activity not measured: no GPU",
	[GPU_ST_FLUSHED] = "GPU activity: flushed",
	[GPU_ST_TAKEN] = "GPU activity stopped: another tool took CUPTI",
	[GPU_ST_WAITED] = "cuInit held until the driver was probed",
};

/*
 * GPU_ST_TAKEN: another client took CUPTI's activity callbacks while the
 * library collected; nothing more will come. What came is written now,
 * and an instant at the time activity stopped says who took it, when it
 * was noticed and what was measured until then.
 */
static void on_taken(struct gpu *g, struct gpu_proc *p, uint64_t ts, const char *who,
		     int32_t error)
{
	char name[GPU_STATUS_TEXT + 64], detail[GPU_STATUS_TEXT + 256];
	struct pf_annot a[6];

	p->collecting = false;
	p->flush_answered = true;
	release_before(g, p, UINT64_MAX);
	if (p->taken)
		return;
	p->taken = true;
	p->taken_ts = ts;
	p->stop_ts = p->last_op_end > p->collect_ts ? p->last_op_end : p->collect_ts;
	if (!p->stop_ts || p->stop_ts > ts)
		p->stop_ts = ts;
	snprintf(name, sizeof(name), "GPU activity stopped: %s took CUPTI", who);
	snprintf(detail, sizeof(detail),
		 "%s took CUPTI's activity callbacks; the last GPU activity measured ended %.3f s "
		 "after collection began, the injection library noticed %.3f s after it%s; "
		 "measured until then: %" PRIu64 " kernels, %" PRIu64 " copies, %" PRIu64
		 " memsets, %" PRIu64 " synchronizations",
		 who, (double)(p->stop_ts - (p->collect_ts ? p->collect_ts : p->stop_ts)) / 1e9,
		 (double)(ts - p->stop_ts) / 1e9,
		 error ? " (CUPTI: multiple subscribers not supported)" : "",
		 p->kernels, p->copies, p->memsets, p->syncs);
	a[0] = (struct pf_annot){ .name = "detail", .type = PA_STR, .s = detail };
	a[1] = (struct pf_annot){ .name = "tool", .type = PA_STR, .s = who };
	a[2] = (struct pf_annot){ .name = "kernels", .type = PA_UINT, .u = p->kernels };
	a[3] = (struct pf_annot){ .name = "copies", .type = PA_UINT, .u = p->copies };
	a[4] = (struct pf_annot){ .name = "memsets", .type = PA_UINT, .u = p->memsets };
	a[5] = (struct pf_annot){ .name = "noticed_after_ns", .type = PA_UINT,
				  .u = ts - p->stop_ts };
	gpupf__status_args(g, p, p->stop_ts, name, a, 6);
}

const char *const gpu_how_text[GPU_HOW__COUNT] = {
	[GPU_HOW_BEFORE] = "loaded before", [GPU_HOW_AT_START] = "at start",
	[GPU_HOW_INJECTED] = "injected now",
};

/* How p's library came, at its first "collecting": injected by this
 * capture (the model's process says), named by CUDA_INJECTION64_PATH in
 * its environment at exec (read while the process lives), or neither. */
static uint8_t how_it_came(struct gpu *g, struct gpu_proc *p)
{
	uint64_t *pv = hmap__get(&g->m->procs, p->pid);
	const struct proc *mp = pv ? (const void *)(uintptr_t)*pv : NULL;
	char env[512];

	if (mp && mp->injected_ns)
		return GPU_HOW_INJECTED;
	if (!outname__proc_env(NULL, (pid_t)p->pid, "CUDA_INJECTION64_PATH", env, sizeof(env)) &&
	    strstr(env, "libcgbpf"))
		return GPU_HOW_AT_START;
	return GPU_HOW_BEFORE;
}

static void on_status(struct gpu *g, struct gpu_proc *p, uint64_t ts, const uint8_t *e,
		      size_t size)
{
	struct gpu_status st;
	const char *text = (const char *)e + sizeof(st);
	size_t room = size - sizeof(st);
	char detail[GPU_STATUS_TEXT + 160];
	const char *nul;

	memcpy(&st, e, sizeof(st));
	if (room > GPU_STATUS_TEXT)
		room = GPU_STATUS_TEXT;
	nul = memchr(text, 0, room);
	if (st.code < 1 || st.code >= GPU_ST__COUNT || !nul) {
		g->bad_entries++;
		return;
	}
	if (st.flags & GPU_STATUS_REPEAT) {
		/* Said already: nothing new. Else the first went missing. */
		if (p->status_n[st.code])
			return;
		p->status_recovered++;
		warn("pid %u: the injection library's first GPU status did not arrive; its repeat "
		     "did: calls made until now have no flow to their GPU work", p->pid);
	}
	free(p->status_text[st.code]);
	p->status_text[st.code] = strdup(text);
	p->status_err[st.code] = st.error;
	p->status_n[st.code]++;
	/* Tests wait for this line (-v). */
	dbg("pid %u: GPU activity: status %u (%s)", p->pid, st.code, text);
	switch (st.code) {
	case GPU_ST_COLLECTING:
		if (!p->collect_ts) {
			p->collect_ts = ts;
			p->how = how_it_came(g, p);
		}
		p->collecting = p->measured = true;
		/* Measured from now on: what the estimate had open goes. */
		gpuest__stop(g, p, false);
		break;
	case GPU_ST_STOPPED:
		p->collecting = false;
		p->flush_answered = true;
		release_before(g, p, UINT64_MAX);
		break;
	case GPU_ST_FLUSHED:
		p->flush_answered = true;
		release_before(g, p, UINT64_MAX);
		break;
	case GPU_ST_TAKEN:
		on_taken(g, p, ts, text, st.error);
		return;
	}
	if (st.error)
		snprintf(detail, sizeof(detail), "%s (error %" PRId32 ")", text, st.error);
	else if ((st.code == GPU_ST_STOPPED || st.code == GPU_ST_FLUSHED) &&
		 p->unfinished > p->unfinished_said)
		snprintf(detail, sizeof(detail), "%s; %" PRIu64 " operations still running "
			 "then, not drawn (CUPTI gives them no times)", text,
			 p->unfinished - p->unfinished_said);
	else
		snprintf(detail, sizeof(detail), "%s", text);
	if (st.code == GPU_ST_STOPPED || st.code == GPU_ST_FLUSHED)
		p->unfinished_said = p->unfinished;
	if (st.code == GPU_ST_WAITED) {
		/* At the start of the wait ("<us> <file>"): not at the batch's
		 * time, which the "collecting" instant of the same batch has. */
		uint64_t us = strtoull(text, NULL, 10) + 1;

		gpupf__status(g, p, ts > us * 1000 ? ts - us * 1000 : ts, status_what[st.code],
			      detail);
		return;
	}
	if (st.code == GPU_ST_COLLECTING) {
		const struct pf_annot a[] = {
			{ .name = "detail", .type = PA_STR, .s = detail },
			{ .name = "library", .type = PA_STR, .s = gpu_how_text[p->how] },
		};

		gpupf__status_args(g, p, ts, status_what[st.code], a, 2);
		return;
	}
	gpupf__status(g, p, ts, status_what[st.code], detail);
}

/* An activity entry's operation into op; false for a bad entry. */
static bool kernel_op(struct gpu_proc *p, const uint8_t *e, size_t size, struct gpu_op *op)
{
	struct gpu_kernel k;

	if (size < sizeof(k))
		return false;
	memcpy(&k, e, sizeof(k));
	if (!sane_times(k.start, k.end))
		return false;
	op->kind = GPU_KERNEL;
	op->start = k.start;
	op->end = k.end;
	op->corr = k.corr;
	op->stream = k.stream;
	op->context = k.context;
	op->graph_id = k.graph_id;
	op->device = k.device;
	op->k.name_id = k.name_id;
	memcpy(op->k.grid, k.grid, sizeof(op->k.grid));
	memcpy(op->k.block, k.block, sizeof(op->k.block));
	op->k.regs = k.regs;
	op->k.smem_static = k.smem_static;
	op->k.smem_dynamic = k.smem_dynamic;
	if (k.name_id && !hmap__get(&p->names, k.name_id))
		p->unknown_names++;
	return true;
}

static bool memcpy_op(const uint8_t *e, size_t size, struct gpu_op *op)
{
	struct gpu_memcpy c;

	if (size < sizeof(c))
		return false;
	memcpy(&c, e, sizeof(c));
	if (!sane_times(c.start, c.end))
		return false;
	op->kind = GPU_MEMCPY;
	op->start = c.start;
	op->end = c.end;
	op->corr = c.corr;
	op->stream = c.stream;
	op->context = c.context;
	op->graph_id = c.graph_id;
	op->device = c.device;
	op->copy_kind = c.copy_kind <= GPU_COPY_PTOP ? c.copy_kind : GPU_COPY_UNKNOWN;
	op->src_kind = c.src_kind;
	op->dst_kind = c.dst_kind;
	op->flags = c.flags;
	op->peer = c.peer;
	op->m.bytes = c.bytes;
	return true;
}

static bool memset_op(const uint8_t *e, size_t size, struct gpu_op *op)
{
	struct gpu_memset s;

	if (size < sizeof(s))
		return false;
	memcpy(&s, e, sizeof(s));
	if (!sane_times(s.start, s.end))
		return false;
	op->kind = GPU_MEMSET;
	op->start = s.start;
	op->end = s.end;
	op->corr = s.corr;
	op->stream = s.stream;
	op->context = s.context;
	op->graph_id = s.graph_id;
	op->device = s.device;
	op->mem_kind = s.mem_kind;
	op->m.bytes = s.bytes;
	op->m.value = s.value;
	return true;
}

static bool sync_op(const uint8_t *e, size_t size, struct gpu_op *op)
{
	struct gpu_sync s;

	if (size < sizeof(s))
		return false;
	memcpy(&s, e, sizeof(s));
	if (!sane_times(s.start, s.end))
		return false;
	op->kind = GPU_SYNC;
	op->start = s.start;
	op->end = s.end;
	op->corr = s.corr;
	op->stream = s.stream;
	op->context = s.context;
	op->s.type = s.type;
	return true;
}

/* The entries that describe rather than time: false for a bad one. */
static bool on_api_entry(struct gpu *g, struct gpu_proc *p, const uint8_t *e, size_t size)
{
	struct gpu_api a;

	if (size < sizeof(a))
		return false;
	memcpy(&a, e, sizeof(a));
	if (!sane_times(a.start, a.end))
		return false;
	on_api(g, p, &a);
	return true;
}

static bool on_name(struct gpu *g, struct gpu_proc *p, const uint8_t *e, size_t size)
{
	struct gpu_name n;
	size_t room = size - sizeof(n);
	const char *text = (const char *)e + sizeof(n);

	memcpy(&n, e, sizeof(n));
	if (room > GPU_NAME_MAX)
		room = GPU_NAME_MAX;
	if (!n.id || !room || !memchr(text, 0, room))
		return false;
	set_name(g, p, n.id, text);
	return true;
}

static bool on_device(struct gpu *g, struct gpu_proc *p, const uint8_t *e, size_t size)
{
	struct gpu_device d;
	struct gpu_dev *dev;

	if (size < sizeof(d))
		return false;
	memcpy(&d, e, sizeof(d));
	/* Activity entries name devices by a byte. */
	if (d.id >= GPU_DEVS || !memchr(d.name, 0, sizeof(d.name)))
		return false;
	dev = gpuproc__dev(p, d.id);
	if (!dev)
		return true;
	if (!dev->known || strcmp(dev->name, d.name) || memcmp(dev->uuid, d.uuid, 16))
		dev->described = false;
	dev->known = true;
	memcpy(dev->name, d.name, sizeof(dev->name));
	memcpy(dev->uuid, d.uuid, sizeof(dev->uuid));
	dev->global_memory = d.global_memory;
	dev->sm_count = d.sm_count;
	dev->cc_major = d.compute_major;
	dev->cc_minor = d.compute_minor;
	if (dev->ops)	/* its track exists already: rename it */
		gpupf__device(g, p, dev);
	return true;
}

static bool on_dropped(struct gpu *g, struct gpu_proc *p, uint64_t ts, const uint8_t *e,
		       size_t size)
{
	struct gpu_dropped d;
	int w;

	if (size < sizeof(d))
		return false;
	memcpy(&d, e, sizeof(d));
	w = d.where == 1 ? GPU_DROP_CUPTI : d.where == 2 ? GPU_DROP_QUEUE : GPU_DROP_OTHER;
	if (__builtin_add_overflow(p->dropped[w], d.count, &p->dropped[w]))
		p->dropped[w] = UINT64_MAX;
	if (__builtin_add_overflow(g->dropped_total, d.count, &g->dropped_total))
		g->dropped_total = UINT64_MAX;
	gpupf__lost(g, p, ts);
	return true;
}

static bool on_stream(struct gpu_proc *p, const uint8_t *e, size_t size)
{
	struct gpu_stream s;
	struct gstream *gs;

	if (size < sizeof(s))
		return false;
	memcpy(&s, e, sizeof(s));
	gs = gpuproc__stream(p, s.device, s.context, s.stream);
	if (gs && (!gs->has_priority || gs->priority != s.priority)) {
		gs->has_priority = true;
		gs->priority = s.priority;
		for (int i = 0; i < GPU_LANES; i++)
			gs->lanes[i].described = false;
	}
	return true;
}

_Static_assert(offsetof(struct gpu_kernel, start) == offsetof(struct gpu_memcpy, start) &&
		       offsetof(struct gpu_kernel, start) == offsetof(struct gpu_memset, start) &&
		       offsetof(struct gpu_kernel, end) == offsetof(struct gpu_memcpy, end) &&
		       offsetof(struct gpu_kernel, end) == offsetof(struct gpu_memset, end),
	       "the operations' times are where unfinished() reads them");

/* A kernel, copy or memset entry with neither start nor end: CUPTI's
 * record of work still running when a forced flush (the end of a
 * collection window) handed its buffer over. */
static bool unfinished(uint16_t kind, const uint8_t *e, size_t size)
{
	uint64_t start, end;

	if (kind == GPU_SYNC || size < offsetof(struct gpu_kernel, end) + sizeof(end))
		return false;
	memcpy(&start, e + offsetof(struct gpu_kernel, start), sizeof(start));
	memcpy(&end, e + offsetof(struct gpu_kernel, end), sizeof(end));
	return !start && !end;
}

/* One entry of a batch: an operation queued for the timeline, or what
 * describes them; a bad one is counted. */
static void on_entry(struct gpu *g, struct gpu_proc *p, const struct rec_hdr *h, const uint8_t *e,
		     uint16_t kind, size_t size)
{
	struct gpu_op op = { 0 };
	bool ok;

	switch (kind) {
	case GPU_KERNEL:
	case GPU_MEMCPY:
	case GPU_MEMSET:
	case GPU_SYNC:
		ok = kind == GPU_KERNEL ? kernel_op(p, e, size, &op) :
		     kind == GPU_MEMCPY ? memcpy_op(e, size, &op) :
		     kind == GPU_MEMSET ? memset_op(e, size, &op) : sync_op(e, size, &op);
		if (ok) {
			push_op(g, p, &op);
		} else if (unfinished(kind, e, size)) {
			/* Cut by the window's end: counted and said, not drawn
			 * (its times are not known). */
			p->unfinished++;
			ok = true;
		}
		break;
	case GPU_API:
		ok = on_api_entry(g, p, e, size);
		break;
	case GPU_NAME:
		ok = on_name(g, p, e, size);
		break;
	case GPU_DEVICE:
		ok = on_device(g, p, e, size);
		break;
	case GPU_STATUS:
		ok = size >= sizeof(struct gpu_status) + 1;
		if (ok)
			on_status(g, p, h->ts, e, size);
		break;
	case GPU_DROPPED:
		ok = on_dropped(g, p, h->ts, e, size);
		break;
	case GPU_STREAM:
		ok = on_stream(p, e, size);
		break;
	case GPU_NCCL_COMM:
	case GPU_NCCL_OP:
	case GPU_NCCL_CHANNEL:
	case GPU_NCCL_PROXY:
		ok = gpunccl__entry(g, p, kind, e, size);
		break;
	default:
		g->unknown_kinds++;
		return;
	}
	if (!ok)
		g->bad_entries++;
}

int gpu__record(struct gpu *g, const void *data, size_t size)
{
	const uint8_t *b = (const uint8_t *)data + sizeof(struct rec_hdr);
	struct gpu_proc *p;
	struct rec_hdr h;
	size_t len, off = 0;

	if (size < sizeof(h)) {
		g->bad_batches++;
		return -EINVAL;
	}
	memcpy(&h, data, sizeof(h));
	len = size - sizeof(h);
	if (h.size != size || len > GPU_BATCH_MAX) {
		g->bad_batches++;
		return -EINVAL;
	}
	p = gpuproc__get(g, h.pid, true);
	if (!p)
		return 0;
	g->batches++;
	p->exited = false;
	while (off < len) {
		struct gpu_ent e;

		/* A size that does not add up leaves nothing to resync on. */
		if (len - off < sizeof(e)) {
			g->bad_entries++;
			break;
		}
		memcpy(&e, b + off, sizeof(e));
		if (e.size < 8 || e.size % 8 || e.size > len - off) {
			g->bad_entries++;
			break;
		}
		g->entries++;
		on_entry(g, p, &h, b + off, e.kind, e.size);
		off += e.size;
	}
	if (p->max_start > REORDER_NS)
		release_before(g, p, p->max_start - REORDER_NS);
	return 0;
}

/* ---------------------------------------------------------------- the sink */

static void on_end(void *ctx, struct thread *t, struct call *c)
{
	struct gpu *g = ctx;
	struct gpu_proc *p;

	if ((c->lib != LIB_CUDA && c->lib != LIB_CUDART) || model__inside_cuda_api(t, c))
		return;
	p = gpuproc__get(g, t->proc->pid, true);
	if (!p)
		return;
	p->api_calls++;
	if (queues_work(c)) {
		p->queue_calls++;
		if (c->flow) {
			struct gpu_thread *gt = gthread(p, t->tid, true);

			if (gt)
				window_add(gt, c->ts, c->end_ts, c->flow);
		} else if (p->collecting) {
			p->unflowed_calls++;
		}
	}
	/* Estimated where not measured: before collection, and from the
	 * moment cgbpf learnt that another tool took CUPTI. */
	if (!g->measured_only && (!p->measured || (p->taken && c->ts >= p->taken_ts)))
		gpuest__call(g, p, t, c);
}

struct sink gpu__sink(struct gpu *g)
{
	return (struct sink){ .ctx = g, .call_end = on_end };
}

/* ---------------------------------------------------------------- life */

struct gpu *gpu__new(struct model *m, struct pftrace *pt)
{
	struct gpu *g = calloc(1, sizeof(*g));

	if (!g)
		return NULL;
	g->m = m;
	g->pt = pt;
	g->sum = gpusum__new();
	if (!g->sum) {
		free(g);
		return NULL;
	}
	m->call_flow = call_flow;
	m->call_flow_ctx = g;
	return g;
}

void gpu__free(struct gpu *g)
{
	uint64_t v;

	if (!g)
		return;
	if (g->m->call_flow_ctx == g) {
		g->m->call_flow = NULL;
		g->m->call_flow_ctx = NULL;
	}
	for (size_t it = 0; hmap__next(&g->procs, &it, NULL, &v);)
		free_proc((void *)(uintptr_t)v);
	hmap__free(&g->procs);
	hmap__free(&g->lib_probed);
	gpusum__free(g->sum);
	straggle__free(g->nccl_strag);
	free(g);
}

void gpu__tick(struct gpu *g, uint64_t now)
{
	uint64_t v;

	if (now <= REORDER_NS)
		return;
	for (size_t it = 0; hmap__next(&g->procs, &it, NULL, &v);)
		release_before(g, (void *)(uintptr_t)v, now - REORDER_NS);
	/* A rank not traced leaves its communicator's instances open. */
	if (g->nccl_strag && now > 60000000000ull)
		straggle__expire(g->nccl_strag, now - 60000000000ull);
}

/* Everything written and its timelines closed. */
static void proc_end(struct gpu *g, struct gpu_proc *p)
{
	release_before(g, p, UINT64_MAX);
	for (int i = 0; i < GPU_DEVS; i++)
		if (gpuproc__dev_at(p, i))
			gpusum__dev_end(g, p, p->devs[i]);
	gpuest__stop(g, p, true);
}

void gpu__proc_exit(struct gpu *g, uint32_t pid, uint64_t ts)
{
	struct gpu_proc *p = gpuproc__find(g, pid);

	if (!p)
		return;
	proc_end(g, p);
	gpuproc__free_bulk(p);
	p->exited = true;
	p->collecting = false;
}

/* The instant of a process whose probed library never reported. */
#define LIB_SILENT "GPU activity not measured: the injection library did not report"

void gpu__lib_probed(struct gpu *g, uint32_t pid)
{
	hmap__put(&g->lib_probed, pid, 1);	/* ENOMEM: the plainer message */
}

void gpu__forget(struct gpu *g, uint32_t pid)
{
	uint64_t v;

	hmap__del(&g->lib_probed, pid, NULL);
	if (hmap__del(&g->procs, pid, &v))
		free_proc((void *)(uintptr_t)v);
	if (g->nccl_strag)
		straggle__forget_pid(g->nccl_strag, pid);
}

void gpu__set_keep(struct gpu *g, int (*keep)(void *ctx, uint32_t pid, uint64_t launch_ts),
		   void (*arrived)(void *ctx, uint32_t pid, uint64_t launch_ts, bool kernel),
		   void *ctx)
{
	g->keep = keep;
	g->arrived = arrived;
	g->keep_ctx = ctx;
}

void gpu__release(struct gpu *g, uint32_t pid)
{
	uint64_t v;

	for (size_t it = 0; hmap__next(&g->procs, &it, NULL, &v);) {
		struct gpu_proc *p = (void *)(uintptr_t)v;

		if (!pid || p->pid == pid)
			release_before(g, p, UINT64_MAX);
	}
}

void gpu__flush_asked_pid(struct gpu *g, uint32_t pid)
{
	struct gpu_proc *p = gpuproc__find(g, pid);

	if (p)
		p->flush_answered = false;
}

void gpu__flush_asked(struct gpu *g)
{
	uint64_t v;

	g->flush_asked = true;
	for (size_t it = 0; hmap__next(&g->procs, &it, NULL, &v);)
		((struct gpu_proc *)(uintptr_t)v)->flush_answered = false;
}

bool gpu__settled(const struct gpu *g)
{
	uint64_t v;

	for (size_t it = 0; hmap__next(&g->procs, &it, NULL, &v);) {
		const struct gpu_proc *p = (void *)(uintptr_t)v;

		if (p->collecting && !p->exited && !p->flush_answered)
			return false;
	}
	return true;
}

void gpu__measured_only(struct gpu *g)
{
	g->measured_only = true;
}

void gpu__end_quiet(struct gpu *g)
{
	uint64_t v;

	for (size_t it = 0; g && hmap__next(&g->procs, &it, NULL, &v);)
		proc_end(g, (void *)(uintptr_t)v);
}

void gpu__finish(struct gpu *g, uint64_t ts)
{
	uint64_t v;

	for (size_t it = 0; hmap__next(&g->procs, &it, NULL, &v);) {
		struct gpu_proc *p = (void *)(uintptr_t)v;
		bool said = false;

		proc_end(g, p);
		if (p->api_entries)
			dbg("pid %u: %" PRIu64 " CUPTI API records, %" PRIu64 " found the call they "
			    "describe", p->pid, p->api_entries, p->api_matched);
		for (int i = 1; i < GPU_ST__COUNT; i++)
			said |= p->status_n[i] != 0;
		if (p->api_calls && !said && hmap__get(&g->lib_probed, p->pid)) {
			p->lib_silent = true;
			gpupf__status(g, p, ts, LIB_SILENT,
				      "the process loaded cgbpf's injection library and cgbpf probed "
				      "it, but the library had not started collecting when the process "
				      "or the capture ended (it looks for cgbpf's probe every 20 ms)");
		} else if (p->api_calls && !said) {
			gpupf__status(g, p, ts, "GPU activity not measured: no injection library",
				      "the process made CUDA calls but no cgbpf injection library "
				      "reported (see docs/gpu-activity.md to load it)");
		}
	}
	/* What the summary counts that the events do not show, for cgbpf
	 * stats (gpu__replay_attr). */
	for (size_t it = 0; g->pt && hmap__next(&g->procs, &it, NULL, &v);) {
		const struct gpu_proc *p = (void *)(uintptr_t)v;
		char buf[128];

		if (!p->unflowed_calls && !p->dropped[GPU_DROP_CUPTI] &&
		    !p->dropped[GPU_DROP_QUEUE] && !p->dropped[GPU_DROP_OTHER])
			continue;
		snprintf(buf, sizeof(buf), "%" PRIu32 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64,
			 p->pid, p->unflowed_calls, p->dropped[GPU_DROP_CUPTI],
			 p->dropped[GPU_DROP_QUEUE], p->dropped[GPU_DROP_OTHER]);
		pftrace__attribute(g->pt, "cgbpf.gpu_process", buf);
	}
	if (g->pt && (g->bad_batches || g->bad_entries || g->unknown_kinds || g->names_dropped)) {
		char buf[96];

		snprintf(buf, sizeof(buf), "%" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64,
			 g->bad_batches, g->bad_entries, g->unknown_kinds, g->names_dropped);
		pftrace__attribute(g->pt, "cgbpf.gpu_batches", buf);
	}
	/* The summary shows the GPU tables when a process used the GPU:
	 * cgbpf stats reads whether one did here. */
	if (g->pt && g->procs.count)
		pftrace__attribute(g->pt, "cgbpf.gpu_processes", "1");
}

void gpu__replay_device(struct gpu *g, uint32_t pid, uint8_t index, const char *name)
{
	struct gpu_proc *p = gpuproc__get(g, pid, false);
	struct gpu_dev *d = p ? gpuproc__dev(p, index) : NULL;

	if (!d)
		return;
	d->known = *name != 0;
	snprintf(d->name, sizeof(d->name), "%s", name);
}

void gpu__replay_op(struct gpu *g, const struct gpu_replay_op *r)
{
	static const uint8_t kinds[] = { GPU_KERNEL, GPU_MEMCPY, GPU_MEMSET, GPU_SYNC };
	struct gpu_proc *p = gpuproc__get(g, r->pid, false);
	struct gpu_op op = { .start = r->start, .end = r->end, .device = r->device };
	struct gpu_corr c = { .call_ts = r->call_ts, .tid = r->tid, .ops = !r->first };
	struct gpu_dev *d = NULL;
	bool late = false;

	if (!p || r->kind >= sizeof(kinds))
		return;
	op.kind = kinds[r->kind];
	/* As release_one counts it. */
	if (op.kind != GPU_SYNC && !(d = gpuproc__dev(p, op.device)))
		return;
	if (d)
		late = d->ops && op.start < d->last_start;
	if (op.kind != GPU_SYNC) {
		if (!r->call_ts)
			p->no_launch++;
		else if (op.start < r->call_ts)
			p->before_launch++;
	}
	p->lane_overflow += r->clamped;
	if (!g->first_ts || op.start < g->first_ts)
		g->first_ts = op.start;
	if (op.end > g->last_ts)
		g->last_ts = op.end;
	gpusum__op(g, p, &op, r->call_ts ? &c : NULL, late, r->kernel ? r->kernel : "");
}

void gpu__replay_comm(struct gpu *g, uint32_t pid, const char *comm)
{
	struct gpu_proc *p = gpuproc__find(g, pid);

	if (p)
		snprintf(p->comm, sizeof(p->comm), "%s", comm);
}

void gpu__replay_status(struct gpu *g, uint32_t pid, const char *what, const char *detail,
			const char *library)
{
	struct gpu_proc *p = gpuproc__get(g, pid, false);
	const char *e;
	int c, err = 0, n = 0;

	if (!p)
		return;
	if (!strcmp(what, LIB_SILENT)) {
		p->lib_silent = true;
		return;
	}
	for (c = 1; c < GPU_ST__COUNT && (!status_what[c] || strcmp(what, status_what[c])); c++)
		;
	/* GPU_ST_TAKEN's instant has other args (left out), and "no
	 * injection library" is what no status at all prints. */
	if (c == GPU_ST__COUNT || c == GPU_ST_TAKEN)
		return;
	/* on_status: "TEXT (error N)". */
	e = strrchr(detail, '(');
	if (e && e > detail && e[-1] == ' ' && sscanf(e, "(error %d)%n", &err, &n) == 1 && !e[n])
		n = (int)(e - 1 - detail);
	else
		n = (int)strlen(detail), err = 0;
	free(p->status_text[c]);
	p->status_text[c] = strndup(detail, n);
	p->status_err[c] = err;
	p->status_n[c]++;
	if (c == GPU_ST_COLLECTING) {
		p->collecting = p->measured = true;
		for (int h = 0; library && h < GPU_HOW__COUNT; h++)
			if (!strcmp(library, gpu_how_text[h]))
				p->how = (uint8_t)h;
	}
}

void gpu__replay_est(struct gpu *g, uint32_t pid, uint64_t stream, uint64_t ns, uint64_t launches)
{
	struct gpu_proc *p = gpuproc__get(g, pid, false);

	if (p)
		gpuest__replay_span(p, stream, ns, launches);
}

void gpu__replay_attr(struct gpu *g, const char *key, const char *value)
{
	uint64_t a, b, c, d;
	uint32_t pid;

	if (!strcmp(key, "cgbpf.gpu_process") &&
	    sscanf(value, "%" SCNu32 " %" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64, &pid, &a, &b,
		   &c, &d) == 5) {
		struct gpu_proc *p = gpuproc__get(g, pid, false);

		if (!p)
			return;
		p->unflowed_calls += a;
		p->dropped[GPU_DROP_CUPTI] += b;
		p->dropped[GPU_DROP_QUEUE] += c;
		p->dropped[GPU_DROP_OTHER] += d;
	} else if (!strcmp(key, "cgbpf.gpu_batches") &&
		   sscanf(value, "%" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64, &a, &b, &c, &d) == 4) {
		g->bad_batches += a;
		g->bad_entries += b;
		g->unknown_kinds += c;
		g->names_dropped += d;
	}
}

void gpu__print_procs(const struct gpu *g, int fmt, FILE *f)
{
	if (fmt != 0)
		gpusum__procs_rows(g, fmt, f);
	else if (g->procs.count)
		gpusum__print_procs(g, f);
}

void gpu__print_timeline(const struct gpu *g, int fmt, FILE *f)
{
	if (fmt != SUMTAB_TEXT)
		gpusum__timeline_rows(g, fmt, f);
	else if (g->first_ts)
		gpusum__print_timeline(g, f);
}

size_t gpu__procs(const struct gpu *g)
{
	return g->procs.count;
}

void gpu__replay_end(struct gpu *g)
{
	uint64_t v;

	for (size_t it = 0; hmap__next(&g->procs, &it, NULL, &v);) {
		struct gpu_proc *p = (void *)(uintptr_t)v;

		for (int i = 0; i < GPU_DEVS; i++)
			if (gpuproc__dev_at(p, i))
				gpusum__dev_end(g, p, p->devs[i]);
	}
}

void gpu__each_busy(const struct gpu *g,
		    void (*fn)(void *ctx, uint32_t pid, unsigned device, uint64_t busy_ns,
			       uint64_t ops, uint64_t kernels),
		    void *ctx)
{
	uint64_t v;

	for (size_t it = 0; hmap__next(&g->procs, &it, NULL, &v);) {
		const struct gpu_proc *p = (const void *)(uintptr_t)v;

		for (unsigned i = 0; p->devs && i < GPU_DEVS; i++) {
			const struct gpu_dev *d = p->devs[i];

			if (d && d->ops)
				fn(ctx, p->pid, d->index, d->busy, d->ops, d->kernels);
		}
	}
}

void gpu__each_nccl(const struct gpu *g,
		    void (*fn)(void *ctx, uint32_t pid, uint64_t hash, int rank, int nranks,
			       uint64_t entered),
		    void *ctx)
{
	uint64_t v;

	for (size_t it = 0; hmap__next(&g->procs, &it, NULL, &v);)
		gpunccl__each_comm((const struct gpu_proc *)(uintptr_t)v, fn, ctx);
}

void gpu__each_nccl_strag(const struct gpu *g,
			  void (*fn)(void *ctx, const struct straggle_row *r), void *ctx)
{
	if (g->nccl_strag)
		straggle__each(g->nccl_strag, fn, ctx);
}

void gpu__set_hang(struct gpu *g, struct hangwatch *h)
{
	g->hang = h;
}

uint64_t gpu__lost(const struct gpu *g)
{
	return g->dropped_total;
}

bool gpu__measured(const struct gpu *g, uint32_t pid)
{
	const struct gpu_proc *p = gpuproc__find(g, pid);

	return p && p->measured;
}

bool gpu__collecting(const struct gpu *g, uint32_t pid)
{
	const struct gpu_proc *p = gpuproc__find(g, pid);

	return p && p->collecting;
}

bool gpu__flush_answered(const struct gpu *g, uint32_t pid)
{
	const struct gpu_proc *p = gpuproc__find(g, pid);

	return p && p->flush_answered;
}

void gpu__print(const void *ctx, const uint64_t *drops, FILE *f)
{
	const struct gpu *g = ctx;

	gpusum__print(g, f);
}
