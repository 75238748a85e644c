/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of GPU activity in user space (user/gpu*.c) on hand-built
 * REC_GPU_BATCH records (bpf/gpu_rec.h) and API calls built through the
 * model as the uprobes' records would build them (user/sources/cuda/cuda.c decodes
 * them): decoding and validation of everything the traced process
 * writes, the order slices are written in, the link from each call to
 * the GPU work it queued, the summary's tables, and the estimate for a
 * process whose activity is not measured. No root, no BPF.
 *
 * Usage: test_gpu DIR
 * Writes DIR/NAME.perfetto-trace, DIR/NAME.summary.txt and
 * DIR/NAME.expect.jsonl (what was fed: every GPU operation with the call
 * that queued it, every queueing call, every estimate span) for each
 * capture; check_gpu.sh decodes the traces with tests/lib/ptrace.py and
 * check_gpu.py compares them, and the summaries, with the expectations.
 * Here only what the API and the counters say.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sources/cuda/cuda.h"
#include "sources/gpu/gpu.h"
#include "sources/gpu/gpuproc.h"
#include "sources/gpu/gpunccl.h"
#include "gpu_rec.h"
#include "core/model.h"
#include "out/perfetto.h"
#include "out/pfsink.h"
#include "tap.h"
#include "sources/sources.h"

/* Pids and tids no live process has: the model names them "pid N". */
#define PID_M 4200001	/* measured */
#define TID_M2 4200002
#define PID_V 4200031	/* validation */
#define PID_E 4200011	/* estimated: no injection library */
#define PID_N 4200021	/* estimated: the library found no CUPTI */
#define PID_S 4200041	/* summary only */
#define PID_T 4200051	/* another tool took CUPTI */

#define US ((uint64_t)1000)
#define MS ((uint64_t)1000000)

static const char *dir;
static struct model m;
static struct pftrace *pt;
static struct gpu *g;
static FILE *ex;		/* the capture's expectations */
static uint64_t now;

/* ---------------------------------------------------------------- captures */

static void capture_begin(const char *name, bool trace)
{
	char path[4096];

	model__init(&m);
	pt = NULL;
	if (trace) {
		snprintf(path, sizeof(path), "%s/%s.perfetto-trace", dir, name);
		pt = pftrace__create(path);
		check(pt != NULL, "%s: trace created", name);
		pftrace__clock_snapshot(pt);
		struct sink ps = pfsink__sink(pt);

		model__add_sink(&m, &ps);
	}
	g = gpu__new(&m, pt);
	check(g != NULL && m.call_flow != NULL, "%s: gpu__new installs the call_flow hook", name);
	struct sink gs = gpu__sink(g);

	model__add_sink(&m, &gs);
	snprintf(path, sizeof(path), "%s/%s.expect.jsonl", dir, name);
	ex = fopen(path, "w");
	if (!ex) {
		perror(path);
		exit(1);
	}
}

static void capture_end(const char *name)
{
	char path[4096];
	FILE *f;

	gpu__finish(g, now);
	snprintf(path, sizeof(path), "%s/%s.summary.txt", dir, name);
	f = fopen(path, "w");
	if (!f) {
		perror(path);
		exit(1);
	}
	gpu__print(g, NULL, f);
	fclose(f);
	gpu__free(g);
	check(m.call_flow == NULL, "%s: gpu__free clears the hook", name);
	g = NULL;
	if (pt)
		check(pftrace__close(pt) == 0, "%s: trace closed", name);
	model__free(&m);
	fclose(ex);
}

/* ---------------------------------------------------------------- API calls */

static int func_id(const char *name)
{
	for (int i = 0; i < CU_FN__COUNT; i++)
		if (!strcmp(cuda_funcs[i].name, name))
			return i;
	fprintf(stderr, "no CUDA function %s\n", name);
	exit(1);
}

static void enter(uint32_t pid, uint32_t tid, const char *fn, const uint64_t *args, int n)
{
	struct rec_call_enter r = { .hdr = { .type = REC_CALL_ENTER, .size = sizeof(r), .pid = pid,
					     .tid = tid, .ts = now } };

	r.lib = LIB_CUDA;
	r.func = func_id(fn);
	if (n)
		memcpy(r.args, args, n * sizeof(args[0]));
	model__call_enter(&m, &r);
}

static void leave(uint32_t pid, uint32_t tid, const char *fn, uint64_t dur)
{
	struct rec_call_exit r = { .hdr = { .type = REC_CALL_EXIT, .size = sizeof(r), .pid = pid,
					    .tid = tid } };

	now += dur;
	r.hdr.ts = now;
	r.lib = LIB_CUDA;
	r.func = func_id(fn);
	model__call_exit(&m, &r);
	now += 2 * US;
}

/* A whole call: [begin, begin + dur]; returns its begin. queued: how
 * many GPU operations the expectations will name it for (-1: not a call
 * that queues work, so not listed). */
static uint64_t call(uint32_t pid, uint32_t tid, const char *fn, const uint64_t *args, int n,
		     uint64_t dur, int queued)
{
	uint64_t ts = now;

	enter(pid, tid, fn, args, n);
	leave(pid, tid, fn, dur);
	if (queued >= 0)
		fprintf(ex, "{\"kind\":\"call\",\"pid\":%u,\"tid\":%u,\"name\":\"%s\",\"ts\":%" PRIu64
			    ",\"dur\":%" PRIu64 ",\"ops\":%d}\n", pid, tid, fn, ts, dur, queued);
	return ts;
}

static uint64_t launch(uint32_t pid, uint32_t tid, uint64_t stream, uint64_t dur, int queued)
{
	uint64_t a[9] = { 0xf00, 4, 1, 1, 256, 1, 1, 0, stream };

	return call(pid, tid, "cuLaunchKernel", a, 9, dur, queued);
}

/* ---------------------------------------------------------------- batches */

struct batch {
	uint8_t b[GPU_BATCH_MAX + 256];
	size_t n;
};

static void put(struct batch *b, const void *e, size_t size)
{
	if (b->n + size > sizeof(b->b)) {
		fprintf(stderr, "test batch overflow\n");
		exit(1);
	}
	memcpy(b->b + b->n, e, size);
	b->n += size;
}

/* Hands the batch over as BPF would: a rec_hdr (the library's call on
 * tid at ts) and the bytes. */
static int feed(uint32_t pid, uint32_t tid, const struct batch *b)
{
	uint8_t rec[sizeof(struct rec_hdr) + sizeof(b->b)];
	struct rec_hdr h = { .type = REC_GPU_BATCH, .size = sizeof(h) + b->n, .pid = pid,
			     .tid = tid, .ts = now };

	memcpy(rec, &h, sizeof(h));
	memcpy(rec + sizeof(h), b->b, b->n);
	return gpu__record(g, rec, sizeof(h) + b->n);
}

static void status_f(struct batch *b, uint32_t code, int32_t error, uint32_t flags,
		     const char *text)
{
	uint8_t e[8 + 16 + 256] = { 0 };
	struct gpu_status st = { .e = { GPU_STATUS, 0 }, .code = code, .error = error,
				 .flags = flags };
	size_t len = strlen(text) + 1;

	st.e.size = (sizeof(st) + len + 7) & ~7u;
	memcpy(e, &st, sizeof(st));
	memcpy(e + sizeof(st), text, len);
	put(b, e, st.e.size);
}

static void status(struct batch *b, uint32_t code, int32_t error, const char *text)
{
	status_f(b, code, error, 0, text);
}

static void name(struct batch *b, uint32_t id, const char *text)
{
	uint8_t e[8 + GPU_NAME_MAX] = { 0 };
	struct gpu_name n = { .e = { GPU_NAME, 0 }, .id = id };
	size_t len = strlen(text) + 1;

	n.e.size = (sizeof(n) + len + 7) & ~7u;
	memcpy(e, &n, sizeof(n));
	memcpy(e + sizeof(n), text, len);
	put(b, e, n.e.size);
}

static void device(struct batch *b, uint32_t id, const char *dname)
{
	struct gpu_device d = { .e = { GPU_DEVICE, sizeof(d) }, .id = id,
				.global_memory = 40ull << 30, .sm_count = 108,
				.compute_major = 8, .compute_minor = 0 };

	for (int i = 0; i < 16; i++)
		d.uuid[i] = 0x10 + i;
	snprintf(d.name, sizeof(d.name), "%s", dname);
	put(b, &d, sizeof(d));
}

static void api(struct batch *b, uint32_t corr, uint32_t tid, uint64_t start, uint64_t end)
{
	struct gpu_api a = { .e = { GPU_API, sizeof(a) }, .corr = corr, .start = start,
			     .end = end, .tid = tid, .cbid = 307 };

	put(b, &a, sizeof(a));
}

/* Operations also go to the expectations, with the call that queued
 * them (0: none, or not linked) and the track lane they must be on. */
struct kspec {
	uint32_t corr, name_id, stream, graph;
	uint64_t start, dur;
	const char *name;	/* as the trace and the summary must name it */
	uint64_t call_ts;	/* the launch call's begin; 0: no flow */
	uint32_t call_tid;
	int lane;
	uint64_t clamped;	/* drawn this much later than it ran */
};

static void kernel(struct batch *b, uint32_t pid, const struct kspec *k)
{
	struct gpu_kernel e = { .e = { GPU_KERNEL, sizeof(e) }, .corr = k->corr,
				.start = k->start, .end = k->start + k->dur, .name_id = k->name_id,
				.stream = k->stream, .context = 1, .graph_id = k->graph,
				.grid = { 4, 2, 1 }, .block = { 256, 1, 1 }, .regs = 32,
				.smem_static = 1024, .smem_dynamic = 4096, .device = 0 };

	put(b, &e, sizeof(e));
	if (!ex)
		return;
	fprintf(ex, "{\"kind\":\"kernel\",\"pid\":%u,\"stream\":%u,\"corr\":%u,\"graph\":%u,"
		    "\"start\":%" PRIu64 ",\"dur\":%" PRIu64 ",\"name\":\"%s\",\"call_ts\":%" PRIu64
		    ",\"call_tid\":%u,\"lane\":%d,\"clamped\":%" PRIu64 "}\n",
		pid, k->stream, k->corr, k->graph, k->start, k->dur, k->name, k->call_ts, k->call_tid,
		k->lane, k->clamped);
}

struct mspec {
	uint16_t kind;		/* GPU_MEMCPY / GPU_MEMSET */
	uint32_t corr, stream;
	uint64_t start, dur, bytes;
	uint8_t copy_kind, src, dst, flags, peer;
	const char *op;		/* nsys's name */
	const char *kname;	/* the "kind" arg */
	uint64_t call_ts;
	uint32_t call_tid;
};

static void memop(struct batch *b, uint32_t pid, const struct mspec *s)
{
	if (s->kind == GPU_MEMCPY) {
		struct gpu_memcpy e = { .e = { GPU_MEMCPY, sizeof(e) }, .corr = s->corr,
					.start = s->start, .end = s->start + s->dur,
					.bytes = s->bytes, .stream = s->stream, .context = 1,
					.copy_kind = s->copy_kind, .src_kind = s->src,
					.dst_kind = s->dst, .flags = s->flags, .device = 0,
					.peer = s->peer };

		put(b, &e, sizeof(e));
	} else {
		struct gpu_memset e = { .e = { GPU_MEMSET, sizeof(e) }, .corr = s->corr,
					.start = s->start, .end = s->start + s->dur,
					.bytes = s->bytes, .value = 7, .stream = s->stream,
					.context = 1, .device = 0, .mem_kind = s->dst };

		put(b, &e, sizeof(e));
	}
	fprintf(ex, "{\"kind\":\"%s\",\"pid\":%u,\"stream\":%u,\"corr\":%u,\"start\":%" PRIu64
		    ",\"dur\":%" PRIu64 ",\"bytes\":%" PRIu64 ",\"op\":\"%s\",\"copy_kind\":\"%s\","
		    "\"call_ts\":%" PRIu64 ",\"call_tid\":%u}\n",
		s->kind == GPU_MEMCPY ? "copy" : "memset", pid, s->stream, s->corr, s->start,
		s->dur, s->bytes, s->op, s->kname ? s->kname : "", s->call_ts, s->call_tid);
}

static void sync_op(struct batch *b, uint32_t pid, uint32_t corr, uint32_t type,
		    uint32_t stream, uint64_t start, uint64_t dur, const char *sname)
{
	struct gpu_sync e = { .e = { GPU_SYNC, sizeof(e) }, .corr = corr, .start = start,
			      .end = start + dur, .type = type, .stream = stream, .context = 1 };

	put(b, &e, sizeof(e));
	fprintf(ex, "{\"kind\":\"sync\",\"pid\":%u,\"stream\":%u,\"start\":%" PRIu64
		    ",\"dur\":%" PRIu64 ",\"name\":\"%s\"}\n", pid, stream, start, dur, sname);
}

static struct gpu_proc *proc_of(uint32_t pid)
{
	return gpuproc__find(g, pid);
}

/* ---------------------------------------------------------------- measured */

#define VECADD "_Z6vecAddPfS_S_i"
#define VECADD_D "vecAdd(float*, float*, float*, int)"
#define NCCL_K "ncclDevKernel_AllReduce_Sum_f32_RING_LL"

/*
 * One process with its injection library collecting: two threads, two
 * streams, launches, copies, a memset, a graph launch of three kernels,
 * a launch whose API record comes while the call is still open, an
 * NCCL kernel overlapping compute, two overlapping kernels on one
 * stream, a kernel whose name never came, a launch made before
 * collection started, records delivered out of order across batches.
 */
static void test_measured(void)
{
	const uint64_t S7 = 0x7000, S13 = 0xd000;
	struct batch b0 = { 0 }, b1 = { 0 }, b2 = { 0 }, b3 = { 0 }, b4 = { 0 };
	uint64_t c[16], t;
	struct gpu_proc *p;

	capture_begin("measured", true);
	now = 5000 * MS;

	/* Before collection: no flow, and its estimate is dropped when
	 * collection starts (measured data takes over). */
	c[0] = launch(PID_M, PID_M, S7, 5 * US, 0);
	p = proc_of(PID_M);
	check(p && p->est && !gpu__measured(g, PID_M), "before collection: estimated, not measured");
	now += 50 * US;

	status(&b0, GPU_ST_COLLECTING, 0, "/usr/local/cuda/lib64/libcupti.so.13");
	device(&b0, 0, "Fake GPU A100");
	{
		struct gpu_stream s = { .e = { GPU_STREAM, sizeof(s) }, .context = 1, .stream = 7,
					.priority = -1, .device = 0 };

		put(&b0, &s, sizeof(s));
	}
	name(&b0, 1, VECADD);
	name(&b0, 2, NCCL_K);
	check(feed(PID_M, PID_M, &b0) == 0, "status batch taken");
	check(gpu__measured(g, PID_M) && p->collecting, "GPU_ST_COLLECTING: measured");
	check(p->status_text[GPU_ST_COLLECTING] &&
		      !strcmp(p->status_text[GPU_ST_COLLECTING], "/usr/local/cuda/lib64/libcupti.so.13"),
	      "the library's CUPTI path kept");
	now += 20 * US;

	/* The pre-collection launch's records come now: linked to nothing. */
	api(&b1, 1, PID_M, c[0] + 1 * US, c[0] + 4 * US);
	kernel(&b1, PID_M, &(struct kspec){ .corr = 1, .name_id = 1, .stream = 7,
					    .start = c[0] + 10 * US, .dur = 3 * US,
					    .name = VECADD_D });

	/* Thread 1 on stream 7. */
	c[1] = launch(PID_M, PID_M, S7, 5 * US, 1);
	c[2] = launch(PID_M, PID_M, S7, 4 * US, 1);
	{
		uint64_t a[4] = { 0x1000, 0x2000, 1000000, S7 };

		c[3] = call(PID_M, PID_M, "cuMemcpyHtoDAsync_v2", a, 4, 6 * US, 1);
	}
	{
		uint64_t a[4] = { 0x1000, 0, 2000000, S7 };

		c[4] = call(PID_M, PID_M, "cuMemsetD8Async", a, 4, 3 * US, 1);
	}
	{
		uint64_t a[2] = { 0xa000, S7 };

		c[5] = call(PID_M, PID_M, "cuGraphLaunch", a, 2, 8 * US, 3);
	}
	/* Thread 2 on stream 13: an NCCL kernel. */
	c[6] = launch(PID_M, TID_M2, S13, 5 * US, 1);

	/* CUPTI's records, in buffers: the later operations first. */
	t = c[1] + 20 * US;	/* the GPU starts */
	for (int i = 1; i <= 6; i++)
		api(&b1, 10 + i, i == 6 ? TID_M2 : PID_M, c[i] + 1 * US, c[i] + 2 * US);
	memop(&b1, PID_M, &(struct mspec){ .kind = GPU_MEMCPY, .corr = 13, .stream = 7,
					    .start = t + 60 * US, .dur = 100 * US, .bytes = 1000000,
					    .copy_kind = GPU_COPY_HTOD, .src = 2, .dst = 3,
					    .flags = GPU_COPY_ASYNC, .op = "[CUDA memcpy Host-to-Device]",
					    .kname = "HtoD", .call_ts = c[3], .call_tid = PID_M });
	memop(&b1, PID_M, &(struct mspec){ .kind = GPU_MEMSET, .corr = 14, .stream = 7,
					    .start = t + 170 * US, .dur = 10 * US, .bytes = 2000000,
					    .dst = 3, .op = "[CUDA memset]", .call_ts = c[4],
					    .call_tid = PID_M });
	for (int i = 0; i < 3; i++)
		kernel(&b1, PID_M, &(struct kspec){ .corr = 15, .name_id = i == 2 ? 2 : 1,
						    .stream = 7, .graph = 5,
						    .start = t + (190 + 20 * i) * US, .dur = 15 * US,
						    .name = i == 2 ? NCCL_K : VECADD_D,
						    .call_ts = c[5], .call_tid = PID_M });
	kernel(&b1, PID_M, &(struct kspec){ .corr = 16, .name_id = 2, .stream = 13,
					    .start = t + 200 * US, .dur = 40 * US, .name = NCCL_K,
					    .call_ts = c[6], .call_tid = TID_M2 });
	check(feed(PID_M, PID_M, &b1) == 0, "second batch taken");
	kernel(&b2, PID_M, &(struct kspec){ .corr = 11, .name_id = 1, .stream = 7, .start = t,
					    .dur = 30 * US, .name = VECADD_D, .call_ts = c[1],
					    .call_tid = PID_M });
	kernel(&b2, PID_M, &(struct kspec){ .corr = 12, .name_id = 1, .stream = 7,
					    .start = t + 31 * US, .dur = 15 * US, .name = VECADD_D,
					    .call_ts = c[2], .call_tid = PID_M });
	{
		/* Lost records, as the library counted them. */
		struct gpu_dropped d = { .e = { GPU_DROPPED, sizeof(d) }, .where = 1, .count = 5 };

		put(&b2, &d, sizeof(d));
	}
	check(feed(PID_M, PID_M, &b2) == 0, "third batch (earlier operations) taken");
	check(p->nheap == 9, "nine operations wait for the reorder window (%u)", p->nheap);
	check(gpu__lost(g) == 5 && p->dropped[GPU_DROP_CUPTI] == 5, "GPU_DROPPED counted");

	/* A launch whose API record comes while the call is still open. */
	now = t + 400 * US;
	{
		uint64_t a[9] = { 0xf00, 4, 1, 1, 256, 1, 1, 0, S13 };

		c[7] = now;
		enter(PID_M, TID_M2, "cuLaunchKernel", a, 9);
		now += 2 * US;
		api(&b3, 17, TID_M2, c[7] + 1 * US, c[7] + 2 * US);
		kernel(&b3, PID_M, &(struct kspec){ .corr = 17, .name_id = 99, .stream = 13,
						    .start = c[7] + 10 * US, .dur = 5 * US,
						    .name = "kernel #99 (name not received)",
						    .call_ts = c[7], .call_tid = TID_M2 });
		check(feed(PID_M, PID_M, &b3) == 0, "a batch during an open call");
		leave(PID_M, TID_M2, "cuLaunchKernel", 3 * US);
		fprintf(ex, "{\"kind\":\"call\",\"pid\":%u,\"tid\":%u,\"name\":\"cuLaunchKernel\","
			    "\"ts\":%" PRIu64 ",\"dur\":%" PRIu64 ",\"ops\":1}\n",
			PID_M, TID_M2, c[7], 5 * US);
		check(p->unknown_names == 1, "a kernel before its name is counted");
	}

	/* Two overlapping kernels on one stream (programmatic dependent
	 * launch): the second on the stream's next lane. A synchronous
	 * copy to the host. A synchronization. A peer copy without a call. */
	now += 10 * US;
	c[8] = launch(PID_M, PID_M, S7, 3 * US, 1);
	c[9] = launch(PID_M, PID_M, S7, 3 * US, 1);
	{
		uint64_t a[3] = { 0x3000, 0x1000, 3000000 };

		c[10] = call(PID_M, PID_M, "cuMemcpyDtoH_v2", a, 3, 250 * US, 1);
	}
	{
		uint64_t a[1] = { S7 };

		c[11] = call(PID_M, PID_M, "cuStreamSynchronize", a, 1, 40 * US, -1);
	}
	t = c[9] + 20 * US;
	api(&b4, 18, PID_M, c[8] + 1 * US, c[8] + 2 * US);
	api(&b4, 19, PID_M, c[9] + 1 * US, c[9] + 2 * US);
	api(&b4, 20, PID_M, c[10] + 1 * US, c[10] + 2 * US);
	kernel(&b4, PID_M, &(struct kspec){ .corr = 18, .name_id = 1, .stream = 7, .start = t,
					    .dur = 50 * US, .name = VECADD_D, .call_ts = c[8],
					    .call_tid = PID_M });
	kernel(&b4, PID_M, &(struct kspec){ .corr = 19, .name_id = 1, .stream = 7,
					    .start = t + 40 * US, .dur = 40 * US, .name = VECADD_D,
					    .call_ts = c[9], .call_tid = PID_M, .lane = 1 });
	memop(&b4, PID_M, &(struct mspec){ .kind = GPU_MEMCPY, .corr = 20, .stream = 7,
					    .start = c[10] + 100 * US, .dur = 120 * US,
					    .bytes = 3000000, .copy_kind = GPU_COPY_DTOH, .src = 3,
					    .dst = 1, .op = "[CUDA memcpy Device-to-Host]",
					    .kname = "DtoH", .call_ts = c[10], .call_tid = PID_M });
	memop(&b4, PID_M, &(struct mspec){ .kind = GPU_MEMCPY, .stream = 7,
					    .start = c[10] + 230 * US, .dur = 10 * US,
					    .bytes = 500000, .copy_kind = GPU_COPY_PTOP, .src = 3,
					    .dst = 3, .flags = GPU_COPY_ASYNC, .peer = 1,
					    .op = "[CUDA memcpy Peer-to-Peer]", .kname = "peer" });
	sync_op(&b4, PID_M, 21, 3, 7, c[11] + 1 * US, 38 * US, "Stream synchronize");

	/* The flush: settled once the library answered. */
	gpu__flush_asked(g);
	check(!gpu__settled(g), "flush asked: not settled while the library has not answered");
	status(&b4, GPU_ST_FLUSHED, 0, "");
	check(feed(PID_M, PID_M, &b4) == 0, "last batch taken");
	check(gpu__settled(g), "settled after GPU_ST_FLUSHED");
	check(p->nheap == 0, "the flush wrote every waiting operation");
	check(p->kernels == 10 && p->copies == 3 && p->memsets == 1 && p->syncs == 1,
	      "counted: %" PRIu64 " kernels, %" PRIu64 " copies, %" PRIu64 " memsets, %" PRIu64
	      " syncs", p->kernels, p->copies, p->memsets, p->syncs);
	check(p->no_launch == 2, "operations without their launch call: the pre-collection "
	      "kernel and the peer copy (%" PRIu64 ")", p->no_launch);
	check(p->before_launch == 0 && p->lane_overflow == 0, "nothing before its launch, no clamp");
	check(p->est_spans == 0, "the estimate opened before collection was dropped");
	fprintf(ex, "{\"kind\":\"meta\",\"pid\":%u,\"tids\":[%u,%u],\"lost\":5}\n", PID_M, PID_M,
		TID_M2);
	capture_end("measured");
}

/* ---------------------------------------------------------------- validation */

/* A raw entry: header and filler. */
static void raw(struct batch *b, uint16_t kind, uint16_t size, uint8_t fill)
{
	uint8_t e[GPU_BATCH_MAX];
	struct gpu_ent h = { kind, size };

	memset(e, fill, sizeof(e));
	memcpy(e, &h, sizeof(h));
	put(b, e, size < sizeof(h) ? sizeof(h) : size);
}

static int feed_raw(const void *rec, size_t size)
{
	return gpu__record(g, rec, size);
}

/*
 * What the traced process writes is never trusted: records unusable as a
 * whole, entries with sizes that do not add up, unknown kinds, truncated
 * entries, texts without their NUL, ids out of range, impossible times.
 * Bad entries are counted and skipped; the good ones around them count.
 */
static void test_validation(void)
{
	struct batch b = { 0 };
	struct gpu_proc *p = NULL;
	uint64_t bad, t;
	uint8_t rec[sizeof(struct rec_hdr) + GPU_BATCH_MAX + 8] = { 0 };
	struct rec_hdr h = { .type = REC_GPU_BATCH, .pid = PID_V, .tid = PID_V };

	capture_begin("validation", true);
	now = 9000 * MS;
	t = now;

	/* Records unusable as a whole. */
	check(feed_raw(rec, sizeof(h) - 1) == -EINVAL, "a record shorter than its header: -EINVAL");
	h.size = sizeof(h) + 16;
	memcpy(rec, &h, sizeof(h));
	check(feed_raw(rec, sizeof(h) + 24) == -EINVAL, "a header size that is not the record's: -EINVAL");
	h.size = sizeof(h) + GPU_BATCH_MAX + 8;
	memcpy(rec, &h, sizeof(h));
	check(feed_raw(rec, h.size) == -EINVAL, "a batch over GPU_BATCH_MAX: -EINVAL");
	check(g->bad_batches == 3 && g->batches == 0 && !proc_of(PID_V),
	      "three records rejected, nothing created (%" PRIu64 ")", g->bad_batches);
	h.size = sizeof(h);
	memcpy(rec, &h, sizeof(h));
	check(feed_raw(rec, sizeof(h)) == 0 && g->batches == 1 && g->entries == 0,
	      "an empty batch is a batch of nothing");

	status(&b, GPU_ST_COLLECTING, 0, "libcupti.so.13");
	name(&b, 1, VECADD);
	check(feed(PID_V, PID_V, &b) == 0 && (p = proc_of(PID_V)) && p->collecting, "collecting");
	if (!p)
		exit(1);
	b.n = 0;

	/* Unknown kinds are skipped, what follows is read. */
	raw(&b, 77, 16, 0xee);
	raw(&b, 0, 8, 0);
	kernel(&b, PID_V, &(struct kspec){ .corr = 0, .name_id = 1, .stream = 3, .start = t,
					   .dur = 10 * US, .name = VECADD_D });
	/* Truncated entries of known kinds: bad, skipped, the next read. */
	raw(&b, GPU_KERNEL, sizeof(struct gpu_kernel) - 8, 0x11);
	raw(&b, GPU_MEMCPY, sizeof(struct gpu_memcpy) - 8, 0x11);
	raw(&b, GPU_MEMSET, sizeof(struct gpu_memset) - 8, 0x11);
	raw(&b, GPU_SYNC, sizeof(struct gpu_sync) - 8, 0x11);
	raw(&b, GPU_API, sizeof(struct gpu_api) - 8, 0x11);
	raw(&b, GPU_DEVICE, sizeof(struct gpu_device) - 8, 0x11);
	raw(&b, GPU_DROPPED, sizeof(struct gpu_dropped) - 8, 0x11);
	raw(&b, GPU_STREAM, sizeof(struct gpu_stream) - 8, 0x11);
	raw(&b, GPU_STATUS, sizeof(struct gpu_status), 0x11);
	raw(&b, GPU_NAME, sizeof(struct gpu_name), 0x11);
	bad = 10;
	/* Texts without their NUL, ids out of range. */
	raw(&b, GPU_NAME, 32, 'x');	/* id 0x78787878, no NUL */
	name(&b, 0, "id_zero");
	raw(&b, GPU_STATUS, 40, 'y');	/* code 0x79797979 */
	status(&b, 99, 0, "no such code");
	{
		struct gpu_device d = { .e = { GPU_DEVICE, sizeof(d) }, .id = 256 };
		uint8_t st[24] = { 0 };
		struct gpu_status s = { .e = { GPU_STATUS, sizeof(st) }, .code = GPU_ST_HELD };

		put(&b, &d, sizeof(d));		/* devices are a byte in activity entries */
		d.id = 1;
		memset(d.name, 'z', sizeof(d.name));
		put(&b, &d, sizeof(d));		/* a name without its NUL */
		memcpy(st, &s, sizeof(s));
		memset(st + sizeof(s), 'w', sizeof(st) - sizeof(s));
		put(&b, st, sizeof(st));	/* a status text without its NUL */
	}
	bad += 7;
	/* Impossible times. */
	{
		struct gpu_kernel k = { .e = { GPU_KERNEL, sizeof(k) }, .start = t + 100, .end = t };

		put(&b, &k, sizeof(k));
		k.start = 0;
		k.end = 10;
		put(&b, &k, sizeof(k));
		k.start = t;
		k.end = t + 25ull * 3600 * 1000000000;
		put(&b, &k, sizeof(k));
	}
	{
		struct gpu_api a = { .e = { GPU_API, sizeof(a) }, .corr = 9, .start = t + 5, .end = t };

		put(&b, &a, sizeof(a));
	}
	bad += 4;
	/* Out-of-range values shown as unknown, the operation kept. */
	memop(&b, PID_V, &(struct mspec){ .kind = GPU_MEMCPY, .stream = 3, .start = t + 20 * US,
					   .dur = 5 * US, .bytes = 4096, .copy_kind = 200,
					   .src = 250, .dst = 251, .op = "[CUDA memcpy Unknown]",
					   .kname = "unknown" });
	sync_op(&b, PID_V, 0, 9, UINT32_MAX, t + 30 * US, 2 * US, "CUDA synchronization");
	/* A kernel whose name id was never sent. */
	kernel(&b, PID_V, &(struct kspec){ .name_id = 0x78787878, .stream = 3,
					   .start = t + 40 * US, .dur = 1 * US,
					   .name = "kernel #2021161080 (name not received)" });
	check(feed(PID_V, PID_V, &b) == 0, "a batch of good and bad entries is taken");
	check(g->unknown_kinds == 2, "two entries of unknown kinds (77, 0) (%" PRIu64 ")", g->unknown_kinds);
	check(g->bad_entries == bad, "%" PRIu64 " bad entries counted (%" PRIu64 ")", bad,
	      g->bad_entries);
	check(!gpuproc__dev_at(p, 1) || !gpuproc__dev_at(p, 1)->known,
	      "a device named without a NUL is not taken");
	check(p->status_n[GPU_ST_HELD] == 0, "a status without its NUL is not taken");
	check(hmap__get(&p->names, 0x78787878) == NULL && hmap__get(&p->names, 0) == NULL,
	      "names without a NUL, or with id 0, are not taken");

	/* Sizes that do not add up end the batch: nothing after them is
	 * read (there is nothing to resync on). */
	{
		static const uint16_t sizes[] = { 12, 0, 4, 4096 };

		for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
			uint64_t be = g->bad_entries, ops = p->nheap;

			b.n = 0;
			raw(&b, GPU_KERNEL, sizes[i] < 8 ? 8 : sizes[i] > 64 ? 64 : sizes[i], 0);
			/* The header says sizes[i]. */
			((struct gpu_ent *)b.b)->size = sizes[i];
			if (sizes[i] == 12)
				b.n = 16;	/* padded on */
			{
				struct kspec k = { .name_id = 1, .stream = 3, .start = t + 50 * US,
						   .dur = US };
				FILE *save = ex;

				ex = NULL;	/* never written */
				kernel(&b, PID_V, &k);
				ex = save;
			}
			check(feed(PID_V, PID_V, &b) == 0 && g->bad_entries == be + 1 &&
				      p->nheap == ops,
			      "entry size %u: counted bad, the rest of the batch skipped", sizes[i]);
		}
		/* A batch ending in a piece of a header. */
		b.n = 0;
		kernel(&b, PID_V, &(struct kspec){ .name_id = 1, .stream = 3, .start = t + 60 * US,
						   .dur = US, .name = VECADD_D });
		b.b[b.n] = GPU_KERNEL;
		b.n += 4;
		bad = g->bad_entries;
		check(feed(PID_V, PID_V, &b) == 0 && g->bad_entries == bad + 1,
		      "a batch ending in 4 stray bytes: the entry before them kept, the bytes counted");
	}

	/* More overlap than a stream has lanes: drawn clamped, counted. */
	b.n = 0;
	for (int i = 0; i < GPU_LANES + 2; i++)
		kernel(&b, PID_V, &(struct kspec){ .name_id = 1, .stream = 4,
						   .start = t + 100 * US + i * US, .dur = 20 * US,
						   .name = VECADD_D,
						   .lane = i < GPU_LANES ? i : GPU_LANES - 1,
						   /* lane 3 ends at 123 us, then 124 us */
						   .clamped = i >= GPU_LANES ? 19 * US : 0 });
	check(feed(PID_V, PID_V, &b) == 0, "overlapping kernels taken");

	/* Written after the reorder window (gpu__tick), then a record older
	 * than what its stream already shows: another lane, and the
	 * summary's timeline leaves it out (counted). */
	gpu__tick(g, t + 3000 * MS);
	check(p->nheap == 0 && p->lane_overflow == 2, "the tick wrote every old operation, "
	      "two drawn clamped (%" PRIu64 ")", p->lane_overflow);
	b.n = 0;
	kernel(&b, PID_V, &(struct kspec){ .name_id = 1, .stream = 3, .start = t + 45 * US,
					   .dur = 2 * US, .name = VECADD_D, .lane = 1 });
	check(feed(PID_V, PID_V, &b) == 0, "a late record taken");
	now = t + 3001 * MS;
	gpu__proc_exit(g, PID_V, now);
	check(p->exited && p->nheap == 0 && gpuproc__dev_at(p, 0) && gpuproc__dev_at(p, 0)->late == 1,
	      "process exit writes what waits; the late record counted (%" PRIu64 ")",
	      gpuproc__dev_at(p, 0) ? gpuproc__dev_at(p, 0)->late : 0);
	check(gpu__settled(g), "an exited process does not hold the flush");
	fprintf(ex, "{\"kind\":\"meta\",\"pid\":%u,\"bad_batches\":3,\"bad_entries\":%" PRIu64
		    ",\"unknown_kinds\":2}\n", PID_V, g->bad_entries);
	capture_end("validation");
}

/* ---------------------------------------------------------------- estimate */

/* stream: the handle; its track is named as the API slices name it:
 * "stream N" in the order the process first used them, "default". */
static void span(uint32_t pid, uint64_t stream, uint64_t start, uint64_t end, int launches,
		 const char *by, const char *end_is)
{
	const char *sname = stream == 0x5100 ? "stream 1" : stream == 0x5200 ? "stream 2" : "default";

	fprintf(ex, "{\"kind\":\"span\",\"pid\":%u,\"stream\":\"%s\",\"start\":%" PRIu64
		    ",\"dur\":%" PRIu64 ",\"launches\":%d,\"ended_by\":\"%s\",\"end\":\"%s\"}\n",
		pid, sname, start, end - start, launches, by, end_is);
}

#define WAITED "the host waited: the work ended within this call"
#define BEFORE "done before this call began: the end is an upper bound"

/*
 * Processes whose GPU activity is not measured: one with no injection
 * library at all, one whose library found no CUPTI. Spans per stream
 * from the first launch to the synchronization that waited for it.
 */
static void estimate_calls(uint32_t pid)
{
	const uint64_t S1 = 0x5100, S2 = 0x5200;
	uint64_t l1, l2, l3, l4, l5, l6, c, e;

	l1 = launch(pid, pid, S1, 5 * US, -1);
	launch(pid, pid, S1, 5 * US, -1);
	{
		uint64_t a[1] = { S1 };

		c = call(pid, pid, "cuStreamSynchronize", a, 1, 50 * US, -1);
		span(pid, S1, l1, c + 50 * US, 2, "cuStreamSynchronize", WAITED);
	}
	l2 = launch(pid, pid, S2, 5 * US, -1);
	{
		uint64_t a[1] = { S2 };

		c = call(pid, pid, "cuStreamSynchronize", a, 1, 2 * US, -1);
		span(pid, S2, l2, c, 1, "cuStreamSynchronize", BEFORE);
	}
	/* An event recorded after the launch: its synchronization ends the span. */
	l3 = launch(pid, pid, S1, 5 * US, -1);
	{
		uint64_t a[2] = { 0xe1, S1 }, s[1] = { 0xe1 };

		call(pid, pid, "cuEventRecord", a, 2, 2 * US, -1);
		e = call(pid, pid, "cuEventSynchronize", s, 1, 20 * US, -1);
		span(pid, S1, l3, e + 20 * US, 1, "cuEventSynchronize", WAITED);
	}
	/* A device synchronization ends every stream's span. */
	l4 = launch(pid, pid, S1, 5 * US, -1);
	l5 = launch(pid, pid, S2, 5 * US, -1);
	c = call(pid, pid, "cuCtxSynchronize", NULL, 0, 30 * US, -1);
	span(pid, S1, l4, c + 30 * US, 1, "cuCtxSynchronize", WAITED);
	span(pid, S2, l5, c + 30 * US, 1, "cuCtxSynchronize", WAITED);
	/* A synchronous copy to the host ends its stream's (default) span. */
	{
		uint64_t a[3] = { 0x3000, 0x1000, 4096 };

		c = call(pid, pid, "cuMemcpyDtoH_v2", a, 3, 30 * US, -1);
		span(pid, 0, c, c + 30 * US, 1, "cuMemcpyDtoH_v2",
		     "a synchronous copy to the host: the work ended within this call");
	}
	/* Left open: drawn to the last launch's return at the end. */
	l6 = launch(pid, pid, S2, 7 * US, -1);
	span(pid, S2, l6, l6 + 7 * US, 1, "(no synchronization seen)",
	     "unknown: drawn to the last launch call's return");
}

static void test_estimate(void)
{
	struct batch b = { 0 };

	capture_begin("estimate", true);
	now = 7000 * MS;
	estimate_calls(PID_E);
	status(&b, GPU_ST_NO_CUPTI, 0, "CGBPF_CUPTI_PATH (unset), libcupti.so.13, "
				       "/usr/local/cuda/lib64");
	check(feed(PID_N, PID_N, &b) == 0, "a NO_CUPTI status taken");
	estimate_calls(PID_N);
	check(!gpu__measured(g, PID_E) && !gpu__measured(g, PID_N), "neither is measured");
	check(proc_of(PID_E)->est_spans == 6 && proc_of(PID_N)->est_spans == 6,
	      "six spans closed each before the end (%" PRIu64 ", %" PRIu64 ")",
	      proc_of(PID_E)->est_spans, proc_of(PID_N)->est_spans);
	check(gpu__settled(g), "processes that never collected do not hold the flush");
	fprintf(ex, "{\"kind\":\"meta\",\"pids\":[%u,%u]}\n", PID_E, PID_N);
	capture_end("estimate");
}

/* ---------------------------------------------------------------- summary only */

/* No trace (--summary-only), and a process that names more streams than
 * a process may have tracks: memory stays bounded. */
static void test_summary_only(void)
{
	struct batch b = { 0 };
	struct gpu_proc *p;
	uint64_t t;
	bool ok = true;

	capture_begin("summary_only", false);
	now = 3000 * MS;
	t = now;
	status(&b, GPU_ST_COLLECTING, 0, "libcupti.so.12");
	name(&b, 1, VECADD);
	check(feed(PID_S, PID_S, &b) == 0, "collecting");
	p = proc_of(PID_S);
	for (uint32_t i = 0; i < 4200; i++) {
		struct gpu_stream s = { .e = { GPU_STREAM, sizeof(s) }, .context = 1, .stream = i };

		b.n = 0;
		put(&b, &s, sizeof(s));
		ok &= feed(PID_S, PID_S, &b) == 0;
	}
	check(ok && p->streams.count == 4097, "streams past the bound share one (%zu)",
	      p->streams.count);
	b.n = 0;
	for (int i = 0; i < 4; i++)
		kernel(&b, PID_S, &(struct kspec){ .name_id = 1, .stream = 1,
						   .start = t + i * 10 * US, .dur = 5 * US,
						   .name = VECADD_D });
	check(feed(PID_S, PID_S, &b) == 0, "kernels taken without a trace");
	check(p->kernels == 0 && p->nheap == 4, "they wait for the reorder window");
	capture_end("summary_only");
}

/*
 * The correlation table (user/sources/gpu/gpu.c): ids are the process's to choose.
 * Ids aimed at one slot are remembered up to the probe bound and no
 * further, in bounded time; later ids still find their call; past
 * CORR_MAX puts the oldest are forgotten unless put again.
 */
static void test_corr(void)
{
	struct batch b = { 0 };
	struct gpu_proc *p;
	uint32_t found = 0, lost = 0;
	uint64_t t;
	bool ok = true;

	capture_begin("corr", false);
	now = 5000 * MS;
	status(&b, GPU_ST_COLLECTING, 0, "libcupti.so.12");
	check(feed(PID_S, PID_S, &b) == 0, "corr: collecting");
	p = proc_of(PID_S);
	t = launch(PID_S, PID_S, 0, 10 * US, -1);
	/* 1000 ids that share every table size's home slot (multiples of
	 * 2^20 apart: the table holds at most 2^19 slots). */
	for (uint32_t i = 1; i <= 1000; i++) {
		b.n = 0;
		api(&b, i << 20, PID_S, t + 1 * US, t + 2 * US);
		ok &= feed(PID_S, PID_S, &b) == 0;
	}
	for (uint32_t i = 1; i <= 1000; i++) {
		const struct gpu_corr *c = NULL;

		for (uint32_t s = 0; s < p->corr_slots; s++)
			if (p->corr_tab[s].corr == i << 20)
				c = &p->corr_tab[s];
		if (c && c->call_ts == t)
			found++;
		else
			lost++;
	}
	check(ok && found == 64 && lost == 936 && p->corr_count == 64,
	      "corr: ids aimed at one slot: 64 remembered, the rest not (%u, %u, %u)", found,
	      lost, p->corr_count);
	/* Increasing ids, 300000 puts (past CORR_MAX = 262144), one put
	 * again late: the oldest go, the one put again stays. */
	ok = true;
	for (uint32_t i = 1; i <= 300000; i += 50) {
		b.n = 0;
		for (uint32_t j = i; j < i + 50; j++)
			api(&b, j, PID_S, t + 1 * US, t + 2 * US);
		if (i == 299951)
			api(&b, 7, PID_S, t + 1 * US, t + 2 * US);
		ok &= feed(PID_S, PID_S, &b) == 0;
	}
	found = 0;
	for (uint32_t s = 0; s < p->corr_slots; s++)
		if (p->corr_tab[s].corr && p->corr_tab[s].corr <= 300000)
			found++;
	check(ok && p->corr_n == 262144 && found == 262144 && p->corr_count == 262144,
	      "corr: at most 262144 remembered (%u in the table, %u in order)", found, p->corr_n);
	ok = true;
	for (uint32_t s = 0; s < p->corr_slots; s++) {
		uint32_t c = p->corr_tab[s].corr;

		/* The last 262144 puts: ids 37858..300000 and 7 again. */
		if (c && c != 7 && c < 37858)
			ok = false;
	}
	check(ok, "corr: the oldest were forgotten, not the id put again");
	/* A record wider than the call (a runtime call no uprobe sees, made
	 * around the driver call seen): the one call inside it. A record
	 * with two calls inside: neither. */
	{
		uint64_t t1 = launch(PID_S, PID_S, 0, 10 * US, -1);
		uint64_t t2 = launch(PID_S, PID_S, 0, 10 * US, -1);
		uint64_t t3 = launch(PID_S, PID_S, 0, 10 * US, -1);
		uint64_t ts1 = 1, ts2 = 1;

		b.n = 0;
		api(&b, 400001, PID_S, t1 - 1 * US, t1 + 11 * US);
		api(&b, 400002, PID_S, t2 - 1 * US, t3 + 11 * US);
		check(feed(PID_S, PID_S, &b) == 0, "corr: wide records fed");
		for (uint32_t s = 0; s < p->corr_slots; s++) {
			if (p->corr_tab[s].corr == 400001)
				ts1 = p->corr_tab[s].call_ts;
			if (p->corr_tab[s].corr == 400002)
				ts2 = p->corr_tab[s].call_ts;
		}
		check(ts1 == t1 && ts2 == 0,
		      "corr: a record around one call finds it, around two none (%" PRIu64
		      " %" PRIu64 ")", ts1 - t1, ts2);
	}
	/* GPU_STATUS_REPEAT: nothing once the status came; the status when
	 * the first went missing. */
	{
		struct gpu_proc *q;

		b.n = 0;
		status_f(&b, GPU_ST_COLLECTING, 0, GPU_STATUS_REPEAT, "libcupti.so.12");
		check(feed(PID_S, PID_S, &b) == 0 && p->status_n[GPU_ST_COLLECTING] == 1 &&
		      !p->status_recovered, "corr: a repeated status that came already is ignored");
		b.n = 0;
		status_f(&b, GPU_ST_COLLECTING, 0, GPU_STATUS_REPEAT, "libcupti.so.12");
		check(feed(PID_S + 1, PID_S + 1, &b) == 0, "corr: a repeat alone fed");
		q = proc_of(PID_S + 1);
		check(q && q->status_n[GPU_ST_COLLECTING] == 1 && q->measured && q->collecting &&
		      q->status_recovered == 1, "corr: a repeat alone says the status");
	}
	capture_end("corr");
}

/* ---------------------------------------------------------------- taken */

/* GPU_ST_TAKEN: another tool took CUPTI while the library collected. What
 * came is counted, the process stops holding cgbpf's flush, and the
 * summary says when activity stopped and who took CUPTI. */
static void test_taken(void)
{
	struct batch b = { 0 };
	struct gpu_proc *p;
	char path[4096], text[8192];
	uint64_t t;
	size_t n;
	FILE *f;

	capture_begin("taken", false);
	now = 5000 * MS;
	t = now;
	status(&b, GPU_ST_COLLECTING, 0, "libcupti.so.13");
	name(&b, 1, VECADD);
	for (int i = 0; i < 3; i++)
		kernel(&b, PID_T, &(struct kspec){ .name_id = 1, .stream = 1,
						   .start = t + i * 10 * US, .dur = 5 * US,
						   .name = VECADD_D });
	check(feed(PID_T, PID_T, &b) == 0, "collecting, three kernels");
	p = proc_of(PID_T);
	gpu__flush_asked(g);
	check(!gpu__settled(g), "collecting: the flush waits for the library");
	now = t + 2500 * MS;
	b.n = 0;
	status(&b, GPU_ST_TAKEN, 39, "CUPTI for Kineto");
	check(feed(PID_T, PID_T, &b) == 0, "GPU_ST_TAKEN taken");
	check(p->taken && !p->collecting && p->measured, "taken: measured, no longer collecting");
	check(gpu__settled(g), "a process whose CUPTI was taken does not hold the flush");
	check(p->kernels == 3 && p->nheap == 0, "what came before is counted (%" PRIu64 ")",
	      p->kernels);
	check(p->stop_ts == t + 25 * US, "stopped at the end of the last kernel (%" PRIu64 ")",
	      p->stop_ts - t);
	capture_end("taken");
	snprintf(path, sizeof(path), "%s/taken.summary.txt", dir);
	f = fopen(path, "r");
	n = f ? fread(text, 1, sizeof(text) - 1, f) : 0;
	text[n] = 0;
	if (f)
		fclose(f);
	check(strstr(text, "measured (CUPTI libcupti.so.13): 3 kernels") != NULL,
	      "summary: measured until then");
	if (!check(strstr(text, "GPU activity stopped at +0.000 s (after collection began): "
				"CUPTI for Kineto took CUPTI") != NULL,
		   "summary: when activity stopped and who took CUPTI"))
		fprintf(stderr, "%s\n", text);
}

/* ----------------------------------------------------- NCCL's plugin */

#define PID_P 4200061
#define HASH_P 0xabcd123456789ef0ull

static void nccl_comm(struct batch *b, uint64_t hash, int rank, int nranks, const char *nm)
{
	uint8_t e[64] = { 0 };
	struct gpu_nccl_comm c = { .e = { GPU_NCCL_COMM, 0 }, .tid = PID_P, .comm = hash,
				   .ts = now, .rank = rank, .nranks = nranks, .nnodes = 1 };
	size_t len = strlen(nm) + 1;

	c.e.size = (sizeof(c) + len + 7) & ~7u;
	memcpy(e, &c, sizeof(c));
	memcpy(e + sizeof(c), nm, len);
	put(b, e, c.e.size);
}

static void nccl_op(struct batch *b, uint8_t func, uint64_t seq, uint64_t bytes, uint8_t nch)
{
	struct gpu_nccl_op o = { .e = { GPU_NCCL_OP, sizeof(o) }, .tid = PID_P, .comm = HASH_P,
				 .seq = seq, .start = now, .end = now + 5 * US, .bytes = bytes,
				 .rank = 1, .peer = -1, .func = func, .algo = GPU_NA_RING,
				 .proto = GPU_NP_SIMPLE, .nchannels = nch, .dtype_size = 4 };

	put(b, &o, sizeof(o));
}

static void nccl_ch(struct batch *b, uint8_t func, uint64_t seq, uint32_t ch, uint64_t start,
		    uint64_t dur)
{
	struct gpu_nccl_ch c = { .e = { GPU_NCCL_CHANNEL, sizeof(c) }, .channel = ch,
				 .comm = HASH_P, .seq = seq, .start = start, .end = start + dur,
				 .skew_ns = 1500, .rank = 1, .func = func };

	put(b, &c, sizeof(c));
	if (func < GPU_NF__COUNT && ch < 64)	/* what the trace must show */
		fprintf(ex, "{\"kind\":\"nccl_ch\",\"channel\":%u,\"seq\":%" PRIu64 ",\"ts\":%" PRIu64
		    ",\"dur\":%" PRIu64 "}\n", ch, seq, start, dur);
}

/*
 * A rank of a 4-rank communicator with NCCL's profiler plugin: three
 * all-reduces of 1 MiB on two channels each, one proxy send, then
 * entries the process got wrong. The GPU-side table counts 3 operations
 * whose GPU time is first start to last end; the trace has the group and
 * its channel and proxy tracks (check_gpu.py).
 */
static void test_nccl_plugin(void)
{
	struct batch b = { 0 };
	struct gpunccl_totals t;
	struct gpu_proc *p;
	uint64_t bad;

	capture_begin("nccl_plugin", true);
	now = 20000 * MS;
	fprintf(ex, "{\"kind\":\"meta\",\"pid\":%u}\n", PID_P);
	nccl_comm(&b, HASH_P, 1, 4, "world");
	for (uint64_t seq = 0; seq < 3; seq++) {
		uint64_t at = now + seq * MS;

		nccl_op(&b, GPU_NF_ALLREDUCE, seq, 1 << 20, 2);
		nccl_ch(&b, GPU_NF_ALLREDUCE, seq, 0, at + 100 * US, 400 * US);
		nccl_ch(&b, GPU_NF_ALLREDUCE, seq, 1, at + 101 * US, 500 * US);
	}
	{
		struct gpu_nccl_proxy x = { .e = { GPU_NCCL_PROXY, sizeof(x) }, .tid = PID_P + 1,
					    .comm = HASH_P, .seq = 2, .start = now + 2200 * US,
					    .end = now + 2300 * US, .bytes = 65536, .rank = 1,
					    .peer = 2, .steps = 4, .channel = 1, .send = 1,
					    .func = GPU_NF_ALLREDUCE };

		put(&b, &x, sizeof(x));
	}
	check(feed(PID_P, PID_P, &b) == 0 && (p = proc_of(PID_P)) != NULL, "plugin batch taken");
	p = proc_of(PID_P);
	if (!p)
		exit(1);
	gpunccl__totals(p, &t);
	check(t.comms == 1 && t.ops == 3 && t.channels == 6 && t.proxies == 1 &&
	      t.proxy_bytes == 65536 && t.skew_max_ns == 1500 && t.clamped == 0,
	      "plugin totals: 1 comm, 3 ops, 6 channel spans, 1 proxy op (%" PRIu64 " %" PRIu64
	      " %" PRIu64 " %" PRIu64 ")", t.comms, t.ops, t.channels, t.proxies);
	check(t.gpu_ns == 3 * (400 + 500) * US, "channel time summed (%" PRIu64 ")", t.gpu_ns);

	/* Wrong entries: each counted bad, none drawn. */
	b.n = 0;
	bad = g->bad_entries;
	nccl_ch(&b, GPU_NF_ALLREDUCE, 9, 64, now, US);		/* channel past NCCL's 64 */
	nccl_ch(&b, GPU_NF__COUNT, 9, 0, now, US);		/* function out of range */
	raw(&b, GPU_NCCL_COMM, 48, 'z');			/* name without NUL */
	raw(&b, GPU_NCCL_OP, sizeof(struct gpu_nccl_op) - 8, 0);	/* short */
	raw(&b, GPU_NCCL_PROXY, sizeof(struct gpu_nccl_proxy), 0xff);	/* send 0xff */
	{
		struct gpu_nccl_ch c = { .e = { GPU_NCCL_CHANNEL, sizeof(c) }, .comm = HASH_P,
					 .start = now + MS, .end = now, .func = 1 };

		put(&b, &c, sizeof(c));		/* ends before it starts */
	}
	/* Spans that overlap their channel's previous one: the next lane;
	 * a fifth at once on one channel: drawn clamped on the last. */
	nccl_ch(&b, GPU_NF_ALLREDUCE, 2, 0, now + 2 * MS + 200 * US, 100 * US);
	nccl_ch(&b, GPU_NF_ALLREDUCE, 2, 1, now + 2 * MS + 400 * US, 300 * US);
	for (int i = 0; i < 5; i++)
		nccl_ch(&b, GPU_NF_ALLREDUCE, 7, 2, now + 3 * MS + (uint64_t)i * 100 * US,
			i == 4 ? 800 * US : 1 * MS - (uint64_t)i * 100 * US);
	check(feed(PID_P, PID_P, &b) == 0, "second batch taken");
	gpunccl__totals(p, &t);
	check(g->bad_entries - bad == 6, "6 wrong plugin entries counted bad (%" PRIu64 ")",
	      g->bad_entries - bad);
	check(t.channels == 13 && t.clamped == 1, "overlapping spans on lanes, the fifth at once "
	      "clamped (%" PRIu64 " %" PRIu64 ")", t.channels, t.clamped);
	fprintf(ex, "{\"kind\":\"meta_bad\",\"bad\":%" PRIu64 "}\n", g->bad_entries);
	capture_end("nccl_plugin");
}

int main(int argc, char **argv)
{
	sources__init();
	if (argc != 2) {
		fprintf(stderr, "usage: test_gpu DIR (tests/unit/check_gpu.sh runs it)\n");
		return 2;
	}
	dir = argv[1];
	test_measured();
	test_validation();
	test_estimate();
	test_summary_only();
	test_corr();
	test_taken();
	test_nccl_plugin();
	printf("%d passed, %d failed\n", n_pass, n_fail);
	return n_fail != 0;
}
