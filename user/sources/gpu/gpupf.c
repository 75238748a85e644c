// SPDX-License-Identifier: MIT
/*
 * GPU activity in the Perfetto trace. Under each process: a track group
 * per GPU ("GPU 0: NVIDIA H100 80GB HBM3", its UUID, SMs and memory in
 * the description, the memory rounded and in bytes) holding a track per stream ("stream 7", with its
 * priority when the library sent it), a "CUDA synchronization" track for
 * the host's waits CUPTI recorded, and a "GPU activity (CUPTI)" track
 * with what the injection library said (collecting, or why not) and the
 * running count of records it lost.
 *
 * Each track is its own packet sequence: slices reach it in start order
 * (user/sources/gpu/gpu.c's heap), so its timestamps are small deltas and the track
 * never needs its own uuid on an event. Slices of one stream never
 * overlap on one track: a record that overlaps the previous one on its
 * stream (CUDA serializes a stream, but programmatic dependent launch
 * lets a kernel start before its predecessor ends, and records can come
 * later than the reorder window) goes to the stream's next lane, a track
 * named "stream 7 (overlapping)"; past the last lane it is clamped to
 * start where the previous ended (counted; the summary keeps its true
 * times).
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include "out/pfsink.h"
#include "sources/gpu/gpupf.h"

uint64_t gpupf__track_uuid(enum gpu_track kind, uint32_t pid, uint32_t idx)
{
	return UUID_GPU((uint64_t)(kind & 0xf) << 52 | (uint64_t)pid << 20 | (idx & 0xfffff));
}

void gpupf__device(struct gpu *g, struct gpu_proc *p, struct gpu_dev *d)
{
	char name[96], desc[192];
	const uint8_t *u = d->uuid;

	if (!g->pt)
		return;
	if (d->known) {
		snprintf(name, sizeof(name), "GPU %u: %s", d->index, d->name);
		snprintf(desc, sizeof(desc),
			 "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x, "
			 "%" PRIu32 " SMs, compute capability %" PRIu32 ".%" PRIu32 ", %.1f GiB "
			 "(%" PRIu64 " bytes)",
			 u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11],
			 u[12], u[13], u[14], u[15], d->sm_count, d->cc_major, d->cc_minor,
			 d->global_memory / (1024.0 * 1024 * 1024), d->global_memory);
	} else {
		/* Its activity came without a device entry: still its own GPU. */
		snprintf(name, sizeof(name), "GPU %u", d->index);
		snprintf(desc, sizeof(desc), "device %u (not described by the injection library)",
			 d->index);
	}
	pftrace__track_desc(g->pt, gpupf__track_uuid(GT_DEVICE, p->pid, d->index),
			    UUID_PROCESS(p->pid), name, desc);
	d->described = true;
}

static void info_track(struct gpu *g, struct gpu_proc *p)
{
	if (p->info_described)
		return;
	pftrace__track_desc(g->pt, gpupf__track_uuid(GT_INFO, p->pid, 0), UUID_PROCESS(p->pid),
			    "GPU activity (CUPTI)",
			    "what cgbpf's injection library could measure, and why not");
	p->info_described = true;
}

static struct pfseq *info_seq(struct gpu *g, struct gpu_proc *p, uint64_t ts)
{
	info_track(g, p);
	if (!p->info_seq)
		p->info_seq = pftrace__seq(g->pt, gpupf__track_uuid(GT_INFO, p->pid, 0), ts);
	return p->info_seq;
}

void gpupf__status(struct gpu *g, struct gpu_proc *p, uint64_t ts, const char *what,
		   const char *detail)
{
	struct pf_annot a = { .name = "detail", .type = PA_STR, .s = detail };
	struct pfseq *s;

	if (!g->pt || !(s = info_seq(g, p, ts)))
		return;
	pftrace__instant(g->pt, s, ts, 0, what, &a, detail && *detail ? 1 : 0);
}

void gpupf__status_args(struct gpu *g, struct gpu_proc *p, uint64_t ts, const char *what,
			const struct pf_annot *a, int n)
{
	struct pfseq *s;

	if (!g->pt || !(s = info_seq(g, p, ts)))
		return;
	pftrace__instant(g->pt, s, ts, 0, what, a, n);
}

void gpupf__lost(struct gpu *g, struct gpu_proc *p, uint64_t ts)
{
	uint64_t uuid = gpupf__track_uuid(GT_LOST, p->pid, 0), total = 0;
	struct pfseq *s;

	if (!g->pt || !(s = info_seq(g, p, ts)))
		return;
	if (!p->lost_described) {
		pftrace__counter_track(g->pt, uuid, UUID_PROCESS(p->pid),
				       "GPU records lost (injection library)", PF_UNIT_COUNT);
		p->lost_described = true;
	}
	for (int i = 0; i < GPU_DROP__COUNT; i++)
		total += p->dropped[i];
	pftrace__counter(g->pt, s, ts, uuid, total > INT64_MAX ? INT64_MAX : (int64_t)total);
}

/* The stream's track name, lane 0 plain, the others marked. */
static void describe_lane(struct gpu *g, struct gpu_proc *p, const struct gstream *s,
			  struct gpu_lane *l, int lane)
{
	char name[96], desc[96], prio[32] = "";

	if (s->has_priority)
		snprintf(prio, sizeof(prio), " (priority %" PRId32 ")", s->priority);
	if (s->context == UINT32_MAX && s->id == UINT32_MAX)
		snprintf(name, sizeof(name), "other streams (too many)%s", lane ? " (overlapping)" : "");
	else
		snprintf(name, sizeof(name), "stream %" PRIu32 "%s%s", s->id, prio,
			 lane ? " (overlapping)" : "");
	snprintf(desc, sizeof(desc), "CUPTI stream %" PRIu32 " of context %" PRIu32 ", lane %d",
		 s->id, s->context, lane);
	pftrace__track_desc(g->pt, gpupf__track_uuid(GT_LANE, p->pid, l->idx),
			    gpupf__track_uuid(GT_DEVICE, p->pid, s->device), name, desc);
	l->described = true;
}

static void describe_sync(struct gpu *g, struct gpu_proc *p, struct gpu_lane *l, int lane)
{
	pftrace__track_desc(g->pt, gpupf__track_uuid(GT_SYNC, p->pid, l->idx), UUID_PROCESS(p->pid),
			    lane ? "CUDA synchronization (overlapping)" : "CUDA synchronization",
			    "host waits CUPTI recorded (CUPTI_ACTIVITY_KIND_SYNCHRONIZATION)");
	l->described = true;
}

/* The first lane op fits on in order; the last one (clamped) if none. */
static int pick_lane(struct gpu_lane *lanes, const struct gpu_op *op)
{
	for (int i = 0; i < GPU_LANES; i++)
		if (op->start >= lanes[i].last_end)
			return i;
	return -1;
}

static const char *const mem_kinds[] = {
	"unknown", "pageable", "pinned", "device", "array", "managed", "device static",
	"managed static",
};

static const char *mem_kind(uint8_t k)
{
	return k < sizeof(mem_kinds) / sizeof(mem_kinds[0]) ? mem_kinds[k] : "unknown";
}

static const char *const copy_ops[] = {
	[GPU_COPY_UNKNOWN] = "[CUDA memcpy Unknown]",
	[GPU_COPY_HTOD] = "[CUDA memcpy Host-to-Device]",
	[GPU_COPY_DTOH] = "[CUDA memcpy Device-to-Host]",
	[GPU_COPY_HTOA] = "[CUDA memcpy Host-to-Array]",
	[GPU_COPY_ATOH] = "[CUDA memcpy Array-to-Host]",
	[GPU_COPY_ATOA] = "[CUDA memcpy Array-to-Array]",
	[GPU_COPY_ATOD] = "[CUDA memcpy Array-to-Device]",
	[GPU_COPY_DTOA] = "[CUDA memcpy Device-to-Array]",
	[GPU_COPY_DTOD] = "[CUDA memcpy Device-to-Device]",
	[GPU_COPY_HTOH] = "[CUDA memcpy Host-to-Host]",
	[GPU_COPY_PTOP] = "[CUDA memcpy Peer-to-Peer]",
};

static const char *const copy_kinds[] = {
	[GPU_COPY_UNKNOWN] = "unknown", [GPU_COPY_HTOD] = "HtoD", [GPU_COPY_DTOH] = "DtoH",
	[GPU_COPY_HTOA] = "HtoA", [GPU_COPY_ATOH] = "AtoH", [GPU_COPY_ATOA] = "AtoA",
	[GPU_COPY_ATOD] = "AtoD", [GPU_COPY_DTOA] = "DtoA", [GPU_COPY_DTOD] = "DtoD",
	[GPU_COPY_HTOH] = "HtoH", [GPU_COPY_PTOP] = "peer",
};

/* "HtoD", "DtoH", ... (the slices' "kind"). */
static const char *copy_kind(uint8_t k)
{
	return k <= GPU_COPY_PTOP ? copy_kinds[k] : copy_kinds[GPU_COPY_UNKNOWN];
}

/* The name of an operation ("[CUDA memcpy Host-to-Device]", "[CUDA memset]")
 * as nsys's tables call it. */
static const char *op_name(const struct gpu_op *op)
{
	if (op->kind == GPU_MEMSET)
		return "[CUDA memset]";
	return op->copy_kind <= GPU_COPY_PTOP ? copy_ops[op->copy_kind] : copy_ops[0];
}

static const char *const sync_names[] = {
	"CUDA synchronization", "Event synchronize", "Stream wait event", "Stream synchronize",
	"Context synchronize",
};

#define OP_ANNOTS 10

/*
 * A kernel's launch configuration as one string, "grid (64,1,1) block
 * (256,1,1) regs 32 smem 0+2048" (shared memory per block, static +
 * dynamic, left out when both are 0): interned per track, a loop's
 * kernels repeat a few configurations, so each slice carries a 1 to 2
 * byte id where five args took about 28 bytes.
 */
static void kernel_config(char *buf, size_t len, const struct gpu_op *op)
{
	int n = snprintf(buf, len,
			 "grid (%" PRIu32 ",%" PRIu32 ",%" PRIu32 ") block (%u,%u,%u) regs %u",
			 op->k.grid[0], op->k.grid[1], op->k.grid[2], op->k.block[0],
			 op->k.block[1], op->k.block[2], op->k.regs);

	if ((op->k.smem_static || op->k.smem_dynamic) && n > 0 && (size_t)n < len)
		snprintf(buf + n, len - n, " smem %" PRIu32 "+%" PRIu32, op->k.smem_static,
			 op->k.smem_dynamic);
}

void gpupf__op(struct gpu *g, struct gpu_proc *p, const struct gpu_op *op,
	       const struct gpu_corr *c)
{
	char config[128], kname[64];
	struct pf_annot a[OP_ANNOTS];
	struct pf_flow f = { 0 };
	struct gpu_lane *lanes, *l;
	struct gstream *s = NULL;
	uint64_t start = op->start, end = op->end;
	const char *name;
	int n = 0, lane;

	if (!g->pt)
		return;
	if (op->kind == GPU_SYNC) {
		lanes = p->sync_lanes;
	} else {
		s = gpuproc__stream(p, op->device, op->context, op->stream);
		if (!s)
			return;
		s->ops++;
		lanes = s->lanes;
	}
	lane = pick_lane(lanes, op);
	if (lane < 0) {
		lane = GPU_LANES - 1;
		p->lane_overflow++;
		start = lanes[lane].last_end;
		if (end < start)
			end = start;
	}
	l = &lanes[lane];
	if (!l->idx)
		l->idx = op->kind == GPU_SYNC ? ++p->next_sync_lane : ++p->next_lane;
	if (!l->described) {
		if (s)
			describe_lane(g, p, s, l, lane);
		else
			describe_sync(g, p, l, lane);
	}
	if (!l->seq)
		l->seq = pftrace__seq(g->pt, gpupf__track_uuid(s ? GT_LANE : GT_SYNC, p->pid, l->idx),
				      start);
	if (!l->seq)
		return;
	l->last_end = end;

	switch (op->kind) {
	case GPU_KERNEL:
		name = gpuproc__kernel_name(p, op, kname, sizeof(kname));
		kernel_config(config, sizeof(config), op);
		a[n++] = (struct pf_annot){ .name = "config", .type = PA_STR, .s = config };
		break;
	case GPU_MEMCPY:
		name = op_name(op);
		a[n++] = (struct pf_annot){ .name = "bytes", .type = PA_UINT, .u = op->m.bytes };
		a[n++] = (struct pf_annot){ .name = "kind", .type = PA_STR,
					    .s = copy_kind(op->copy_kind) };
		if (op->end > op->start)
			a[n++] = (struct pf_annot){ .name = "GBps", .type = PA_DOUBLE,
						    .d = (double)op->m.bytes / (op->end - op->start) };
		a[n++] = (struct pf_annot){ .name = "src", .type = PA_STR, .s = mem_kind(op->src_kind) };
		a[n++] = (struct pf_annot){ .name = "dst", .type = PA_STR, .s = mem_kind(op->dst_kind) };
		if (op->copy_kind == GPU_COPY_PTOP)
			a[n++] = (struct pf_annot){ .name = "peer", .type = PA_UINT, .u = op->peer };
		if (!(op->flags & GPU_COPY_ASYNC))
			a[n++] = (struct pf_annot){ .name = "async", .type = PA_BOOL, .u = 0 };
		break;
	case GPU_MEMSET:
		name = op_name(op);
		a[n++] = (struct pf_annot){ .name = "bytes", .type = PA_UINT, .u = op->m.bytes };
		a[n++] = (struct pf_annot){ .name = "value", .type = PA_UINT, .u = op->m.value };
		a[n++] = (struct pf_annot){ .name = "memory", .type = PA_STR, .s = mem_kind(op->mem_kind) };
		break;
	default:
		name = sync_names[op->s.type < 5 ? op->s.type : 0];
		if (op->stream != UINT32_MAX)
			a[n++] = (struct pf_annot){ .name = "stream", .type = PA_UINT, .u = op->stream };
		/* Its GPU is the one its context's streams run on (cgbpf
		 * export needs it: a synchronization record names no device). */
		a[n++] = (struct pf_annot){ .name = "context", .type = PA_UINT, .u = op->context };
		break;
	}
	if (op->corr)
		a[n++] = (struct pf_annot){ .name = "correlation", .type = PA_UINT, .u = op->corr };
	if (op->graph_id && n < OP_ANNOTS)
		a[n++] = (struct pf_annot){ .name = "graph", .type = PA_UINT, .u = op->graph_id };
	if (start != op->start && n < OP_ANNOTS)
		a[n++] = (struct pf_annot){ .name = "clamped_by_ns", .type = PA_UINT,
					    .u = start - op->start };
	/* The launch's flow ends here: a kernel launch queues one kernel,
	 * whose slice closes the flow (the shortest encoding); a graph
	 * launch's operations, and copies and memsets (a call may queue
	 * several), end it without closing it. A record that starts before
	 * its launch call (the clocks disagree) links the other way round,
	 * as the two ends' times say. */
	if (c && c->flow && op->kind != GPU_SYNC) {
		if (c->call_ts && op->start < c->call_ts)
			f.out = c->flow;
		else if (op->kind == GPU_KERNEL && !op->graph_id)
			f.end = c->flow;
		else
			f.in = c->flow;
	}
	pftrace__begin_flow(g->pt, l->seq, start, 0, NULL, name, a, n, &f);
	pftrace__end(g->pt, l->seq, end, NULL, 0);
}
