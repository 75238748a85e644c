// SPDX-License-Identifier: MIT
/*
 * sources/gpu/: GPU activity: this source (the probes), the decoder
 * (gpu.c), the per-process tables (gpuproc.c), the trace (gpupf.c), the
 * tables (gpusum.c) and the estimate without CUPTI (gpuest.c).
 *
 * The GPU activity source: cgbpf's injection library (inject/gpu.c) in a
 * target hands CUPTI's activity over through its probe site
 * cgbpf_gpu_batch (bpf/gpu_rec.h); bpf/gpu.bpf.c copies each batch into
 * the events ring. This source attaches that probe to every target that
 * maps the library (the probe's presence tells the library to collect,
 * so only targets collect), asks for a flush at stop by probing the
 * second site, and takes the REC_GPU_BATCH records.
 *
 * What the batches say is decoded by user/sources/gpu/gpu.c (model, trace, summary);
 * this file owns the probes: which processes collect, and the flush.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>
#include <bpf/libbpf.h>
#include "cgbpf.skel.h"
#include "gpu_rec.h"
#include "core/apilib.h"
#include "core/attach.h"
#include "core/hangwatch.h"
#include "core/inject.h"
#include "core/opts.h"
#include "core/session.h"
#include "core/source.h"
#include "lib/elf/elfsym.h"
#include "lib/hmap.h"
#include "lib/log.h"
#include "lib/procfs.h"
#include "lib/straggle.h"
#include "out/capwin.h"
#include "out/summary.h"
#include "sources/gpu/gpu.h"

/* How long, at most, stop waits for every collecting library's flush. */
#define FLUSH_WAIT_NS (1500ull * 1000000)

/* A target that maps the library; what it said is user/sources/gpu/gpu.c's to know. */
struct gproc {
	uint32_t pid;
	struct uprobe *batch, *flush;
	bool exited;
	bool asked;		/* a capture window's end asked it for a flush */
	char path[64];		/* /proc/PID/map_files/... of the library */
	const char *file;	/* what the probes name: path, or gpusrc's inj */
	uint64_t flush_off;
	uint64_t window_off;	/* GPU_WINDOW_SITE; 0: an older library */
};

struct gpusrc {
	/* user/sources/gpu/gpu.c: the model, trace and summary of the activity */
	struct gpu *gpu;
	struct hmap procs;	/* pid -> struct gproc * */
	char inj[PATH_MAX];	/* -- CMD: the library CMD is given ("": none) */
};

static struct gproc *gproc(struct gpusrc *g, uint32_t pid, bool create)
{
	uint64_t *v = hmap__get(&g->procs, pid);
	struct gproc *p;

	if (v || !create)
		return v ? (void *)(uintptr_t)*v : NULL;
	p = calloc(1, sizeof(*p));
	if (!p || hmap__put(&g->procs, pid, (uintptr_t)p)) {
		free(p);
		return NULL;
	}
	p->pid = pid;
	return p;
}

/* Whether path is the injection library (under either of its names). */
static bool is_lib(const char *path)
{
	const char *base = strrchr(path, '/');

	return inject__is_lib(base ? base + 1 : path);
}

struct find_ctx {
	uint32_t pid;
	char path[64];
	bool found;
};

static int find_lib(const struct map_entry *e, void *ctx)
{
	struct find_ctx *f = ctx;

	/* The executable mapping: its map_files entry names the very inode,
	 * whatever the process's mount namespace. */
	if (e->perms[2] != 'x' || !e->path || !*e->path || !is_lib(e->path))
		return 0;
	snprintf(f->path, sizeof(f->path), "/proc/%u/map_files/%" PRIx64 "-%" PRIx64, f->pid,
		 e->start, e->end);
	f->found = true;
	return 1;
}

/* The file offsets of the library's sites (flush, window: 0 when it has
 * none); false for a library without the GPU part (NVTX only). */
static bool site_offsets(const char *path, uint64_t *batch, uint64_t *flush, uint64_t *window)
{
	struct elfsym *es = elfsym__open(path);
	bool ok = es && !elfsym__offset(es, GPU_PROBE_SITE, batch);

	if (ok && elfsym__offset(es, GPU_FLUSH_SITE, flush))
		*flush = 0;
	if (ok && elfsym__offset(es, GPU_WINDOW_SITE, window))
		*window = 0;
	elfsym__close(es);
	return ok;
}

/* Probes the library's batch site in pid when pid maps the library. */
static void attach_proc(struct session *s, struct gpusrc *g, uint32_t pid)
{
	struct find_ctx f = { .pid = pid };
	struct gproc *p = gproc(g, pid, false);
	uint64_t off = 0, flush_off = 0, window_off = 0;

	/* An exited pid maps nothing: one that maps the library again is a
	 * new process under the reused pid. */
	if ((p && p->batch) || procfs__for_each_map(pid, find_lib, &f) <= 0 ||
	    !f.found)
		return;
	if (!site_offsets(f.path, &off, &flush_off, &window_off)) {
		dbg("pid %u: %s has no %s: no GPU activity", pid, f.path, GPU_PROBE_SITE);
		return;
	}
	p = gproc(g, pid, true);
	if (!p)
		return;
	p->exited = false;
	p->flush_off = flush_off;
	p->window_off = window_off;
	memcpy(p->path, f.path, sizeof(p->path));
	p->file = p->path;
	p->batch = uprobe__attach(s->skel->progs.gpu_batch, pid, f.path, off, false);
	if (!p->batch) {
		warn("pid %u: probing the injection library's GPU site: %s; no GPU activity", pid,
		     strerror(errno));
		return;
	}
	gpu__lib_probed(g->gpu, pid);
	dbg("pid %u: GPU activity site probed in %s", pid, f.path);
}

/*
 * -- CMD, forked and waiting for its exec: the batch site of the library
 * it is given is probed now, for its pid, so the probe is there when the
 * driver loads the library at cuInit. The library then starts collecting
 * inside InitializeInjection, before the first kernel, instead of up to a
 * poll later, after the mapping was seen: a short program would otherwise
 * end before its GPU activity was collected at all.
 */
static void gpu_spawned(struct session *s, void *state, uint32_t pid)
{
	struct gpusrc *g = state;
	struct gproc *p;
	uint64_t off = 0, flush_off = 0, window_off = 0;

	/* No GPU part: attach_proc says so when it maps it. */
	if (!*g->inj || !site_offsets(g->inj, &off, &flush_off, &window_off))
		return;
	p = gproc(g, pid, true);
	if (!p)
		return;
	p->batch = uprobe__attach(s->skel->progs.gpu_batch, pid, g->inj, off, false);
	if (!p->batch) {
		/* attach_proc tries again once the library is mapped. */
		dbg("pid %u: probing %s before its exec: %s", pid, g->inj, strerror(errno));
		return;
	}
	p->file = g->inj;
	p->flush_off = flush_off;
	p->window_off = window_off;
	gpu__lib_probed(g->gpu, pid);
	dbg("pid %u: GPU activity site probed in %s before its exec", pid, g->inj);
}

/* Capture windows: an operation is written when its launch began inside
 * the open file's window, and counted where it went. */
static int keep_op(void *ctx, uint32_t pid, uint64_t launch_ts)
{
	struct session *s = ctx;

	return !s->cap || capture__gpu_op(s->cap, pid, launch_ts) == CAPTURE_KEEP;
}

static void arrived_op(void *ctx, uint32_t pid, uint64_t launch_ts, bool kernel)
{
	struct session *s = ctx;

	if (s->cap)
		capture__gpu_arrived(s->cap, pid, launch_ts, kernel);
}

/* Probes the library's flush site (at off): it hands over what CUPTI
 * holds. */
static bool ask_flush(struct session *s, struct gproc *p, uint64_t off)
{
	p->flush = uprobe__attach(s->skel->progs.gpu_flush, p->pid, p->file, off, false);
	return p->flush;
}

static bool window_pid(const struct gproc *p, uint32_t pid)
{
	return !pid || p->pid == pid;
}

/*
 * A capture window ended: ask the libraries of its processes for what
 * CUPTI holds, so that the window's GPU activity reaches its file: the
 * window site (completed records, every poll while probed), or with an
 * older library the flush site (forced, as at stop: a kernel still
 * running is handed over without times, and skipped). The library acts
 * on the site's rising edge, so the probe goes when the file closes
 * (gpu_window_end).
 */
static bool gpu_window_close(struct session *s, void *state, uint32_t pid)
{
	struct gpusrc *g = state;
	uint64_t v;
	bool asked = false;

	for (size_t it = 0; hmap__next(&g->procs, &it, NULL, &v);) {
		struct gproc *p = (void *)(uintptr_t)v;

		if (!window_pid(p, pid) || p->exited || !p->batch || p->flush || !p->flush_off ||
		    !gpu__collecting(g->gpu, p->pid))
			continue;
		gpu__flush_asked_pid(g->gpu, p->pid);
		/* The window site: completed records only, every poll until
		 * the file closes. An older library has the forced flush. */
		if (!ask_flush(s, p, p->window_off ? p->window_off : p->flush_off)) {
			/* Gone (its exit not read yet): what it sent is in
			 * the ring already, read by the next tick. */
			if (errno == ESRCH)
				asked = true;
			else
				dbg("pid %u: asking for a window's GPU activity: %s", p->pid,
				    strerror(errno));
			continue;
		}
		p->asked = asked = true;
	}
	return asked;
}

/*
 * Settled when every library asked answered, and, where the window site
 * was probed (completed records only), the file has a kernel for each
 * launch of its window: a kernel still running at the window's end comes
 * when it ends (capture__gpu_caught_up). A launch that queues no kernel
 * (captured into a graph, failed) keeps the file open to its time limit.
 */
static bool gpu_window_settled(struct session *s, void *state, uint32_t pid)
{
	struct gpusrc *g = state;
	bool completed_only = false;
	uint64_t v;

	for (size_t it = 0; hmap__next(&g->procs, &it, NULL, &v);) {
		struct gproc *p = (void *)(uintptr_t)v;

		if (!window_pid(p, pid) || !p->asked || p->exited)
			continue;
		if (!gpu__flush_answered(g->gpu, p->pid))
			return false;
		completed_only |= p->window_off != 0;
	}
	return !completed_only || !s->cap || capture__gpu_caught_up(s->cap, pid);
}

static void gpu_window_end(struct session *s, void *state, uint32_t pid)
{
	struct gpusrc *g = state;
	uint64_t v;

	(void)s;
	gpu__release(g->gpu, pid);
	for (size_t it = 0; hmap__next(&g->procs, &it, NULL, &v);) {
		struct gproc *p = (void *)(uintptr_t)v;

		if (!window_pid(p, pid) || !p->asked)
			continue;
		p->asked = false;
		uprobe__destroy(p->flush);
		p->flush = NULL;
	}
}

static int gpu_init(struct session *s, void **state)
{
	struct gpusrc *g = calloc(1, sizeof(*g));
	struct sink sk;

	if (g)
		g->gpu = gpu__new(&s->model, s->pt);
	if (!g || !g->gpu) {
		free(g);
		err("out of memory");
		return -ENOMEM;
	}
	sk = gpu__sink(g->gpu);
	if (model__add_sink(&s->model, &sk)) {
		err("too many model sinks for the GPU activity");
		gpu__free(g->gpu);
		free(g);
		return -E2BIG;
	}
	/* Only with capture windows: arrived_op costs every operation a
	 * correlation lookup. */
	if (capture__gated(&s->o->cap))
		gpu__set_keep(g->gpu, keep_op, arrived_op, s);
	*state = g;
	return 0;
}

static void gpu_proc(struct session *s, void *state, enum src_proc ev, uint32_t pid, uint64_t ts)
{
	struct gpusrc *g = state;
	struct gproc *p;

	if (ev != SRC_PROC_EXIT) {
		attach_proc(s, g, pid);
		return;
	}
	gpu__proc_exit(g->gpu, pid, ts);
	if (s->mon)
		gpu__forget(g->gpu, pid);	/* the monitor keeps nothing of the dead */
	p = gproc(g, pid, false);
	if (p) {
		p->exited = true;
		uprobe__release(p->batch);
		uprobe__release(p->flush);
		p->batch = p->flush = NULL;
	}
}

static int gpu_rec(struct session *s, void *state, const void *data, size_t size)
{
	struct gpusrc *g = state;

	(void)s;
	return gpu__record(g->gpu, data, size) ? -EINVAL : 0;
}

/* Asks every collecting library for a flush by probing its second site. */
static uint64_t gpu_stop(struct session *s, void *state)
{
	struct gpusrc *g = state;
	uint64_t v, n = 0;

	gpu__flush_asked(g->gpu);
	/* A window's flush still probed: the library acts on a new probe
	 * only after it saw the site bare (it reads it every 20 ms). */
	for (size_t it = 0; hmap__next(&g->procs, &it, NULL, &v);) {
		struct gproc *p = (void *)(uintptr_t)v;

		if (p->flush) {
			uprobe__destroy(p->flush);
			p->flush = NULL;
			p->asked = false;
			n++;
		}
	}
	if (n)
		usleep(50 * 1000);
	n = 0;
	for (size_t it = 0; hmap__next(&g->procs, &it, NULL, &v);) {
		struct gproc *p = (void *)(uintptr_t)v;

		if (!p->batch || !gpu__collecting(g->gpu, p->pid) || !p->flush_off)
			continue;
		if (!ask_flush(s, p, p->flush_off)) {
			warn("pid %u: asking for the last GPU activity: %s; what it still held "
			     "is missing", p->pid, strerror(errno));
			continue;
		}
		n++;
	}
	return n ? FLUSH_WAIT_NS : 0;
}

static bool gpu_settled(struct session *s, void *state)
{
	struct gpusrc *g = state;
	uint64_t v;

	(void)s;
	for (size_t it = 0; hmap__next(&g->procs, &it, NULL, &v);) {
		struct gproc *p = (void *)(uintptr_t)v;

		if (p->flush && !p->exited && !gpu__flush_answered(g->gpu, p->pid))
			return false;
	}
	return true;
}

/* What user/sources/gpu/gpu.c's section does not say: flushes that did not come,
 * batches the ring lost. */
static void gpu_print(const void *ctx, const uint64_t *drops, FILE *f)
{
	const struct gpusrc *g = ctx;
	bool head = false;
	uint64_t v;

	for (size_t it = 0; hmap__next(&g->procs, &it, NULL, &v);) {
		const struct gproc *p = (const void *)(uintptr_t)v;

		if (!p->flush || p->exited || gpu__flush_answered(g->gpu, p->pid))
			continue;
		if (!head)
			fprintf(f, "\n** GPU activity: what did not arrive\n\n");
		head = true;
		fprintf(f, "   pid %u: its last GPU activity did not come before the capture "
			"ended\n", p->pid);
	}
	if (drops[REC_GPU_BATCH])
		fprintf(f, "%s   %" PRIu64 " GPU activity batches LOST (ring full)\n",
			head ? "" : "\n** GPU activity: what did not arrive\n\n", drops[REC_GPU_BATCH]);
}

/* -- CMD: NCCL loads the injection library as its profiler plugin
 * (NCCL_PROFILER_PLUGIN) at each communicator's init, unless CMD brings
 * another plugin: NCCL loads one, so that one stays and NCCL's GPU-side
 * timing (inject/ncclprof.c) is not collected. */
static void nccl_plugin_spawn(struct session *s, const char *cmd, const char *inj)
{
	const char *set = getenv("NCCL_PROFILER_PLUGIN");
	const char *base;

	if (!(s->o->trace_mask & TRACE_BIT(LIB_NCCL)))
		return;
	if (set && *set) {
		base = strrchr(set, '/');
		if (!strcasecmp(set, "none"))
			dbg("NCCL_PROFILER_PLUGIN=none: NCCL's GPU-side timing is not collected");
		else if (!inject__is_lib(base ? base + 1 : set))
			warn("NCCL_PROFILER_PLUGIN is %s, another profiler plugin: NCCL loads one, so "
			     "%s keeps it, and NCCL's GPU-side timing is not collected (its calls "
			     "are)", set, cmd);
		return;
	}
	if (inj)
		setenv("NCCL_PROFILER_PLUGIN", inj, 1);
}

/* -- CMD: the driver loads the injection library at cuInit
 * (CUDA_INJECTION64_PATH), unless CMD brings another tool's. */
static void gpu_spawn(struct session *s, void *state, const char *cmd)
{
	const char *set = getenv("CUDA_INJECTION64_PATH");
	struct gpusrc *g = state;
	char inj[PATH_MAX];
	bool have = inject__path(inj, sizeof(inj));
	const char *base;

	nccl_plugin_spawn(s, cmd, have ? inj : NULL);
	if (!(s->o->trace_mask & (TRACE_BIT(LIB_CUDA) | TRACE_BIT(LIB_CUDART))))
		return;
	if (set && *set) {
		base = strrchr(set, '/');
		if (!inject__is_lib(base ? base + 1 : set))
			warn("CUDA_INJECTION64_PATH is %s, another tool's: %s keeps it, and its GPU "
			     "activity is estimated from its API calls", set, cmd);
		else
			snprintf(g->inj, sizeof(g->inj), "%s", set);
		return;
	}
	if (have) {
		setenv("CUDA_INJECTION64_PATH", inj, 1);
		snprintf(g->inj, sizeof(g->inj), "%s", inj);
	} else
		warn("libcgbpf-inject.so not found next to cgbpf: the GPU activity of %s is "
		     "estimated from its API calls (docs/injection.md)", cmd);
}

/* Every source is made by now: the NCCL source's hang watcher, if any,
 * hears of NCCL's profiler plugin's task starts too. */
static int gpu_start(struct session *s, void *state)
{
	struct gpusrc *g = state;

	gpu__set_hang(g->gpu, s->hang);
	return 0;
}

static void gpu_tick(struct session *s, void *state, uint64_t now)
{
	struct gpusrc *g = state;

	(void)s;
	gpu__tick(g->gpu, now);
}

static void gpu_finish(struct session *s, void *state, struct capture_info *ci)
{
	struct gpusrc *g = state;

	(void)s;
	gpu__finish(g->gpu, session__now());
	summary__add_section(ci, SUMMARY_OTHER, gpu__print, g->gpu);
	summary__add_section(ci, SUMMARY_OTHER, gpu_print, state);
}

static void gpu_fini(struct session *s, void *state)
{
	struct gpusrc *g = state;
	uint64_t v;

	(void)s;
	if (!g)
		return;
	for (size_t it = 0; hmap__next(&g->procs, &it, NULL, &v);) {
		struct gproc *p = (void *)(uintptr_t)v;

		uprobe__release(p->batch);	/* attach__free waits for them */
		uprobe__release(p->flush);
		free(p);
	}
	hmap__free(&g->procs);
	gpu__free(g->gpu);
	free(g);
}

/* monitor: cgbpf_gpu_busy_seconds_total and its operation counts. */
enum busy_series { BUSY_SECONDS, OPS_KERNEL, OPS_OTHER };

struct busy_out {
	const struct src_metrics *m;
	enum busy_series series;
};

static void busy_line(void *ctx, uint32_t pid, unsigned device, uint64_t busy_ns, uint64_t ops,
		      uint64_t kernels)
{
	const struct busy_out *o = ctx;
	char comm[64], line[256];

	o->m->comm(o->m->ctx, pid, comm, sizeof(comm));
	if (o->series == BUSY_SECONDS)
		snprintf(line, sizeof(line),
			 "cgbpf_gpu_busy_seconds_total{pid=\"%u\",comm=\"%s\",gpu=\"%u\"} %.9f\n",
			 pid, comm, device, busy_ns / 1e9);
	else
		snprintf(line, sizeof(line),
			 "cgbpf_gpu_operations_total{pid=\"%u\",comm=\"%s\",gpu=\"%u\",kind=\"%s\"} %"
			 PRIu64 "\n", pid, comm, device, o->series == OPS_KERNEL ? "kernel" : "other",
			 o->series == OPS_KERNEL ? kernels : ops - kernels);
	o->m->line(o->m->ctx, line);
}

/* cgbpf_nccl_plugin_last_seq: communicators the host side does not know. */
struct seq_out {
	const struct src_metrics *m;
	const struct hangwatch *hang;
};

static void seq_line(void *ctx, uint32_t pid, uint64_t hash, int rank, int nranks,
		     uint64_t entered)
{
	const struct seq_out *o = ctx;
	char line[192];

	if (hangwatch__host_knows(o->hang, pid, rank, nranks))
		return;
	snprintf(line, sizeof(line),
		 "cgbpf_nccl_plugin_last_seq{comm=\"%04x\",rank=\"%d\",nranks=\"%d\",pid=\"%u\"} %"
		 PRIu64 "\n", (unsigned)(hash >> 48), rank, nranks, pid, entered);
	o->m->line(o->m->ctx, line);
}

/* cgbpf_nccl_gpu_*: the GPU-side straggler counts, one family each. */
struct strag_out {
	const struct src_metrics *m;
	enum straggle_series what;
};

static void strag_line(void *ctx, const struct straggle_row *r)
{
	const struct strag_out *o = ctx;
	char line[256];

	if (r->nranks <= 0 || r->rank < 0)
		return;
	straggle__sample(r, "cgbpf_nccl_gpu", o->what, line, sizeof(line));
	o->m->line(o->m->ctx, line);
}

static void strag_metrics(const struct gpusrc *g, const struct src_metrics *m)
{
	static const char *const head[STRAG__SERIES] = {
		"# HELP cgbpf_nccl_gpu_matched_total NCCL operations matched across the ranks of a "
		"communicator whose every rank is traced here, on the GPU side: NCCL's profiler "
		"plugin, by NCCL's commHash and its own numbers (comm: its first 4 hex digits, as "
		"cgbpf_nccl_last_seq's).\n# TYPE cgbpf_nccl_gpu_matched_total counter\n",
		"# HELP cgbpf_nccl_gpu_entered_last_total Of those, the ones whose kernel started "
		"last on this rank (channel 0's GPU start).\n"
		"# TYPE cgbpf_nccl_gpu_entered_last_total counter\n",
		"# HELP cgbpf_nccl_gpu_others_waited_seconds_total How long the other ranks' "
		"kernels had been running when this rank's started, summed.\n"
		"# TYPE cgbpf_nccl_gpu_others_waited_seconds_total counter\n",
		"# HELP cgbpf_nccl_gpu_late_seconds_total How long after its communicator's first "
		"rank's kernel this rank's kernel started, summed (0 when first).\n"
		"# TYPE cgbpf_nccl_gpu_late_seconds_total counter\n",
	};

	for (enum straggle_series i = 0; i < STRAG__SERIES; i++) {
		struct strag_out o = { m, i };

		m->line(m->ctx, head[i]);
		gpu__each_nccl_strag(g->gpu, strag_line, &o);
	}
}

static void gpu_metrics(struct session *s, void *state, const struct src_metrics *m)
{
	struct gpusrc *g = state;
	struct busy_out o = { .m = m, .series = BUSY_SECONDS };
	struct seq_out so = { .m = m, .hang = s->hang };

	m->line(m->ctx, "# HELP cgbpf_gpu_busy_seconds_total Time a process's GPU work (kernels, "
			"copies, memsets) kept a GPU busy, measured by CUPTI in its injection "
			"library: the union of its operations' spans, counted 2 s behind (the "
			"reorder window). Only processes that load cgbpf's injection library "
			"(docs/injection.md).\n# TYPE cgbpf_gpu_busy_seconds_total counter\n");
	gpu__each_busy(g->gpu, busy_line, &o);
	m->line(m->ctx, "# HELP cgbpf_gpu_operations_total GPU operations CUPTI measured: kernels, "
			"and other (copies, memsets).\n# TYPE cgbpf_gpu_operations_total counter\n");
	o.series = OPS_KERNEL;
	gpu__each_busy(g->gpu, busy_line, &o);
	o.series = OPS_OTHER;
	gpu__each_busy(g->gpu, busy_line, &o);
	m->line(m->ctx, "# HELP cgbpf_nccl_plugin_last_seq For a communicator rank whose creation "
			"was not traced (a job older than the monitor), from NCCL's profiler plugin: "
			"the collectives it entered since the communicator's creation, as NCCL "
			"numbers them (its per-function numbers of the latest seen, + 1, summed); "
			"comm: the first 4 hex digits of NCCL's commHash.\n"
			"# TYPE cgbpf_nccl_plugin_last_seq gauge\n");
	gpu__each_nccl(g->gpu, seq_line, &so);
	strag_metrics(g, m);
}

const struct source src_gpu = {
	.name = "gpu",
	.types = { REC_GPU_BATCH },
	.init = gpu_init,
	.start = gpu_start,
	.record = gpu_rec,
	.spawn = gpu_spawn,
	.spawned = gpu_spawned,
	.proc = gpu_proc,
	.tick = gpu_tick,
	.stop = gpu_stop,
	.settled = gpu_settled,
	.window_close = gpu_window_close,
	.window_settled = gpu_window_settled,
	.window_end = gpu_window_end,
	.metrics = gpu_metrics,
	.finish = gpu_finish,
	.fini = gpu_fini,
};
