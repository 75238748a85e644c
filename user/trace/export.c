// SPDX-License-Identifier: MIT
/*
 * cgbpf export --format kineto-json: a saved cgbpf trace as the
 * Chrome-trace JSON the PyTorch profiler (Kineto) writes, one file per
 * process, for Holistic Trace Analysis and other Kineto tooling. The
 * facts about the format this follows, with where they come from, and
 * the mapping are in docs/export.md.
 *
 * Two streaming passes over the trace (user/trace/tread.c): the first learns
 * the tracks (processes, threads, GPUs, streams), the clocks, the NCCL
 * rank of each process and which processes have anything to export; the
 * second writes each slice as it comes, so memory is bounded by the
 * number of tracks and processes, never by the number of events (the
 * reader holds only the slices open at once). The metadata HTA reads
 * (distributedInfo, deviceProperties) comes first in each file, before
 * traceEvents: HTA's ijson reader stops at traceEvents, and its rank
 * lookup takes the first `"rank": N` of the file.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "lib/hmap.h"
#include "lib/jsonw.h"
#include "lib/log.h"
#include "lib/outfile.h"
#include "trace/export.h"
#include "trace/tread.h"

#define CLOCK_REALTIME_ID 1
#define CLOCK_BOOTTIME_ID 6
/* NVTX start/end ranges live on per-process async tracks ("NVTX ranges
 * N"), not threads: each becomes a thread of its own in the JSON, with an
 * id no Linux thread has (pid_max is at most 2^22). */
#define NVTX_TID_BASE (1 << 30)
/* Kineto puts GPU rows below the processes' (GenericActivityProfiler.cpp:
 * sortIndex = gpu + kExceedMaxPid). */
#define GPU_SORT_BASE 16777216
#define MAX_COMMS 64		/* (communicator, rank) pairs kept per process */
#define MAX_OUTPUTS 1024	/* files open at once */
#define MAX_DEPTH 4		/* track ancestry that means anything here */
/* The row of a stream's synchronizations: the stream's id plus this, as
 * Kineto places "Stream Sync" events (output_json.h kSyncStreamTidOffset),
 * so they do not overlap the stream's kernels. */
#define SYNC_TID_OFFSET 1000000

enum xkind {
	XK_SKIP,	/* nothing of it is exported */
	XK_PROCESS,
	XK_THREAD,	/* API, NCCL and NVTX push/pop slices */
	XK_DEVICE,	/* "GPU N: name": its streams are under it */
	XK_LANE,	/* "stream S": kernels, copies, memsets */
	XK_NVTX,	/* "NVTX ranges N": NVTX start/end ranges */
	XK_SYNC,	/* "CUDA synchronization": CUPTI's synchronization records */
};

/* What a slice becomes. */
enum xclass {
	XC_NONE,
	XC_RUNTIME,	/* cuda_runtime */
	XC_DRIVER,	/* cuda_driver */
	XC_NCCL,	/* cpu_op */
	XC_NVTX,	/* user_annotation */
	XC_KERNEL,	/* kernel */
	XC_MEMCPY,	/* gpu_memcpy */
	XC_MEMSET,	/* gpu_memset */
	XC_SYNC,	/* cuda_sync */
	XC__COUNT,
};

static const char *const class_cat[XC__COUNT] = {
	[XC_RUNTIME] = "cuda_runtime", [XC_DRIVER] = "cuda_driver", [XC_NCCL] = "cpu_op",
	[XC_NVTX] = "user_annotation", [XC_KERNEL] = "kernel", [XC_MEMCPY] = "gpu_memcpy",
	[XC_MEMSET] = "gpu_memset", [XC_SYNC] = "cuda_sync",
};

struct xproc;

struct xtrack {
	uint32_t machine;
	uint64_t uuid, parent;
	enum tread_track_kind tk;
	int32_t pid, tid;
	char *name, *desc;
	bool classified;
	enum xkind kind;
	struct xproc *proc;
	uint32_t device, stream, context, nvtx;
	uint64_t nslices;	/* slices exported from it */
	uint64_t min_ts;	/* the earliest of their starts */
};

struct xcomm {
	char id[24];
	int32_t rank, nranks;
};

struct xproc {
	uint32_t machine;
	int32_t pid;
	char *name;
	uint64_t nslices;
	uint64_t min_ts;
	struct xcomm comms[MAX_COMMS];
	int ncomm;
	bool selected;
	/* distributedInfo: world > 0 when known; rank -1 when the process
	 * holds several ranks of its largest communicator. */
	int32_t rank, world;
	char comm_id[24];
	int nranks_here;
	/* output */
	char *path;
	FILE *f;
	bool any;		/* an event written (commas) */
	uint64_t counts[XC__COUNT];
	uint64_t unended;
	struct hmap ctx_dev;	/* CUDA context -> its GPU + 1 (from its streams) */
	struct hmap sync_rows;	/* context << 32 | tid of each synchronization row */
};

struct xmach {
	struct hmap tracks;	/* uuid -> struct xtrack * */
	bool snap;		/* a BOOTTIME + REALTIME pair seen */
	uint64_t boot, real;
};

struct xport {
	const char *input;
	const char *output;	/* NULL: next to the input */
	int32_t *pids;
	int npids;
	struct hmap machines;	/* machine -> struct xmach * */
	struct hmap procs;	/* machine << 32 | pid -> struct xproc * */
	struct xtrack **tracks;
	size_t ntracks, cap_tracks;
	bool cgbpf;		/* cgbpf.* attributes seen */
	char version[64];
	int64_t base_real;	/* the common time zero, REALTIME (or BOOTTIME) ns */
	bool machines_seen;	/* a merged trace: machines other than 0 */
	const void *mem;	/* the trace in memory (export__mem), else x->input */
	size_t memlen;
	FILE *fixed_out;	/* every document to this stream (export__mem) */
	dev_t in_dev;		/* the input file, to refuse it as an output */
	ino_t in_ino;
};

/* ------------------------------------------------------------ tables */

static struct xmach *mach_get(struct xport *x, uint32_t id)
{
	uint64_t *v = hmap__get(&x->machines, id);
	struct xmach *m;

	if (v)
		return (struct xmach *)(uintptr_t)*v;
	m = calloc(1, sizeof(*m));
	if (!m || hmap__put(&x->machines, id, (uintptr_t)m)) {
		free(m);
		return NULL;
	}
	return m;
}

static struct xtrack *track_find(struct xport *x, uint32_t machine, uint64_t uuid)
{
	uint64_t *v = hmap__get(&x->machines, machine), *t;

	if (!v)
		return NULL;
	t = hmap__get(&((struct xmach *)(uintptr_t)*v)->tracks, uuid);
	return t ? (struct xtrack *)(uintptr_t)*t : NULL;
}

static struct xproc *proc_get(struct xport *x, uint32_t machine, int32_t pid)
{
	uint64_t key = (uint64_t)machine << 32 | (uint32_t)pid, *v = hmap__get(&x->procs, key);
	struct xproc *p;

	if (v)
		return (struct xproc *)(uintptr_t)*v;
	p = calloc(1, sizeof(*p));
	if (!p || hmap__put(&x->procs, key, (uintptr_t)p)) {
		free(p);
		return NULL;
	}
	p->machine = machine;
	p->pid = pid;
	p->min_ts = UINT64_MAX;
	return p;
}

static int set_str(char **dst, const char *s)
{
	char *n;

	if (*dst && !strcmp(*dst, s))
		return 0;
	n = strdup(s);
	if (!n)
		return -ENOMEM;
	free(*dst);
	*dst = n;
	return 0;
}

/* ------------------------------------------------------------ pass 1 */

static int on_track(void *ctx, const struct tread_track *t)
{
	struct xport *x = ctx;
	struct xmach *m = mach_get(x, t->machine);
	struct xtrack *xt = track_find(x, t->machine, t->uuid);

	if (!m)
		return -ENOMEM;
	if (!xt) {
		if (x->ntracks == x->cap_tracks) {
			size_t cap = x->cap_tracks ? 2 * x->cap_tracks : 256;
			struct xtrack **n = realloc(x->tracks, cap * sizeof(*n));

			if (!n)
				return -ENOMEM;
			x->tracks = n;
			x->cap_tracks = cap;
		}
		xt = calloc(1, sizeof(*xt));
		if (!xt || hmap__put(&m->tracks, t->uuid, (uintptr_t)xt)) {
			free(xt);
			return -ENOMEM;
		}
		x->tracks[x->ntracks++] = xt;
		xt->machine = t->machine;
		xt->uuid = t->uuid;
		xt->min_ts = UINT64_MAX;
	}
	/* A descriptor again renames the track (a thread's exit, setproctitle). */
	xt->parent = t->parent;
	xt->tk = t->kind;
	xt->pid = t->pid;
	xt->tid = t->tid;
	if (set_str(&xt->name, t->name) || set_str(&xt->desc, t->description))
		return -ENOMEM;
	if (t->kind == TREAD_TRACK_PROCESS) {
		struct xproc *p = proc_get(x, t->machine, t->pid);

		if (!p || set_str(&p->name, t->name))
			return -ENOMEM;
	}
	return 0;
}

static int on_clock(void *ctx, uint32_t machine, const struct tread_clock *c, int n)
{
	struct xport *x = ctx;
	struct xmach *m = mach_get(x, machine);
	uint64_t boot = 0, real = 0;

	if (!m)
		return -ENOMEM;
	if (m->snap)
		return 0;	/* the first pair defines the mapping */
	for (int i = 0; i < n; i++) {
		if (c[i].id == CLOCK_BOOTTIME_ID)
			boot = c[i].ts;
		else if (c[i].id == CLOCK_REALTIME_ID)
			real = c[i].ts;
	}
	if (boot && real) {
		m->snap = true;
		m->boot = boot;
		m->real = real;
	}
	return 0;
}

static int on_attr(void *ctx, uint32_t machine, const char *key, const char *value)
{
	struct xport *x = ctx;

	(void)machine;
	if (!strncmp(key, "cgbpf.", 6))
		x->cgbpf = true;
	if (!strcmp(key, "cgbpf.version") && !x->version[0])
		snprintf(x->version, sizeof(x->version), "%s", value);
	return 0;
}

static bool prefix(const char *s, const char *p)
{
	return !strncmp(s, p, strlen(p));
}

/* "GPU 3" or "GPU 3: NVIDIA H100 80GB HBM3" -> 3. */
static bool parse_device(const char *name, uint32_t *dev)
{
	unsigned v;
	int n = 0;

	if (sscanf(name, "GPU %u%n", &v, &n) != 1 || !n || (name[n] && name[n] != ':'))
		return false;
	*dev = v;
	return true;
}

/* What a track is, from its descriptor and its ancestors': names and
 * parents, not uuid bits (cgbpf merge renumbers the uuids of every input
 * after the first). */
static void classify(struct xport *x, struct xtrack *t, int depth)
{
	struct xtrack *par;
	unsigned a, b;
	int n = 0;

	if (t->classified)
		return;
	t->classified = true;
	t->kind = XK_SKIP;
	switch (t->tk) {
	case TREAD_TRACK_PROCESS:
		t->kind = XK_PROCESS;
		t->proc = proc_get(x, t->machine, t->pid);
		return;
	case TREAD_TRACK_THREAD:
		t->kind = XK_THREAD;
		t->proc = proc_get(x, t->machine, t->pid);
		return;
	case TREAD_TRACK_PLAIN:
		break;
	default:
		return;
	}
	par = t->parent ? track_find(x, t->machine, t->parent) : NULL;
	if (!par || depth >= MAX_DEPTH)
		return;
	classify(x, par, depth + 1);
	if (par->kind == XK_PROCESS) {
		t->proc = par->proc;
		if (parse_device(t->name, &t->device)) {
			t->kind = XK_DEVICE;
		} else if (prefix(t->name, "CUDA synchronization")) {
			/* user/sources/gpu/gpupf.c: "CUDA synchronization" and its
			 * "(overlapping)" lanes, under the process. */
			t->kind = XK_SYNC;
		} else if (sscanf(t->name, "NVTX ranges %u%n", &a, &n) == 1 && !t->name[n]) {
			t->kind = XK_NVTX;
			t->nvtx = a;
		}
	} else if (par->kind == XK_DEVICE) {
		t->proc = par->proc;
		t->device = par->device;
		/* user/sources/gpu/gpupf.c: "CUPTI stream S of context C, lane L". */
		if (sscanf(t->desc, "CUPTI stream %u of context %u", &a, &b) == 2) {
			t->kind = XK_LANE;
			t->stream = a;
			t->context = b;
			if (t->proc && !hmap__get(&t->proc->ctx_dev, b))
				hmap__put(&t->proc->ctx_dev, b, (uint64_t)t->device + 1);
		} else if (sscanf(t->name, "stream %u", &a) == 1) {
			t->kind = XK_LANE;
			t->stream = a;
		}
	}
}

static const struct tread_arg *arg_of(const struct tread_arg *a, int n, const char *name)
{
	for (int i = 0; i < n; i++)
		if (!strcmp(a[i].name, name))
			return &a[i];
	return NULL;
}

static const struct tread_arg *slice_arg(const struct tread_slice *s, const char *name)
{
	const struct tread_arg *a = arg_of(s->end_args, s->nend_args, name);

	return a ? a : arg_of(s->args, s->nargs, name);
}

/* What a slice of track t becomes; XC_NONE: not exported. */
static enum xclass slice_class(const struct xtrack *t, const struct tread_slice *s)
{
	switch (t->kind) {
	case XK_THREAD:
		if (s->category[0]) {
			if (!strcmp(s->category, "syscall"))
				return XC_NONE;
			/* user/sources/nccl/ncclpf.c's "NCCL group" slice. */
			if (!strcmp(s->category, "nccl"))
				return XC_NCCL;
			/* NVTX push/pop: the category is the domain. */
			return XC_NVTX;
		}
		if (prefix(s->name, "cuda") || prefix(s->name, "__cuda"))
			return XC_RUNTIME;
		if (prefix(s->name, "cu"))
			return XC_DRIVER;
		if (prefix(s->name, "nccl"))
			return XC_NCCL;
		return XC_NONE;
	case XK_NVTX:
		return XC_NVTX;
	case XK_SYNC:
		return XC_SYNC;
	case XK_LANE:
		/* By the args user/sources/gpu/gpupf.c gives each kind, not by the name: a
		 * kernel's name is the program's to choose. */
		if (arg_of(s->args, s->nargs, "config"))
			return XC_KERNEL;
		if (arg_of(s->args, s->nargs, "memory"))
			return XC_MEMSET;
		if (arg_of(s->args, s->nargs, "kind"))
			return XC_MEMCPY;
		return XC_NONE;
	default:
		return XC_NONE;
	}
}

/* Kineto's name of a synchronization (cupti_strings.cpp syncTypeString)
 * from cgbpf's (user/sources/gpu/gpupf.c). */
static const char *sync_kind(const char *name)
{
	static const char *const map[][2] = {
		{ "Event synchronize", "Event Sync" },
		{ "Stream wait event", "Stream Wait Event" },
		{ "Stream synchronize", "Stream Sync" },
		{ "Context synchronize", "Context Sync" },
	};

	for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
		if (!strcmp(name, map[i][0]))
			return map[i][1];
	return "Unknown Sync";
}

/* A synchronization's CUPTI stream (UINT32_MAX: none, CUPTI's invalid
 * value) and CUDA context (0 in traces older than its arg) from its args. */
static uint32_t sync_stream(const struct tread_slice *s)
{
	const struct tread_arg *a = arg_of(s->args, s->nargs, "stream");

	return a && a->type == TREAD_A_UINT && a->u < UINT32_MAX ? (uint32_t)a->u : UINT32_MAX;
}

static uint32_t sync_context(const struct tread_slice *s)
{
	const struct tread_arg *a = arg_of(s->args, s->nargs, "context");

	return a && a->type == TREAD_A_UINT && a->u <= UINT32_MAX ? (uint32_t)a->u : 0;
}

/* Its row: the sync row of its stream (-1 without one: CuptiActivity.h
 * streamIdForTrace), where Kineto (output_json.cpp handleActivity) puts
 * "Stream Sync" only and the others on the stream's own row, or on row
 * |-1| = 1 without a stream: a row that kernels of CUPTI stream 1 share,
 * where a synchronization overlaps them without nesting (viewers then
 * move one elsewhere, trace processor counts it as an error). */
static int64_t sync_tid(uint32_t stream)
{
	return (stream == UINT32_MAX ? -1 : (int64_t)stream) + SYNC_TID_OFFSET;
}

/* The GPU of a context, from the streams of the process that ran on it;
 * 0 when none did (Kineto's contextIdtoDeviceId default). */
static uint32_t ctx_device(const struct xproc *p, uint32_t context)
{
	const uint64_t *v = hmap__get(&p->ctx_dev, context);

	return v ? (uint32_t)(*v - 1) : 0;
}

static void add_comm(struct xproc *p, const char *id, int64_t rank, int64_t nranks)
{
	if (!id[0] || rank < 0 || nranks <= 0 || rank >= nranks || nranks > INT32_MAX)
		return;
	for (int i = 0; i < p->ncomm; i++)
		if (!strcmp(p->comms[i].id, id) && p->comms[i].rank == rank)
			return;
	if (p->ncomm == MAX_COMMS)
		return;
	snprintf(p->comms[p->ncomm].id, sizeof(p->comms[0].id), "%s", id);
	p->comms[p->ncomm].rank = (int32_t)rank;
	p->comms[p->ncomm].nranks = (int32_t)nranks;
	p->ncomm++;
}

static int64_t arg_int(const struct tread_arg *a, int64_t dflt)
{
	if (!a)
		return dflt;
	if (a->type == TREAD_A_INT)
		return a->i;
	if (a->type == TREAD_A_UINT && a->u <= INT64_MAX)
		return (int64_t)a->u;
	return dflt;
}

/* "3fa2 rank 1/4" (user/sources/nccl/nccl.c's label) -> id, rank, size. */
static bool parse_comm_label(const char *s, char *id, size_t idlen, int *rank, int *n)
{
	char buf[24];
	int used = 0;

	if (sscanf(s, "%23s rank %d/%d%n", buf, rank, n, &used) != 3 || s[used])
		return false;
	snprintf(id, idlen, "%s", buf);
	return true;
}

/* The communicators a process's NCCL slices name: the init calls'
 * arguments (rank, nranks, comm_id) and every call's "comm" label. */
static void learn_comms(struct xproc *p, const struct tread_slice *s)
{
	const struct tread_arg *a;
	char id[24];
	int r, n;

	if ((!strcmp(s->name, "ncclCommInitRank") || !strcmp(s->name, "ncclCommInitRankConfig")) &&
	    !arg_of(s->end_args, s->nend_args, "result")) {
		a = arg_of(s->args, s->nargs, "comm_id");
		if (a && a->type == TREAD_A_STR)
			add_comm(p, a->s, arg_int(arg_of(s->args, s->nargs, "rank"), -1),
				 arg_int(arg_of(s->args, s->nargs, "nranks"), -1));
	}
	a = slice_arg(s, "comm");
	if (a && a->type == TREAD_A_STR && parse_comm_label(a->s, id, sizeof(id), &r, &n))
		add_comm(p, id, r, n);
}

static int pass1_slice(void *ctx, const struct tread_slice *s)
{
	struct xport *x = ctx;
	struct xtrack *t = track_find(x, s->machine, s->track);
	enum xclass c;

	if (!t)
		return 0;
	classify(x, t, 0);
	if (!t->proc)
		return 0;
	c = slice_class(t, s);
	if (c == XC_NONE)
		return 0;
	if (c == XC_NCCL)
		learn_comms(t->proc, s);
	if (c == XC_SYNC) {
		/* Its row, for the metadata. */
		uint64_t key = (uint64_t)sync_context(s) << 32 | sync_stream(s);

		if (!hmap__get(&t->proc->sync_rows, key) && hmap__put(&t->proc->sync_rows, key, 1))
			return -ENOMEM;
	}
	t->nslices++;
	t->proc->nslices++;
	if (s->ts < t->min_ts)
		t->min_ts = s->ts;
	if (s->ts < t->proc->min_ts)
		t->proc->min_ts = s->ts;
	return 0;
}

/* The rank a process has in its largest communicator: what torch's
 * default process group is (the others are subsets of it). */
static void pick_rank(struct xproc *p)
{
	const struct xcomm *best = NULL;

	p->rank = -1;
	p->world = 0;
	for (int i = 0; i < p->ncomm; i++)
		if (!best || p->comms[i].nranks > best->nranks)
			best = &p->comms[i];
	if (!best)
		return;
	p->world = best->nranks;
	snprintf(p->comm_id, sizeof(p->comm_id), "%s", best->id);
	for (int i = 0; i < p->ncomm; i++) {
		if (strcmp(p->comms[i].id, best->id))
			continue;
		p->nranks_here++;
		p->rank = p->comms[i].rank;
	}
	if (p->nranks_here > 1)
		p->rank = -1;	/* ranks as threads of one process */
}

/* ------------------------------------------------------------ output */

static int64_t to_real(const struct xport *x, uint32_t machine, uint64_t ts)
{
	const uint64_t *v = hmap__get(&x->machines, machine);
	const struct xmach *m = v ? (const struct xmach *)(uintptr_t)*v : NULL;

	if (!m || !m->snap)
		return (int64_t)ts;
	/* Unsigned: a file's clocks are not trusted, and wrapping is defined. */
	return (int64_t)(ts - m->boot + m->real);
}

static void put_ts(const struct xport *x, FILE *f, uint32_t machine, uint64_t ts)
{
	jsonw__us(f, (int64_t)((uint64_t)to_real(x, machine, ts) - (uint64_t)x->base_real));
}

static void ev_start(struct xproc *p)
{
	fputs(p->any ? ",\n  " : "\n  ", p->f);
	p->any = true;
}

static void put_key(FILE *f, bool *first, const char *key)
{
	if (!*first)
		fputs(", ", f);
	*first = false;
	jsonw__str(f, key);
	fputs(": ", f);
}

static void put_value(FILE *f, const struct tread_arg *a)
{
	switch (a->type) {
	case TREAD_A_UINT:
		fprintf(f, "%" PRIu64, a->u);
		break;
	case TREAD_A_INT:
		fprintf(f, "%" PRId64, a->i);
		break;
	case TREAD_A_BOOL:
		fputs(a->u ? "true" : "false", f);
		break;
	case TREAD_A_DOUBLE:
		jsonw__double(f, a->d);
		break;
	case TREAD_A_PTR:
		fprintf(f, "\"0x%" PRIx64 "\"", a->u);
		break;
	case TREAD_A_STR:
		jsonw__str(f, a->s);
		break;
	default:
		fputs("null", f);
		break;
	}
}

/*
 * cgbpf's argument names that mean something else to Kineto tooling on a
 * host event: HTA takes an event with a numeric "stream" >= 0 and a
 * "correlation" >= 0 for GPU work, and the rank of a file from the first
 * `"rank": N` in it. Renamed, never dropped.
 */
static const char *host_arg_name(const char *name)
{
	static const char *const ren[][2] = {
		{ "stream", "stream name" },	/* "stream 2": cgbpf's per-process numbering */
		{ "correlation", "cgbpf correlation" },
		{ "External id", "cgbpf External id" },
		{ "device", "cuda device" },
		{ "context", "cuda context" },
		{ "rank", "Rank" },		/* Kineto's collective metadata name */
	};

	for (size_t i = 0; i < sizeof(ren) / sizeof(ren[0]); i++)
		if (!strcmp(name, ren[i][0]))
			return ren[i][1];
	return name;
}

/* The begin event's args (those the end event does not replace), then
 * the end event's, under host names. */
static void put_host_args(FILE *f, bool *first, const struct tread_slice *s)
{
	for (int i = 0; i < s->nargs; i++) {
		if (s->args[i].type == TREAD_A_OTHER ||
		    arg_of(s->end_args, s->nend_args, s->args[i].name))
			continue;
		put_key(f, first, host_arg_name(s->args[i].name));
		put_value(f, &s->args[i]);
	}
	for (int i = 0; i < s->nend_args; i++) {
		if (s->end_args[i].type == TREAD_A_OTHER)
			continue;
		put_key(f, first, host_arg_name(s->end_args[i].name));
		put_value(f, &s->end_args[i]);
	}
}

static void put_x_head(struct xport *x, struct xproc *p, enum xclass c, const char *name,
		       int64_t pid, int64_t tid, const struct tread_slice *s)
{
	FILE *f = p->f;

	ev_start(p);
	fputs("{\"ph\": \"X\", \"cat\": \"", f);
	fputs(class_cat[c], f);
	fputs("\", \"name\": ", f);
	jsonw__str(f, name);
	fprintf(f, ", \"pid\": %" PRId64 ", \"tid\": %" PRId64 ", \"ts\": ", pid, tid);
	put_ts(x, f, s->machine, s->ts);
	fputs(", \"dur\": ", f);
	jsonw__us(f, s->end_ts >= s->ts ? (int64_t)(s->end_ts - s->ts) : 0);
	fputs(", \"args\": {", f);
}

static void put_flow(struct xport *x, struct xproc *p, char ph, uint64_t id, int64_t pid,
		     int64_t tid, const struct tread_slice *s)
{
	FILE *f = p->f;

	ev_start(p);
	fprintf(f, "{\"ph\": \"%c\", \"id\": %" PRIu64 ", \"pid\": %" PRId64 ", \"tid\": %" PRId64
		", \"ts\": ", ph, id, pid, tid);
	put_ts(x, f, s->machine, s->ts);
	fputs(ph == 'f' ? ", \"cat\": \"ac2g\", \"name\": \"ac2g\", \"bp\": \"e\"}"
			: ", \"cat\": \"ac2g\", \"name\": \"ac2g\"}", f);
}

/* PyTorch's names of NCCL's collectives ("Collective name"). */
static const char *collective(const char *fn)
{
	static const char *const names[][2] = {
		{ "ncclAllReduce", "allreduce" }, { "ncclAllGather", "allgather" },
		{ "ncclReduceScatter", "reduce_scatter" }, { "ncclBroadcast", "broadcast" },
		{ "ncclBcast", "broadcast" }, { "ncclReduce", "reduce" },
		{ "ncclAlltoAll", "all_to_all" }, { "ncclSend", "send" }, { "ncclRecv", "recv" },
	};

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (!strcmp(fn, names[i][0]))
			return names[i][1];
	return NULL;
}

/* Kineto's collective metadata (output_json.cpp appendCollectiveArgs)
 * from the call's own arguments: element counts in and out as the
 * collective defines them, the communicator's size, the rank. */
static void put_collective(FILE *f, bool *first, const struct tread_slice *s)
{
	const char *coll = collective(s->name);
	const struct tread_arg *comm = slice_arg(s, "comm"), *dt = slice_arg(s, "datatype");
	int64_t count = arg_int(slice_arg(s, "count"), -1), in, out;
	char id[24];
	int r, n;

	if (!coll || count < 0 || !comm || comm->type != TREAD_A_STR ||
	    !parse_comm_label(comm->s, id, sizeof(id), &r, &n) || n <= 0)
		return;
	in = out = count;
	if (!strcmp(coll, "allgather"))
		out = count * n;
	else if (!strcmp(coll, "reduce_scatter"))
		in = count * n;
	else if (!strcmp(coll, "all_to_all"))
		in = out = count * n;
	put_key(f, first, "Collective name");
	jsonw__str(f, coll);
	put_key(f, first, "In msg nelems");
	fprintf(f, "%" PRId64, in);
	put_key(f, first, "Out msg nelems");
	fprintf(f, "%" PRId64, out);
	put_key(f, first, "Group size");
	fprintf(f, "%d", n);
	if (dt && dt->type == TREAD_A_STR) {
		put_key(f, first, "dtype");
		jsonw__str(f, dt->s);
	}
	if (!arg_of(s->args, s->nargs, "rank") && !arg_of(s->end_args, s->nend_args, "rank")) {
		put_key(f, first, "Rank");
		fprintf(f, "%d", r);
	}
}

static uint64_t first_flow(const struct tread_slice *s, bool gpu)
{
	if (gpu) {
		if (s->nflow_end)
			return s->flow_end[0];
		if (s->flow_in)
			return s->flow_in;
	}
	return s->nflow_out ? s->flow_out[0] : 0;
}

static void write_host(struct xport *x, struct xtrack *t, enum xclass c,
		       const struct tread_slice *s)
{
	struct xproc *p = t->proc;
	int64_t tid = t->kind == XK_NVTX ? NVTX_TID_BASE + (int64_t)t->nvtx : t->tid;
	uint64_t corr = c == XC_NVTX ? 0 : first_flow(s, false);
	bool first = true;
	FILE *f = p->f;

	put_x_head(x, p, c, s->name, p->pid, tid, s);
	if (corr) {
		put_key(f, &first, "External id");
		fprintf(f, "%" PRIu64, corr);
		put_key(f, &first, "correlation");
		fprintf(f, "%" PRIu64, corr);
	}
	if (c == XC_NVTX) {
		put_key(f, &first, "domain");
		jsonw__str(f, s->category[0] ? s->category : "NVTX");
	}
	put_host_args(f, &first, s);
	if (c == XC_NCCL)
		put_collective(f, &first, s);
	if (!s->ended) {
		put_key(f, &first, "cgbpf");
		fputs("\"no end in the trace (the call had not returned)\"", f);
		p->unended++;
	}
	fputs("}}", f);
	if (corr)
		put_flow(x, p, 's', corr, p->pid, tid, s);
	p->counts[c]++;
}

/* CUPTI's names (Kineto's cupti_strings.cpp) of cgbpf's copy kinds and
 * memory kinds (user/sources/gpu/gpu.c, user/sources/gpu/gpupf.c). */
static const char *kineto_name(const char *s)
{
	static const char *const map[][2] = {
		{ "peer", "PtoP" }, { "unknown", "Unknown" }, { "pageable", "Pageable" },
		{ "pinned", "Pinned" }, { "device", "Device" }, { "array", "Array" },
		{ "managed", "Managed" }, { "device static", "Device Static" },
		{ "managed static", "Managed Static" },
	};

	for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
		if (!strcmp(s, map[i][0]))
			return map[i][1];
	return s;	/* HtoD, DtoH, ... are CUPTI's already */
}

static const char *str_arg(const struct tread_slice *s, const char *name, const char *dflt)
{
	const struct tread_arg *a = arg_of(s->args, s->nargs, name);

	return a && a->type == TREAD_A_STR ? a->s : dflt;
}

static void put_u_arg(FILE *f, bool *first, const char *key, const struct tread_arg *a)
{
	if (!a || (a->type != TREAD_A_UINT && a->type != TREAD_A_INT))
		return;
	put_key(f, first, key);
	put_value(f, a);
}

static void write_gpu(struct xport *x, struct xtrack *t, enum xclass c,
		      const struct tread_slice *s)
{
	struct xproc *p = t->proc;
	uint64_t corr = first_flow(s, true);
	const struct tread_arg *a;
	char name[160];
	const char *nm = s->name;
	bool first = true;
	FILE *f = p->f;

	if (c == XC_MEMCPY) {
		snprintf(name, sizeof(name), "Memcpy %s (%s -> %s)",
			 kineto_name(str_arg(s, "kind", "unknown")),
			 kineto_name(str_arg(s, "src", "unknown")),
			 kineto_name(str_arg(s, "dst", "unknown")));
		nm = name;
	} else if (c == XC_MEMSET) {
		snprintf(name, sizeof(name), "Memset (%s)",
			 kineto_name(str_arg(s, "memory", "unknown")));
		nm = name;
	}
	put_x_head(x, p, c, nm, t->device, t->stream, s);
	/* Kineto's order (CuptiActivity.h). A GPU operation whose launch
	 * call has no slice in the trace (made before collection began)
	 * still needs a correlation >= 0 to count as GPU work in HTA; 0 is
	 * no flow id cgbpf gives. */
	if (corr) {
		put_key(f, &first, "External id");
		fprintf(f, "%" PRIu64, corr);
	}
	put_key(f, &first, "device");
	fprintf(f, "%" PRIu32, t->device);
	put_key(f, &first, "context");
	fprintf(f, "%" PRIu32, t->context);
	put_key(f, &first, "stream");
	fprintf(f, "%" PRIu32, t->stream);
	put_key(f, &first, "correlation");
	fprintf(f, "%" PRIu64, corr);
	if (c == XC_KERNEL) {
		unsigned g[3], b[3], regs, ss = 0, sd = 0;
		const char *cfg = str_arg(s, "config", "");
		int n = sscanf(cfg, "grid (%u,%u,%u) block (%u,%u,%u) regs %u smem %u+%u", &g[0],
			       &g[1], &g[2], &b[0], &b[1], &b[2], &regs, &ss, &sd);

		if (n >= 7) {
			put_key(f, &first, "registers per thread");
			fprintf(f, "%u", regs);
			put_key(f, &first, "shared memory");
			fprintf(f, "%llu", (unsigned long long)ss + sd);
			put_key(f, &first, "grid");
			fprintf(f, "[%u, %u, %u]", g[0], g[1], g[2]);
			put_key(f, &first, "block");
			fprintf(f, "[%u, %u, %u]", b[0], b[1], b[2]);
		}
	} else {
		put_u_arg(f, &first, "bytes", arg_of(s->args, s->nargs, "bytes"));
		a = arg_of(s->args, s->nargs, "GBps");
		if (a && a->type == TREAD_A_DOUBLE) {
			put_key(f, &first, "memory bandwidth (GB/s)");
			jsonw__double(f, a->d);
		}
		put_u_arg(f, &first, "value", arg_of(s->args, s->nargs, "value"));
		put_u_arg(f, &first, "peer device", arg_of(s->args, s->nargs, "peer"));
	}
	put_u_arg(f, &first, "graph id", arg_of(s->args, s->nargs, "graph"));
	put_u_arg(f, &first, "cupti correlation", arg_of(s->args, s->nargs, "correlation"));
	fputs("}}", f);
	if (corr)
		put_flow(x, p, 'f', corr, t->device, t->stream, s);
	p->counts[c]++;
}

/* A CUPTI synchronization record as Kineto writes one (CuptiActivity.h
 * CudaSyncActivity): on its GPU's row, named by kind. Its correlation is
 * 0: the trace links no API call to it (cgbpf's correlation is its flow
 * ids, and a synchronization has none), and HTA then takes it for GPU
 * work, as Kineto's are (H3). */
static void write_sync(struct xport *x, struct xtrack *t, const struct tread_slice *s)
{
	struct xproc *p = t->proc;
	const char *kind = sync_kind(s->name);
	uint32_t stream = sync_stream(s), context = sync_context(s);
	uint32_t dev = ctx_device(p, context);
	const struct tread_arg *corr = arg_of(s->args, s->nargs, "correlation");
	bool first = true;
	FILE *f = p->f;

	put_x_head(x, p, XC_SYNC, kind, dev, sync_tid(stream), s);
	put_key(f, &first, "cuda_sync_kind");
	jsonw__str(f, kind);
	put_key(f, &first, "stream");
	fprintf(f, "%" PRId64, stream == UINT32_MAX ? (int64_t)-1 : (int64_t)stream);
	put_key(f, &first, "correlation");
	fputs("0", f);
	put_key(f, &first, "device");
	fprintf(f, "%" PRIu32, dev);
	put_key(f, &first, "context");
	fprintf(f, "%" PRIu32, context);
	put_u_arg(f, &first, "cupti correlation", corr);
	fputs("}}", f);
	p->counts[XC_SYNC]++;
}

static int pass2_slice(void *ctx, const struct tread_slice *s)
{
	struct xport *x = ctx;
	struct xtrack *t = track_find(x, s->machine, s->track);
	enum xclass c;

	if (!t || !t->proc || !t->proc->f)
		return 0;
	c = slice_class(t, s);
	if (c == XC_NONE)
		return 0;
	if (c == XC_SYNC)
		write_sync(x, t, s);
	else if (c >= XC_KERNEL)
		write_gpu(x, t, c, s);
	else
		write_host(x, t, c, s);
	return 0;
}

/* ------------------------------------------------------------ files */

static int cmp_track(const void *a, const void *b)
{
	const struct xtrack *x = *(const struct xtrack *const *)a, *y = *(const struct xtrack *const *)b;

	if (x->kind != y->kind)
		return x->kind < y->kind ? -1 : 1;
	if (x->device != y->device)
		return x->device < y->device ? -1 : 1;
	if (x->stream != y->stream)
		return x->stream < y->stream ? -1 : 1;
	if (x->tid != y->tid)
		return x->tid < y->tid ? -1 : 1;
	if (x->nvtx != y->nvtx)
		return x->nvtx < y->nvtx ? -1 : 1;
	return x->uuid < y->uuid ? -1 : x->uuid > y->uuid;
}

static void put_meta(struct xproc *p, const char *what, int64_t pid, int64_t tid, const char *key,
		     const char *sval, int64_t ival)
{
	FILE *f = p->f;

	ev_start(p);
	fprintf(f, "{\"ph\": \"M\", \"name\": \"%s\", \"ts\": 0.000, \"pid\": %" PRId64
		", \"tid\": %" PRId64 ", \"args\": {\"%s\": ", what, pid, tid, key);
	if (sval)
		jsonw__str(f, sval);
	else
		fprintf(f, "%" PRId64, ival);
	fputs("}}", f);
}

/* "GPU-…, 132 SMs, compute capability 9.0, 80.0 GiB (85899345920 bytes)"
 * (user/sources/gpu/gpupf.c). */
static void put_device_props(FILE *f, const struct xtrack *d, bool *first)
{
	const char *name = strchr(d->name, ':'), *p, *q;
	unsigned sms, maj, min;
	uint64_t mem;
	char close;

	fputs(*first ? "\n    {" : ",\n    {", f);
	*first = false;
	fprintf(f, "\"id\": %" PRIu32 ", \"name\": ", d->device);
	if (name)
		name += name[1] == ' ' ? 2 : 1;
	jsonw__str(f, name ? name : "");
	/* The exact size since the description has it; older traces hold it
	 * rounded to 0.1 GiB only, and have none here. */
	q = strstr(d->desc, " GiB (");
	if (q && sscanf(q, " GiB (%" SCNu64 " bytes%c", &mem, &close) == 2 && close == ')')
		fprintf(f, ", \"totalGlobalMem\": %" PRIu64, mem);
	p = strstr(d->desc, ", ");
	if (p && sscanf(p, ", %u SMs, compute capability %u.%u", &sms, &maj, &min) == 3) {
		fprintf(f, ", \"computeMajor\": %u, \"computeMinor\": %u, \"numSms\": %u", maj, min,
			sms);
	}
	if (prefix(d->desc, "GPU-")) {
		fputs(", \"uuid\": ", f);
		jsonw__strn(f, d->desc, p ? (size_t)(p - d->desc) : strlen(d->desc));
	}
	fputc('}', f);
}

static int64_t boot_at_zero(const struct xport *x, uint32_t machine)
{
	const uint64_t *v = hmap__get(&x->machines, machine);
	const struct xmach *m = v ? (const struct xmach *)(uintptr_t)*v : NULL;

	if (!m || !m->snap)
		return x->base_real;
	return (int64_t)((uint64_t)x->base_real - m->real + m->boot);
}

static bool mach_snap(const struct xport *x, uint32_t machine)
{
	const uint64_t *v = hmap__get(&x->machines, machine);

	return v && ((const struct xmach *)(uintptr_t)*v)->snap;
}

/* Whether a synchronization of p is on GPU dev. */
static bool sync_on(const struct xproc *p, uint32_t dev)
{
	uint64_t k;

	for (size_t it = 0; hmap__next(&p->sync_rows, &it, &k, NULL);)
		if (ctx_device(p, (uint32_t)(k >> 32)) == dev)
			return true;
	return false;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static uint64_t row_key(uint32_t dev, int64_t tid)
{
	return hash__u64((uint64_t)dev << 32 ^ hash__u64((uint64_t)tid));
}

static void put_gpu_rows(struct xproc *p, uint32_t dev)
{
	char buf[32];

	snprintf(buf, sizeof(buf), "GPU %" PRIu32, dev);
	put_meta(p, "process_name", dev, 0, "name", p->name ? p->name : "", 0);
	put_meta(p, "process_labels", dev, 0, "labels", buf, 0);
	put_meta(p, "process_sort_index", dev, 0, "sort_index", NULL, GPU_SORT_BASE + (int64_t)dev);
}

/* The rows of p's synchronizations: a stream's "stream S (sync)", as
 * Kineto names it, and "synchronization (no stream)"; the rows of their
 * GPU if its streams did not name it. devs and rows: the GPUs and (GPU,
 * tid) rows named already. */
static void sync_meta(struct xproc *p, struct hmap *devs, struct hmap *rows)
{
	uint64_t *keys = malloc((p->sync_rows.count + 1) * sizeof(*keys)), k;
	size_t nk = 0;

	if (!keys)
		return;
	for (size_t it = 0; hmap__next(&p->sync_rows, &it, &k, NULL);)
		keys[nk++] = k;
	qsort(keys, nk, sizeof(*keys), cmp_u64);
	for (size_t i = 0; i < nk; i++) {
		uint32_t stream = (uint32_t)keys[i], dev = ctx_device(p, (uint32_t)(keys[i] >> 32));
		int64_t tid = sync_tid(stream), sort = stream == UINT32_MAX ? -1 : (int64_t)stream;
		char buf[48];

		if (!hmap__get(devs, dev)) {
			put_gpu_rows(p, dev);
			hmap__put(devs, dev, 1);
		}
		if (hmap__get(rows, row_key(dev, tid)))
			continue;	/* another context on the same GPU */
		hmap__put(rows, row_key(dev, tid), 1);
		if (stream == UINT32_MAX)
			snprintf(buf, sizeof(buf), "synchronization (no stream)");
		else
			snprintf(buf, sizeof(buf), "stream %" PRIu32 " (sync)", stream);
		/* Kineto's sort index of a sync row is its stream's: next to it. */
		put_meta(p, "thread_name", dev, tid, "name", buf, 0);
		put_meta(p, "thread_sort_index", dev, tid, "sort_index", NULL, sort);
	}
	free(keys);
}

/* Header, metadata events: everything before the slices. */
static void write_head(struct xport *x, struct xproc *p, struct xtrack **tr, size_t n)
{
	FILE *f = p->f;
	bool first = true;
	uint32_t last_dev = UINT32_MAX, last_stream = UINT32_MAX;
	struct hmap devs = { 0 }, rows = { 0 };	/* GPU and stream rows named */

	fputs("{\n  \"schemaVersion\": 1,\n", f);
	if (p->world > 0) {
		/* HTA's rank lookup is the regular expression "rank":\s+(\d+):
		 * a space after the colon. */
		fputs("  \"distributedInfo\": {\"backend\": \"nccl\", ", f);
		if (p->rank >= 0)
			fprintf(f, "\"rank\": %d, ", p->rank);
		fprintf(f, "\"world_size\": %d},\n", p->world);
	}
	fputs("  \"deviceProperties\": [", f);
	for (size_t i = 0; i < n; i++) {
		const struct xtrack *d = tr[i];
		bool used = false;

		if (d->kind != XK_DEVICE || d->proc != p)
			continue;
		for (size_t j = 0; j < n && !used; j++)
			used = tr[j]->kind == XK_LANE && tr[j]->proc == p && tr[j]->nslices &&
			       tr[j]->device == d->device;
		used = used || sync_on(p, d->device);
		if (used && d->device != last_dev)
			put_device_props(f, d, &first);
		if (used)
			last_dev = d->device;
	}
	fputs(first ? "],\n" : "\n  ],\n", f);
	fprintf(f, "  \"displayTimeUnit\": \"ms\",\n  \"baseTimeNanoseconds\": %" PRId64 ",\n",
		x->base_real);
	fputs("  \"cgbpf\": {\"version\": ", f);
	jsonw__str(f, x->version);
	fputs(", \"source\": ", f);
	jsonw__str(f, x->input);
	fprintf(f, ", \"machine\": %" PRIu32 ", \"pid\": %d, \"clock\": \"%s\", "
		"\"boottime_ns_at_ts_zero\": %" PRId64, p->machine, p->pid,
		mach_snap(x, p->machine) ? "REALTIME" : "BOOTTIME (the trace has no REALTIME)",
		boot_at_zero(x, p->machine));
	if (p->world > 0 && p->rank < 0)
		fprintf(f, ", \"note\": \"%d ranks of communicator %s in this one process: no "
			"single rank\"", p->nranks_here, p->comm_id);
	fputs("},\n  \"traceEvents\": [", f);

	put_meta(p, "process_name", p->pid, 0, "name", p->name ? p->name : "", 0);
	put_meta(p, "process_labels", p->pid, 0, "labels", "CPU", 0);
	put_meta(p, "process_sort_index", p->pid, 0, "sort_index", NULL, p->pid);
	last_dev = UINT32_MAX;
	for (size_t i = 0; i < n; i++) {
		struct xtrack *t = tr[i];
		char buf[320];	/* "thread TID (" + a name of up to 255 bytes + ")" */

		if (t->proc != p || !t->nslices)
			continue;
		if (t->kind == XK_THREAD) {
			snprintf(buf, sizeof(buf), "thread %d (%s)", t->tid, t->name);
			put_meta(p, "thread_name", p->pid, t->tid, "name", buf, 0);
			put_meta(p, "thread_sort_index", p->pid, t->tid, "sort_index", NULL, t->tid);
		} else if (t->kind == XK_NVTX) {
			put_meta(p, "thread_name", p->pid, NVTX_TID_BASE + (int64_t)t->nvtx, "name",
				 t->name, 0);
			put_meta(p, "thread_sort_index", p->pid, NVTX_TID_BASE + (int64_t)t->nvtx,
				 "sort_index", NULL, NVTX_TID_BASE + (int64_t)t->nvtx);
		} else if (t->kind == XK_LANE) {
			if (t->device != last_dev) {
				put_gpu_rows(p, t->device);
				hmap__put(&devs, t->device, 1);
				last_stream = UINT32_MAX;
			}
			/* The lanes of one stream ("(overlapping)") are one stream
			 * to Kineto: one tid. */
			if (t->device != last_dev || t->stream != last_stream) {
				snprintf(buf, sizeof(buf), "stream %" PRIu32, t->stream);
				put_meta(p, "thread_name", t->device, t->stream, "name", buf, 0);
				put_meta(p, "thread_sort_index", t->device, t->stream, "sort_index",
					 NULL, t->stream);
				hmap__put(&rows, row_key(t->device, t->stream), 1);
			}
			last_dev = t->device;
			last_stream = t->stream;
		}
	}
	sync_meta(p, &devs, &rows);
	hmap__free(&devs);
	hmap__free(&rows);
}

static void write_tail(struct xport *x, struct xproc *p)
{
	(void)x;
	fputs("\n  ],\n  \"traceName\": ", p->f);
	jsonw__str(p->f, p->path);
	fputs("\n}\n", p->f);
}

/* -o's %p (pid), %m (machine), %%; -EINVAL for any other %-code. */
static int expand(const char *pat, const struct xproc *p, char *out, size_t len)
{
	size_t o = 0;

	for (const char *s = pat; *s; s++) {
		char buf[24];
		const char *add = buf;

		if (*s != '%') {
			buf[0] = *s;
			buf[1] = 0;
		} else if (s[1] == 'p') {
			snprintf(buf, sizeof(buf), "%d", p->pid);
			s++;
		} else if (s[1] == 'm') {
			snprintf(buf, sizeof(buf), "%" PRIu32, p->machine);
			s++;
		} else if (s[1] == '%') {
			add = "%";
			s++;
		} else {
			return -EINVAL;
		}
		if (o + strlen(add) >= len)
			return -ENAMETOOLONG;
		memcpy(out + o, add, strlen(add));
		o += strlen(add);
	}
	out[o] = 0;
	return 0;
}

static bool has_code(const char *pat, char code)
{
	for (const char *s = pat; *s; s++) {
		if (*s != '%')
			continue;
		if (s[1] == code)
			return true;
		if (s[1])
			s++;
	}
	return false;
}

/* Default output: the input's name without .perfetto-trace, with .json;
 * per process (.PID, .MACHINE.PID) when there are several. */
static int default_output(const char *in, bool several, bool machines, char *out, size_t len)
{
	static const char *const exts[] = { ".perfetto-trace", ".pftrace", ".pb", ".trace" };
	size_t n = strlen(in);
	int r;

	for (size_t i = 0; i < sizeof(exts) / sizeof(exts[0]); i++) {
		size_t e = strlen(exts[i]);

		if (n > e && !strcmp(in + n - e, exts[i])) {
			n -= e;
			break;
		}
	}
	r = snprintf(out, len, "%.*s%s.json", (int)n, in,
		     !several ? "" : machines ? ".%m.%p" : ".%p");
	return r < 0 || (size_t)r >= len ? -ENAMETOOLONG : 0;
}

static int cmp_proc(const void *a, const void *b)
{
	const struct xproc *x = *(const struct xproc *const *)a, *y = *(const struct xproc *const *)b;

	if (x->machine != y->machine)
		return x->machine < y->machine ? -1 : 1;
	return x->pid < y->pid ? -1 : x->pid > y->pid;
}

static void close_all(struct xport *x, struct xproc **ps, size_t n, bool discard)
{
	for (size_t i = 0; i < n; i++) {
		struct xproc *p = ps[i];

		if (!p->f)
			continue;
		if (p->f == stdout || p->f == x->fixed_out) {
			fflush(p->f);
		} else {
			if (discard)
				outfile__discard(fileno(p->f), p->path);
			fclose(p->f);
		}
		p->f = NULL;
	}
}

static const char usage[] =
"Usage: cgbpf export --format kineto-json [-o OUTPUT] [--pid PID[,PID...]] TRACE\n"
"\n"
"Writes a cgbpf trace as the Chrome-trace JSON the PyTorch profiler (Kineto)\n"
"writes, so that Holistic Trace Analysis, TensorBoard's profiler plugin and\n"
"other Kineto tooling read it: CUDA runtime and driver calls (cuda_runtime,\n"
"cuda_driver), kernels, copies and memsets on their GPU and stream (kernel,\n"
"gpu_memcpy, gpu_memset) linked to their launch by a correlation id and an\n"
"ac2g flow, CUPTI's synchronization records (cuda_sync), NVTX ranges\n"
"(user_annotation), NCCL calls (cpu_op), the process's NCCL rank and world\n"
"size (distributedInfo) and its GPUs (deviceProperties). Syscalls, the\n"
"scheduler and CPU samples have no Kineto event type: not exported (the\n"
"Perfetto trace has them; docs/export.md). One file per process,\n"
"as the PyTorch profiler writes one per rank. The trace is read twice,\n"
"streaming: memory stays bounded whatever its size.\n"
"\n"
"Options:\n"
"  -f, --format FORMAT     kineto-json (the only format so far)\n"
"  -o, --output OUTPUT     the JSON file; %p is replaced by the pid, %m by the\n"
"                          machine of a merged trace (0 otherwise), %% by %;\n"
"                          needed with several processes (one file each).\n"
"                          '-': standard output (one process). Default: TRACE\n"
"                          without .perfetto-trace, plus .json (.PID.json per\n"
"                          process when there are several)\n"
"  -p, --pid PID[,PID...]  only these processes\n"
"  -v, --verbose           debug messages\n"
"  -h, --help              this help\n"
"\n"
"Examples:\n"
"  cgbpf export --format kineto-json run.perfetto-trace\n"
"  cgbpf export --format kineto-json -o traces/rank_%p.json job.perfetto-trace\n"
"  cgbpf export -f kineto-json --pid 4242 -o - run.perfetto-trace | gzip > r.json.gz\n"
"\n"
"Exit status: 0 on success, 1 when nothing could be exported or an output\n"
"could not be written, 2 for usage errors and inputs that are not cgbpf traces.\n";

static int usage_error(const char *fmt, const char *arg)
{
	fputs("cgbpf: export: ", stderr);
	fprintf(stderr, fmt, arg);
	fputs("\nTry 'cgbpf export --help'.\n", stderr);
	return 2;
}

static int parse_pid_list(const char *s, struct xport *x)
{
	char *copy = strdup(s), *tok, *save = NULL;
	int err = 0;

	if (!copy)
		return -ENOMEM;
	if (!*s || *s == ',' || s[strlen(s) - 1] == ',' || strstr(s, ",,"))
		err = -EINVAL;
	for (tok = strtok_r(copy, ",", &save); tok && !err; tok = strtok_r(NULL, ",", &save)) {
		char *end;
		unsigned long v;
		int32_t *n;

		errno = 0;
		v = strtoul(tok, &end, 10);
		if (errno || *end || !*tok || *tok == '-' || *tok == '+' || v == 0 || v > INT32_MAX) {
			err = -EINVAL;
			break;
		}
		n = realloc(x->pids, (x->npids + 1) * sizeof(*n));
		if (!n) {
			err = -ENOMEM;
			break;
		}
		x->pids = n;
		x->pids[x->npids++] = (int32_t)v;
	}
	free(copy);
	return err;
}

static bool pid_wanted(const struct xport *x, int32_t pid)
{
	if (!x->npids)
		return true;
	for (int i = 0; i < x->npids; i++)
		if (x->pids[i] == pid)
			return true;
	return false;
}

static void xport_free(struct xport *x)
{
	size_t i = 0;
	uint64_t k, v;

	for (size_t j = 0; j < x->ntracks; j++) {
		free(x->tracks[j]->name);
		free(x->tracks[j]->desc);
		free(x->tracks[j]);
	}
	free(x->tracks);
	while (hmap__next(&x->machines, &i, &k, &v)) {
		struct xmach *m = (struct xmach *)(uintptr_t)v;

		hmap__free(&m->tracks);
		free(m);
	}
	hmap__free(&x->machines);
	i = 0;
	while (hmap__next(&x->procs, &i, &k, &v)) {
		struct xproc *p = (struct xproc *)(uintptr_t)v;

		free(p->name);
		free(p->path);
		hmap__free(&p->ctx_dev);
		hmap__free(&p->sync_rows);
		free(p);
	}
	hmap__free(&x->procs);
	free(x->pids);
}

/* The input must be a file that can be read twice. */
static int check_input(struct xport *x, const char *path)
{
	struct stat st;

	if (!strcmp(path, "-"))
		return usage_error("%s: reading a trace from standard input is not supported "
				   "(it is read twice): give a file", path);
	if (stat(path, &st)) {
		fprintf(stderr, "cgbpf: export: %s: %s\n", path, strerror(errno));
		return 2;
	}
	if (!S_ISREG(st.st_mode)) {
		fprintf(stderr, "cgbpf: export: %s: not a regular file\n", path);
		return 2;
	}
	x->in_dev = st.st_dev;
	x->in_ino = st.st_ino;
	return 0;
}

static int read_trace(struct xport *x, const struct tread_ops *ops, struct tread_stats *st)
{
	if (x->mem)
		return tread__run_mem(x->mem, x->memlen, x->input, ops, x, st);
	return tread__run(x->input, ops, x, st);
}

/* Pass 1, the processes to export (*ps, sorted), their ranks and the
 * common time zero. 0, or the exit status after a message. */
static int analyse(struct xport *x, struct xproc ***out, size_t *nout)
{
	struct tread_ops ops = { .track = on_track, .clock = on_clock, .attr = on_attr,
				 .slice = pass1_slice };
	struct tread_stats st = { 0 };
	struct xproc **ps;
	size_t nps = 0, i = 0, nsel = 0;
	uint64_t k, v;
	int r;

	r = read_trace(x, &ops, &st);
	if (r == -ENOMEM) {
		err("export: out of memory");
		return 1;
	}
	if (r) {
		fprintf(stderr, "cgbpf: export: %s is not a readable cgbpf trace (see above)\n",
			x->input);
		return 2;
	}
	if (st.truncated_tail)
		warn("%s ends inside a packet (a capture that was killed?): the last one is left out",
		     x->input);
	if (!x->cgbpf) {
		fprintf(stderr, "cgbpf: export: %s is not a cgbpf trace: %s\n", x->input,
			st.packets ? "no cgbpf attributes in it (a trace another tool wrote?)"
				   : "no trace packets in it");
		return 2;
	}
	/* Pass 1 classified each track at its first slice, with the
	 * descriptors read by then; cgbpf describes a track (and its parents)
	 * before its first event, but a classification made before a parent's
	 * descriptor came would stick: again, with all of them. */
	for (size_t j = 0; j < x->ntracks; j++)
		x->tracks[j]->classified = false;
	for (size_t j = 0; j < x->ntracks; j++)
		classify(x, x->tracks[j], 0);
	ps = calloc(x->procs.count + 1, sizeof(*ps));
	if (!ps) {
		err("export: out of memory");
		return 1;
	}
	while (hmap__next(&x->procs, &i, &k, &v)) {
		struct xproc *p = (struct xproc *)(uintptr_t)v;

		if (p->machine)
			x->machines_seen = true;
		if (!p->nslices || !pid_wanted(x, p->pid))
			continue;
		p->selected = true;
		ps[nps++] = p;
	}
	qsort(ps, nps, sizeof(*ps), cmp_proc);
	if (!nps) {
		if (x->npids)
			fprintf(stderr, "cgbpf: export: %s: none of the processes given with --pid "
				"has CUDA, NCCL or NVTX calls or GPU activity in this trace\n",
				x->input);
		else
			fprintf(stderr, "cgbpf: export: %s: nothing to export: no CUDA, NCCL or "
				"NVTX calls and no GPU activity in this trace\n", x->input);
		free(ps);
		return x->npids ? 2 : 1;
	}
	for (size_t j = 0; j < nps; j++) {
		pick_rank(ps[j]);
		if (ps[j]->min_ts < UINT64_MAX) {
			int64_t real = to_real(x, ps[j]->machine, ps[j]->min_ts);

			if (!nsel++ || real < x->base_real)
				x->base_real = real;
		}
	}
	*out = ps;
	*nout = nps;
	return 0;
}

/* Whether path names the input file (under any spelling: creating the
 * output would replace the trace before its second pass). */
static bool is_input(const struct xport *x, const char *path)
{
	struct stat st;

	if (!strcmp(path, x->input))
		return true;
	return x->in_ino && !stat(path, &st) && st.st_dev == x->in_dev && st.st_ino == x->in_ino;
}

/* Each process's output path, all of them before any file is made, so
 * that nothing is written when one is bad. 0 or the exit status. */
static int name_outputs(struct xport *x, struct xproc **ps, size_t nps)
{
	char pat[PATH_MAX];
	int r;

	if (nps > MAX_OUTPUTS) {
		fprintf(stderr, "cgbpf: export: %s has %zu processes to export, more than %d "
			"files at once: choose some with --pid\n", x->input, nps, MAX_OUTPUTS);
		return 2;
	}
	if (x->output) {
		snprintf(pat, sizeof(pat), "%s", x->output);
	} else if (default_output(x->input, nps > 1, x->machines_seen, pat, sizeof(pat))) {
		fprintf(stderr, "cgbpf: export: %s: name too long\n", x->input);
		return 2;
	}
	if (nps > 1 && !has_code(pat, 'p')) {
		fprintf(stderr, "cgbpf: export: %s has %zu processes to export (one file each, as "
			"Kineto writes one per rank): put %%p in -o, or choose one with --pid\n",
			x->input, nps);
		return 2;
	}
	for (size_t j = 0; j < nps; j++) {
		char path[PATH_MAX];

		if (!strcmp(pat, "-")) {
			if (nps > 1) {
				fprintf(stderr, "cgbpf: export: -o - writes one process: %zu in %s\n",
					nps, x->input);
				return 2;
			}
			ps[j]->path = strdup("-");
		} else {
			r = expand(pat, ps[j], path, sizeof(path));
			if (r == -EINVAL) {
				fprintf(stderr, "cgbpf: export: invalid -o '%s': %%p (pid), %%m "
					"(machine) and %%%% are the only %%-codes\n", x->output);
				return 2;
			}
			if (r) {
				fprintf(stderr, "cgbpf: export: -o '%s': name too long\n", pat);
				return 2;
			}
			if (is_input(x, path)) {
				fprintf(stderr, "cgbpf: export: the output %s is the input\n", path);
				return 2;
			}
			ps[j]->path = strdup(path);
		}
		if (!ps[j]->path) {
			err("export: out of memory");
			return 1;
		}
		for (size_t l = 0; l < j; l++) {
			if (!strcmp(ps[l]->path, ps[j]->path)) {
				fprintf(stderr, "cgbpf: export: pids %d and %d of %s would both be "
					"written to %s: put %%m in -o (a merged trace repeats pids)\n",
					ps[l]->pid, ps[j]->pid, x->input, ps[j]->path);
				return 2;
			}
		}
	}
	return 0;
}

/* Opens the files (unless x->fixed_out), writes heads, pass 2, tails.
 * 0, or 1 after a message (outputs removed). */
static int write_all(struct xport *x, struct xproc **ps, size_t nps)
{
	struct tread_ops ops = { .slice = pass2_slice };
	struct xtrack **tr = malloc((x->ntracks + 1) * sizeof(*tr));
	int ret = 0;

	if (!tr) {
		err("export: out of memory");
		return 1;
	}
	memcpy(tr, x->tracks, x->ntracks * sizeof(*tr));
	qsort(tr, x->ntracks, sizeof(*tr), cmp_track);
	for (size_t j = 0; j < nps; j++) {
		struct xproc *p = ps[j];

		if (x->fixed_out) {
			p->f = x->fixed_out;
		} else if (!strcmp(p->path, "-")) {
			p->f = stdout;
		} else {
			p->f = outfile__fopen(p->path, OUTFILE_MODE);
			if (!p->f) {
				int e = errno;

				fprintf(stderr, "cgbpf: export: cannot create %s: %s\n", p->path,
					outfile__strerror(e));
				free(tr);
				close_all(x, ps, nps, true);
				return 1;
			}
			setvbuf(p->f, NULL, _IOFBF, 64 << 10);
		}
		/* With one stream for all (the fuzzer) the documents are
		 * interleaved: not JSON, but every path runs. */
		write_head(x, p, tr, x->ntracks);
	}
	free(tr);
	if (read_trace(x, &ops, NULL)) {
		fprintf(stderr, "cgbpf: export: %s changed while it was read; nothing written\n",
			x->input);
		close_all(x, ps, nps, true);
		return 1;
	}
	for (size_t j = 0; j < nps; j++) {
		struct xproc *p = ps[j];

		write_tail(x, p);
		if (fflush(p->f) || ferror(p->f)) {
			fprintf(stderr, "cgbpf: export: writing %s: %s\n", p->path, strerror(errno));
			ret = 1;
		}
	}
	if (ret) {
		close_all(x, ps, nps, true);
		return 1;
	}
	for (size_t j = 0; j < nps; j++) {
		struct xproc *p = ps[j];

		if (p->f != stdout && p->f != x->fixed_out) {
			int fd = dup(fileno(p->f));

			if (fclose(p->f)) {
				fprintf(stderr, "cgbpf: export: writing %s: %s\n", p->path,
					strerror(errno));
				if (fd >= 0)
					outfile__discard(fd, p->path);
				ret = 1;
			}
			if (fd >= 0)
				close(fd);
		}
		p->f = NULL;
	}
	return ret;
}

static void report(struct xproc **ps, size_t nps)
{
	for (size_t j = 0; j < nps; j++) {
		struct xproc *p = ps[j];
		char rank[64] = "";

		if (p->world > 0 && p->rank >= 0)
			snprintf(rank, sizeof(rank), ", NCCL rank %d of %d", p->rank, p->world);
		else if (p->world > 0)
			snprintf(rank, sizeof(rank), ", %d NCCL ranks of %d (no single rank)",
				 p->nranks_here, p->world);
		info("wrote %s: pid %d (%s): %" PRIu64 " runtime and %" PRIu64 " driver calls, %"
		     PRIu64 " kernels, %" PRIu64 " copies, %" PRIu64 " memsets, %" PRIu64
		     " synchronizations, %" PRIu64 " NVTX ranges, %" PRIu64 " NCCL calls%s",
		     p->path, p->pid, p->name ? p->name : "?", p->counts[XC_RUNTIME],
		     p->counts[XC_DRIVER], p->counts[XC_KERNEL], p->counts[XC_MEMCPY],
		     p->counts[XC_MEMSET], p->counts[XC_SYNC], p->counts[XC_NVTX],
		     p->counts[XC_NCCL], rank);
		if (p->unended)
			warn("%s: %" PRIu64 " calls had not returned when the trace ended: written "
			     "with the duration 0", p->path, p->unended);
	}
}

static int run(struct xport *x)
{
	struct xproc **ps = NULL;
	size_t nps = 0;
	int ret;

	ret = analyse(x, &ps, &nps);
	if (!ret)
		ret = name_outputs(x, ps, nps);
	if (!ret)
		ret = write_all(x, ps, nps);
	if (!ret)
		report(ps, nps);
	free(ps);
	return ret;
}

int export__mem(const void *buf, size_t len, FILE *out)
{
	struct xport x = { .input = "(memory)", .mem = buf, .memlen = len, .fixed_out = out };
	struct xproc **ps = NULL;
	size_t nps = 0;
	int ret;

	ret = analyse(&x, &ps, &nps);
	for (size_t j = 0; !ret && j < nps; j++) {
		ps[j]->path = strdup("(memory)");
		if (!ps[j]->path)
			ret = 1;
	}
	if (!ret)
		ret = write_all(&x, ps, nps);
	free(ps);
	xport_free(&x);
	return ret;
}

int export__main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "format", required_argument, NULL, 'f' },
		{ "output", required_argument, NULL, 'o' },
		{ "pid", required_argument, NULL, 'p' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	struct xport x = { 0 };
	const char *format = NULL;
	int c, ret;

	while ((c = getopt_long(argc, argv, "f:o:p:vh", opts, NULL)) != -1) {
		switch (c) {
		case 'f':
			format = optarg;
			break;
		case 'o':
			if (!*optarg) {
				ret = usage_error("invalid -o '%s': empty", optarg);
				goto out;
			}
			x.output = optarg;
			break;
		case 'p':
			if (parse_pid_list(optarg, &x)) {
				ret = usage_error("invalid --pid '%s': process ids (1 or more), "
						  "comma-separated", optarg);
				goto out;
			}
			break;
		case 'v':
			log_verbosity = LOG_DEBUG;
			break;
		case 'h':
			fputs(usage, stdout);
			ret = 0;
			goto out;
		default:
			ret = usage_error("%s", "bad option");
			goto out;
		}
	}
	if (!format) {
		ret = usage_error("%s", "needs --format (kineto-json)");
		goto out;
	}
	if (strcmp(format, "kineto-json")) {
		ret = usage_error("unknown format '%s': kineto-json is the only one", format);
		goto out;
	}
	if (optind >= argc) {
		ret = usage_error("%s", "needs the trace to export");
		goto out;
	}
	if (argc - optind > 1) {
		ret = usage_error("one trace at a time ('%s' is one too many)", argv[optind + 1]);
		goto out;
	}
	x.input = argv[optind];
	if (x.output)
		for (const char *s = x.output; *s; s++) {
			if (*s != '%')
				continue;
			if (s[1] != 'p' && s[1] != 'm' && s[1] != '%') {
				ret = usage_error("invalid -o '%s': %%p (pid), %%m (machine) and "
						  "%%%% are the only %%-codes", x.output);
				goto out;
			}
			s++;
		}
	ret = check_input(&x, x.input);
	if (ret)
		goto out;
	ret = run(&x);
out:
	xport_free(&x);
	return ret;
}
