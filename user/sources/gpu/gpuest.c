// SPDX-License-Identifier: MIT
/*
 * GPU activity estimated from API calls, for processes whose activity is
 * not measured (no injection library, or CUPTI unavailable or held by
 * another tool). Per stream, a span opens at the first call that queues
 * work on it (launch, copy, memset, graph launch) while it had none
 * known pending, and closes at a synchronization that waited for it
 * (stream, device or event synchronize; a synchronous device-to-host
 * copy for its stream): the stream had work queued all along that span,
 * and its GPU work ran inside it. The span is an upper bound of the
 * stream's busy time: the GPU may have idled in it (waiting for the host
 * between launches), and its first kernel starts some microseconds after
 * the first launch call. Its end is the synchronization's return when
 * the host waited there (the call lasted EST_WAIT_NS or more: the work
 * ended shortly before), else the synchronization's entry (the work had
 * ended earlier, unknown how much). docs/gpu-activity.md gives the error.
 *
 * Spans go on tracks of their own, "stream 3 (estimate)" in a group
 * "GPU (estimate from API calls)" under the process, never beside
 * measured slices; streams are named as the API slices' arguments name
 * them. A process that starts collecting stops being estimated.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include "out/pfsink.h"
#include "sources/gpu/gpuest.h"
#include "sources/gpu/gpupf.h"

#define EST_WAIT_NS 10000	/* a synchronization this long waited for the GPU */
#define EST_STREAMS 1024	/* streams per process; more are not estimated */
#define EST_EVENTS 65536	/* events remembered per process */

struct est_stream {
	uint64_t handle;
	uint64_t open_since;	/* 0: nothing known pending */
	uint64_t last_launch, last_launch_end;
	uint64_t last_written;	/* the track's last slice end */
	uint32_t launches;	/* in the open span */
	uint32_t idx;
	struct pfseq *seq;
	bool described;
	uint64_t spans, span_ns, total_launches;
};

struct est_proc {
	struct hmap streams;	/* handle -> struct est_stream * */
	struct hmap ev_stream;	/* event -> stream handle of its last record */
	struct hmap ev_ts;	/* event -> its last record's call begin */
	bool group_described;
	uint64_t spans, span_ns, launches, dropped_open;
};

static struct est_proc *est_of(struct gpu_proc *p)
{
	if (!p->est)
		p->est = calloc(1, sizeof(struct est_proc));
	return p->est;
}

static struct est_stream *est_stream(struct est_proc *e, uint64_t h)
{
	uint64_t *v = hmap__get(&e->streams, h);
	struct est_stream *s;

	if (v)
		return (void *)(uintptr_t)*v;
	if (e->streams.count >= EST_STREAMS)
		return NULL;
	s = calloc(1, sizeof(*s));
	if (!s || hmap__put(&e->streams, h, (uintptr_t)s)) {
		free(s);
		return NULL;
	}
	s->handle = h;
	s->idx = e->streams.count;
	return s;
}

static void describe(struct gpu *g, struct gpu_proc *p, struct est_proc *e, struct est_stream *s)
{
	struct proc *mp = model__proc(g->m, p->pid);
	char buf[48], name[96];
	const char *sn;

	if (!e->group_described) {
		pftrace__track_desc(g->pt, gpupf__track_uuid(GT_EST_GROUP, p->pid, 0),
				    UUID_PROCESS(p->pid), "GPU (estimate from API calls)",
				    "GPU activity was not measured: spans in which each stream had "
				    "work queued, from launches to the synchronizations that waited "
				    "for them (docs/gpu-activity.md)");
		e->group_described = true;
	}
	sn = mp ? model__stream_name(mp, s->handle, false, buf, sizeof(buf)) : "stream ?";
	snprintf(name, sizeof(name), "%s (estimate)", sn);
	pftrace__track_desc(g->pt, gpupf__track_uuid(GT_EST_STREAM, p->pid, s->idx),
			    gpupf__track_uuid(GT_EST_GROUP, p->pid, 0), name,
			    "an upper bound of the stream's busy time, not measured");
	s->described = true;
}

/* Writes the span [open_since, end] and closes it. */
static void span(struct gpu *g, struct gpu_proc *p, struct est_proc *e, struct est_stream *s,
		 uint64_t end, const char *by, const char *end_is)
{
	uint64_t start = s->open_since;
	struct pf_annot a[3] = {
		{ .name = "launches", .type = PA_UINT, .u = s->launches },
		{ .name = "ended_by", .type = PA_STR, .s = by },
		{ .name = "end", .type = PA_STR, .s = end_is },
	};

	/* Another thread may have queued on it during the synchronization
	 * that closed the last span: the track stays in order. */
	if (start < s->last_written)
		start = s->last_written;
	if (end < start)
		end = start;
	s->spans++;
	s->span_ns += end - start;
	s->total_launches += s->launches;
	e->spans++;
	e->span_ns += end - start;
	e->launches += s->launches;
	p->est_spans++;
	s->open_since = 0;
	s->launches = 0;
	s->last_written = end;
	if (!g->pt)
		return;
	if (!s->described)
		describe(g, p, e, s);
	if (!s->seq)
		s->seq = pftrace__seq(g->pt, gpupf__track_uuid(GT_EST_STREAM, p->pid, s->idx), start);
	if (!s->seq)
		return;
	pftrace__begin(g->pt, s->seq, start, "GPU work queued (estimate)", a, 3);
	pftrace__end(g->pt, s->seq, end, NULL, 0);
}

static void close_by(struct gpu *g, struct gpu_proc *p, struct est_proc *e, struct est_stream *s,
		     const struct call *c)
{
	bool waited = c->end_ts - c->ts >= EST_WAIT_NS;

	if (!s || !s->open_since)
		return;
	span(g, p, e, s, waited ? c->end_ts : c->ts, c->name,
	     waited ? "the host waited: the work ended within this call"
		    : "done before this call began: the end is an upper bound");
}

void gpuest__call(struct gpu *g, struct gpu_proc *p, struct thread *t, const struct call *c)
{
	struct est_proc *e;
	struct est_stream *s;
	uint64_t v;

	if (!c->gpu || !c->ended || c->ret != 0 || !(e = est_of(p)))
		return;
	switch (c->gpu) {
	case GC_LAUNCH:
	case GC_GRAPH:
	case GC_COPY:
	case GC_MEMSET:
		s = est_stream(e, c->stream);
		if (!s)
			return;
		if (!s->open_since)
			s->open_since = c->ts;
		s->launches++;
		s->last_launch = c->ts;
		s->last_launch_end = c->end_ts;
		/* A synchronous copy to the host returns once it is done,
		 * and so is everything queued before it on its stream. */
		if (c->gpu == GC_COPY && !c->gpu_async && c->dir == DIR_DTOH)
			span(g, p, e, s, c->end_ts, c->name,
			     "a synchronous copy to the host: the work ended within this call");
		break;
	case GC_SYNC_STREAM: {
		uint64_t *sv = hmap__get(&e->streams, c->stream);

		close_by(g, p, e, sv ? (void *)(uintptr_t)*sv : NULL, c);
		break;
	}
	case GC_SYNC_DEVICE:
		for (size_t it = 0; hmap__next(&e->streams, &it, NULL, &v);)
			close_by(g, p, e, (void *)(uintptr_t)v, c);
		break;
	case GC_EVENT_RECORD:
		if (e->ev_stream.count >= EST_EVENTS && !hmap__get(&e->ev_stream, c->event))
			return;
		hmap__put(&e->ev_stream, c->event, c->stream);
		hmap__put(&e->ev_ts, c->event, c->ts);
		break;
	case GC_SYNC_EVENT: {
		uint64_t *h = hmap__get(&e->ev_stream, c->event), *at = hmap__get(&e->ev_ts, c->event);
		uint64_t *sv = h ? hmap__get(&e->streams, *h) : NULL;

		s = sv ? (void *)(uintptr_t)*sv : NULL;
		/* Only what was queued before the event was recorded. */
		if (s && at && s->last_launch <= *at)
			close_by(g, p, e, s, c);
		break;
	}
	}
}

void gpuest__stop(struct gpu *g, struct gpu_proc *p, bool write_open)
{
	struct est_proc *e = p->est;
	uint64_t v;

	if (!e)
		return;
	for (size_t it = 0; hmap__next(&e->streams, &it, NULL, &v);) {
		struct est_stream *s = (void *)(uintptr_t)v;

		if (!s->open_since)
			continue;
		if (write_open) {
			span(g, p, e, s, s->last_launch_end, "(no synchronization seen)",
			     "unknown: drawn to the last launch call's return");
		} else {
			s->open_since = 0;
			s->launches = 0;
			e->dropped_open++;
		}
	}
}

void gpuest__free(struct gpu_proc *p)
{
	struct est_proc *e = p->est;
	uint64_t v;

	if (!e)
		return;
	for (size_t it = 0; hmap__next(&e->streams, &it, NULL, &v);)
		free((void *)(uintptr_t)v);
	hmap__free(&e->streams);
	hmap__free(&e->ev_stream);
	hmap__free(&e->ev_ts);
	free(e);
	p->est = NULL;
}

void gpuest__replay_span(struct gpu_proc *p, uint64_t stream, uint64_t ns, uint64_t launches)
{
	struct est_proc *e = est_of(p);
	struct est_stream *s = e ? est_stream(e, stream) : NULL;

	if (!s)
		return;
	s->spans++;
	s->span_ns += ns;
	s->total_launches += launches;
	e->spans++;
	e->span_ns += ns;
	e->launches += launches;
	p->est_spans++;
}

static int cmp_pid(const void *a, const void *b)
{
	const struct gpu_proc *x = *(const struct gpu_proc *const *)a;
	const struct gpu_proc *y = *(const struct gpu_proc *const *)b;

	return x->pid < y->pid ? -1 : x->pid > y->pid;
}

/* Streams with spans: those the trace has a track of (cgbpf stats counts
 * those; a stream that had work queued and never waited for has none). */
static size_t streams_spanned(const struct est_proc *e)
{
	size_t n = 0;
	uint64_t v;

	for (size_t it = 0; hmap__next(&e->streams, &it, NULL, &v);)
		n += ((const struct est_stream *)(uintptr_t)v)->spans > 0;
	return n;
}

uint64_t gpuest__spans(const struct gpu_proc *p)
{
	const struct est_proc *e = p->est;

	return e ? e->spans : 0;
}

void gpuest__print(const struct gpu *g, const struct hmap *only, FILE *f)
{
	const struct gpu_proc **ps = malloc((g->procs.count + 1) * sizeof(*ps));
	size_t np = 0;
	uint64_t v;
	bool any = false;

	if (!ps)
		return;
	/* By pid, as the lines above them (cgbpf stats prints the same). */
	for (size_t it = 0; hmap__next(&g->procs, &it, NULL, &v);)
		ps[np++] = (const void *)(uintptr_t)v;
	qsort(ps, np, sizeof(*ps), cmp_pid);
	for (size_t j = 0; j < np; j++) {
		const struct gpu_proc *p = ps[j];
		const struct est_proc *e = p->est;

		if (!e || !e->spans || (only && !hmap__get(only, p->pid)))
			continue;
		any = true;
		fprintf(f, "   pid %u: estimated from API calls: %" PRIu64 " spans of queued GPU work "
			   "on %zu stream(s), %.6f s in all, %" PRIu64 " launches%s\n",
			p->pid, e->spans, streams_spanned(e), e->span_ns / 1e9, e->launches,
			!p->measured ? "" : p->taken ? " (before collection started, and after "
			"another tool took CUPTI)" : " (before collection started)");
	}
	free(ps);
	if (any)
		fprintf(f, "   (estimates bound each stream's busy time from above; they are not "
			   "measurements: docs/gpu-activity.md; `record -p PID --inject` loads the "
			   "injection library into a running process and measures)\n");
}
