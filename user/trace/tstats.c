// SPDX-License-Identifier: MIT
/*
 * cgbpf stats FILE...: the summary's tables from saved traces.
 *
 * The trace reader (user/trace/tread.c) gives tracks, events and paired slices;
 * here they are told apart as the writers made them (docs/design.md,
 * "Summary from a trace") and fed to the same online statistics
 * (user/lib/stats.c) record's summary keeps, then printed by the same code
 * (user/lib/sumtab.c), so the numbers of one run are the same in both:
 *
 * - a thread track's slice without category named as a CUDA driver or
 *   runtime function is an API call; one nested in another such call
 *   (an open begin of one below it on the track) is a call made inside
 *   it; its end's "result" means it failed, "return_lost" that its
 *   return was never seen (left out, as record leaves it out);
 * - category "syscall": a syscall (osrt_sum); "nccl": NCCL's group and
 *   communicator slices (not a table here yet); any other category on a
 *   thread track: an NVTX push/pop range of that domain; on an "NVTX
 *   ranges N" track: a start/end range;
 * - an instant with a "domain" arg on a thread track: an NVTX mark;
 * - slices on a track described as "CUPTI stream ..." are GPU
 *   operations: kernels (a "config" arg) and memory operations;
 * - the counter tracks "GPU memory (cuMemAlloc)" and "Pinned host memory
 *   (cuMemAllocHost)" give each process's peak;
 * - the attributes cgbpf.syscall_threshold_ns and cgbpf.nvtx_unmatched
 *   what the events do not say.
 *
 * Tracks are recognized by their descriptors, not their uuids, so merged
 * traces (uuids remapped per machine) read the same.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "nccl_funcs.h"
#include "core/apilib.h"
#include "core/model.h"
#include "lib/hmap.h"
#include "lib/ncclbw.h"
#include "lib/log.h"
#include "lib/outfile.h"
#include "lib/stats.h"
#include "lib/stragalign.h"
#include "lib/straggle.h"
#include "sources/gpu/gpunccl.h"
#include "lib/sumtab.h"
#include "sources/cuda/cuda.h"
#include "sources/cuda/cudart.h"
#include "sources/gpu/gpu.h"
#include "sources/nccl/nccl.h"
#include "sources/nccl/ncclsum.h"
#include "sources/syscalls/syscall_names.h"
#include "trace/stragact.h"
#include "trace/tread.h"
#include "trace/tstats.h"

#define NSYSCALLS (sizeof(syscall_names) / sizeof(syscall_names[0]))
#define KERNEL_ROWS 4096	/* as user/sources/gpu/gpusum.c */
/* Launch calls waiting for their GPU operations, at most (the table's
 * slots): past it the oldest are forgotten, and their operations count
 * without their launch times. */
#define FLOWS_MAX (1u << 20)

/*
 * Launch calls by flow id, for their GPU operations. A capture numbers
 * its flows 1, 2, ... in call order, and an operation comes some
 * thousand calls after its launch: a table indexed by the id's low bits
 * finds each in one step (a hash map with deletions spent its time in
 * probe chains of deleted entries). A call that would overwrite one still
 * waiting doubles the table while at least half of it waits (that many
 * launches are in flight), else takes the slot: the call there waited a
 * whole table of launches for GPU work that did not come. cgbpf merge
 * moves each machine's ids by a multiple of 2^48: their high bits move
 * the index too, so machines do not share slots.
 */
struct flow_slot {
	uint64_t flow, ts;	/* the call's begin */
	uint32_t tid;
	uint8_t state;		/* 0 free, 1 waiting, 2 its first operation came */
};

struct flows {
	struct flow_slot *s;
	size_t cap;		/* a power of two, or 0 */
	size_t waiting;		/* slots in state 1 */
};

static size_t flow_index(uint64_t flow, size_t cap)
{
	return (flow + (flow >> 32) * 0x9e3779b97f4a7c15ull) & (cap - 1);
}

static void flows_free(struct flows *fl)
{
	free(fl->s);
	fl->s = NULL;
	fl->cap = fl->waiting = 0;
}

/* Doubles the table (up to FLOWS_MAX); -ENOMEM, or -E2BIG at the bound. */
static int flows_grow(struct flows *fl)
{
	size_t nc = fl->cap ? fl->cap * 2 : 4096;
	struct flow_slot *n;

	if (nc > FLOWS_MAX)
		return -E2BIG;
	n = calloc(nc, sizeof(*n));
	if (!n)
		return -ENOMEM;
	for (size_t i = 0; i < fl->cap; i++) {
		/* Each slot splits in two: no two entries meet. */
		if (fl->s[i].state)
			n[flow_index(fl->s[i].flow, nc)] = fl->s[i];
	}
	free(fl->s);
	fl->s = n;
	fl->cap = nc;
	return 0;
}

static int flows_put(struct flows *fl, uint64_t flow, uint64_t ts, uint32_t tid)
{
	struct flow_slot *x;
	int err;

	if (!fl->cap && (err = flows_grow(fl)))
		return err;
	x = &fl->s[flow_index(flow, fl->cap)];
	while (x->state == 1 && x->flow != flow && fl->waiting * 2 > fl->cap) {
		err = flows_grow(fl);
		if (err == -E2BIG)
			break;		/* the oldest goes */
		if (err)
			return err;
		x = &fl->s[flow_index(flow, fl->cap)];
	}
	if (x->state != 1)
		fl->waiting++;
	*x = (struct flow_slot){ .flow = flow, .ts = ts, .tid = tid, .state = 1 };
	return 0;
}

static struct flow_slot *flows_get(struct flows *fl, uint64_t flow)
{
	struct flow_slot *x = fl->cap ? &fl->s[flow_index(flow, fl->cap)] : NULL;

	return x && x->state && x->flow == flow ? x : NULL;
}

/* The reports, in the order record prints them. */
enum report {
	R_API,
	R_API_INNER,
	R_KERN_LAUNCH,
	R_API_MEM,
	R_PEAK,
	R_NCCL,
	R_NCCL_STRAG,
	R_NCCL_STRAG_ACT,
	R_NCCL_STRAG_GPU,
	R_NVTX,
	R_SAMPLES,
	R_OSRT,
	R_PY_SITES,
	R_GPU_KERN,
	R_GPU_MEM_TIME,
	R_GPU_MEM_SIZE,
	R_GPU_UTIL,
	R_GPU_PROCS,
	R__COUNT
};

static const struct {
	const char *name;
	const char *title;
} reports[R__COUNT] = {
	[R_API] = { "cuda_api_sum", "CUDA API Summary" },
	[R_API_INNER] = { "cuda_api_inner_sum", "CUDA API calls made inside other CUDA API calls" },
	[R_KERN_LAUNCH] = { "cuda_kern_launch_sum", "Top kernels by launches" },
	[R_API_MEM] = { "cuda_api_mem_size_sum", "Memory copies, API side" },
	[R_PEAK] = { "cuda_mem_peak", "Peak memory allocated per process" },
	[R_NCCL] = { "nccl_sum", "NCCL Summary" },
	[R_NCCL_STRAG] = { "nccl_stragglers", "NCCL stragglers: which rank the others wait for" },
	[R_NCCL_STRAG_ACT] = { "nccl_straggler_activity",
			       "NCCL straggler: what it did before its late entries" },
	[R_NCCL_STRAG_GPU] = { "nccl_stragglers_gpu",
			       "NCCL stragglers, GPU side: whose kernel the others wait for" },
	[R_NVTX] = { "nvtx_sum", "NVTX Range Summary" },
	[R_SAMPLES] = { "cpu_samples", "CPU samples" },
	[R_OSRT] = { "osrt_sum", "OS Runtime Summary" },
	[R_PY_SITES] = { "python_sites", "Python call sites" },
	[R_GPU_KERN] = { "cuda_gpu_kern_sum", "CUDA GPU Kernel Summary" },
	[R_GPU_MEM_TIME] = { "cuda_gpu_mem_time_sum", "CUDA GPU MemOps Summary (by Time)" },
	[R_GPU_MEM_SIZE] = { "cuda_gpu_mem_size_sum", "CUDA GPU MemOps Summary (by Size)" },
	[R_GPU_UTIL] = { "cuda_gpu_util", "GPU utilization and idle time" },
	[R_GPU_PROCS] = { "cuda_gpu_procs", "GPU activity per process" },
};

enum tk_kind {
	TK_OTHER,
	TK_PROCESS,
	TK_THREAD,
	TK_CTR_GPU,
	TK_CTR_PINNED,
	TK_GPU_LANE,
	TK_NVTX_RANGES,
	TK_GPU_DEV,		/* "GPU N: name" under a process */
	TK_GPU_SYNC,		/* "CUDA synchronization" under a process */
	TK_GPU_INFO,		/* "GPU activity (CUPTI)" under a process */
	TK_EST_GROUP,		/* "GPU (estimate from API calls)" under a process */
	TK_EST_STREAM,		/* "... (estimate)" under that */
	TK_NCCL_COMM,		/* "NCCL comm 3fa2 rank 1/4" under a process */
	TK_NCCL_GPU,		/* "NCCL 908d rank 2/4: GPU (NCCL profiler)" under a process */
	TK_NCCL_GPU_CH,		/* "channel 0", "channel 0 (2)" under that */
};

struct proc_row {
	uint32_t pid;
	char *comm;
	uint64_t peak[2];
};

struct tk {
	enum tk_kind kind;
	uint64_t parent;	/* key of the parent track */
	struct proc_row *proc;	/* process tracks */
	uint32_t pid, tid;	/* thread tracks; pid: of GPU device and sync tracks too */
	uint32_t device;	/* GPU device tracks */
	char *comm;		/* NCCL comm tracks: the id ("3fa2"); rank, nranks: -1 unknown */
	int rank, nranks;
	/* Thread tracks: which open slices are CUDA API calls (bit 0) and
	 * calls of any traced library (bit 1). */
	uint8_t *api;
	int depth, cap, api_open, calls_open;
	bool last_inside;	/* the slice that just ended had an API call below it */
	bool last_outer;	/* ... and no traced call (record's thread call stack) */
};

struct named {
	char *name;
	char *style;		/* nvtx: "PushPop" / "StartEnd" */
	struct stats st, st2;	/* st2: sizes of GPU memory operations */
	uint64_t launches;	/* kernels by launches; Python sites too */
	uint64_t calls, ns;	/* Python sites */
};

/* Rows by name: a hash of the name (and style) with linear probing. */
struct names {
	struct hmap map;
	size_t n;
};

struct acc {
	struct hmap tracks;		/* track key -> struct tk * */
	struct tk *last_tk;		/* the latest looked up, and its key */
	uint64_t last_tk_key;
	char last_fn[64];		/* the latest name api_func answered */
	int64_t last_lf;
	struct hmap api_fn;		/* hash(name) -> lib << 16 | func, + 1 */
	struct stats *api[LIB__COUNT], *inner[LIB__COUNT];
	uint16_t nfuncs[LIB__COUNT];
	struct names kernels;		/* launches */
	struct named *last_kernel;	/* the row of the latest launch */
	uint64_t launches, unnamed;
	uint64_t copies[SUMTAB_DIRS], copy_bytes[SUMTAB_DIRS], memsets, memset_bytes;
	struct names sys, nvtx, gpu_kern, gpu_mem;
	struct names pysites;		/* python_sites: by the py arg */
	struct names self;		/* cpu_samples: by innermost function (calls) */
	uint64_t samples;
	unsigned sample_hz, sample_cpus;	/* one trace's (cgbpf.sample_hz, _cpus); */
	bool sample_mixed;		/* several traces said different ones */
	struct hmap other_fn;		/* hash(name) of NCCL and NVTX functions: calls */
	struct named gpu_other;		/* kernel names past KERNEL_ROWS */
	/* nccl_sum, as user/sources/nccl/ncclsum.c keeps it */
	struct sumtab_nccl_op nccl[NC_FN__COUNT];
	struct stats nccl_time[NC_FN__COUNT], nccl_groups;
	uint64_t nccl_group_ops, nccl_group_bytes, nccl_nested;
	struct sumtab_nccl_comm *comms;
	size_t ncomms, capcomms;
	struct hmap nccl_fn;		/* hash(name) -> func + 1 */
	uint64_t marks;
	int64_t nvtx_unmatched;		/* -1: no trace said */
	bool nvtx_traced;
	bool gpu;			/* a process used the GPU (GPU tables shown) */
	bool gpu_known;			/* a trace said whether */
	uint64_t threshold;		/* SUMTAB_UNKNOWN: no trace said */
	struct proc_row **procs;
	size_t nprocs, capprocs;
	uint32_t machines;		/* highest machine id + 1 seen */
	/* nccl_stragglers: the operations, and each capture's host (per file
	 * and machine; unmerged files of different hosts are refused). */
	struct straggle *strag;
	struct straggle *strag_gpu;	/* nccl_stragglers_gpu: the plugin's channel 0 spans */
	struct ncclbw_gpu *nccl_gpu;	/* nccl_sum's GPU-side times: the same spans */
	struct stragalign *align;	/* nccl_stragglers: communicators older than the capture */
	int file;			/* the file being read */
	struct hmap hosts;		/* file << 32 | machine -> char * */
	char *first_host;		/* machine 0 of the first file */
	char *const *paths;		/* the traces read (nccl_straggler_activity reads them again) */
	int npaths;
	bool act_asked;			/* nccl_straggler_activity is a report of its own */
	bool hosts_differ;		/* unmerged files of different hosts */
	/* The GPU timeline, replayed through user/sources/gpu/gpu.c (cuda_gpu_util). */
	struct model model;
	struct gpu *g;
	struct flows flows;		/* launch calls by flow id */
	uint64_t gpu_ops;
};

static uint64_t key_of(uint32_t machine, uint64_t uuid)
{
	return machine ? hash__u64(uuid ^ hash__u64(machine)) : uuid;
}

static uint64_t named_hash(const char *name, const char *style)
{
	return hash__bytes(name, strlen(name)) ^ (style ? hash__bytes(style, strlen(style)) : 0);
}

/* The row of (name, style); NULL if none. */
static struct named *named_find(const struct names *ns, const char *name, const char *style)
{
	struct named *r;
	uint64_t *v;

	for (uint64_t h = named_hash(name, style); (v = hmap__get(&ns->map, h)); h++) {
		r = (struct named *)(uintptr_t)*v;
		if (!strcmp(r->name, name) && (!style || !strcmp(r->style, style)))
			return r;
	}
	return NULL;
}

/* The row of (name, style), added if new; NULL on ENOMEM. */
static struct named *named_get(struct names *ns, const char *name, const char *style)
{
	struct named *r = named_find(ns, name, style);
	uint64_t h = named_hash(name, style);

	if (r)
		return r;
	while (hmap__get(&ns->map, h))
		h++;
	r = calloc(1, sizeof(*r));
	if (!r)
		return NULL;
	r->name = strdup(name);
	r->style = style ? strdup(style) : NULL;
	if (!r->name || (style && !r->style) || hmap__put(&ns->map, h, (uintptr_t)r)) {
		free(r->name);
		free(r->style);
		free(r);
		return NULL;
	}
	ns->n++;
	return r;
}

static void names_free(struct names *ns)
{
	uint64_t v;

	for (size_t it = 0; hmap__next(&ns->map, &it, NULL, &v);) {
		struct named *r = (struct named *)(uintptr_t)v;

		stats__free(&r->st);
		stats__free(&r->st2);
		free(r->name);
		free(r->style);
		free(r);
	}
	hmap__free(&ns->map);
}

/* The rows of ns, for sumtab (sizes: the second series). */
static struct sumtab_row *names_rows(const struct names *ns, bool sizes, int *n)
{
	struct sumtab_row *rows = calloc(ns->n ? ns->n : 1, sizeof(*rows));
	uint64_t v;

	*n = 0;
	if (!rows)
		return NULL;
	for (size_t it = 0; hmap__next(&ns->map, &it, NULL, &v);) {
		struct named *r = (struct named *)(uintptr_t)v;

		rows[(*n)++] = (struct sumtab_row){ .name = r->name, .style = r->style,
						    .st = sizes ? &r->st2 : &r->st };
	}
	return rows;
}

static int acc_init(struct acc *a)
{
	memset(a, 0, sizeof(*a));
	a->nvtx_unmatched = -1;
	a->threshold = SUMTAB_UNKNOWN;
	model__init(&a->model);
	a->g = gpu__new(&a->model, NULL);
	a->strag = straggle__new();
	a->strag_gpu = straggle__new();
	a->align = stragalign__new();
	if (!a->g || !a->strag || !a->strag_gpu || !a->align)
		return -ENOMEM;
	straggle__no_gaps(a->strag_gpu);
	straggle__title(a->strag_gpu, gpunccl__strag_title, gpunccl__strag_basis);
	for (int f = 0; f < NC_FN__COUNT; f++) {
		const char *name = nccl_funcs[f].name;

		a->nccl[f] = (struct sumtab_nccl_op){
			.name = name,
			.transfer = nccl_funcs[f].cls == NC_C_COLL || nccl_funcs[f].cls == NC_C_P2P,
			.time = &a->nccl_time[f] };
		if (hmap__put(&a->nccl_fn, hash__bytes(name, strlen(name)), f + 1))
			return -ENOMEM;
	}
	for (unsigned l = 0; l < LIB__COUNT; l++) {
		const struct api_lib *lib = apilib__get(l);

		if (lib && l != LIB_CUDA && l != LIB_CUDART) {
			for (uint16_t f = 0; f < lib->nfuncs; f++) {
				const char *name = lib->symbol(f);

				if (name && hmap__put(&a->other_fn, hash__bytes(name, strlen(name)),
						      (uint64_t)l << 16 | f))
					return -ENOMEM;
			}
			continue;
		}
		if (!lib || !lib->nfuncs)
			continue;
		a->nfuncs[l] = lib->nfuncs;
		a->api[l] = calloc(lib->nfuncs, sizeof(struct stats));
		a->inner[l] = calloc(lib->nfuncs, sizeof(struct stats));
		if (!a->api[l] || !a->inner[l])
			return -ENOMEM;
		for (uint16_t f = 0; f < lib->nfuncs; f++) {
			const char *name = lib->symbol(f);
			uint64_t h;

			if (!name)
				continue;
			h = hash__bytes(name, strlen(name));
			if (!hmap__get(&a->api_fn, h) &&
			    hmap__put(&a->api_fn, h, ((uint64_t)l << 16 | f) + 1))
				return -ENOMEM;
		}
	}
	return 0;
}

static void acc_free(struct acc *a)
{
	uint64_t v;

	for (size_t it = 0; hmap__next(&a->tracks, &it, NULL, &v);) {
		struct tk *t = (struct tk *)(uintptr_t)v;

		free(t->api);
		free(t->comm);
		free(t);
	}
	hmap__free(&a->tracks);
	for (size_t it = 0; hmap__next(&a->hosts, &it, NULL, &v);)
		free((void *)(uintptr_t)v);
	hmap__free(&a->hosts);
	free(a->first_host);
	straggle__free(a->strag);
	straggle__free(a->strag_gpu);
	stragalign__free(a->align);
	hmap__free(&a->api_fn);
	hmap__free(&a->other_fn);
	names_free(&a->pysites);
	names_free(&a->self);
	flows_free(&a->flows);
	gpu__free(a->g);
	model__free(&a->model);
	for (int l = 0; l < LIB__COUNT; l++) {
		for (int f = 0; f < a->nfuncs[l]; f++) {
			stats__free(&a->api[l][f]);
			stats__free(&a->inner[l][f]);
		}
		free(a->api[l]);
		free(a->inner[l]);
	}
	for (int f = 0; f < NC_FN__COUNT; f++)
		stats__free(&a->nccl_time[f]);
	stats__free(&a->nccl_groups);
	ncclbw__gpu_free(a->nccl_gpu);
	hmap__free(&a->nccl_fn);
	free(a->comms);
	names_free(&a->kernels);
	names_free(&a->sys);
	names_free(&a->nvtx);
	names_free(&a->gpu_kern);
	names_free(&a->gpu_mem);
	stats__free(&a->gpu_other.st);
	for (size_t i = 0; i < a->nprocs; i++) {
		free(a->procs[i]->comm);
		free(a->procs[i]);
	}
	free(a->procs);
}

/* The API function a slice name is, as lib << 16 | func; -1 if none. */
static int64_t api_func(struct acc *a, const char *name)
{
	uint64_t *v;
	int64_t lf = -1;

	/* A trace is mostly the same few calls: the last answer first. */
	if (a->last_fn[0] && !strcmp(a->last_fn, name))
		return a->last_lf;
	v = hmap__get(&a->api_fn, hash__bytes(name, strlen(name)));
	/* The hash stands for the name: check it. */
	if (v && !strcmp(apilib__get((*v - 1) >> 16)->symbol((*v - 1) & 0xffff), name))
		lf = *v - 1;
	if (strlen(name) < sizeof(a->last_fn)) {
		strcpy(a->last_fn, name);
		a->last_lf = lf;
	}
	return lf;
}

static bool other_call(const struct acc *a, const char *name);

static struct tk *track_of(struct acc *a, uint32_t machine, uint64_t uuid)
{
	uint64_t key = key_of(machine, uuid), *v;

	if (a->last_tk && a->last_tk_key == key)
		return a->last_tk;
	v = hmap__get(&a->tracks, key);
	if (!v)
		return NULL;
	a->last_tk = (struct tk *)(uintptr_t)*v;
	a->last_tk_key = key;
	return a->last_tk;
}

static bool starts(const char *s, const char *prefix)
{
	return !strncmp(s, prefix, strlen(prefix));
}

static bool ends(const char *s, const char *suffix)
{
	size_t n = s ? strlen(s) : 0, m = strlen(suffix);

	return n >= m && !strcmp(s + n - m, suffix);
}

/* The kind of t's parent track, read before t (writers describe a parent
 * first); TK_OTHER when not known. */
static enum tk_kind parent_kind(struct acc *a, const struct tread_track *t)
{
	uint64_t *v = hmap__get(&a->tracks, key_of(t->machine, t->parent));

	return v ? ((const struct tk *)(uintptr_t)*v)->kind : TK_OTHER;
}

/* "GPU 3" or "GPU 3: NAME" (user/sources/gpu/gpupf.c; GPUs 0 to 255): the name after
 * ": " ("" if none), the index in *dev; NULL if name is no GPU track's. */
static const char *gpu_device(const char *name, uint32_t *dev)
{
	unsigned v;
	int n = 0;

	if (sscanf(name, "GPU %u%n", &v, &n) != 1 || !n || v > 255 ||
	    (name[n] && strncmp(name + n, ": ", 2)))
		return NULL;
	if (dev)
		*dev = v;
	return name[n] ? name + n + 2 : "";
}

/* "NCCL comm 3fa2 rank 1/4" (user/sources/nccl/ncclpf.c): the id and
 * the rank and size, -1 when "?" or when the id is a handle ("(0x...)":
 * no id shared by the ranks). Renamed when a rank or size was learned
 * late. 0 or -ENOMEM. */
static int nccl_comm_track(struct tk *k, const char *name)
{
	char id[64], r[16], n[16];

	k->rank = k->nranks = -1;
	/* "NCCL comm 3fa2 rank 1/4", or the plugin's "NCCL 908d rank 2/4: GPU ..." */
	if (sscanf(name, "NCCL comm %63s rank %15[^/]/%15[^:]", id, r, n) != 3 &&
	    sscanf(name, "NCCL %63s rank %15[^/]/%15[^:]", id, r, n) != 3)
		return 0;
	free(k->comm);
	k->comm = strdup(id);
	if (!k->comm)
		return -ENOMEM;
	if (id[0] != '(' && r[0] != '?' && n[0] != '?') {
		k->rank = atoi(r);
		k->nranks = atoi(n);
	}
	return 0;
}

static int on_track(void *ctx, const struct tread_track *t)
{
	struct acc *a = ctx;
	struct tk *k = track_of(a, t->machine, t->uuid);
	enum tk_kind kind = TK_OTHER;

	if (t->machine >= a->machines)
		a->machines = t->machine + 1;
	switch (t->kind) {
	case TREAD_TRACK_PROCESS:
		kind = TK_PROCESS;
		break;
	case TREAD_TRACK_THREAD:
		kind = TK_THREAD;
		break;
	case TREAD_TRACK_COUNTER:
		if (!strcmp(t->name, "GPU memory (cuMemAlloc)"))
			kind = TK_CTR_GPU;
		else if (!strcmp(t->name, "Pinned host memory (cuMemAllocHost)"))
			kind = TK_CTR_PINNED;
		break;
	case TREAD_TRACK_PLAIN:
		if (starts(t->description, "CUPTI stream "))
			kind = TK_GPU_LANE;
		else if (starts(t->name, "NVTX ranges "))
			kind = TK_NVTX_RANGES;
		else if (gpu_device(t->name, NULL))
			kind = TK_GPU_DEV;
		else if (starts(t->name, "CUDA synchronization"))
			kind = TK_GPU_SYNC;
		else if (!strcmp(t->name, "GPU activity (CUPTI)"))
			kind = TK_GPU_INFO;
		else if (!strcmp(t->name, "GPU (estimate from API calls)"))
			kind = TK_EST_GROUP;
		else if (starts(t->name, "NCCL comm "))
			kind = TK_NCCL_COMM;
		else if (starts(t->name, "NCCL ") && ends(t->name, ": GPU (NCCL profiler)"))
			kind = TK_NCCL_GPU;
		else if (starts(t->name, "channel ") && t->parent && parent_kind(a, t) == TK_NCCL_GPU)
			kind = TK_NCCL_GPU_CH;
		else if (t->parent)
			kind = TK_EST_STREAM;	/* checked below: its parent's kind */
		break;
	}
	if (!k) {
		k = calloc(1, sizeof(*k));
		if (!k || hmap__put(&a->tracks, key_of(t->machine, t->uuid), (uintptr_t)k)) {
			free(k);
			return -ENOMEM;
		}
	}
	k->kind = kind;
	k->parent = t->parent ? key_of(t->machine, t->parent) : 0;
	k->tid = t->tid;
	k->pid = t->pid;
	if (kind >= TK_GPU_DEV) {
		/* user/sources/gpu/gpupf.c, user/sources/gpu/gpuest.c: under the
		 * process track, or under the estimate group. */
		uint64_t *pv = k->parent ? hmap__get(&a->tracks, k->parent) : NULL;
		const struct tk *pt = pv ? (const struct tk *)(uintptr_t)*pv : NULL;

		k->pid = pt && pt->proc ? pt->proc->pid : pt ? pt->pid : 0;
		if (kind == TK_EST_STREAM && (!pt || pt->kind != TK_EST_GROUP))
			k->kind = TK_OTHER;
	}
	if ((kind == TK_NCCL_COMM || kind == TK_NCCL_GPU) && nccl_comm_track(k, t->name))
		return -ENOMEM;
	if (kind == TK_NCCL_GPU_CH)
		k->device = (uint32_t)atoi(t->name + strlen("channel "));
	if (kind == TK_GPU_DEV) {
		const char *name = gpu_device(t->name, &k->device);

		gpu__replay_device(a->g, k->pid, (uint8_t)k->device, name);
	}
	if (kind == TK_PROCESS) {
		/* Re-described when renamed: the latest name, as record's. */
		const char *comm = t->name;
		char *c;

		if (!k->proc) {
			if (a->nprocs == a->capprocs) {
				size_t nc = a->capprocs ? a->capprocs * 2 : 16;
				struct proc_row **n = realloc(a->procs, nc * sizeof(*n));

				if (!n)
					return -ENOMEM;
				a->procs = n;
				a->capprocs = nc;
			}
			k->proc = calloc(1, sizeof(*k->proc));
			if (!k->proc)
				return -ENOMEM;
			a->procs[a->nprocs++] = k->proc;
		}
		/* A container's process is named "comm [container ID]". */
		c = strndup(comm, strstr(comm, " [container ") ? (size_t)(strstr(comm, " [container ") - comm) :
							      strlen(comm));
		if (!c)
			return -ENOMEM;
		free(k->proc->comm);
		k->proc->comm = c;
		k->proc->pid = t->pid;
	}
	return 0;
}

static const struct tread_arg *arg(const struct tread_arg *args, int n, const char *name)
{
	for (int i = 0; i < n; i++)
		if (!strcmp(args[i].name, name))
			return &args[i];
	return NULL;
}

static uint64_t arg_u(const struct tread_arg *args, int n, const char *name)
{
	const struct tread_arg *x = arg(args, n, name);

	return x && (x->type == TREAD_A_UINT || x->type == TREAD_A_PTR) ? x->u : 0;
}

static int on_event(void *ctx, const struct tread_event *e)
{
	struct acc *a = ctx;
	struct tk *k = track_of(a, e->machine, e->track);

	if (!k)
		return 0;
	if (e->type == TREAD_COUNTER && (k->kind == TK_CTR_GPU || k->kind == TK_CTR_PINNED)) {
		struct tk *p = NULL;
		uint64_t *v = k->parent ? hmap__get(&a->tracks, k->parent) : NULL;

		if (v)
			p = (struct tk *)(uintptr_t)*v;
		if (p && p->proc && e->value > 0 &&
		    (uint64_t)e->value > p->proc->peak[k->kind == TK_CTR_PINNED])
			p->proc->peak[k->kind == TK_CTR_PINNED] = e->value;
		return 0;
	}
	if (k->kind == TK_GPU_INFO && e->type == TREAD_INSTANT) {
		const struct tread_arg *d = arg(e->args, e->nargs, "detail"),
				       *l = arg(e->args, e->nargs, "library");

		gpu__replay_status(a->g, k->pid, e->name, d && d->type == TREAD_A_STR ? d->s : "",
				   l && l->type == TREAD_A_STR ? l->s : NULL);
		return 0;
	}
	if (k->kind != TK_THREAD)
		return 0;
	if (e->type == TREAD_INSTANT) {
		if (arg(e->args, e->nargs, "domain"))
			a->marks++;
		return 0;
	}
	if (e->type == TREAD_SLICE_BEGIN) {
		bool api = !*e->category && api_func(a, e->name) >= 0;
		bool call = api || (!*e->category && other_call(a, e->name));

		if (k->depth == k->cap) {
			int nc = k->cap ? k->cap * 2 : 16;
			uint8_t *n = realloc(k->api, nc);

			if (!n)
				return -ENOMEM;
			k->api = n;
			k->cap = nc;
		}
		k->api[k->depth++] = api | call << 1;
		k->api_open += api;
		k->calls_open += call;
		/* A launch: its GPU operations end its flow (user/sources/gpu/gpu.c). */
		if (api && e->nflow_out && flows_put(&a->flows, e->flow_out[0], e->ts, k->tid))
			return -ENOMEM;
	} else if (e->type == TREAD_SLICE_END && k->depth) {
		uint8_t was = k->api[--k->depth];

		k->api_open -= was & 1;
		k->calls_open -= was >> 1;
		k->last_inside = k->api_open > 0;
		k->last_outer = !k->calls_open;
	}
	return 0;
}

static void api_call(struct acc *a, struct tk *k, const struct tread_slice *s, int64_t lf)
{
	int l = lf >> 16, f = lf & 0xffff;
	uint64_t dur = s->end_ts - s->ts;
	bool ok = !arg(s->end_args, s->nend_args, "result");
	const struct tread_arg *x;

	if (arg(s->end_args, s->nend_args, "return_lost"))
		return;
	if (k->last_inside) {
		stats__add(&a->inner[l][f], dur);
		return;
	}
	stats__add(&a->api[l][f], dur);
	if (arg(s->args, s->nargs, "launch")) {
		const char *kn = "(unnamed: loaded before cgbpf attached)";
		struct named *r;

		a->launches++;
		x = arg(s->args, s->nargs, "kernel");
		if (x && x->type == TREAD_A_STR && !starts(x->s, "unnamed 0x"))
			kn = x->s;
		else
			a->unnamed++;
		r = a->last_kernel && !strcmp(a->last_kernel->name, kn) ? a->last_kernel :
			named_get(&a->kernels, kn, NULL);
		a->last_kernel = r;
		if (r) {
			r->launches++;
			stats__add(&r->st, dur);
		}
	}
	x = arg(s->args, s->nargs, "kind");
	if (x && x->type == TREAD_A_STR && ok) {
		for (int d = 1; d < SUMTAB_DIRS; d++)
			if (!strcmp(x->s, cuda__dir_name(d))) {
				a->copies[d]++;
				a->copy_bytes[d] += arg_u(s->args, s->nargs, "bytes");
				break;
			}
	} else if (ok && ((l == LIB_CUDA && cuda_funcs[f].cls == CU_C_MEMSET) ||
			  (l == LIB_CUDART && cudart__is_memset(f)))) {
		a->memsets++;
		a->memset_bytes += arg_u(s->args, s->nargs, "bytes");
	}
}

/* python_sites: an outermost call with a Python call site (record's
 * user/sources/python/pysrc.c counts the same calls, at their end). */
static void py_site(struct acc *a, const struct tread_slice *s)
{
	const struct tread_arg *x = arg(s->args, s->nargs, "py");
	struct named *r;

	if (!x || x->type != TREAD_A_STR || !(r = named_get(&a->pysites, x->s, NULL)))
		return;
	r->calls++;
	r->ns += s->end_ts > s->ts ? s->end_ts - s->ts : 0;
	if (arg(s->args, s->nargs, "launch"))
		r->launches++;
}

static void syscall(struct acc *a, const struct tread_slice *s)
{
	const char *name = s->name;
	struct named *r;
	unsigned nr;
	char tail;

	/* Numbers beyond the table are one row in record's summary. */
	if (sscanf(name, "syscall_%u%c", &nr, &tail) == 1 && nr >= NSYSCALLS)
		name = "(numbers beyond the table)";
	r = named_get(&a->sys, name, NULL);
	if (r)
		stats__add(&r->st, s->end_ts - s->ts);
}

static void nvtx_range(struct acc *a, const struct tread_slice *s, const char *style)
{
	const char *domain = *s->category ? s->category : "NVTX";
	struct named *r;
	char *name = NULL;

	if (strcmp(domain, "NVTX") && asprintf(&name, "%s:%s", domain, s->name) < 0)
		return;
	r = named_get(&a->nvtx, name ? name : s->name, style);
	if (r)
		stats__add(&r->st, s->end_ts - s->ts);
	free(name);
}

static void gpu_op(struct acc *a, const struct tread_slice *s)
{
	/* The slice may start later than the operation did (its lane was
	 * full): the summary keeps the true start. */
	uint64_t start = s->ts - arg_u(s->args, s->nargs, "clamped_by_ns");
	uint64_t dur = s->end_ts > start ? s->end_ts - start : 0;
	struct named *r;

	if (arg(s->args, s->nargs, "config")) {
		/* As record: KERNEL_ROWS names, the others in one row. */
		r = named_find(&a->gpu_kern, s->name, NULL);
		if (!r && a->gpu_kern.n < KERNEL_ROWS)
			r = named_get(&a->gpu_kern, s->name, NULL);
		stats__add(r ? &r->st : &a->gpu_other.st, dur);
		return;
	}
	if (!starts(s->name, "[CUDA mem"))
		return;
	r = named_get(&a->gpu_mem, s->name, NULL);
	if (r) {
		stats__add(&r->st, dur);
		stats__add(&r->st2, arg_u(s->args, s->nargs, "bytes"));
	}
}

/* A GPU operation (k: its lane or synchronization track) into the
 * timeline, in file order: the order record wrote them, start order per
 * process. Its launch call is the slice its flow started from. */
static void gpu_replay(struct acc *a, const struct tk *k, const struct tread_slice *s)
{
	struct gpu_replay_op r = { .kind = GPU_RE_SYNC, .start = s->ts, .end = s->end_ts,
				   .kernel = s->name };
	struct flow_slot *x;
	uint64_t flow = 0;

	if (k->kind == TK_GPU_LANE) {
		uint64_t *v = k->parent ? hmap__get(&a->tracks, k->parent) : NULL;
		const struct tk *d = v ? (const struct tk *)(uintptr_t)*v : NULL;

		if (!d || d->kind != TK_GPU_DEV)
			return;
		r.pid = d->pid;
		r.device = (uint8_t)d->device;
		if (arg(s->args, s->nargs, "config"))
			r.kind = GPU_RE_KERNEL;
		else if (arg(s->args, s->nargs, "memory"))
			r.kind = GPU_RE_MEMSET;
		else if (arg(s->args, s->nargs, "kind"))
			r.kind = GPU_RE_COPY;
		else
			return;
		r.start = s->ts - arg_u(s->args, s->nargs, "clamped_by_ns");
		r.clamped = arg(s->args, s->nargs, "clamped_by_ns") != NULL;
		flow = s->nflow_end ? s->flow_end[0] : s->flow_in ? s->flow_in :
		       s->nflow_out ? s->flow_out[0] : 0;
	} else {
		r.pid = k->pid;
	}
	if (flow && (x = flows_get(&a->flows, flow))) {
		r.call_ts = x->ts;
		r.tid = x->tid;
		r.first = x->state == 1;
		a->flows.waiting -= x->state == 1;
		/* A kernel launch's one kernel closes its flow: its slot is free. */
		x->state = s->nflow_end ? 0 : 2;
	}
	a->gpu_ops++;
	gpu__replay_op(a->g, &r);
}

static int nccl_func(const struct acc *a, const char *name);

/* Whether a slice name is a call of NCCL or NVTX (a traced library's
 * function that is not the driver's or the runtime's). */
static bool other_call(const struct acc *a, const char *name)
{
	uint64_t *v = hmap__get(&a->other_fn, hash__bytes(name, strlen(name)));
	const struct api_lib *lib;

	if (!v)
		return false;
	lib = apilib__get(*v >> 16);
	return lib && !strcmp(lib->symbol(*v & 0xffff), name);
}

static int nccl_func(const struct acc *a, const char *name)
{
	uint64_t *v = hmap__get(&a->nccl_fn, hash__bytes(name, strlen(name)));

	return v && !strcmp(nccl_funcs[*v - 1].name, name) ? (int)(*v - 1) : -1;
}

/* The communicator size in a "comm" arg ("3fa2 rank 1/4"); -1: unknown. */
static int comm_nranks(const struct tread_slice *s)
{
	const struct tread_arg *c = arg(s->args, s->nargs, "comm");
	const char *slash;
	char *end;
	long n;

	if (!c || c->type != TREAD_A_STR || !(slash = strrchr(c->s, '/')))
		return -1;
	n = strtol(slash + 1, &end, 10);
	return end != slash + 1 && !*end && n >= 0 && n <= INT32_MAX ? (int)n : -1;
}

static void nccl_call(struct acc *a, const struct tread_slice *s, int f)
{
	struct sumtab_nccl_op *o = &a->nccl[f];
	uint64_t dur = s->end_ts - s->ts, bytes;
	int nranks;

	if (arg(s->end_args, s->nend_args, "return_lost"))
		return;
	if (arg(s->args, s->nargs, "nested")) {
		a->nccl_nested++;
		return;
	}
	o->calls++;
	if (arg(s->end_args, s->nend_args, "result")) {
		o->errors++;
		return;
	}
	if (!o->transfer)
		return;
	bytes = arg_u(s->args, s->nargs, "bytes");
	o->bytes += bytes;
	if (arg(s->args, s->nargs, "group")) {
		o->grouped++;
		return;
	}
	stats__add(o->time, dur);
	nranks = comm_nranks(s);
	if (nranks < 1) {
		o->unknown_size++;
		return;
	}
	o->bw_time += dur;
	o->size += bytes * ncclbw__size_factor(nccl_funcs[f].coll, nranks);
	o->bus_size += bytes * ncclbw__size_factor(nccl_funcs[f].coll, nranks) *
		       ncclbw__bus_factor(nccl_funcs[f].coll, nranks);
}

/* The host of the capture being read (machine of a merged trace). */
static const char *host_of(const struct acc *a, uint32_t machine)
{
	uint64_t *v = hmap__get(&a->hosts, (uint64_t)a->file << 32 | machine);

	return v ? (const char *)(uintptr_t)*v : "";
}

/* A collective, send or receive on a communicator's track. */
static int nccl_op(struct acc *a, const struct tk *k, const struct tread_slice *s)
{
	const struct tread_arg *peer = arg(s->args, s->nargs, "peer");
	struct straggle_op op = {
		.host = host_of(a, s->machine), .comm = k->comm ? k->comm : "",
		.rank = k->comm ? k->rank : -1, .nranks = k->nranks, .pid = k->pid,
		.name = s->name, .seq = arg_u(s->args, s->nargs, "seq"), .peer = -1,
		.recv = !strcmp(s->name, "ncclRecv"), .ts = s->ts, .end = s->end_ts,
	};

	if ((op.recv || !strcmp(s->name, "ncclSend")) && peer && peer->type == TREAD_A_INT)
		op.peer = (int)peer->i;
	else if (op.recv || !strcmp(s->name, "ncclSend"))
		op.seq = 0;	/* a send without its peer: not matched */
	else if (op.rank < 0)	/* older than the capture: aligned at the end */
		return stragalign__op(a->align, &op, arg_u(s->args, s->nargs, "bytes"));
	return straggle__add(a->strag, &op);
}

/* A channel span of NCCL's profiler plugin: channel 0's (every lane of
 * it) is the rank's entry into the operation on the GPU, numbered as
 * record numbers it (gpunccl__strag_seq). */
static int nccl_gpu_op(struct acc *a, const struct tk *k, const struct tread_slice *s)
{
	uint64_t *pv = k->parent ? hmap__get(&a->tracks, k->parent) : NULL;
	const struct tk *g = pv ? (const struct tk *)(uintptr_t)*pv : NULL;
	const struct tread_arg *peer = arg(s->args, s->nargs, "peer");
	unsigned func = gpunccl__func_of(s->name);
	bool p2p = func == GPU_NF_SEND || func == GPU_NF_RECV;
	char name[32];
	struct straggle_op op = {
		.host = host_of(a, s->machine), .comm = g && g->comm ? g->comm : "",
		.rank = g && g->comm ? g->rank : -1, .nranks = g ? g->nranks : -1, .pid = k->pid,
		.name = name, .seq = gpunccl__strag_seq(func, arg_u(s->args, s->nargs, "seq")),
		.peer = -1, .recv = func == GPU_NF_RECV, .ts = s->ts, .end = s->end_ts,
		.how = "nccl_seq",
	};

	if (k->device != 0 || !g)
		return 0;
	snprintf(name, sizeof(name), "nccl%s", s->name);
	if (p2p && peer && peer->type == TREAD_A_INT)
		op.peer = (int)peer->i;
	else if (p2p)
		op.seq = 0;
	/* nccl_sum's GPU-side time of the operation, as record adds it. */
	if (ncclbw__gpu_add(&a->nccl_gpu, ncclbw__fn_of_op(s->name), s->end_ts - s->ts,
			    arg_u(s->args, s->nargs, "bytes"), g->nranks))
		return -ENOMEM;
	return straggle__add(a->strag_gpu, &op);
}

static int on_slice(void *ctx, const struct tread_slice *s)
{
	struct acc *a = ctx;
	struct tk *k = track_of(a, s->machine, s->track);
	int64_t lf;

	if (!k || !s->ended)
		return 0;
	switch (k->kind) {
	case TK_THREAD:
		if (!strcmp(s->category, "syscall")) {
			syscall(a, s);
		} else if (!*s->category) {
			int nf;

			lf = api_func(a, s->name);
			nf = lf < 0 ? nccl_func(a, s->name) : -1;
			if (lf >= 0)
				api_call(a, k, s, lf);
			else if (nf >= 0)
				nccl_call(a, s, nf);
			if (k->last_outer && (lf >= 0 || nf >= 0 || other_call(a, s->name)))
				py_site(a, s);
		} else if (!strcmp(s->category, "nccl")) {
			if (!strcmp(s->name, "NCCL group")) {
				stats__add(&a->nccl_groups, s->end_ts - s->ts);
				a->nccl_group_ops += arg_u(s->end_args, s->nend_args, "operations");
				a->nccl_group_bytes += arg_u(s->end_args, s->nend_args, "bytes");
			}
		} else {
			nvtx_range(a, s, "PushPop");
		}
		break;
	case TK_NVTX_RANGES:
		nvtx_range(a, s, "StartEnd");
		break;
	case TK_GPU_LANE:
		gpu_op(a, s);
		gpu_replay(a, k, s);
		break;
	case TK_GPU_SYNC:
		gpu_replay(a, k, s);
		break;
	case TK_EST_STREAM:
		gpu__replay_est(a->g, k->pid, key_of(s->machine, s->track), s->end_ts - s->ts,
				arg_u(s->args, s->nargs, "launches"));
		break;
	case TK_NCCL_COMM:
		return nccl_op(a, k, s);
	case TK_NCCL_GPU_CH:
		return nccl_gpu_op(a, k, s);
	default:
		break;
	}
	return 0;
}

static int on_sample(void *ctx, const struct tread_sample *s)
{
	struct acc *a = ctx;
	struct named *r;

	/* As record counts them: those with a stack count by their
	 * innermost frame. */
	a->samples++;
	if (!s->has_stack)
		return 0;
	r = named_get(&a->self, s->leaf, NULL);
	if (!r)
		return -ENOMEM;
	r->calls++;
	return 0;
}

static int on_attr(void *ctx, uint32_t machine, const char *key, const char *value)
{
	struct acc *a = ctx;
	char *end;
	uint64_t v;

	if (!strcmp(key, "cgbpf.syscall_threshold_ns")) {
		/* Written since cgbpf stats exists, as is cgbpf.gpu_processes
		 * when a process used the GPU; older traces get the GPU tables
		 * always. */
		a->gpu_known = true;
		if (!strcmp(value, "off")) {
			/* Several traces: counted where any traced them. */
			if (a->threshold == SUMTAB_UNKNOWN)
				a->threshold = UINT64_MAX;
			return 0;
		}
		errno = 0;
		v = strtoull(value, &end, 10);
		if (!errno && !*end && end != value && v < SUMTAB_UNKNOWN &&
		    (a->threshold >= SUMTAB_UNKNOWN || v < a->threshold))
			a->threshold = v;
	} else if (!strcmp(key, "cgbpf.sample_hz") || !strcmp(key, "cgbpf.sample_cpus")) {
		unsigned *to = !strcmp(key, "cgbpf.sample_hz") ? &a->sample_hz : &a->sample_cpus;
		unsigned long n = strtoul(value, &end, 10);

		if (*to && *to != n)
			a->sample_mixed = true;
		*to = (unsigned)n;
	} else if (!strcmp(key, "cgbpf.nccl_newer")) {
		unsigned pid;
		int at = 0;

		if (sscanf(value, "%u %n", &pid, &at) == 1 && at &&
		    stragalign__newer(a->align, host_of(a, machine), pid, value + at))
			return -ENOMEM;
	} else if (!strcmp(key, "cgbpf.nccl_env")) {
		/* "pid rank world job": a process with communicators older than
		 * the capture (user/lib/stragalign.c). */
		unsigned pid;
		int rank, world, at = 0;

		if (sscanf(value, "%u %d %d %n", &pid, &rank, &world, &at) == 3 && at &&
		    stragalign__env(a->align, host_of(a, machine), pid, rank, world, value + at))
			return -ENOMEM;
	} else if (!strcmp(key, "cgbpf.nccl_comm")) {
		struct sumtab_nccl_comm c;

		if (sscanf(value, "%" SCNx64 " %" SCNx64 " %d %d %u", &c.id, &c.handle, &c.rank,
			   &c.nranks, &c.pid) != 5)
			return 0;
		if (a->ncomms == a->capcomms) {
			size_t nc = a->capcomms ? a->capcomms * 2 : 16;
			struct sumtab_nccl_comm *n = realloc(a->comms, nc * sizeof(*n));

			if (!n)
				return -ENOMEM;
			a->comms = n;
			a->capcomms = nc;
		}
		a->comms[a->ncomms++] = c;
	} else if (!strcmp(key, "cgbpf.hostname")) {
		uint64_t k = (uint64_t)a->file << 32 | machine;
		char *h = strdup(value);

		if (!h)
			return -ENOMEM;
		if (hmap__del(&a->hosts, k, &v))
			free((void *)(uintptr_t)v);
		if (hmap__put(&a->hosts, k, (uintptr_t)h)) {
			free(h);
			return -ENOMEM;
		}
		/* Files of one host, or one merged file: the clocks agree. */
		if (!machine && !a->first_host && !(a->first_host = strdup(value)))
			return -ENOMEM;
		else if (!machine && a->file && strcmp(a->first_host, value))
			a->hosts_differ = true;
	} else if (!strcmp(key, "cgbpf.gpu_processes")) {
		a->gpu = true;
	} else if (!strcmp(key, "cgbpf.gpu_process") || !strcmp(key, "cgbpf.gpu_batches")) {
		gpu__replay_attr(a->g, key, value);
	} else if (!strcmp(key, "cgbpf.nvtx_unmatched")) {
		errno = 0;
		v = strtoull(value, &end, 10);
		if (!errno && !*end && end != value) {
			a->nvtx_unmatched = (a->nvtx_unmatched < 0 ? 0 : a->nvtx_unmatched) + v;
			a->nvtx_traced = true;
		}
	}
	return 0;
}

/* ---------------------------------------------------------------- output */

static struct sumtab_row *api_rows(struct acc *a, struct stats *const tab[LIB__COUNT], int *n)
{
	static const uint8_t libs[] = { LIB_CUDART, LIB_CUDA };
	struct sumtab_row *rows;
	int cap = 0;

	*n = 0;
	for (size_t j = 0; j < sizeof(libs); j++)
		cap += a->nfuncs[libs[j]];
	rows = calloc(cap ? cap : 1, sizeof(*rows));
	if (!rows)
		return NULL;
	for (size_t j = 0; j < sizeof(libs); j++) {
		int l = libs[j];

		for (int f = 0; tab[l] && f < a->nfuncs[l]; f++)
			if (tab[l][f].n)
				rows[(*n)++] = (struct sumtab_row){ .name = apilib__get(l)->symbol(f),
								    .st = &tab[l][f] };
	}
	return rows;
}

/* cuda_api_sum (with its inner calls' table when with_inner) or
 * cuda_api_inner_sum, as r says; 0 or -ENOMEM. */
static int print_api(struct acc *a, enum report r, enum sumtab_fmt fmt, bool with_inner, FILE *f)
{
	struct sumtab_row *rows, *inner;
	int n = 0, ni = 0, err = 0;

	rows = api_rows(a, a->api, &n);
	inner = api_rows(a, a->inner, &ni);
	if (!rows || !inner)
		err = -ENOMEM;
	else if (r == R_API)
		sumtab__api(f, fmt, rows, n, inner, with_inner ? ni : 0);
	else
		sumtab__api_inner(f, fmt, rows, n, inner, ni);
	free(rows);
	free(inner);
	return err;
}

/* cuda_kern_launch_sum; 0 or -ENOMEM. */
static int print_launches(struct acc *a, enum sumtab_fmt fmt, FILE *f)
{
	struct sumtab_kernel *ks = calloc(a->kernels.n ? a->kernels.n : 1, sizeof(*ks));
	size_t nk = 0;
	uint64_t v;

	if (!ks)
		return -ENOMEM;
	for (size_t it = 0; hmap__next(&a->kernels.map, &it, NULL, &v);) {
		struct named *k = (struct named *)(uintptr_t)v;

		ks[nk++] = (struct sumtab_kernel){ .name = k->name, .launches = k->launches,
						   .avg_api = k->st.mean };
	}
	sumtab__kernels(f, fmt, ks, nk, a->launches, a->unnamed);
	free(ks);
	return 0;
}

/* cuda_mem_peak; 0 or -ENOMEM. */
static int print_peak(struct acc *a, enum sumtab_fmt fmt, FILE *f)
{
	struct sumtab_peak *ps = calloc(a->nprocs ? a->nprocs : 1, sizeof(*ps));

	if (!ps)
		return -ENOMEM;
	for (size_t i = 0; i < a->nprocs; i++)
		ps[i] = (struct sumtab_peak){ .pid = a->procs[i]->pid,
					      .comm = a->procs[i]->comm ? a->procs[i]->comm : "",
					      .gpu = a->procs[i]->peak[0],
					      .pinned = a->procs[i]->peak[1] };
	sumtab__peak(f, fmt, ps, a->nprocs);
	free(ps);
	return 0;
}

/* cuda_gpu_kern_sum, the kernels past the names kept as one row; 0 or
 * -ENOMEM. */
static int print_gpu_kern(struct acc *a, enum sumtab_fmt fmt, FILE *f)
{
	int n = 0;
	struct sumtab_row *rows = names_rows(&a->gpu_kern, false, &n);

	if (!rows)
		return -ENOMEM;
	if (a->gpu_other.st.n) {
		struct sumtab_row *m = realloc(rows, (n + 1) * sizeof(*rows));

		if (!m) {
			free(rows);
			return -ENOMEM;
		}
		rows = m;
		rows[n++] = (struct sumtab_row){
			.name = "(other kernels: more names than the summary keeps)",
			.st = &a->gpu_other.st };
	}
	sumtab__gpu_kern(f, fmt, rows, n);
	free(rows);
	return 0;
}

/* cpu_samples, under the sampling rate in text; 0 or -ENOMEM. */
static int print_samples(struct acc *a, enum sumtab_fmt fmt, FILE *f)
{
	struct sumtab_self *ss = calloc(a->self.n ? a->self.n : 1, sizeof(*ss));
	size_t ns = 0;
	uint64_t v;

	if (!ss)
		return -ENOMEM;
	for (size_t it = 0; hmap__next(&a->self.map, &it, NULL, &v);) {
		const struct named *x = (const struct named *)(uintptr_t)v;

		ss[ns++] = (struct sumtab_self){ .name = x->name, .n = x->calls };
	}
	if (fmt == SUMTAB_TEXT) {
		fprintf(f, "\n** CPU samples (cpu_samples):\n\n   %" PRIu64 " samples", a->samples);
		if (a->sample_hz && !a->sample_mixed)
			fprintf(f, " at %u Hz on %u CPU(s)", a->sample_hz, a->sample_cpus);
		fprintf(f, " in the trace\n");
	}
	sumtab__cpu_self(f, fmt, ss, ns, a->samples);
	free(ss);
	return 0;
}

/* python_sites; 0 or -ENOMEM. */
static int print_pysites(struct acc *a, enum sumtab_fmt fmt, FILE *f)
{
	struct sumtab_pysite *ps = calloc(a->pysites.n ? a->pysites.n : 1, sizeof(*ps));
	size_t np = 0;
	uint64_t v;

	if (!ps)
		return -ENOMEM;
	for (size_t it = 0; hmap__next(&a->pysites.map, &it, NULL, &v);) {
		const struct named *x = (const struct named *)(uintptr_t)v;

		ps[np++] = (struct sumtab_pysite){ .site = x->name, .calls = x->calls,
						   .ns = x->ns, .launches = x->launches };
	}
	sumtab__pysites(f, fmt, ps, np);
	free(ps);
	return 0;
}

/* Prints report r; 0 or -ENOMEM. */
static int print_report(struct acc *a, enum report r, enum sumtab_fmt fmt, bool with_inner,
			FILE *f)
{
	struct sumtab_row *rows = NULL;
	int n = 0;

	switch (r) {
	case R_API:
	case R_API_INNER:
		return print_api(a, r, fmt, with_inner, f);
	case R_KERN_LAUNCH:
		return print_launches(a, fmt, f);
	case R_API_MEM:
		sumtab__api_mem(f, fmt, a->copies, a->copy_bytes, a->memsets, a->memset_bytes);
		break;
	case R_PEAK:
		return print_peak(a, fmt, f);
	case R_NCCL: {
		struct sumtab_nccl t = { .ops = a->nccl, .nops = NC_FN__COUNT,
					 .groups = &a->nccl_groups, .group_ops = a->nccl_group_ops,
					 .group_bytes = a->nccl_group_bytes, .nested = a->nccl_nested,
					 .comms = a->comms, .ncomms = a->ncomms };

		for (int i = 0; a->nccl_gpu && i < NC_FN__COUNT; i++)
			a->nccl[i].gpu = &a->nccl_gpu->fn[i];
		sumtab__nccl(f, fmt, &t);
		break;
	}
	case R_NCCL_STRAG:
		if (a->hosts_differ) {
			if (fmt == SUMTAB_TEXT)
				fprintf(f, "\n** %s (%s):\n\n", reports[r].title, reports[r].name);
			fprintf(f, "   not computed: these traces come from different hosts, whose "
				   "clocks differ; merge them first (cgbpf merge -o all.perfetto-trace "
				   "FILE...), which aligns the clocks, and run stats on the merged trace\n");
			return 0;
		}
		if (stragalign__feed(a->align, a->strag))
			return -ENOMEM;
		return straggle__print(a->strag, fmt, f);
	case R_NCCL_STRAG_GPU:
		if (a->hosts_differ) {
			if (fmt == SUMTAB_TEXT)
				fprintf(f, "\n** %s (%s):\n\n", reports[r].title, reports[r].name);
			fprintf(f, "   not computed: these traces come from different hosts; merge "
				   "them first (cgbpf merge), and run stats on the merged trace\n");
			return 0;
		}
		return straggle__print(a->strag_gpu, fmt, f);
	case R_NCCL_STRAG_ACT: {
		struct straggle_named nm;
		bool named;

		if (stragalign__feed(a->align, a->strag))
			return -ENOMEM;
		named = !a->hosts_differ && straggle__finish(a->strag, &nm);

		return stragact__print(named ? &nm : NULL, a->paths, a->npaths, fmt, f) ? -ENOMEM : 0;
	}
	case R_NVTX:
		rows = names_rows(&a->nvtx, false, &n);
		if (!rows)
			return -ENOMEM;
		sumtab__nvtx(f, fmt, rows, n, a->marks, a->nvtx_unmatched);
		break;
	case R_OSRT:
		rows = names_rows(&a->sys, false, &n);
		if (!rows)
			return -ENOMEM;
		sumtab__osrt(f, fmt, rows, n, a->threshold);
		break;
	case R_GPU_KERN:
		return print_gpu_kern(a, fmt, f);
	case R_GPU_MEM_TIME:
	case R_GPU_MEM_SIZE:
		rows = names_rows(&a->gpu_mem, r == R_GPU_MEM_SIZE, &n);
		if (!rows)
			return -ENOMEM;
		if (r == R_GPU_MEM_TIME)
			sumtab__gpu_mem_time(f, fmt, rows, n);
		else
			sumtab__gpu_mem_size(f, fmt, rows, n);
		break;
	case R_SAMPLES:
		return print_samples(a, fmt, f);
	case R_PY_SITES:
		return print_pysites(a, fmt, f);
	case R_GPU_UTIL:
		gpu__print_timeline(a->g, fmt, f);
		break;
	case R_GPU_PROCS:
		for (size_t i = 0; i < a->nprocs; i++)
			gpu__replay_comm(a->g, a->procs[i]->pid,
					 a->procs[i]->comm ? a->procs[i]->comm : "");
		gpu__print_procs(a->g, fmt, f);
		break;
	default:
		break;
	}
	free(rows);
	return 0;
}

static const char usage[] =
"Usage: cgbpf stats [options] FILE.perfetto-trace...\n"
"\n"
"Prints the summary tables `cgbpf record` prints at its end, computed from\n"
"saved traces alone (several files, merged ones too: one set of tables over\n"
"all of them). The numbers equal those record printed for the same run.\n"
"\n"
"Options:\n"
"  -r, --report NAME[,NAME...]  only these tables, in this order ('--report\n"
"                               list' lists them); default: all\n"
"  -f, --format FMT             table (as record prints it, default), csv or json\n"
"  -o, --output PREFIX          write each table to PREFIX_NAME.txt / .csv / .json\n"
"                               instead of standard output\n"
"  -h, --help                   this help\n"
"\n"
"Tables: cuda_api_sum, cuda_api_inner_sum, cuda_kern_launch_sum,\n"
"cuda_api_mem_size_sum, cuda_mem_peak, nccl_sum, nccl_stragglers,\n"
"nccl_stragglers_gpu, nvtx_sum, osrt_sum, python_sites, cuda_gpu_kern_sum,\n"
"cuda_gpu_mem_time_sum, cuda_gpu_mem_size_sum, cuda_gpu_util, cuda_gpu_procs;\n"
"nccl_straggler_activity only when asked (man -l docs/cgbpf-stats.1).\n"
"\n"
"Examples:\n"
"  cgbpf stats run.perfetto-trace\n"
"  cgbpf stats --report cuda_api_sum,cuda_gpu_kern_sum --format csv run.perfetto-trace\n"
"  cgbpf stats --format json -o report rank0.perfetto-trace rank1.perfetto-trace\n";

static int usage_error(const char *fmt, const char *arg)
{
	fprintf(stderr, "cgbpf stats: ");
	fprintf(stderr, fmt, arg);
	fprintf(stderr, "\nRun 'cgbpf stats --help' for the options.\n");
	return 2;
}

static void list_reports(FILE *f)
{
	for (int r = 0; r < R__COUNT; r++)
		fprintf(f, "  %-24s %s\n", reports[r].name, reports[r].title);
}

/* Parses a --report list into order[]; the count, or -1 after a message. */
static int parse_reports(const char *list, enum report *order)
{
	char *copy = strdup(list), *save = NULL;
	int n = 0;

	if (!copy)
		return -1;
	for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		int r;

		for (r = 0; r < R__COUNT && strcmp(tok, reports[r].name); r++)
			;
		if (r == R__COUNT) {
			fprintf(stderr, "cgbpf stats: unknown report '%s'; the reports are:\n", tok);
			list_reports(stderr);
			free(copy);
			return -1;
		}
		for (int i = 0; i < n; i++)
			if (order[i] == (enum report)r)
				goto next;
		order[n++] = r;
next:;
	}
	free(copy);
	if (!n) {
		fprintf(stderr, "cgbpf stats: --report needs at least one name; the reports are:\n");
		list_reports(stderr);
		return -1;
	}
	return n;
}

/* Whether record would have printed report r for these traces. */
static bool shown(const struct acc *a, enum report r)
{
	if (r == R_NCCL) {
		for (int f = 0; f < NC_FN__COUNT; f++)
			if (a->nccl[f].calls)
				return true;
		return a->nccl_nested > 0 || (a->nccl_gpu && a->nccl_gpu->ops);
	}
	if (r == R_NCCL_STRAG)
		return straggle__any(a->strag) || stragalign__held(a->align);
	if (r == R_NCCL_STRAG_GPU)
		return straggle__any(a->strag_gpu);
	if (r == R_NCCL_STRAG_ACT)
		return false;	/* a second read of the traces: when asked */
	if (r == R_NVTX)
		return a->nvtx_traced || a->nvtx.n || a->marks;
	if (r == R_GPU_KERN || r == R_GPU_MEM_TIME || r == R_GPU_MEM_SIZE)
		return a->gpu || !a->gpu_known || a->gpu_kern.n || a->gpu_mem.n;
	if (r == R_GPU_UTIL)
		return a->gpu_ops > 0;
	if (r == R_PY_SITES)
		return a->pysites.n > 0;
	if (r == R_SAMPLES)
		return a->samples > 0;
	if (r == R_GPU_PROCS)
		return gpu__procs(a->g) > 0;
	return true;
}

/* What stats takes from a trace. */
static const struct tread_ops stats_ops = {
	.track = on_track,
	.event = on_event,
	.slice = on_slice,
	.attr = on_attr,
	.sample = on_sample,
};

int tstats__mem(const void *buf, size_t len, int fmt, FILE *f)
{
	struct acc a;
	int err = acc_init(&a);

	if (!err)
		err = tread__run_mem(buf, len, "trace", &stats_ops, &a, NULL);
	if (!err)
		gpu__replay_end(a.g);
	for (int r = 0; !err && r < R__COUNT; r++)
		err = print_report(&a, r, fmt, r == R_API, f);
	acc_free(&a);
	return err;
}

/* The options of cgbpf stats. */
struct stats_opts {
	enum report order[R__COUNT];	/* the reports to print, in order */
	int nrep;
	bool all;			/* no --report: those record would print */
	bool has_api;			/* cuda_api_sum among them */
	enum sumtab_fmt fmt;
	const char *prefix;		/* --output, or NULL for stdout */
	char **files;			/* the traces */
	int nfiles;
};

/* Parses the options of cgbpf stats into so; 0, 1 when done (--help,
 * --report list), or 2 after a usage message. */
static int stats_args(int argc, char **argv, struct stats_opts *so)
{
	static const struct option opts[] = {
		{ "report", required_argument, NULL, 'r' },
		{ "format", required_argument, NULL, 'f' },
		{ "output", required_argument, NULL, 'o' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	int c;

	so->fmt = SUMTAB_TEXT;
	so->all = true;
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":r:f:o:h", opts, NULL)) != -1) {
		switch (c) {
		case 'r':
			if (!strcmp(optarg, "list") || !strcmp(optarg, "help")) {
				list_reports(stdout);
				return 1;
			}
			so->nrep = parse_reports(optarg, so->order);
			if (so->nrep < 0)
				return 2;
			so->all = false;
			break;
		case 'f':
			if (!strcmp(optarg, "table"))
				so->fmt = SUMTAB_TEXT;
			else if (!strcmp(optarg, "csv"))
				so->fmt = SUMTAB_CSV;
			else if (!strcmp(optarg, "json"))
				so->fmt = SUMTAB_JSON;
			else
				return usage_error("--format: '%s' is not table, csv or json", optarg);
			break;
		case 'o':
			if (!*optarg)
				return usage_error("--output: an empty prefix%s", "");
			so->prefix = optarg;
			break;
		case 'h':
			fputs(usage, stdout);
			return 1;
		case ':':
			return usage_error("option '%s' needs a value", argv[optind - 1]);
		default:
			return usage_error("unknown option '%s'", argv[optind - 1]);
		}
	}
	if (optind >= argc)
		return usage_error("no trace file given%s", "");
	so->files = argv + optind;
	so->nfiles = argc - optind;
	if (so->all)
		for (so->nrep = 0; so->nrep < R__COUNT; so->nrep++)
			so->order[so->nrep] = so->nrep;
	for (int i = 0; i < so->nrep; i++)
		so->has_api |= so->order[i] == R_API;
	return 0;
}

/* Reads the n traces at paths into a; 0, or the first failure's -errno
 * (after a message when out of memory). */
static int read_traces(struct acc *a, char *const *paths, int n)
{
	a->paths = paths;
	a->npaths = n;
	for (int i = 0; i < n; i++) {
		struct tread_stats st;
		int err;

		a->file = i;
		err = tread__run(paths[i], &stats_ops, a, &st);

		if (err) {
			if (err == -ENOMEM)
				err("%s: out of memory", paths[i]);
			return err;
		}
		if (st.unmatched_ends)
			dbg("%s: %" PRIu64 " slice ends without a begin", paths[i], st.unmatched_ends);
		/* Flow ids are per capture: another file's are other calls. */
		flows_free(&a->flows);
	}
	return 0;
}

/* Opens PREFIX_NAME.EXT, the file of report r under --output; NULL
 * (after a message when it is the file that failed). *path: its name,
 * for the caller to free. */
static FILE *open_report(const char *prefix, enum report r, enum sumtab_fmt fmt, char **path)
{
	static const char *const ext[] = { "txt", "csv", "json" };
	FILE *f;

	if (asprintf(path, "%s_%s.%s", prefix, reports[r].name, ext[fmt]) < 0) {
		*path = NULL;
		return NULL;
	}
	f = outfile__fopen(*path, OUTFILE_MODE);
	if (!f)
		err("%s: %s", *path, outfile__strerror(errno));
	return f;
}

/* Ends and closes the file at path that open_report() opened; 0, or -1
 * after a message. */
static int close_report(FILE *f, enum sumtab_fmt fmt, const char *path)
{
	bool bad;

	if (fmt == SUMTAB_JSON)
		fputc('\n', f);
	bad = fflush(f) || ferror(f);
	if (fclose(f) || bad) {
		err("writing %s failed: %s", path, strerror(errno));
		return -1;
	}
	return 0;
}

/* Prints the reports so asks for, to stdout or to one file each; 0, or 1
 * after a message. */
/* nccl_stragglers' named rank: what it did before its late entries,
 * after the text report, unless asked for as a report of its own. */
static int strag_activity(void *ctx, const struct straggle_named *n, FILE *f)
{
	struct acc *a = ctx;

	if (!f)
		return a->paths && !a->act_asked ? 0 : -1;
	return stragact__print(n, a->paths, a->npaths, SUMTAB_TEXT, f) ? -ENOMEM : 0;
}

static int print_reports(struct acc *a, const struct stats_opts *so)
{
	int ret = 0;

	for (int i = 0; i < so->nrep; i++)
		a->act_asked |= !so->all && so->order[i] == R_NCCL_STRAG_ACT;
	straggle__activity(a->strag, strag_activity, a);

	if (so->fmt == SUMTAB_JSON && !so->prefix)
		printf("{");
	for (int i = 0, first = 1; i < so->nrep; i++) {
		enum report r = so->order[i];
		FILE *f = stdout;
		char *path = NULL;
		bool inner = so->fmt == SUMTAB_TEXT && r == R_API;
		int err;

		/* In text, cuda_api_sum holds the inner calls' table, as in
		 * record's summary: shown once. */
		if (so->fmt == SUMTAB_TEXT && r == R_API_INNER && so->has_api)
			continue;
		if (so->all && !shown(a, r))
			continue;
		if (so->prefix) {
			f = open_report(so->prefix, r, so->fmt, &path);
			if (!f) {
				free(path);
				return 1;
			}
		} else if (so->fmt == SUMTAB_CSV) {
			printf("\n** %s (%s):\n\n", reports[r].title, reports[r].name);
		} else if (so->fmt == SUMTAB_JSON) {
			printf("%s\n", first ? "" : ",");
			sumtab__json_str(stdout, reports[r].name);
			printf(": ");
		}
		first = 0;
		err = print_report(a, r, so->fmt, inner, f);
		if (f != stdout) {
			if (close_report(f, so->fmt, path))
				ret = 1;
			free(path);
		}
		if (err) {
			err("out of memory");
			return 1;
		}
	}
	if (so->fmt == SUMTAB_JSON && !so->prefix)
		printf("\n}\n");
	if (fflush(stdout) || ferror(stdout)) {
		err("writing the tables failed: %s", strerror(errno));
		ret = 1;
	}
	return ret;
}

int tstats__main(int argc, char **argv)
{
	struct stats_opts so = { 0 };
	struct acc a;
	int ret;

	ret = stats_args(argc, argv, &so);
	if (ret)
		return ret == 1 ? 0 : 2;
	if (acc_init(&a)) {
		err("out of memory");
		acc_free(&a);
		return 1;
	}
	if (read_traces(&a, so.files, so.nfiles)) {
		ret = 1;
	} else {
		gpu__replay_end(a.g);
		ret = print_reports(&a, &so);
	}
	acc_free(&a);
	return ret;
}
