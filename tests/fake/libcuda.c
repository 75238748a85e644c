/* SPDX-License-Identifier: MIT */
/*
 * A fake CUDA driver (libcuda.so.1) for testing cgbpf on machines without
 * a GPU. It exports the driver API functions cgbpf probes under their
 * real exported names and behaves like a driver to its caller: handles are
 * validated, errors are the driver's, device memory is real host memory,
 * copies and memsets really move bytes, and synchronization really waits
 * for the simulated GPU.
 *
 * The GPU is simulated in virtual time rather than by worker threads: each
 * stream keeps the time at which its queued work will be done ("ready"),
 * a kernel launch pushes that time forward by the kernel's duration, and
 * synchronizing sleeps until it. Copies and memsets are performed at
 * submission, which no correct program can tell apart from performing
 * them later in stream order, since fake kernels never touch memory. This
 * keeps the launch path free of locks, allocation and thread hand-offs
 * (the tracer's benchmark launches ~1M kernels/s from one thread), cannot
 * deadlock, and survives fork() because there are no threads to lose.
 *
 * Legacy default stream semantics are kept: work on the NULL stream waits
 * for all earlier work on blocking streams of its context, and work on a
 * blocking stream (including the per-thread default stream) waits for
 * earlier NULL-stream work.
 *
 * Graphs: cuGraphCreate, kernel and memset nodes, instantiation, and
 * stream capture (a launch or an async memset on a capturing stream adds
 * a node and runs nothing). A graph launch runs the executable graph's
 * nodes one after the other on its stream, each an operation of its own
 * (the fake CUPTI gives each a record with the graph's and the node's id
 * and the launch's correlation id); dependencies are checked but nodes run
 * in the order they were added, which is one the dependencies allow. Copy
 * nodes, child graphs and capturing a copy are not simulated
 * (CUDA_ERROR_NOT_SUPPORTED).
 *
 * Kernel duration: FAKECUDA_KERNEL_NS (read at cuInit, default 0) for every
 * kernel, or "__ns<digits>" anywhere in the kernel's name for that kernel.
 * FAKECUDA_MEM_BYTES caps device memory (default 80 GiB; allocations are
 * lazily backed mmaps, so untouched bytes cost nothing). FAKECUDA_STATS=path
 * writes {"pid":..,"calls":{symbol:count}} at exit, counting every call the
 * library received ("%p" in the path becomes the pid), for ground truth.
 *
 * No exported function calls another exported function, and each has a
 * body of its own (so the compiler cannot fold two names into one
 * address): a tracer probing both would see one application call twice.
 * tests/fake/check-exports.sh checks the exports, tests/fake/selftest.sh
 * the behaviour.
 */
#define _GNU_SOURCE
/* See the exported names as they are, as NVIDIA's own build does. */
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>

#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <link.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#include <sys/syscall.h>

#include "fake_activity.h"
#if __has_include(<cudaProfiler.h>)
#include <cudaProfiler.h>
#else
CUresult cuProfilerStart(void);
CUresult cuProfilerStop(void);
#endif

#pragma GCC visibility push(hidden)

#define EXPORT __attribute__((visibility("default")))

/* Every exported function, for FAKECUDA_STATS and to give each a unique body. */
#define FAKE_API(X) \
	X(cuInit) X(cuDriverGetVersion) X(cuDeviceGet) X(cuDeviceGetCount) \
	X(cuDeviceGetName) X(cuGetErrorName) X(cuGetErrorString) \
	X(cuGetProcAddress) X(cuGetProcAddress_v2) \
	X(cuCtxCreate) X(cuCtxCreate_v2) X(cuCtxCreate_v3) X(cuCtxCreate_v4) \
	X(cuCtxDestroy_v2) X(cuCtxSetCurrent) X(cuCtxGetCurrent) \
	X(cuCtxSynchronize) X(cuCtxSynchronize_v2) \
	X(cuModuleLoad) X(cuModuleLoadData) X(cuModuleLoadDataEx) \
	X(cuModuleLoadFatBinary) X(cuModuleUnload) X(cuModuleGetFunction) \
	X(cuLibraryLoadData) X(cuLibraryLoadFromFile) X(cuLibraryUnload) \
	X(cuLibraryGetKernel) X(cuKernelGetFunction) \
	X(cuLaunchKernel) X(cuLaunchKernel_ptsz) X(cuLaunchKernelEx) \
	X(cuLaunchKernelEx_ptsz) X(cuLaunchCooperativeKernel) \
	X(cuLaunchCooperativeKernel_ptsz) X(cuGraphLaunch) X(cuGraphLaunch_ptsz) \
	X(cuMemAlloc_v2) X(cuMemAllocAsync) X(cuMemAllocAsync_ptsz) \
	X(cuMemAllocManaged) X(cuMemFree_v2) X(cuMemFreeAsync) \
	X(cuMemFreeAsync_ptsz) X(cuMemAllocHost_v2) X(cuMemHostAlloc) \
	X(cuMemFreeHost) \
	X(cuMemcpy) X(cuMemcpy_ptds) X(cuMemcpyAsync) X(cuMemcpyAsync_ptsz) \
	X(cuMemcpyHtoD_v2) X(cuMemcpyHtoD_v2_ptds) X(cuMemcpyHtoDAsync_v2) \
	X(cuMemcpyHtoDAsync_v2_ptsz) X(cuMemcpyDtoH_v2) X(cuMemcpyDtoH_v2_ptds) \
	X(cuMemcpyDtoHAsync_v2) X(cuMemcpyDtoHAsync_v2_ptsz) X(cuMemcpyDtoD_v2) \
	X(cuMemcpyDtoD_v2_ptds) X(cuMemcpyDtoDAsync_v2) X(cuMemcpyDtoDAsync_v2_ptsz) \
	X(cuMemsetD8_v2) X(cuMemsetD8_v2_ptds) X(cuMemsetD8Async) X(cuMemsetD8Async_ptsz) \
	X(cuMemsetD16_v2) X(cuMemsetD16_v2_ptds) X(cuMemsetD16Async) \
	X(cuMemsetD16Async_ptsz) X(cuMemsetD32_v2) X(cuMemsetD32_v2_ptds) \
	X(cuMemsetD32Async) X(cuMemsetD32Async_ptsz) \
	X(cuStreamCreate) X(cuStreamCreateWithPriority) X(cuStreamDestroy_v2) \
	X(cuStreamQuery) X(cuStreamQuery_ptsz) X(cuStreamSynchronize) \
	X(cuStreamSynchronize_ptsz) X(cuStreamWaitEvent) X(cuStreamWaitEvent_ptsz) \
	X(cuEventCreate) X(cuEventDestroy_v2) X(cuEventRecord) X(cuEventRecord_ptsz) \
	X(cuEventQuery) X(cuEventSynchronize) X(cuEventElapsedTime_v2) \
	X(cuGraphCreate) X(cuGraphDestroy) X(cuGraphAddKernelNode) \
	X(cuGraphAddKernelNode_v2) X(cuGraphAddMemsetNode) X(cuGraphGetNodes) \
	X(cuGraphInstantiate_v2) X(cuGraphInstantiateWithFlags) X(cuGraphExecDestroy) \
	X(cuStreamBeginCapture) X(cuStreamBeginCapture_ptsz) X(cuStreamBeginCapture_v2) \
	X(cuStreamBeginCapture_v2_ptsz) X(cuStreamEndCapture) X(cuStreamEndCapture_ptsz) \
	X(cuStreamIsCapturing) X(cuStreamIsCapturing_ptsz) \
	X(cuProfilerStart) X(cuProfilerStop)

#define API_ENUM(name) API_##name,
enum api_id { FAKE_API(API_ENUM) API__COUNT };
#undef API_ENUM
#define API_NAME(name) #name,
static const char *const api_names[] = { FAKE_API(API_NAME) };
#undef API_NAME

static int g_stats;			/* FAKECUDA_STATS given */
static unsigned long g_calls[API__COUNT];

#define API_ENTER(name) do { \
	if (__builtin_expect(g_stats, 0)) \
		__atomic_fetch_add(&g_calls[API_##name], 1, __ATOMIC_RELAXED); \
} while (0)

/* ------------------------------------------------------------ objects */

/*
 * Handles point into one reserved arena of fixed-size slots, so any handle
 * value can be checked without dereferencing wild memory: in range, slot
 * aligned, right magic. Slots are recycled but never unmapped, so a stale
 * handle reads as dead instead of crashing.
 */
#define SLOT_SIZE 128
#define ARENA_BYTES (64ul << 20)

enum {
	MAGIC_DEAD = 0,
	MAGIC_CTX = 0x43545831,		/* "CTX1" */
	MAGIC_STREAM = 0x5354524d,	/* "STRM" */
	MAGIC_EVENT = 0x45564e54,	/* "EVNT" */
	MAGIC_MODULE = 0x4d4f4455,	/* "MODU" */
	MAGIC_LIBRARY = 0x4c494252,	/* "LIBR" */
	MAGIC_FUNC = 0x46554e43,	/* "FUNC" */
	MAGIC_KERNEL = 0x4b45524e,	/* "KERN" */
	MAGIC_GRAPH = 0x47525048,	/* "GRPH" */
	MAGIC_GNODE = 0x474e4f44,	/* "GNOD" */
	MAGIC_GEXEC = 0x47455845,	/* "GEXE" */
	/* A per-thread stream whose context died; its thread unlinks it. */
	MAGIC_ZOMBIE = 0x5a4f4d42,
};

struct fctx;
struct fgraph;

struct obj {
	uint32_t magic;
	uint32_t pad;
	struct fctx *ctx;
	struct obj *next_free;
};

enum stream_kind { S_USER, S_LEGACY, S_PTDS };

struct fstream {
	struct obj h;
	uint64_t ready;		/* when all submitted work is done, CLOCK_MONOTONIC ns */
	unsigned int flags;
	int priority;
	int kind;
	struct fstream *tls_next;	/* per-thread streams of one thread */
	struct fgraph *capture;	/* the graph being captured; NULL: none */
};

struct fctx {
	struct obj h;
	struct fstream *null_stream;
	uint64_t blocking_max;	/* latest ready of any blocking non-NULL stream */
	uint64_t all_max;	/* latest ready of any stream */
	unsigned int flags;
	CUdevice dev;
};

struct fevent {
	struct obj h;
	uint64_t time;
	int recorded;
	unsigned int flags;
};

struct fsym;

struct fmod {
	struct obj h;
	struct fsym *syms;
};

/* A CUfunction or a CUkernel. */
struct fsym {
	struct obj h;
	char *name;
	struct obj *owner;	/* module or library; NULL for a kernel's function */
	int64_t ns;		/* duration from the name, -1 for the default */
	struct fsym *next;
	struct fsym *func;	/* kernel: its function in the latest context */
	struct fsym *kernel;	/* function: the kernel it came from */
};

/* What one graph node does; an executable graph holds a copy of each. */
enum { GN_KERNEL = 1, GN_MEMSET };

struct gwork {
	int kind;
	uint64_t id;		/* the node's, unique in the process (CUPTI's graphNodeId) */
	union {
		struct {
			struct fsym *fn;
			uint32_t grid[3], block[3], smem;
		} k;
		struct {
			uintptr_t dst;
			size_t pitch, width, height;
			uint32_t value, elem;
		} m;
	};
};

struct gnode {
	struct obj h;
	struct fgraph *graph;
	struct gwork w;
};

/* A graph: its nodes in the order they were added (a topological order,
 * since a node's dependencies exist before it). */
struct fgraph {
	struct obj h;
	struct gnode **nodes;
	size_t n, cap;
};

struct fexec {
	struct obj h;
	struct gwork *work;
	size_t n;
	uint32_t id;		/* CUPTI's graphId */
};

_Static_assert(sizeof(struct fstream) <= SLOT_SIZE, "slot");
_Static_assert(sizeof(struct gnode) <= SLOT_SIZE, "slot");
_Static_assert(sizeof(struct fgraph) <= SLOT_SIZE, "slot");
_Static_assert(sizeof(struct fexec) <= SLOT_SIZE, "slot");
_Static_assert(sizeof(struct fctx) <= SLOT_SIZE, "slot");
_Static_assert(sizeof(struct fevent) <= SLOT_SIZE, "slot");
_Static_assert(sizeof(struct fmod) <= SLOT_SIZE, "slot");
_Static_assert(sizeof(struct fsym) <= SLOT_SIZE, "slot");

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static char *g_arena;
static size_t g_arena_used;
static struct obj *g_free_slots;

static int g_inited;
static uint64_t g_kernel_ns;
static uint64_t g_mem_limit;

static __thread struct fctx *t_ctx;
static __thread struct fstream *t_ptds;
static pthread_key_t g_ptds_key;
static int g_ptds_key_ok;

static void *obj_alloc(uint32_t magic, struct fctx *ctx)
{
	struct obj *o = NULL;

	pthread_mutex_lock(&g_lock);
	if (!g_arena) {
		void *p = mmap(NULL, ARENA_BYTES, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		if (p != MAP_FAILED)
			g_arena = p;
	}
	if (g_free_slots) {
		o = g_free_slots;
		g_free_slots = o->next_free;
	} else if (g_arena && g_arena_used + SLOT_SIZE <= ARENA_BYTES) {
		o = (struct obj *)(g_arena + g_arena_used);
		g_arena_used += SLOT_SIZE;
	}
	if (o) {
		memset(o, 0, SLOT_SIZE);
		o->ctx = ctx;
		__atomic_store_n(&o->magic, magic, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&g_lock);
	return o;
}

/* Caller holds g_lock. */
static void obj_free_locked(struct obj *o)
{
	if (o->magic == MAGIC_FUNC || o->magic == MAGIC_KERNEL)
		free(((struct fsym *)o)->name);
	else if (o->magic == MAGIC_GRAPH)
		free(((struct fgraph *)o)->nodes);
	else if (o->magic == MAGIC_GEXEC)
		free(((struct fexec *)o)->work);
	__atomic_store_n(&o->magic, MAGIC_DEAD, __ATOMIC_RELEASE);
	o->next_free = g_free_slots;
	g_free_slots = o;
}

static void obj_free(void *o)
{
	pthread_mutex_lock(&g_lock);
	obj_free_locked(o);
	pthread_mutex_unlock(&g_lock);
}

static inline void *obj_check(const void *h, uint32_t magic)
{
	uintptr_t off = (uintptr_t)h - (uintptr_t)g_arena;

	if (!h || !g_arena || off >= ARENA_BYTES || off % SLOT_SIZE)
		return NULL;
	if (__atomic_load_n(&((const struct obj *)h)->magic, __ATOMIC_ACQUIRE) != magic)
		return NULL;
	return (void *)h;
}

/* Frees every live object for which pred() holds; caller holds g_lock. */
static void sweep_locked(int (*pred)(struct obj *o, const void *arg), const void *arg)
{
	for (size_t off = 0; off < g_arena_used; off += SLOT_SIZE) {
		struct obj *o = (struct obj *)(g_arena + off);

		if (o->magic != MAGIC_DEAD && o->magic != MAGIC_ZOMBIE && pred(o, arg))
			obj_free_locked(o);
	}
}

/* ------------------------------------------------------------ time */

static inline uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void wait_until(uint64_t t)
{
	struct timespec ts = { .tv_sec = t / 1000000000ull, .tv_nsec = t % 1000000000ull };

	while (now_ns() < t)
		clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
}

static inline uint64_t max_u64(uint64_t a, uint64_t b)
{
	return a > b ? a : b;
}

static inline void atomic_max(uint64_t *p, uint64_t v)
{
	uint64_t old = __atomic_load_n(p, __ATOMIC_RELAXED);

	while (old < v &&
	       !__atomic_compare_exchange_n(p, &old, v, 1, __ATOMIC_RELEASE, __ATOMIC_RELAXED))
		;
}

/* ------------------------------------------------------------ activity */

/* The fake CUPTI's hook (fake_activity.h); NULL: nobody listens, and the
 * launch path reads no clock for it. */
static fake_activity_fn g_act;
static uint32_t g_corr;

EXPORT void fakecuda_activity_hook(fake_activity_fn fn)
{
	__atomic_store_n(&g_act, fn, __ATOMIC_RELEASE);
}

static inline int act_on(void)
{
	return __builtin_expect(__atomic_load_n(&g_act, __ATOMIC_ACQUIRE) != NULL, 0);
}

/* Completes a and hands it to the hook: the call began at t0. */
static void act_emit(struct fake_activity *a, uint64_t t0)
{
	fake_activity_fn fn = __atomic_load_n(&g_act, __ATOMIC_ACQUIRE);

	if (!fn)
		return;
	a->corr = __atomic_add_fetch(&g_corr, 1, __ATOMIC_RELAXED);
	a->api_start = t0;
	a->api_end = now_ns();
	a->tid = (uint32_t)syscall(SYS_gettid);
	a->ptid = (uint32_t)pthread_self();
	fn(a);
}

/* A handle's slot number: unique in the process, as CUPTI's ids. */
static uint32_t slot_id(const void *h)
{
	return (uint32_t)(((const char *)h - g_arena) / SLOT_SIZE);
}

/* What a copy or a memset of n bytes takes on the simulated GPU while a
 * CUPTI listens (10 and 20 bytes/ns); without one they take no time. */
static uint64_t mem_ns(size_t n, int set)
{
	return act_on() ? (uint64_t)n / (set ? 20 : 10) + 1 : 0;
}

/*
 * Queue work of duration dur on s after dep; returns when it will be done.
 * Zero-length work that nothing delays costs a few loads and no clock read.
 */
static uint64_t submit(struct fstream *s, uint64_t dur, int want_now, uint64_t dep)
{
	struct fctx *c = s->h.ctx;
	int blocking = !(s->flags & CU_STREAM_NON_BLOCKING);
	uint64_t old, end;

	if (s->kind == S_LEGACY)
		dep = max_u64(dep, __atomic_load_n(&c->blocking_max, __ATOMIC_ACQUIRE));
	else if (blocking)
		dep = max_u64(dep, __atomic_load_n(&c->null_stream->ready, __ATOMIC_ACQUIRE));
	if (dur || want_now)
		dep = max_u64(dep, now_ns());
	old = __atomic_load_n(&s->ready, __ATOMIC_ACQUIRE);
	do {
		end = max_u64(old, dep) + dur;
		if (end == old)
			return end;
	} while (!__atomic_compare_exchange_n(&s->ready, &old, end, 1, __ATOMIC_ACQ_REL,
					      __ATOMIC_ACQUIRE));
	atomic_max(&c->all_max, end);
	if (blocking && s->kind != S_LEGACY)
		atomic_max(&c->blocking_max, end);
	return end;
}

static inline uint64_t stream_ready(struct fstream *s)
{
	return __atomic_load_n(&s->ready, __ATOMIC_ACQUIRE);
}

/* ------------------------------------------------------------ contexts, streams */

static inline struct fctx *cur_ctx(void)
{
	struct fctx *c = t_ctx;

	if (c && __atomic_load_n(&c->h.magic, __ATOMIC_ACQUIRE) == MAGIC_CTX)
		return c;
	return NULL;
}

#define REQUIRE_INIT() do { \
	if (!__atomic_load_n(&g_inited, __ATOMIC_ACQUIRE)) \
		return CUDA_ERROR_NOT_INITIALIZED; \
} while (0)

#define REQUIRE_CTX(c) do { \
	REQUIRE_INIT(); \
	if (!((c) = cur_ctx())) \
		return CUDA_ERROR_INVALID_CONTEXT; \
} while (0)

static void ptds_release(void *unused)
{
	struct fstream *s, *next;

	pthread_mutex_lock(&g_lock);
	for (s = t_ptds; s; s = next) {
		next = s->tls_next;
		obj_free_locked(&s->h);
	}
	t_ptds = NULL;
	pthread_mutex_unlock(&g_lock);
}

static void ptds_key_create(void)
{
	g_ptds_key_ok = pthread_key_create(&g_ptds_key, ptds_release) == 0;
}

/* The calling thread's per-thread default stream in c. */
static struct fstream *ptds_get(struct fctx *c)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	struct fstream **pp = &t_ptds, *s;

	while ((s = *pp)) {
		if (s->h.magic == MAGIC_STREAM && s->h.ctx == c)
			return s;
		if (s->h.magic == MAGIC_ZOMBIE) {
			*pp = s->tls_next;
			obj_free(s);
			continue;
		}
		pp = &s->tls_next;
	}
	s = obj_alloc(MAGIC_STREAM, c);
	if (!s)
		return NULL;
	s->kind = S_PTDS;
	s->tls_next = t_ptds;
	t_ptds = s;
	pthread_once(&once, ptds_key_create);
	/* Any non-NULL value makes the key's destructor run at thread exit. */
	if (g_ptds_key_ok)
		pthread_setspecific(g_ptds_key, s);
	return s;
}

/* A stream argument: ptsz says the call is a _ptsz/_ptds variant. */
static struct fstream *stream_get(CUstream h, struct fctx *c, int ptsz)
{
	if (!h)
		return ptsz ? ptds_get(c) : c->null_stream;
	if (h == CU_STREAM_LEGACY)
		return c->null_stream;
	if (h == CU_STREAM_PER_THREAD)
		return ptds_get(c);
	return obj_check(h, MAGIC_STREAM);
}

/* ------------------------------------------------------------ memory */

enum { MEM_DEVICE = 1, MEM_MANAGED = 2, MEM_HOST = 4 };
#define MEM_DEV_ANY (MEM_DEVICE | MEM_MANAGED | MEM_HOST)

struct alloc {
	uintptr_t base;
	size_t size;
	size_t map_size;
	int kind;
	struct fctx *ctx;
};

/* Sorted by base, for range lookups from copies. */
static pthread_mutex_t g_alloc_lock = PTHREAD_MUTEX_INITIALIZER;
static struct alloc *g_allocs;
static size_t g_nallocs, g_allocs_cap;
static uint64_t g_dev_bytes;

/* Index of the first allocation with base > p; caller holds g_alloc_lock. */
static size_t alloc_upper(uintptr_t p)
{
	size_t lo = 0, hi = g_nallocs;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (g_allocs[mid].base <= p)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* Whether [p, p+n) lies inside one allocation of a kind in kinds. */
static int alloc_contains(uintptr_t p, size_t n, int kinds)
{
	int ok = 0;
	size_t i;

	pthread_mutex_lock(&g_alloc_lock);
	i = alloc_upper(p);
	if (i > 0) {
		struct alloc *a = &g_allocs[i - 1];

		ok = (a->kind & kinds) && p - a->base <= a->size && n <= a->size - (p - a->base);
	}
	pthread_mutex_unlock(&g_alloc_lock);
	return ok;
}

static CUresult mem_alloc(uintptr_t *out, size_t size, int kind, struct fctx *c)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE), map_size;
	CUresult rc = CUDA_SUCCESS;
	void *p;
	size_t i;

	if (size == 0)
		return CUDA_ERROR_INVALID_VALUE;
	if (size > SIZE_MAX - page)
		return CUDA_ERROR_OUT_OF_MEMORY;
	map_size = (size + page - 1) / page * page;

	pthread_mutex_lock(&g_alloc_lock);
	if (kind != MEM_HOST && size > g_mem_limit - g_dev_bytes) {
		rc = CUDA_ERROR_OUT_OF_MEMORY;
		goto out;
	}
	if (g_nallocs == g_allocs_cap) {
		size_t cap = g_allocs_cap ? g_allocs_cap * 2 : 64;
		struct alloc *v = realloc(g_allocs, cap * sizeof(*v));

		if (!v) {
			rc = CUDA_ERROR_OUT_OF_MEMORY;
			goto out;
		}
		g_allocs = v;
		g_allocs_cap = cap;
	}
	/* Backed lazily: a "300 MB" buffer only costs the pages it touches. */
	p = mmap(NULL, map_size, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED) {
		rc = CUDA_ERROR_OUT_OF_MEMORY;
		goto out;
	}
	i = alloc_upper((uintptr_t)p);
	memmove(&g_allocs[i + 1], &g_allocs[i], (g_nallocs - i) * sizeof(*g_allocs));
	g_allocs[i] = (struct alloc){ (uintptr_t)p, size, map_size, kind, c };
	g_nallocs++;
	if (kind != MEM_HOST)
		g_dev_bytes += size;
	*out = (uintptr_t)p;
out:
	pthread_mutex_unlock(&g_alloc_lock);
	return rc;
}

/* Caller holds g_alloc_lock. */
static void mem_release_locked(size_t i)
{
	struct alloc a = g_allocs[i];

	memmove(&g_allocs[i], &g_allocs[i + 1], (g_nallocs - i - 1) * sizeof(*g_allocs));
	g_nallocs--;
	if (a.kind != MEM_HOST)
		g_dev_bytes -= a.size;
	munmap((void *)a.base, a.map_size);
}

/* Frees the allocation starting exactly at p, if it is of a kind in kinds. */
static CUresult mem_free(uintptr_t p, int kinds)
{
	CUresult rc = CUDA_ERROR_INVALID_VALUE;
	size_t i;

	pthread_mutex_lock(&g_alloc_lock);
	i = alloc_upper(p);
	if (i > 0 && g_allocs[i - 1].base == p && (g_allocs[i - 1].kind & kinds)) {
		mem_release_locked(i - 1);
		rc = CUDA_SUCCESS;
	}
	pthread_mutex_unlock(&g_alloc_lock);
	return rc;
}

static void mem_free_ctx(struct fctx *c)
{
	pthread_mutex_lock(&g_alloc_lock);
	for (size_t i = g_nallocs; i-- > 0;)
		if (g_allocs[i].ctx == c)
			mem_release_locked(i);
	pthread_mutex_unlock(&g_alloc_lock);
}

/* ------------------------------------------------------------ graphs */

static uint32_t g_graph_ids;
static uint64_t g_node_ids;

/* Adds a node doing w to g; caller checked w. */
static CUresult graph_add(struct fgraph *g, const struct gwork *w, struct gnode **out)
{
	struct gnode *n = obj_alloc(MAGIC_GNODE, NULL);
	CUresult rc = CUDA_SUCCESS;

	if (!n)
		return CUDA_ERROR_OUT_OF_MEMORY;
	n->graph = g;
	n->w = *w;
	n->w.id = __atomic_add_fetch(&g_node_ids, 1, __ATOMIC_RELAXED);
	pthread_mutex_lock(&g_lock);
	if (g->n == g->cap) {
		size_t cap = g->cap ? g->cap * 2 : 8;
		struct gnode **v = realloc(g->nodes, cap * sizeof(*v));

		if (!v) {
			rc = CUDA_ERROR_OUT_OF_MEMORY;
			obj_free_locked(&n->h);
			goto out;
		}
		g->nodes = v;
		g->cap = cap;
	}
	g->nodes[g->n++] = n;
	if (out)
		*out = n;
out:
	pthread_mutex_unlock(&g_lock);
	return rc;
}

/* Frees g and its nodes; caller holds g_lock. */
static void graph_free_locked(struct fgraph *g)
{
	for (size_t i = 0; i < g->n; i++)
		obj_free_locked(&g->nodes[i]->h);
	obj_free_locked(&g->h);
}

/* The graph a stream captures into, or NULL. */
static inline struct fgraph *capturing(const struct fstream *s)
{
	return __atomic_load_n(&s->capture, __ATOMIC_ACQUIRE);
}

/* Fills count elements of elem bytes at dst with val. */
static void fill(uintptr_t dst, unsigned int val, size_t elem, size_t count)
{
	if (elem == 1) {
		memset((void *)dst, (int)(val & 0xff), count);
	} else if (elem == 2) {
		uint16_t *p = (uint16_t *)dst, v = (uint16_t)val;

		for (size_t i = 0; i < count; i++)
			p[i] = v;
	} else {
		uint32_t *p = (uint32_t *)dst;

		for (size_t i = 0; i < count; i++)
			p[i] = val;
	}
}

/* Where a copy's ends must lie: device side, or any memory at all. */
enum { END_HOST = 0, END_DEV = MEM_DEV_ANY };

static CUresult copy_common(uintptr_t dst, int dst_kind, uintptr_t src, int src_kind, size_t n,
			    CUstream h, int ptsz, int async)
{
	struct fstream *s;
	struct fctx *c;
	uint64_t end, t0, dur;

	REQUIRE_CTX(c);
	if (!(s = stream_get(h, c, ptsz)))
		return CUDA_ERROR_INVALID_HANDLE;
	if (capturing(s))
		return async ? CUDA_ERROR_NOT_SUPPORTED : CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
	if (n == 0)
		return CUDA_SUCCESS;
	if (!dst || !src)
		return CUDA_ERROR_INVALID_VALUE;
	if ((dst_kind && !alloc_contains(dst, n, dst_kind)) ||
	    (src_kind && !alloc_contains(src, n, src_kind)))
		return CUDA_ERROR_INVALID_VALUE;
	t0 = act_on() ? now_ns() : 0;
	dur = mem_ns(n, 0);
	end = submit(s, dur, dur != 0, 0);
	if (!async)
		wait_until(end);
	memmove((void *)dst, (const void *)src, n);
	if (t0) {
		struct fake_activity a = {
			.kind = FA_MEMCPY, .stream = slot_id(s), .context = slot_id(c),
			.start = end - dur, .end = end, .bytes = n, .async = async,
			.copy_kind = src_kind ? (dst_kind ? FA_DTOD : FA_DTOH) :
					      (dst_kind ? FA_HTOD : FA_HTOH),
		};

		act_emit(&a, t0);
	}
	return CUDA_SUCCESS;
}

static CUresult memset_common(uintptr_t dst, unsigned int val, size_t elem, size_t count,
			      CUstream h, int ptsz, int async)
{
	struct fgraph *g;
	struct fstream *s;
	struct fctx *c;
	uint64_t end, t0, dur;

	REQUIRE_CTX(c);
	if (!(s = stream_get(h, c, ptsz)))
		return CUDA_ERROR_INVALID_HANDLE;
	if (count == 0)
		return CUDA_SUCCESS;
	if (!dst || dst % elem || count > SIZE_MAX / elem ||
	    !alloc_contains(dst, count * elem, MEM_DEV_ANY))
		return CUDA_ERROR_INVALID_VALUE;
	if ((g = capturing(s))) {
		struct gwork w = { .kind = GN_MEMSET, .m = { .dst = dst, .pitch = count * elem,
							     .width = count, .height = 1,
							     .value = val, .elem = (uint32_t)elem } };
		CUresult rc;

		if (!async)
			return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
		t0 = act_on() ? now_ns() : 0;
		rc = graph_add(g, &w, NULL);
		if (rc == CUDA_SUCCESS && t0) {
			struct fake_activity a = {
				.kind = FA_MEMSET, .captured = 1, .stream = slot_id(s),
				.context = slot_id(c), .bytes = count * elem, .async = 1, .value = val,
			};

			act_emit(&a, t0);
		}
		return rc;
	}
	t0 = act_on() ? now_ns() : 0;
	dur = mem_ns(count * elem, 1);
	end = submit(s, dur, dur != 0, 0);
	if (!async)
		wait_until(end);
	if (t0) {
		struct fake_activity a = {
			.kind = FA_MEMSET, .stream = slot_id(s), .context = slot_id(c),
			.start = end - dur, .end = end, .bytes = count * elem, .async = async,
			.value = val,
		};

		act_emit(&a, t0);
	}
	fill(dst, val, elem, count);
	return CUDA_SUCCESS;
}

/* ------------------------------------------------------------ launches */

static inline struct fsym *launchable(CUfunction f)
{
	struct fsym *k = obj_check(f, MAGIC_FUNC);

	/* Since CUDA 12 a CUkernel may be passed where a CUfunction is expected. */
	return k ? k : obj_check(f, MAGIC_KERNEL);
}

/* The limits of current NVIDIA GPUs. */
static int dims_ok(unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,
		   unsigned int by, unsigned int bz, unsigned int smem)
{
	return gx && gy && gz && bx && by && bz && gx <= 0x7fffffffu && gy <= 65535 &&
	       gz <= 65535 && bx <= 1024 && by <= 1024 && bz <= 64 &&
	       (uint64_t)bx * by * bz <= 1024 && smem <= 227 * 1024;
}

static CUresult launch_common(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
			      unsigned int bx, unsigned int by, unsigned int bz,
			      unsigned int smem, CUstream h, int ptsz)
{
	struct fgraph *g;
	struct fstream *s;
	struct fsym *k;
	struct fctx *c;
	uint64_t ns;

	REQUIRE_CTX(c);
	if (!(k = launchable(f)))
		return CUDA_ERROR_INVALID_HANDLE;
	if (!dims_ok(gx, gy, gz, bx, by, bz, smem))
		return CUDA_ERROR_INVALID_VALUE;
	if (!(s = stream_get(h, c, ptsz)))
		return CUDA_ERROR_INVALID_HANDLE;
	if ((g = capturing(s))) {
		struct gwork w = { .kind = GN_KERNEL, .k = { .fn = k, .grid = { gx, gy, gz },
							     .block = { bx, by, bz }, .smem = smem } };
		uint64_t t0 = act_on() ? now_ns() : 0;
		CUresult rc = graph_add(g, &w, NULL);

		if (rc == CUDA_SUCCESS && t0) {
			struct fake_activity a = {
				.kind = FA_KERNEL, .captured = 1, .stream = slot_id(s),
				.context = slot_id(c), .name = k->name, .grid = { gx, gy, gz },
				.block = { bx, by, bz }, .smem_dynamic = smem,
			};

			act_emit(&a, t0);
		}
		return rc;
	}
	ns = k->ns >= 0 ? (uint64_t)k->ns : g_kernel_ns;
	if (act_on()) {
		uint64_t t0 = now_ns(), end = submit(s, ns, 1, 0);
		struct fake_activity a = {
			.kind = FA_KERNEL, .stream = slot_id(s), .context = slot_id(c),
			.start = end - ns, .end = end, .name = k->name,
			.grid = { gx, gy, gz }, .block = { bx, by, bz }, .smem_dynamic = smem,
		};

		act_emit(&a, t0);
		return CUDA_SUCCESS;
	}
	submit(s, ns, ns != 0, 0);
	return CUDA_SUCCESS;
}

static CUresult launch_ex_common(const CUlaunchConfig *cfg, CUfunction f, int ptsz)
{
	REQUIRE_INIT();
	if (!cfg || (cfg->numAttrs && !cfg->attrs))
		return CUDA_ERROR_INVALID_VALUE;
	return launch_common(f, cfg->gridDimX, cfg->gridDimY, cfg->gridDimZ, cfg->blockDimX,
			     cfg->blockDimY, cfg->blockDimZ, cfg->sharedMemBytes, cfg->hStream,
			     ptsz);
}

/* Runs an executable graph's nodes one after the other on h's stream. */
static CUresult graph_launch_common(CUgraphExec hexec, CUstream h, int ptsz)
{
	struct fake_activity *acts = NULL;
	struct fstream *s;
	struct fexec *e;
	struct fctx *c;
	uint64_t t0;

	REQUIRE_CTX(c);
	if (!(e = obj_check(hexec, MAGIC_GEXEC)))
		return CUDA_ERROR_INVALID_VALUE;
	if (!(s = stream_get(h, c, ptsz)))
		return CUDA_ERROR_INVALID_HANDLE;
	if (capturing(s))
		return CUDA_ERROR_NOT_SUPPORTED;	/* a child graph node: not simulated */
	/* A node's kernel or memory may have gone since instantiation. */
	for (size_t i = 0; i < e->n; i++) {
		const struct gwork *w = &e->work[i];

		if (w->kind == GN_KERNEL && !launchable((CUfunction)w->k.fn))
			return CUDA_ERROR_INVALID_VALUE;
		if (w->kind == GN_MEMSET &&
		    !alloc_contains(w->m.dst, w->m.pitch * (w->m.height - 1) + w->m.width * w->m.elem,
				    MEM_DEV_ANY))
			return CUDA_ERROR_INVALID_VALUE;
	}
	t0 = act_on() ? now_ns() : 0;
	if (t0 && e->n && !(acts = calloc(e->n, sizeof(*acts))))
		return CUDA_ERROR_OUT_OF_MEMORY;
	for (size_t i = 0; i < e->n; i++) {
		const struct gwork *w = &e->work[i];
		uint64_t dur, end;

		if (w->kind == GN_KERNEL)
			dur = w->k.fn->ns >= 0 ? (uint64_t)w->k.fn->ns : g_kernel_ns;
		else
			dur = mem_ns(w->m.width * w->m.elem * w->m.height, 1);
		end = submit(s, dur, dur != 0 || t0, 0);
		if (w->kind == GN_MEMSET)
			for (size_t r = 0; r < w->m.height; r++)
				fill(w->m.dst + r * w->m.pitch, w->m.value, w->m.elem, w->m.width);
		if (!acts)
			continue;
		acts[i] = (struct fake_activity){
			.kind = w->kind == GN_KERNEL ? FA_KERNEL : FA_MEMSET,
			.stream = slot_id(s), .context = slot_id(c), .start = end - dur, .end = end,
			.graph_id = e->id, .graph_node_id = w->id, .async = 1,
		};
		if (w->kind == GN_KERNEL) {
			acts[i].name = w->k.fn->name;
			memcpy(acts[i].grid, w->k.grid, sizeof(acts[i].grid));
			memcpy(acts[i].block, w->k.block, sizeof(acts[i].block));
			acts[i].smem_dynamic = w->k.smem;
		} else {
			acts[i].bytes = w->m.width * w->m.elem * w->m.height;
			acts[i].value = w->m.value;
		}
	}
	if (t0) {
		struct fake_activity a = { .kind = FA_GRAPH, .stream = slot_id(s),
					   .api = ptsz ? "cuGraphLaunch_ptsz" : "cuGraphLaunch",
					   .context = slot_id(c), .graph_id = e->id,
					   .nodes = acts, .nnodes = (uint32_t)e->n };

		act_emit(&a, t0);
	}
	free(acts);
	return CUDA_SUCCESS;
}

/* ------------------------------------------------------------ init, fork, stats */

static uint64_t env_u64(const char *name, uint64_t def)
{
	const char *v = getenv(name);
	char *end;
	unsigned long long x;

	if (!v || !*v)
		return def;
	errno = 0;
	x = strtoull(v, &end, 0);
	return (errno || *end) ? def : x;
}

static void fork_prepare(void)
{
	pthread_mutex_lock(&g_lock);
	pthread_mutex_lock(&g_alloc_lock);
}

static void fork_parent(void)
{
	pthread_mutex_unlock(&g_alloc_lock);
	pthread_mutex_unlock(&g_lock);
}

/*
 * A forked child starts with no driver state, as if the library had just
 * been loaded: it must call cuInit again, and the parent's handles and
 * device pointers are invalid in it (its device memory is unmapped).
 * The forking thread took both locks in fork_prepare, so it may release
 * them here (plain mutexes only: a rwlock's unlock tells a writer by its
 * thread id, which the child's thread does not share).
 */
static void fork_child(void)
{
	for (size_t off = 0; off < g_arena_used; off += SLOT_SIZE) {
		struct obj *o = (struct obj *)(g_arena + off);

		if (o->magic == MAGIC_FUNC || o->magic == MAGIC_KERNEL)
			free(((struct fsym *)o)->name);
		else if (o->magic == MAGIC_GRAPH)
			free(((struct fgraph *)o)->nodes);
		else if (o->magic == MAGIC_GEXEC)
			free(((struct fexec *)o)->work);
	}
	if (g_arena) {
		memset(g_arena, 0, g_arena_used);
		g_arena_used = 0;
	}
	g_free_slots = NULL;
	for (size_t i = 0; i < g_nallocs; i++)
		munmap((void *)g_allocs[i].base, g_allocs[i].map_size);
	g_nallocs = 0;
	g_dev_bytes = 0;
	g_inited = 0;
	t_ctx = NULL;
	t_ptds = NULL;
	if (g_ptds_key_ok)
		pthread_setspecific(g_ptds_key, NULL);
	memset(g_calls, 0, sizeof(g_calls));
	pthread_mutex_unlock(&g_alloc_lock);
	pthread_mutex_unlock(&g_lock);
}

__attribute__((constructor)) static void fake_load(void)
{
	const char *stats = getenv("FAKECUDA_STATS");

	g_stats = stats && *stats;
	pthread_atfork(fork_prepare, fork_parent, fork_child);
}

__attribute__((destructor)) static void fake_unload(void)
{
	const char *tmpl = getenv("FAKECUDA_STATS");
	char path[4096];
	size_t o = 0;
	int first = 1;
	FILE *f;

	if (!g_stats || !tmpl)
		return;
	for (const char *p = tmpl; *p && o < sizeof(path) - 1; p++) {
		if (p[0] == '%' && p[1] == 'p') {
			int n = snprintf(path + o, sizeof(path) - o, "%d", (int)getpid());

			if (n < 0 || (size_t)n >= sizeof(path) - o)
				return;
			o += (size_t)n;
			p++;
		} else {
			path[o++] = *p;
		}
	}
	path[o] = '\0';
	f = fopen(path, "w");
	if (!f)
		return;
	fprintf(f, "{\"pid\": %d, \"calls\": {", (int)getpid());
	for (int i = 0; i < API__COUNT; i++) {
		unsigned long n = __atomic_load_n(&g_calls[i], __ATOMIC_RELAXED);

		if (!n)
			continue;
		fprintf(f, "%s\"%s\": %lu", first ? "" : ", ", api_names[i], n);
		first = 0;
	}
	fprintf(f, "}}\n");
	fclose(f);
}

/*
 * CUDA_INJECTION64_PATH, as the driver honours it: the library is loaded
 * during the first cuInit and its InitializeInjection called (outside the
 * driver's lock: the library calls back into the driver). A library that
 * cannot be loaded or initialized is reported and ignored.
 * FAKECUDA_NO_INJECTION=1 makes the driver ignore the variable.
 */
static void load_injection(void)
{
	const char *path = getenv("CUDA_INJECTION64_PATH");
	int (*init)(void);
	void *h;

	/* FAKECUDA_NO_INJECTION=1: a driver that ignores the variable (tests
	 * of what cgbpf does without the library's help). */
	if (!path || !*path || env_u64("FAKECUDA_NO_INJECTION", 0))
		return;
	h = dlopen(path, RTLD_NOW);
	if (!h) {
		fprintf(stderr, "fake libcuda: CUDA_INJECTION64_PATH: %s\n", dlerror());
		return;
	}
	init = (int (*)(void))dlsym(h, "InitializeInjection");
	if (!init || init() != 1)
		fprintf(stderr, "fake libcuda: %s: InitializeInjection %s\n", path,
			init ? "failed" : "not found");
}

EXPORT CUresult cuInit(unsigned int Flags)
{
	int first = 0;

	API_ENTER(cuInit);
	if (Flags != 0)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&g_lock);
	if (!g_inited) {
		g_kernel_ns = env_u64("FAKECUDA_KERNEL_NS", 0);
		g_mem_limit = env_u64("FAKECUDA_MEM_BYTES", 80ull << 30);
		__atomic_store_n(&g_inited, 1, __ATOMIC_RELEASE);
		first = 1;
	}
	pthread_mutex_unlock(&g_lock);
	if (first)
		load_injection();
	return CUDA_SUCCESS;
}

EXPORT CUresult cuDriverGetVersion(int *driverVersion)
{
	API_ENTER(cuDriverGetVersion);
	if (!driverVersion)
		return CUDA_ERROR_INVALID_VALUE;
	*driverVersion = CUDA_VERSION;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGet(CUdevice *device, int ordinal)
{
	API_ENTER(cuDeviceGet);
	REQUIRE_INIT();
	if (!device)
		return CUDA_ERROR_INVALID_VALUE;
	if (ordinal != 0)
		return CUDA_ERROR_INVALID_DEVICE;
	*device = 0;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGetCount(int *count)
{
	API_ENTER(cuDeviceGetCount);
	REQUIRE_INIT();
	if (!count)
		return CUDA_ERROR_INVALID_VALUE;
	*count = 1;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuDeviceGetName(char *name, int len, CUdevice dev)
{
	API_ENTER(cuDeviceGetName);
	REQUIRE_INIT();
	if (!name || len <= 0)
		return CUDA_ERROR_INVALID_VALUE;
	if (dev != 0)
		return CUDA_ERROR_INVALID_DEVICE;
	snprintf(name, (size_t)len, "cgbpf fake GPU");
	return CUDA_SUCCESS;
}

/* ------------------------------------------------------------ errors */

#define FAKE_ERRORS(X) \
	X(CUDA_SUCCESS, "no error") \
	X(CUDA_ERROR_INVALID_VALUE, "invalid argument") \
	X(CUDA_ERROR_OUT_OF_MEMORY, "out of memory") \
	X(CUDA_ERROR_NOT_INITIALIZED, "initialization error") \
	X(CUDA_ERROR_DEINITIALIZED, "driver shutting down") \
	X(CUDA_ERROR_STUB_LIBRARY, "CUDA driver is a stub library") \
	X(CUDA_ERROR_NO_DEVICE, "no CUDA-capable device is detected") \
	X(CUDA_ERROR_INVALID_DEVICE, "invalid device ordinal") \
	X(CUDA_ERROR_INVALID_IMAGE, "device kernel image is invalid") \
	X(CUDA_ERROR_INVALID_CONTEXT, "invalid device context") \
	X(CUDA_ERROR_NO_BINARY_FOR_GPU, "no kernel image is available for execution on the device") \
	X(CUDA_ERROR_INVALID_SOURCE, "device kernel image is invalid") \
	X(CUDA_ERROR_FILE_NOT_FOUND, "file not found") \
	X(CUDA_ERROR_OPERATING_SYSTEM, "OS call failed or operation not supported on this OS") \
	X(CUDA_ERROR_INVALID_HANDLE, "invalid resource handle") \
	X(CUDA_ERROR_ILLEGAL_STATE, "the operation cannot be performed in the present state") \
	X(CUDA_ERROR_NOT_FOUND, "named symbol not found") \
	X(CUDA_ERROR_NOT_READY, "device not ready") \
	X(CUDA_ERROR_ILLEGAL_ADDRESS, "an illegal memory access was encountered") \
	X(CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES, "too many resources requested for launch") \
	X(CUDA_ERROR_LAUNCH_FAILED, "unspecified launch failure") \
	X(CUDA_ERROR_NOT_PERMITTED, "operation not permitted") \
	X(CUDA_ERROR_NOT_SUPPORTED, "operation not supported") \
	X(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "operation not permitted when stream is capturing") \
	X(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, "operation failed due to a previous error during capture") \
	X(CUDA_ERROR_UNKNOWN, "unknown error")

EXPORT CUresult cuGetErrorName(CUresult error, const char **pStr)
{
	API_ENTER(cuGetErrorName);
	if (!pStr)
		return CUDA_ERROR_INVALID_VALUE;
	switch (error) {
#define ERR_NAME(code, str) case code: *pStr = #code; return CUDA_SUCCESS;
	FAKE_ERRORS(ERR_NAME)
#undef ERR_NAME
	default:
		*pStr = NULL;
		return CUDA_ERROR_INVALID_VALUE;
	}
}

EXPORT CUresult cuGetErrorString(CUresult error, const char **pStr)
{
	API_ENTER(cuGetErrorString);
	if (!pStr)
		return CUDA_ERROR_INVALID_VALUE;
	switch (error) {
#define ERR_STR(code, str) case code: *pStr = str; return CUDA_SUCCESS;
	FAKE_ERRORS(ERR_STR)
#undef ERR_STR
	default:
		*pStr = NULL;
		return CUDA_ERROR_INVALID_VALUE;
	}
}

/* ------------------------------------------------------------ cuGetProcAddress */

static void *g_self;
static Dl_info g_self_info;

static void self_open(void)
{
	if (dladdr((void *)&self_open, &g_self_info) && g_self_info.dli_fname)
		g_self = dlopen(g_self_info.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
}

/* A symbol this library itself defines, not one of its dependencies. */
static void *self_sym(const char *name)
{
	Dl_info info;
	void *p;

	if (!g_self || !(p = dlsym(g_self, name)))
		return NULL;
	if (!dladdr(p, &info) || info.dli_fbase != g_self_info.dli_fbase)
		return NULL;
	return p;
}

/*
 * The exported name a base name resolves to for a caller built against
 * cudaVersion, as the real driver does, for the versioned functions this
 * library exports. First match wins, so newer entries come first.
 */
static const struct {
	const char *base;
	int since;
	const char *sym;
} versioned[] = {
	{ "cuCtxCreate", 13000, "cuCtxCreate_v4" },
	{ "cuCtxCreate", 3020, "cuCtxCreate_v2" },
	{ "cuMemAlloc", 3020, "cuMemAlloc_v2" },
	{ "cuMemFree", 3020, "cuMemFree_v2" },
	{ "cuMemAllocHost", 3020, "cuMemAllocHost_v2" },
	{ "cuMemcpyHtoD", 3020, "cuMemcpyHtoD_v2" },
	{ "cuMemcpyDtoH", 3020, "cuMemcpyDtoH_v2" },
	{ "cuMemcpyDtoD", 3020, "cuMemcpyDtoD_v2" },
	{ "cuMemcpyHtoDAsync", 3020, "cuMemcpyHtoDAsync_v2" },
	{ "cuMemcpyDtoHAsync", 3020, "cuMemcpyDtoHAsync_v2" },
	{ "cuMemcpyDtoDAsync", 3020, "cuMemcpyDtoDAsync_v2" },
	{ "cuMemsetD8", 3020, "cuMemsetD8_v2" },
	{ "cuMemsetD16", 3020, "cuMemsetD16_v2" },
	{ "cuMemsetD32", 3020, "cuMemsetD32_v2" },
	{ "cuCtxDestroy", 4000, "cuCtxDestroy_v2" },
	{ "cuStreamDestroy", 4000, "cuStreamDestroy_v2" },
	{ "cuEventDestroy", 4000, "cuEventDestroy_v2" },
	{ "cuEventElapsedTime", 12080, "cuEventElapsedTime_v2" },
	{ "cuGetProcAddress", 12000, "cuGetProcAddress_v2" },
	{ "cuGraphAddKernelNode", 12000, "cuGraphAddKernelNode_v2" },
	{ "cuGraphInstantiate", 12000, "cuGraphInstantiateWithFlags" },
	{ "cuGraphInstantiate", 11000, "cuGraphInstantiate_v2" },
	{ "cuStreamBeginCapture", 10010, "cuStreamBeginCapture_v2" },
};

static CUresult proc_address(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
			     CUdriverProcAddressQueryResult *status)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	const char *name = symbol;
	char buf[256];
	void *p = NULL;

	if (!symbol || !pfn)
		return CUDA_ERROR_INVALID_VALUE;
	*pfn = NULL;
	pthread_once(&once, self_open);
	for (size_t i = 0; i < sizeof(versioned) / sizeof(versioned[0]); i++) {
		if (!strcmp(symbol, versioned[i].base) && cudaVersion >= versioned[i].since) {
			name = versioned[i].sym;
			break;
		}
	}
	if (strncmp(name, "cu", 2) != 0)
		goto not_found;
	if (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) {
		static const char *const sfx[] = { "_ptds", "_ptsz" };

		for (size_t i = 0; !p && i < 2; i++) {
			int n = snprintf(buf, sizeof(buf), "%s%s", name, sfx[i]);

			if (n > 0 && (size_t)n < sizeof(buf))
				p = self_sym(buf);
		}
	}
	if (!p)
		p = self_sym(name);
	if (!p)
		goto not_found;
	*pfn = p;
	if (status)
		*status = CU_GET_PROC_ADDRESS_SUCCESS;
	return CUDA_SUCCESS;
not_found:
	if (status)
		*status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
	return CUDA_ERROR_NOT_FOUND;
}

EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags)
{
	API_ENTER(cuGetProcAddress);
	return proc_address(symbol, pfn, cudaVersion, flags, NULL);
}

EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion,
				    cuuint64_t flags, CUdriverProcAddressQueryResult *symbolStatus)
{
	API_ENTER(cuGetProcAddress_v2);
	return proc_address(symbol, pfn, cudaVersion, flags, symbolStatus);
}

/* ------------------------------------------------------------ contexts */

static CUresult ctx_create(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
	struct fstream *ns;
	struct fctx *c;

	REQUIRE_INIT();
	if (!pctx || (flags & ~(unsigned int)CU_CTX_FLAGS_MASK))
		return CUDA_ERROR_INVALID_VALUE;
	if (dev != 0)
		return CUDA_ERROR_INVALID_DEVICE;
	if (!(c = obj_alloc(MAGIC_CTX, NULL)))
		return CUDA_ERROR_OUT_OF_MEMORY;
	c->h.ctx = c;
	c->flags = flags;
	c->dev = dev;
	if (!(ns = obj_alloc(MAGIC_STREAM, c))) {
		obj_free(c);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	ns->kind = S_LEGACY;
	c->null_stream = ns;
	t_ctx = c;
	*pctx = (CUcontext)c;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxCreate(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
	API_ENTER(cuCtxCreate);
	return ctx_create(pctx, flags, dev);
}

EXPORT CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
	API_ENTER(cuCtxCreate_v2);
	return ctx_create(pctx, flags, dev);
}

EXPORT CUresult cuCtxCreate_v3(CUcontext *pctx, CUexecAffinityParam *paramsArray, int numParams,
			       unsigned int flags, CUdevice dev)
{
	API_ENTER(cuCtxCreate_v3);
	if (numParams < 0 || (numParams > 0 && !paramsArray))
		return CUDA_ERROR_INVALID_VALUE;
	return ctx_create(pctx, flags, dev);
}

EXPORT CUresult cuCtxCreate_v4(CUcontext *pctx, CUctxCreateParams *ctxCreateParams,
			       unsigned int flags, CUdevice dev)
{
	API_ENTER(cuCtxCreate_v4);
	if (ctxCreateParams && ctxCreateParams->numExecAffinityParams < 0)
		return CUDA_ERROR_INVALID_VALUE;
	return ctx_create(pctx, flags, dev);
}

static int owned_by_ctx(struct obj *o, const void *c)
{
	return o->ctx == c && o != c;
}

EXPORT CUresult cuCtxDestroy_v2(CUcontext ctx)
{
	struct fctx *c;

	API_ENTER(cuCtxDestroy_v2);
	REQUIRE_INIT();
	if (!(c = obj_check(ctx, MAGIC_CTX)))
		return CUDA_ERROR_INVALID_CONTEXT;
	pthread_mutex_lock(&g_lock);
	/* Per-thread streams stay linked in their threads' lists until those unlink them. */
	for (size_t off = 0; off < g_arena_used; off += SLOT_SIZE) {
		struct fstream *s = (struct fstream *)(g_arena + off);

		if (s->h.magic == MAGIC_STREAM && s->h.ctx == c && s->kind == S_PTDS)
			s->h.magic = MAGIC_ZOMBIE;
	}
	sweep_locked(owned_by_ctx, c);
	obj_free_locked(&c->h);
	pthread_mutex_unlock(&g_lock);
	mem_free_ctx(c);
	if (t_ctx == c)
		t_ctx = NULL;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxSetCurrent(CUcontext ctx)
{
	struct fctx *c = NULL;

	API_ENTER(cuCtxSetCurrent);
	REQUIRE_INIT();
	if (ctx && !(c = obj_check(ctx, MAGIC_CTX)))
		return CUDA_ERROR_INVALID_CONTEXT;
	t_ctx = c;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxGetCurrent(CUcontext *pctx)
{
	API_ENTER(cuCtxGetCurrent);
	REQUIRE_INIT();
	if (!pctx)
		return CUDA_ERROR_INVALID_VALUE;
	*pctx = (CUcontext)cur_ctx();
	return CUDA_SUCCESS;
}

/* cudaProfiler.h: capture ranges of profilers (--capture-range
 * cudaProfilerApi). The real driver starts and stops its own profiling;
 * here they only count. */
EXPORT CUresult cuProfilerStart(void)
{
	API_ENTER(cuProfilerStart);
	return CUDA_SUCCESS;
}

EXPORT CUresult cuProfilerStop(void)
{
	API_ENTER(cuProfilerStop);
	return CUDA_SUCCESS;
}

/*
 * The fake NCCL's asynchronous mode (FAKENCCL_ASYNC=1, see
 * tests/fake/libnccl.c): its operations return at once and stay pending on
 * the stream they were given until the application synchronizes it. After
 * its own wait, every stream or context synchronize calls
 *   int fakenccl_sync(void *stream, int all)
 * exported by the fake libnccl.so.2: the stream as the caller named it (a
 * _ptsz call's NULL: CU_STREAM_PER_THREAD), or all = 1 for a context
 * synchronize (every pending operation of the process). It returns 0, or
 * non-zero when a pending operation failed (its wait passed
 * FAKENCCL_TIMEOUT_S): the synchronize then returns CUDA_ERROR_UNKNOWN.
 * No link dependency: the hook is looked up at each synchronize until
 * found (in the global scope, then in a libnccl.so* already loaded
 * RTLD_LOCAL, as ctypes loads it), then cached; without it nothing is
 * called (the real NCCL, or no NCCL). The lookup makes no system call (no
 * library search on disk): a synchronize's syscalls stay the driver's.
 */
typedef int (*nccl_sync_fn)(void *stream, int all);

/* dl_iterate_phdr callback: the path of a loaded libnccl.so*, if any. */
static int find_nccl(struct dl_phdr_info *info, size_t size, void *arg)
{
	const char *base = info->dlpi_name ? strrchr(info->dlpi_name, '/') : NULL;

	if (!base || strncmp(base + 1, "libnccl.so", 10))
		return 0;
	snprintf(arg, PATH_MAX, "%s", info->dlpi_name);
	return 1;
}

static nccl_sync_fn nccl_sync_hook(void)
{
	static nccl_sync_fn fn;
	nccl_sync_fn f = __atomic_load_n(&fn, __ATOMIC_ACQUIRE);
	char path[PATH_MAX];
	void *h;

	if (f)
		return f;
	f = (nccl_sync_fn)dlsym(RTLD_DEFAULT, "fakenccl_sync");
	/* A full path already loaded: dlopen matches it without opening. */
	if (!f && dl_iterate_phdr(find_nccl, path) &&
	    (h = dlopen(path, RTLD_NOW | RTLD_NOLOAD))) {
		f = (nccl_sync_fn)dlsym(h, "fakenccl_sync");
		if (!f)
			dlclose(h);	/* kept open (never unloaded) once found */
	}
	if (f)
		__atomic_store_n(&fn, f, __ATOMIC_RELEASE);
	return f;
}

/* After a synchronize's own wait: the fake NCCL's pending operations. */
static CUresult nccl_sync(void *stream, int all)
{
	nccl_sync_fn f = nccl_sync_hook();

	return f && f(stream, all) ? CUDA_ERROR_UNKNOWN : CUDA_SUCCESS;
}

EXPORT CUresult cuCtxSynchronize(void)
{
	struct fctx *c;
	uint64_t t0;
	CUresult r;

	API_ENTER(cuCtxSynchronize);
	REQUIRE_CTX(c);
	t0 = act_on() ? now_ns() : 0;
	wait_until(__atomic_load_n(&c->all_max, __ATOMIC_ACQUIRE));
	r = nccl_sync(NULL, 1);	/* the fake NCCL's pending work, see above */
	if (t0) {
		struct fake_activity a = { .kind = FA_SYNC, .sync_type = FA_SYNC_CONTEXT,
					   .stream = UINT32_MAX, .context = slot_id(c),
					   .start = t0 };

		a.end = now_ns();
		act_emit(&a, t0);
	}
	return r;
}

EXPORT CUresult cuCtxSynchronize_v2(CUcontext ctx)
{
	struct fctx *c;

	API_ENTER(cuCtxSynchronize_v2);
	REQUIRE_INIT();
	if (ctx) {
		if (!(c = obj_check(ctx, MAGIC_CTX)))
			return CUDA_ERROR_INVALID_CONTEXT;
	} else if (!(c = cur_ctx())) {
		return CUDA_ERROR_INVALID_CONTEXT;
	}
	wait_until(__atomic_load_n(&c->all_max, __ATOMIC_ACQUIRE));
	return nccl_sync(NULL, 1);	/* the fake NCCL's pending work */
}

/* ------------------------------------------------------------ modules, libraries */

static int64_t name_ns(const char *name)
{
	for (const char *p = strstr(name, "__ns"); p; p = strstr(p + 1, "__ns")) {
		const char *d = p + 4;
		uint64_t v = 0;

		if (*d < '0' || *d > '9')
			continue;
		for (; *d >= '0' && *d <= '9'; d++)
			v = v > (uint64_t)INT64_MAX / 10 ? (uint64_t)INT64_MAX : v * 10 + (uint64_t)(*d - '0');
		return v > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)v;
	}
	return -1;
}

static CUresult module_new(void *out, uint32_t magic, struct fctx *c)
{
	struct fmod *m = obj_alloc(magic, c);

	if (!m)
		return CUDA_ERROR_OUT_OF_MEMORY;
	*(void **)out = m;
	return CUDA_SUCCESS;
}

static CUresult module_load(CUmodule *module, const void *image, const char *path)
{
	struct fctx *c;

	REQUIRE_CTX(c);
	if (!module || (!image && !path))
		return CUDA_ERROR_INVALID_VALUE;
	if (path && access(path, R_OK) != 0)
		return CUDA_ERROR_FILE_NOT_FOUND;
	return module_new(module, MAGIC_MODULE, c);
}

/* The (owner, name) symbol of type magic, made on first request. */
static CUresult sym_get(void *out, struct obj *owner, uint32_t magic, const char *name)
{
	struct fmod *m = (struct fmod *)owner;
	struct fsym *s;
	char *copy;

	if (!strncmp(name, "missing", 7))
		return CUDA_ERROR_NOT_FOUND;
	pthread_mutex_lock(&g_lock);
	for (s = m->syms; s; s = s->next) {
		if (!strcmp(s->name, name)) {
			pthread_mutex_unlock(&g_lock);
			*(void **)out = s;
			return CUDA_SUCCESS;
		}
	}
	pthread_mutex_unlock(&g_lock);

	if (!(copy = strdup(name)))
		return CUDA_ERROR_OUT_OF_MEMORY;
	if (!(s = obj_alloc(magic, owner->ctx))) {
		free(copy);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	s->name = copy;
	s->owner = owner;
	s->ns = name_ns(name);

	pthread_mutex_lock(&g_lock);
	/* Another thread may have made the same one meanwhile: keep the first. */
	for (struct fsym *o = m->syms; o; o = o->next) {
		if (!strcmp(o->name, name)) {
			obj_free_locked(&s->h);
			s = o;
			goto out;
		}
	}
	s->next = m->syms;
	m->syms = s;
out:
	pthread_mutex_unlock(&g_lock);
	*(void **)out = s;
	return CUDA_SUCCESS;
}

static int owned_by_module(struct obj *o, const void *m)
{
	struct fsym *s = (struct fsym *)o;

	if (o->magic != MAGIC_FUNC && o->magic != MAGIC_KERNEL)
		return 0;
	return s->owner == m || (s->kernel && s->kernel->owner == m);
}

static void module_unload(struct fmod *m)
{
	pthread_mutex_lock(&g_lock);
	sweep_locked(owned_by_module, m);
	obj_free_locked(&m->h);
	pthread_mutex_unlock(&g_lock);
}

EXPORT CUresult cuModuleLoad(CUmodule *module, const char *fname)
{
	API_ENTER(cuModuleLoad);
	if (!fname)
		return CUDA_ERROR_INVALID_VALUE;
	return module_load(module, NULL, fname);
}

EXPORT CUresult cuModuleLoadData(CUmodule *module, const void *image)
{
	API_ENTER(cuModuleLoadData);
	if (!image)
		return CUDA_ERROR_INVALID_VALUE;
	return module_load(module, image, NULL);
}

EXPORT CUresult cuModuleLoadDataEx(CUmodule *module, const void *image, unsigned int numOptions,
				   CUjit_option *options, void **optionValues)
{
	API_ENTER(cuModuleLoadDataEx);
	if (!image || (numOptions && (!options || !optionValues)))
		return CUDA_ERROR_INVALID_VALUE;
	return module_load(module, image, NULL);
}

EXPORT CUresult cuModuleLoadFatBinary(CUmodule *module, const void *fatCubin)
{
	API_ENTER(cuModuleLoadFatBinary);
	if (!fatCubin)
		return CUDA_ERROR_INVALID_VALUE;
	return module_load(module, fatCubin, NULL);
}

EXPORT CUresult cuModuleUnload(CUmodule hmod)
{
	struct fmod *m;

	API_ENTER(cuModuleUnload);
	REQUIRE_INIT();
	if (!(m = obj_check(hmod, MAGIC_MODULE)))
		return CUDA_ERROR_INVALID_HANDLE;
	module_unload(m);
	return CUDA_SUCCESS;
}

EXPORT CUresult cuModuleGetFunction(CUfunction *hfunc, CUmodule hmod, const char *name)
{
	struct fmod *m;
	struct fctx *c;

	API_ENTER(cuModuleGetFunction);
	REQUIRE_CTX(c);
	if (!hfunc || !name)
		return CUDA_ERROR_INVALID_VALUE;
	if (!(m = obj_check(hmod, MAGIC_MODULE)))
		return CUDA_ERROR_INVALID_HANDLE;
	return sym_get(hfunc, &m->h, MAGIC_FUNC, name);
}

static CUresult library_load(CUlibrary *library, const void *code, const char *path,
			     CUjit_option *jitOptions, void **jitOptionsValues,
			     unsigned int numJitOptions, CUlibraryOption *libraryOptions,
			     void **libraryOptionValues, unsigned int numLibraryOptions)
{
	REQUIRE_INIT();
	if (!library || (!code && !path) ||
	    (numJitOptions && (!jitOptions || !jitOptionsValues)) ||
	    (numLibraryOptions && (!libraryOptions || !libraryOptionValues)))
		return CUDA_ERROR_INVALID_VALUE;
	if (path && access(path, R_OK) != 0)
		return CUDA_ERROR_FILE_NOT_FOUND;
	/* Libraries are context-independent. */
	return module_new(library, MAGIC_LIBRARY, NULL);
}

EXPORT CUresult cuLibraryLoadData(CUlibrary *library, const void *code, CUjit_option *jitOptions,
				  void **jitOptionsValues, unsigned int numJitOptions,
				  CUlibraryOption *libraryOptions, void **libraryOptionValues,
				  unsigned int numLibraryOptions)
{
	API_ENTER(cuLibraryLoadData);
	if (!code)
		return CUDA_ERROR_INVALID_VALUE;
	return library_load(library, code, NULL, jitOptions, jitOptionsValues, numJitOptions,
			    libraryOptions, libraryOptionValues, numLibraryOptions);
}

EXPORT CUresult cuLibraryLoadFromFile(CUlibrary *library, const char *fileName,
				      CUjit_option *jitOptions, void **jitOptionsValues,
				      unsigned int numJitOptions, CUlibraryOption *libraryOptions,
				      void **libraryOptionValues, unsigned int numLibraryOptions)
{
	API_ENTER(cuLibraryLoadFromFile);
	if (!fileName)
		return CUDA_ERROR_INVALID_VALUE;
	return library_load(library, NULL, fileName, jitOptions, jitOptionsValues, numJitOptions,
			    libraryOptions, libraryOptionValues, numLibraryOptions);
}

EXPORT CUresult cuLibraryUnload(CUlibrary library)
{
	struct fmod *m;

	API_ENTER(cuLibraryUnload);
	REQUIRE_INIT();
	if (!(m = obj_check(library, MAGIC_LIBRARY)))
		return CUDA_ERROR_INVALID_HANDLE;
	module_unload(m);
	return CUDA_SUCCESS;
}

EXPORT CUresult cuLibraryGetKernel(CUkernel *pKernel, CUlibrary library, const char *name)
{
	struct fmod *m;

	API_ENTER(cuLibraryGetKernel);
	REQUIRE_INIT();
	if (!pKernel || !name)
		return CUDA_ERROR_INVALID_VALUE;
	if (!(m = obj_check(library, MAGIC_LIBRARY)))
		return CUDA_ERROR_INVALID_HANDLE;
	return sym_get(pKernel, &m->h, MAGIC_KERNEL, name);
}

EXPORT CUresult cuKernelGetFunction(CUfunction *pFunc, CUkernel kernel)
{
	struct fsym *k, *f;
	struct fctx *c;
	char *copy;

	API_ENTER(cuKernelGetFunction);
	REQUIRE_CTX(c);
	if (!pFunc)
		return CUDA_ERROR_INVALID_VALUE;
	if (!(k = obj_check(kernel, MAGIC_KERNEL)))
		return CUDA_ERROR_INVALID_HANDLE;
	pthread_mutex_lock(&g_lock);
	f = k->func;
	if (f && f->h.magic == MAGIC_FUNC && f->kernel == k && f->h.ctx == c) {
		pthread_mutex_unlock(&g_lock);
		*pFunc = (CUfunction)f;
		return CUDA_SUCCESS;
	}
	pthread_mutex_unlock(&g_lock);
	if (!(copy = strdup(k->name)))
		return CUDA_ERROR_OUT_OF_MEMORY;
	if (!(f = obj_alloc(MAGIC_FUNC, c))) {
		free(copy);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	f->name = copy;
	f->ns = k->ns;
	f->kernel = k;
	pthread_mutex_lock(&g_lock);
	k->func = f;
	pthread_mutex_unlock(&g_lock);
	*pFunc = (CUfunction)f;
	return CUDA_SUCCESS;
}

/* ------------------------------------------------------------ launches */

EXPORT CUresult cuLaunchKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
			       unsigned int gridDimZ, unsigned int blockDimX,
			       unsigned int blockDimY, unsigned int blockDimZ,
			       unsigned int sharedMemBytes, CUstream hStream, void **kernelParams,
			       void **extra)
{
	API_ENTER(cuLaunchKernel);
	return launch_common(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ,
			     sharedMemBytes, hStream, 0);
}

EXPORT CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
				    unsigned int gridDimZ, unsigned int blockDimX,
				    unsigned int blockDimY, unsigned int blockDimZ,
				    unsigned int sharedMemBytes, CUstream hStream,
				    void **kernelParams, void **extra)
{
	API_ENTER(cuLaunchKernel_ptsz);
	return launch_common(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ,
			     sharedMemBytes, hStream, 1);
}

EXPORT CUresult cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f, void **kernelParams,
				 void **extra)
{
	API_ENTER(cuLaunchKernelEx);
	return launch_ex_common(config, f, 0);
}

EXPORT CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig *config, CUfunction f,
				      void **kernelParams, void **extra)
{
	API_ENTER(cuLaunchKernelEx_ptsz);
	return launch_ex_common(config, f, 1);
}

EXPORT CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned int gridDimX,
					  unsigned int gridDimY, unsigned int gridDimZ,
					  unsigned int blockDimX, unsigned int blockDimY,
					  unsigned int blockDimZ, unsigned int sharedMemBytes,
					  CUstream hStream, void **kernelParams)
{
	API_ENTER(cuLaunchCooperativeKernel);
	return launch_common(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ,
			     sharedMemBytes, hStream, 0);
}

EXPORT CUresult cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned int gridDimX,
					       unsigned int gridDimY, unsigned int gridDimZ,
					       unsigned int blockDimX, unsigned int blockDimY,
					       unsigned int blockDimZ, unsigned int sharedMemBytes,
					       CUstream hStream, void **kernelParams)
{
	API_ENTER(cuLaunchCooperativeKernel_ptsz);
	return launch_common(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ,
			     sharedMemBytes, hStream, 1);
}

EXPORT CUresult cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream)
{
	API_ENTER(cuGraphLaunch);
	return graph_launch_common(hGraphExec, hStream, 0);
}

EXPORT CUresult cuGraphLaunch_ptsz(CUgraphExec hGraphExec, CUstream hStream)
{
	API_ENTER(cuGraphLaunch_ptsz);
	return graph_launch_common(hGraphExec, hStream, 1);
}

/* ------------------------------------------------------------ memory API */

static CUresult alloc_common(CUdeviceptr *dptr, size_t size, int kind, CUstream h, int use_stream,
			     int ptsz)
{
	struct fctx *c;
	uintptr_t p;
	CUresult rc;

	REQUIRE_CTX(c);
	if (!dptr)
		return CUDA_ERROR_INVALID_VALUE;
	if (use_stream && !stream_get(h, c, ptsz))
		return CUDA_ERROR_INVALID_HANDLE;
	rc = mem_alloc(&p, size, kind, c);
	if (rc == CUDA_SUCCESS)
		*dptr = (CUdeviceptr)p;
	return rc;
}

static CUresult free_common(CUdeviceptr dptr, CUstream h, int use_stream, int ptsz)
{
	struct fctx *c;

	REQUIRE_CTX(c);
	if (use_stream && !stream_get(h, c, ptsz))
		return CUDA_ERROR_INVALID_HANDLE;
	if (!dptr)
		return use_stream ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
	return mem_free((uintptr_t)dptr, MEM_DEVICE | MEM_MANAGED);
}

static CUresult host_alloc_common(void **pp, size_t size, unsigned int flags)
{
	struct fctx *c;
	uintptr_t p;
	CUresult rc;

	REQUIRE_CTX(c);
	if (!pp || (flags & ~(unsigned int)(CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP |
					     CU_MEMHOSTALLOC_WRITECOMBINED)))
		return CUDA_ERROR_INVALID_VALUE;
	rc = mem_alloc(&p, size, MEM_HOST, c);
	if (rc == CUDA_SUCCESS)
		*pp = (void *)p;
	return rc;
}

EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
	API_ENTER(cuMemAlloc_v2);
	return alloc_common(dptr, bytesize, MEM_DEVICE, NULL, 0, 0);
}

EXPORT CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
	API_ENTER(cuMemAllocAsync);
	return alloc_common(dptr, bytesize, MEM_DEVICE, hStream, 1, 0);
}

EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
	API_ENTER(cuMemAllocAsync_ptsz);
	return alloc_common(dptr, bytesize, MEM_DEVICE, hStream, 1, 1);
}

EXPORT CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags)
{
	API_ENTER(cuMemAllocManaged);
	if (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST)
		return CUDA_ERROR_INVALID_VALUE;
	return alloc_common(dptr, bytesize, MEM_MANAGED, NULL, 0, 0);
}

EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr)
{
	API_ENTER(cuMemFree_v2);
	return free_common(dptr, NULL, 0, 0);
}

EXPORT CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream)
{
	API_ENTER(cuMemFreeAsync);
	return free_common(dptr, hStream, 1, 0);
}

EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream)
{
	API_ENTER(cuMemFreeAsync_ptsz);
	return free_common(dptr, hStream, 1, 1);
}

EXPORT CUresult cuMemAllocHost_v2(void **pp, size_t bytesize)
{
	API_ENTER(cuMemAllocHost_v2);
	return host_alloc_common(pp, bytesize, 0);
}

EXPORT CUresult cuMemHostAlloc(void **pp, size_t bytesize, unsigned int Flags)
{
	API_ENTER(cuMemHostAlloc);
	return host_alloc_common(pp, bytesize, Flags);
}

EXPORT CUresult cuMemFreeHost(void *p)
{
	struct fctx *c;

	API_ENTER(cuMemFreeHost);
	REQUIRE_CTX(c);
	if (!p)
		return CUDA_ERROR_INVALID_VALUE;
	return mem_free((uintptr_t)p, MEM_HOST);
}

/* ------------------------------------------------------------ copies */

#define U(p) ((uintptr_t)(p))

EXPORT CUresult cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount)
{
	API_ENTER(cuMemcpy);
	return copy_common(U(dst), END_HOST, U(src), END_HOST, ByteCount, NULL, 0, 0);
}

EXPORT CUresult cuMemcpy_ptds(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount)
{
	API_ENTER(cuMemcpy_ptds);
	return copy_common(U(dst), END_HOST, U(src), END_HOST, ByteCount, NULL, 1, 0);
}

EXPORT CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount,
			      CUstream hStream)
{
	API_ENTER(cuMemcpyAsync);
	return copy_common(U(dst), END_HOST, U(src), END_HOST, ByteCount, hStream, 0, 1);
}

EXPORT CUresult cuMemcpyAsync_ptsz(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount,
				   CUstream hStream)
{
	API_ENTER(cuMemcpyAsync_ptsz);
	return copy_common(U(dst), END_HOST, U(src), END_HOST, ByteCount, hStream, 1, 1);
}

EXPORT CUresult cuMemcpyHtoD_v2(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount)
{
	API_ENTER(cuMemcpyHtoD_v2);
	return copy_common(U(dstDevice), END_DEV, U(srcHost), END_HOST, ByteCount, NULL, 0, 0);
}

EXPORT CUresult cuMemcpyHtoD_v2_ptds(CUdeviceptr dstDevice, const void *srcHost,
				     size_t ByteCount)
{
	API_ENTER(cuMemcpyHtoD_v2_ptds);
	return copy_common(U(dstDevice), END_DEV, U(srcHost), END_HOST, ByteCount, NULL, 1, 0);
}

EXPORT CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dstDevice, const void *srcHost,
				     size_t ByteCount, CUstream hStream)
{
	API_ENTER(cuMemcpyHtoDAsync_v2);
	return copy_common(U(dstDevice), END_DEV, U(srcHost), END_HOST, ByteCount, hStream, 0, 1);
}

EXPORT CUresult cuMemcpyHtoDAsync_v2_ptsz(CUdeviceptr dstDevice, const void *srcHost,
					  size_t ByteCount, CUstream hStream)
{
	API_ENTER(cuMemcpyHtoDAsync_v2_ptsz);
	return copy_common(U(dstDevice), END_DEV, U(srcHost), END_HOST, ByteCount, hStream, 1, 1);
}

EXPORT CUresult cuMemcpyDtoH_v2(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount)
{
	API_ENTER(cuMemcpyDtoH_v2);
	return copy_common(U(dstHost), END_HOST, U(srcDevice), END_DEV, ByteCount, NULL, 0, 0);
}

EXPORT CUresult cuMemcpyDtoH_v2_ptds(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount)
{
	API_ENTER(cuMemcpyDtoH_v2_ptds);
	return copy_common(U(dstHost), END_HOST, U(srcDevice), END_DEV, ByteCount, NULL, 1, 0);
}

EXPORT CUresult cuMemcpyDtoHAsync_v2(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount,
				     CUstream hStream)
{
	API_ENTER(cuMemcpyDtoHAsync_v2);
	return copy_common(U(dstHost), END_HOST, U(srcDevice), END_DEV, ByteCount, hStream, 0, 1);
}

EXPORT CUresult cuMemcpyDtoHAsync_v2_ptsz(void *dstHost, CUdeviceptr srcDevice,
					  size_t ByteCount, CUstream hStream)
{
	API_ENTER(cuMemcpyDtoHAsync_v2_ptsz);
	return copy_common(U(dstHost), END_HOST, U(srcDevice), END_DEV, ByteCount, hStream, 1, 1);
}

EXPORT CUresult cuMemcpyDtoD_v2(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount)
{
	API_ENTER(cuMemcpyDtoD_v2);
	return copy_common(U(dstDevice), END_DEV, U(srcDevice), END_DEV, ByteCount, NULL, 0, 0);
}

EXPORT CUresult cuMemcpyDtoD_v2_ptds(CUdeviceptr dstDevice, CUdeviceptr srcDevice,
				     size_t ByteCount)
{
	API_ENTER(cuMemcpyDtoD_v2_ptds);
	return copy_common(U(dstDevice), END_DEV, U(srcDevice), END_DEV, ByteCount, NULL, 1, 0);
}

EXPORT CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dstDevice, CUdeviceptr srcDevice,
				     size_t ByteCount, CUstream hStream)
{
	API_ENTER(cuMemcpyDtoDAsync_v2);
	return copy_common(U(dstDevice), END_DEV, U(srcDevice), END_DEV, ByteCount, hStream, 0, 1);
}

EXPORT CUresult cuMemcpyDtoDAsync_v2_ptsz(CUdeviceptr dstDevice, CUdeviceptr srcDevice,
					  size_t ByteCount, CUstream hStream)
{
	API_ENTER(cuMemcpyDtoDAsync_v2_ptsz);
	return copy_common(U(dstDevice), END_DEV, U(srcDevice), END_DEV, ByteCount, hStream, 1, 1);
}

/* ------------------------------------------------------------ memsets */

EXPORT CUresult cuMemsetD8_v2(CUdeviceptr dstDevice, unsigned char uc, size_t N)
{
	API_ENTER(cuMemsetD8_v2);
	return memset_common(U(dstDevice), uc, 1, N, NULL, 0, 0);
}

EXPORT CUresult cuMemsetD8_v2_ptds(CUdeviceptr dstDevice, unsigned char uc, size_t N)
{
	API_ENTER(cuMemsetD8_v2_ptds);
	return memset_common(U(dstDevice), uc, 1, N, NULL, 1, 0);
}

EXPORT CUresult cuMemsetD8Async(CUdeviceptr dstDevice, unsigned char uc, size_t N,
				CUstream hStream)
{
	API_ENTER(cuMemsetD8Async);
	return memset_common(U(dstDevice), uc, 1, N, hStream, 0, 1);
}

EXPORT CUresult cuMemsetD8Async_ptsz(CUdeviceptr dstDevice, unsigned char uc, size_t N,
				     CUstream hStream)
{
	API_ENTER(cuMemsetD8Async_ptsz);
	return memset_common(U(dstDevice), uc, 1, N, hStream, 1, 1);
}

EXPORT CUresult cuMemsetD16_v2(CUdeviceptr dstDevice, unsigned short us, size_t N)
{
	API_ENTER(cuMemsetD16_v2);
	return memset_common(U(dstDevice), us, 2, N, NULL, 0, 0);
}

EXPORT CUresult cuMemsetD16_v2_ptds(CUdeviceptr dstDevice, unsigned short us, size_t N)
{
	API_ENTER(cuMemsetD16_v2_ptds);
	return memset_common(U(dstDevice), us, 2, N, NULL, 1, 0);
}

EXPORT CUresult cuMemsetD16Async(CUdeviceptr dstDevice, unsigned short us, size_t N,
				 CUstream hStream)
{
	API_ENTER(cuMemsetD16Async);
	return memset_common(U(dstDevice), us, 2, N, hStream, 0, 1);
}

EXPORT CUresult cuMemsetD16Async_ptsz(CUdeviceptr dstDevice, unsigned short us, size_t N,
				      CUstream hStream)
{
	API_ENTER(cuMemsetD16Async_ptsz);
	return memset_common(U(dstDevice), us, 2, N, hStream, 1, 1);
}

EXPORT CUresult cuMemsetD32_v2(CUdeviceptr dstDevice, unsigned int ui, size_t N)
{
	API_ENTER(cuMemsetD32_v2);
	return memset_common(U(dstDevice), ui, 4, N, NULL, 0, 0);
}

EXPORT CUresult cuMemsetD32_v2_ptds(CUdeviceptr dstDevice, unsigned int ui, size_t N)
{
	API_ENTER(cuMemsetD32_v2_ptds);
	return memset_common(U(dstDevice), ui, 4, N, NULL, 1, 0);
}

EXPORT CUresult cuMemsetD32Async(CUdeviceptr dstDevice, unsigned int ui, size_t N,
				 CUstream hStream)
{
	API_ENTER(cuMemsetD32Async);
	return memset_common(U(dstDevice), ui, 4, N, hStream, 0, 1);
}

EXPORT CUresult cuMemsetD32Async_ptsz(CUdeviceptr dstDevice, unsigned int ui, size_t N,
				      CUstream hStream)
{
	API_ENTER(cuMemsetD32Async_ptsz);
	return memset_common(U(dstDevice), ui, 4, N, hStream, 1, 1);
}

/* ------------------------------------------------------------ streams */

static CUresult stream_create(CUstream *phStream, unsigned int flags, int priority)
{
	struct fstream *s;
	struct fctx *c;

	REQUIRE_CTX(c);
	if (!phStream || (flags & ~(unsigned int)CU_STREAM_NON_BLOCKING))
		return CUDA_ERROR_INVALID_VALUE;
	if (!(s = obj_alloc(MAGIC_STREAM, c)))
		return CUDA_ERROR_OUT_OF_MEMORY;
	s->kind = S_USER;
	s->flags = flags;
	/* Clamped to the device's range [-5, 0], like the real driver. */
	s->priority = priority < -5 ? -5 : priority > 0 ? 0 : priority;
	*phStream = (CUstream)s;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuStreamCreate(CUstream *phStream, unsigned int Flags)
{
	API_ENTER(cuStreamCreate);
	return stream_create(phStream, Flags, 0);
}

EXPORT CUresult cuStreamCreateWithPriority(CUstream *phStream, unsigned int flags, int priority)
{
	API_ENTER(cuStreamCreateWithPriority);
	return stream_create(phStream, flags, priority);
}

EXPORT CUresult cuStreamDestroy_v2(CUstream hStream)
{
	struct fstream *s;

	API_ENTER(cuStreamDestroy_v2);
	REQUIRE_INIT();
	/* Pending work still counts for its context (its times are folded in already). */
	if (!(s = obj_check(hStream, MAGIC_STREAM)) || s->kind != S_USER)
		return CUDA_ERROR_INVALID_HANDLE;
	pthread_mutex_lock(&g_lock);
	/* A capture in progress is abandoned with its stream. */
	if (s->capture)
		graph_free_locked(s->capture);
	obj_free_locked(&s->h);
	pthread_mutex_unlock(&g_lock);
	return CUDA_SUCCESS;
}

static CUresult stream_query(CUstream h, int ptsz)
{
	struct fstream *s;
	struct fctx *c;

	REQUIRE_CTX(c);
	if (!(s = stream_get(h, c, ptsz)))
		return CUDA_ERROR_INVALID_HANDLE;
	return now_ns() >= stream_ready(s) ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

static CUresult stream_sync(CUstream h, int ptsz)
{
	struct fstream *s;
	struct fctx *c;
	uint64_t t0;
	CUresult r;

	REQUIRE_CTX(c);
	if (!(s = stream_get(h, c, ptsz)))
		return CUDA_ERROR_INVALID_HANDLE;
	if (capturing(s))
		return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
	t0 = act_on() ? now_ns() : 0;
	wait_until(stream_ready(s));
	/* The fake NCCL's work pending on this stream (see cuCtxSynchronize). */
	r = nccl_sync(!h && ptsz ? CU_STREAM_PER_THREAD : h, 0);
	if (t0) {
		struct fake_activity a = { .kind = FA_SYNC, .sync_type = FA_SYNC_STREAM,
					   .stream = slot_id(s), .context = slot_id(c),
					   .start = t0 };

		a.end = now_ns();
		act_emit(&a, t0);
	}
	return r;
}

static CUresult stream_wait_event(CUstream h, CUevent e, unsigned int flags, int ptsz)
{
	struct fstream *s;
	struct fevent *ev;
	struct fctx *c;

	REQUIRE_CTX(c);
	if (flags & ~1u)	/* CU_EVENT_WAIT_DEFAULT or CU_EVENT_WAIT_EXTERNAL */
		return CUDA_ERROR_INVALID_VALUE;
	if (!(s = stream_get(h, c, ptsz)) || !(ev = obj_check(e, MAGIC_EVENT)))
		return CUDA_ERROR_INVALID_HANDLE;
	if (__atomic_load_n(&ev->recorded, __ATOMIC_ACQUIRE))
		submit(s, 0, 0, __atomic_load_n(&ev->time, __ATOMIC_ACQUIRE));
	return CUDA_SUCCESS;
}

EXPORT CUresult cuStreamQuery(CUstream hStream)
{
	API_ENTER(cuStreamQuery);
	return stream_query(hStream, 0);
}

EXPORT CUresult cuStreamQuery_ptsz(CUstream hStream)
{
	API_ENTER(cuStreamQuery_ptsz);
	return stream_query(hStream, 1);
}

EXPORT CUresult cuStreamSynchronize(CUstream hStream)
{
	API_ENTER(cuStreamSynchronize);
	return stream_sync(hStream, 0);
}

EXPORT CUresult cuStreamSynchronize_ptsz(CUstream hStream)
{
	API_ENTER(cuStreamSynchronize_ptsz);
	return stream_sync(hStream, 1);
}

EXPORT CUresult cuStreamWaitEvent(CUstream hStream, CUevent hEvent, unsigned int Flags)
{
	API_ENTER(cuStreamWaitEvent);
	return stream_wait_event(hStream, hEvent, Flags, 0);
}

EXPORT CUresult cuStreamWaitEvent_ptsz(CUstream hStream, CUevent hEvent, unsigned int Flags)
{
	API_ENTER(cuStreamWaitEvent_ptsz);
	return stream_wait_event(hStream, hEvent, Flags, 1);
}

/* ------------------------------------------------------------ events */

EXPORT CUresult cuEventCreate(CUevent *phEvent, unsigned int Flags)
{
	struct fevent *ev;
	struct fctx *c;

	API_ENTER(cuEventCreate);
	REQUIRE_CTX(c);
	if (!phEvent || (Flags & ~(unsigned int)(CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING |
						  CU_EVENT_INTERPROCESS)))
		return CUDA_ERROR_INVALID_VALUE;
	if ((Flags & CU_EVENT_INTERPROCESS) && !(Flags & CU_EVENT_DISABLE_TIMING))
		return CUDA_ERROR_INVALID_VALUE;
	if (!(ev = obj_alloc(MAGIC_EVENT, c)))
		return CUDA_ERROR_OUT_OF_MEMORY;
	ev->flags = Flags;
	*phEvent = (CUevent)ev;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuEventDestroy_v2(CUevent hEvent)
{
	struct fevent *ev;

	API_ENTER(cuEventDestroy_v2);
	REQUIRE_INIT();
	if (!(ev = obj_check(hEvent, MAGIC_EVENT)))
		return CUDA_ERROR_INVALID_HANDLE;
	obj_free(ev);
	return CUDA_SUCCESS;
}

static CUresult event_record(CUevent e, CUstream h, int ptsz)
{
	struct fstream *s;
	struct fevent *ev;
	struct fctx *c;
	uint64_t t;

	REQUIRE_CTX(c);
	if (!(ev = obj_check(e, MAGIC_EVENT)) || !(s = stream_get(h, c, ptsz)))
		return CUDA_ERROR_INVALID_HANDLE;
	t = submit(s, 0, 1, 0);
	__atomic_store_n(&ev->time, t, __ATOMIC_RELEASE);
	__atomic_store_n(&ev->recorded, 1, __ATOMIC_RELEASE);
	return CUDA_SUCCESS;
}

EXPORT CUresult cuEventRecord(CUevent hEvent, CUstream hStream)
{
	API_ENTER(cuEventRecord);
	return event_record(hEvent, hStream, 0);
}

EXPORT CUresult cuEventRecord_ptsz(CUevent hEvent, CUstream hStream)
{
	API_ENTER(cuEventRecord_ptsz);
	return event_record(hEvent, hStream, 1);
}

EXPORT CUresult cuEventQuery(CUevent hEvent)
{
	struct fevent *ev;

	API_ENTER(cuEventQuery);
	REQUIRE_INIT();
	if (!(ev = obj_check(hEvent, MAGIC_EVENT)))
		return CUDA_ERROR_INVALID_HANDLE;
	if (!__atomic_load_n(&ev->recorded, __ATOMIC_ACQUIRE))
		return CUDA_SUCCESS;
	return now_ns() >= __atomic_load_n(&ev->time, __ATOMIC_ACQUIRE) ? CUDA_SUCCESS
									: CUDA_ERROR_NOT_READY;
}

EXPORT CUresult cuEventSynchronize(CUevent hEvent)
{
	struct fevent *ev;

	API_ENTER(cuEventSynchronize);
	REQUIRE_INIT();
	if (!(ev = obj_check(hEvent, MAGIC_EVENT)))
		return CUDA_ERROR_INVALID_HANDLE;
	if (__atomic_load_n(&ev->recorded, __ATOMIC_ACQUIRE))
		wait_until(__atomic_load_n(&ev->time, __ATOMIC_ACQUIRE));
	return CUDA_SUCCESS;
}

EXPORT CUresult cuEventElapsedTime_v2(float *pMilliseconds, CUevent hStart, CUevent hEnd)
{
	struct fevent *a, *b;
	uint64_t now = now_ns(), ta, tb;

	API_ENTER(cuEventElapsedTime_v2);
	REQUIRE_INIT();
	if (!pMilliseconds)
		return CUDA_ERROR_INVALID_VALUE;
	if (!(a = obj_check(hStart, MAGIC_EVENT)) || !(b = obj_check(hEnd, MAGIC_EVENT)))
		return CUDA_ERROR_INVALID_HANDLE;
	if ((a->flags | b->flags) & CU_EVENT_DISABLE_TIMING)
		return CUDA_ERROR_INVALID_HANDLE;
	if (!__atomic_load_n(&a->recorded, __ATOMIC_ACQUIRE) ||
	    !__atomic_load_n(&b->recorded, __ATOMIC_ACQUIRE))
		return CUDA_ERROR_INVALID_HANDLE;
	ta = __atomic_load_n(&a->time, __ATOMIC_ACQUIRE);
	tb = __atomic_load_n(&b->time, __ATOMIC_ACQUIRE);
	if (now < ta || now < tb)
		return CUDA_ERROR_NOT_READY;
	*pMilliseconds = (float)((double)((int64_t)(tb - ta)) / 1e6);
	return CUDA_SUCCESS;
}

/* ------------------------------------------------------------ graph API */

EXPORT CUresult cuGraphCreate(CUgraph *phGraph, unsigned int flags)
{
	struct fgraph *g;

	API_ENTER(cuGraphCreate);
	REQUIRE_INIT();
	if (!phGraph || flags)
		return CUDA_ERROR_INVALID_VALUE;
	/* Graphs belong to no context. */
	if (!(g = obj_alloc(MAGIC_GRAPH, NULL)))
		return CUDA_ERROR_OUT_OF_MEMORY;
	*phGraph = (CUgraph)g;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuGraphDestroy(CUgraph hGraph)
{
	struct fgraph *g;

	API_ENTER(cuGraphDestroy);
	REQUIRE_INIT();
	if (!(g = obj_check(hGraph, MAGIC_GRAPH)))
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&g_lock);
	graph_free_locked(g);
	pthread_mutex_unlock(&g_lock);
	return CUDA_SUCCESS;
}

/* The graph a node is added to, its dependencies checked: each a node of it. */
static CUresult node_args(void *out, CUgraph hGraph, const CUgraphNode *deps, size_t ndeps,
			  const void *params, struct fgraph **pg)
{
	REQUIRE_INIT();
	if (!out || !params || (ndeps && !deps))
		return CUDA_ERROR_INVALID_VALUE;
	if (!(*pg = obj_check(hGraph, MAGIC_GRAPH)))
		return CUDA_ERROR_INVALID_VALUE;
	for (size_t i = 0; i < ndeps; i++) {
		struct gnode *d = obj_check(deps[i], MAGIC_GNODE);

		if (!d || d->graph != *pg)
			return CUDA_ERROR_INVALID_VALUE;
	}
	return CUDA_SUCCESS;
}

static CUresult kernel_node(CUgraphNode *out, CUgraph hGraph, const CUgraphNode *deps,
			    size_t ndeps, const CUDA_KERNEL_NODE_PARAMS_v1 *p, CUkernel kern)
{
	struct fgraph *g;
	struct fsym *k;
	CUresult rc = node_args(out, hGraph, deps, ndeps, p, &g);
	struct gwork w = { .kind = GN_KERNEL };

	if (rc != CUDA_SUCCESS)
		return rc;
	if (!(k = launchable(p->func ? p->func : (CUfunction)kern)))
		return CUDA_ERROR_INVALID_VALUE;
	if (!dims_ok(p->gridDimX, p->gridDimY, p->gridDimZ, p->blockDimX, p->blockDimY,
		     p->blockDimZ, p->sharedMemBytes))
		return CUDA_ERROR_INVALID_VALUE;
	w.k.fn = k;
	w.k.grid[0] = p->gridDimX;
	w.k.grid[1] = p->gridDimY;
	w.k.grid[2] = p->gridDimZ;
	w.k.block[0] = p->blockDimX;
	w.k.block[1] = p->blockDimY;
	w.k.block[2] = p->blockDimZ;
	w.k.smem = p->sharedMemBytes;
	return graph_add(g, &w, (struct gnode **)out);
}

EXPORT CUresult cuGraphAddKernelNode(CUgraphNode *phGraphNode, CUgraph hGraph,
				     const CUgraphNode *dependencies, size_t numDependencies,
				     const CUDA_KERNEL_NODE_PARAMS_v1 *nodeParams)
{
	API_ENTER(cuGraphAddKernelNode);
	return kernel_node(phGraphNode, hGraph, dependencies, numDependencies, nodeParams, NULL);
}

EXPORT CUresult cuGraphAddKernelNode_v2(CUgraphNode *phGraphNode, CUgraph hGraph,
					const CUgraphNode *dependencies, size_t numDependencies,
					const CUDA_KERNEL_NODE_PARAMS *nodeParams)
{
	CUDA_KERNEL_NODE_PARAMS_v1 p;

	API_ENTER(cuGraphAddKernelNode_v2);
	if (!nodeParams)
		return CUDA_ERROR_INVALID_VALUE;
	/* v2 adds the CUkernel and the context after v1's fields. */
	memcpy(&p, nodeParams, sizeof(p));
	return kernel_node(phGraphNode, hGraph, dependencies, numDependencies, &p,
			   nodeParams->kern);
}

EXPORT CUresult cuGraphAddMemsetNode(CUgraphNode *phGraphNode, CUgraph hGraph,
				     const CUgraphNode *dependencies, size_t numDependencies,
				     const CUDA_MEMSET_NODE_PARAMS *p, CUcontext ctx)
{
	struct fgraph *g;
	struct gwork w = { .kind = GN_MEMSET };
	CUresult rc;

	API_ENTER(cuGraphAddMemsetNode);
	if ((rc = node_args(phGraphNode, hGraph, dependencies, numDependencies, p, &g)))
		return rc;
	if (ctx && !obj_check(ctx, MAGIC_CTX))
		return CUDA_ERROR_INVALID_CONTEXT;
	if ((p->elementSize != 1 && p->elementSize != 2 && p->elementSize != 4) || !p->dst ||
	    p->dst % p->elementSize || !p->width || !p->height ||
	    p->width > SIZE_MAX / p->elementSize ||
	    (p->height > 1 && p->pitch < p->width * p->elementSize) ||
	    (p->height > 1 && p->pitch > (SIZE_MAX - p->width * p->elementSize) / (p->height - 1)))
		return CUDA_ERROR_INVALID_VALUE;
	w.m.dst = p->dst;
	w.m.pitch = p->height > 1 ? p->pitch : p->width * p->elementSize;
	w.m.width = p->width;
	w.m.height = p->height;
	w.m.value = p->value;
	w.m.elem = p->elementSize;
	if (!alloc_contains(w.m.dst, w.m.pitch * (w.m.height - 1) + w.m.width * w.m.elem,
			    MEM_DEV_ANY))
		return CUDA_ERROR_INVALID_VALUE;
	return graph_add(g, &w, (struct gnode **)phGraphNode);
}

EXPORT CUresult cuGraphGetNodes(CUgraph hGraph, CUgraphNode *nodes, size_t *numNodes)
{
	struct fgraph *g;

	API_ENTER(cuGraphGetNodes);
	REQUIRE_INIT();
	if (!numNodes)
		return CUDA_ERROR_INVALID_VALUE;
	if (!(g = obj_check(hGraph, MAGIC_GRAPH)))
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&g_lock);
	if (nodes) {
		size_t n = *numNodes < g->n ? *numNodes : g->n;

		for (size_t i = 0; i < n; i++)
			nodes[i] = (CUgraphNode)g->nodes[i];
		for (size_t i = n; i < *numNodes; i++)
			nodes[i] = NULL;
		*numNodes = n;
	} else {
		*numNodes = g->n;
	}
	pthread_mutex_unlock(&g_lock);
	return CUDA_SUCCESS;
}

/* An executable snapshot of hGraph: later changes to the graph do not reach it. */
static CUresult instantiate(CUgraphExec *out, CUgraph hGraph)
{
	struct fgraph *g;
	struct fexec *e;

	REQUIRE_INIT();
	if (!out)
		return CUDA_ERROR_INVALID_VALUE;
	if (!(g = obj_check(hGraph, MAGIC_GRAPH)))
		return CUDA_ERROR_INVALID_VALUE;
	if (!(e = obj_alloc(MAGIC_GEXEC, NULL)))
		return CUDA_ERROR_OUT_OF_MEMORY;
	pthread_mutex_lock(&g_lock);
	if (g->n && !(e->work = malloc(g->n * sizeof(*e->work)))) {
		obj_free_locked(&e->h);
		pthread_mutex_unlock(&g_lock);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	for (size_t i = 0; i < g->n; i++)
		e->work[i] = g->nodes[i]->w;
	e->n = g->n;
	pthread_mutex_unlock(&g_lock);
	e->id = __atomic_add_fetch(&g_graph_ids, 1, __ATOMIC_RELAXED);
	*out = (CUgraphExec)e;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuGraphInstantiate_v2(CUgraphExec *phGraphExec, CUgraph hGraph,
				      CUgraphNode *phErrorNode, char *logBuffer, size_t bufferSize)
{
	CUresult rc;

	API_ENTER(cuGraphInstantiate_v2);
	rc = instantiate(phGraphExec, hGraph);
	if (rc == CUDA_SUCCESS && logBuffer && bufferSize)
		logBuffer[0] = '\0';
	if (phErrorNode)
		*phErrorNode = NULL;
	return rc;
}

EXPORT CUresult cuGraphInstantiateWithFlags(CUgraphExec *phGraphExec, CUgraph hGraph,
					    unsigned long long flags)
{
	API_ENTER(cuGraphInstantiateWithFlags);
	if (flags & ~(unsigned long long)(CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH |
					  CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD |
					  CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH |
					  CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY))
		return CUDA_ERROR_INVALID_VALUE;
	return instantiate(phGraphExec, hGraph);
}

EXPORT CUresult cuGraphExecDestroy(CUgraphExec hGraphExec)
{
	struct fexec *e;

	API_ENTER(cuGraphExecDestroy);
	REQUIRE_INIT();
	if (!(e = obj_check(hGraphExec, MAGIC_GEXEC)))
		return CUDA_ERROR_INVALID_VALUE;
	obj_free(e);
	return CUDA_SUCCESS;
}

/* ------------------------------------------------------------ stream capture */

static CUresult begin_capture(CUstream h, int mode, int ptsz)
{
	struct fstream *s;
	struct fgraph *g;
	struct fctx *c;

	REQUIRE_CTX(c);
	if (mode != CU_STREAM_CAPTURE_MODE_GLOBAL && mode != CU_STREAM_CAPTURE_MODE_THREAD_LOCAL &&
	    mode != CU_STREAM_CAPTURE_MODE_RELAXED)
		return CUDA_ERROR_INVALID_VALUE;
	if (!(s = stream_get(h, c, ptsz)))
		return CUDA_ERROR_INVALID_HANDLE;
	/* The legacy NULL stream cannot be captured. */
	if (s->kind == S_LEGACY)
		return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
	if (!(g = obj_alloc(MAGIC_GRAPH, NULL)))
		return CUDA_ERROR_OUT_OF_MEMORY;
	pthread_mutex_lock(&g_lock);
	if (s->capture) {
		obj_free_locked(&g->h);
		pthread_mutex_unlock(&g_lock);
		return CUDA_ERROR_ILLEGAL_STATE;
	}
	__atomic_store_n(&s->capture, g, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&g_lock);
	return CUDA_SUCCESS;
}

EXPORT CUresult cuStreamBeginCapture(CUstream hStream)
{
	API_ENTER(cuStreamBeginCapture);
	return begin_capture(hStream, CU_STREAM_CAPTURE_MODE_GLOBAL, 0);
}

EXPORT CUresult cuStreamBeginCapture_ptsz(CUstream hStream)
{
	API_ENTER(cuStreamBeginCapture_ptsz);
	return begin_capture(hStream, CU_STREAM_CAPTURE_MODE_GLOBAL, 1);
}

EXPORT CUresult cuStreamBeginCapture_v2(CUstream hStream, CUstreamCaptureMode mode)
{
	API_ENTER(cuStreamBeginCapture_v2);
	return begin_capture(hStream, (int)mode, 0);
}

EXPORT CUresult cuStreamBeginCapture_v2_ptsz(CUstream hStream, CUstreamCaptureMode mode)
{
	API_ENTER(cuStreamBeginCapture_v2_ptsz);
	return begin_capture(hStream, (int)mode, 1);
}

static CUresult end_capture(CUstream h, CUgraph *out, int ptsz)
{
	struct fstream *s;
	struct fgraph *g;
	struct fctx *c;

	REQUIRE_CTX(c);
	if (!out)
		return CUDA_ERROR_INVALID_VALUE;
	if (!(s = stream_get(h, c, ptsz)))
		return CUDA_ERROR_INVALID_HANDLE;
	pthread_mutex_lock(&g_lock);
	g = s->capture;
	__atomic_store_n(&s->capture, NULL, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&g_lock);
	if (!g)
		return CUDA_ERROR_ILLEGAL_STATE;
	*out = (CUgraph)g;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuStreamEndCapture(CUstream hStream, CUgraph *phGraph)
{
	API_ENTER(cuStreamEndCapture);
	return end_capture(hStream, phGraph, 0);
}

EXPORT CUresult cuStreamEndCapture_ptsz(CUstream hStream, CUgraph *phGraph)
{
	API_ENTER(cuStreamEndCapture_ptsz);
	return end_capture(hStream, phGraph, 1);
}

static CUresult is_capturing(CUstream h, CUstreamCaptureStatus *st, int ptsz)
{
	struct fstream *s;
	struct fctx *c;

	REQUIRE_CTX(c);
	if (!st)
		return CUDA_ERROR_INVALID_VALUE;
	if (!(s = stream_get(h, c, ptsz)))
		return CUDA_ERROR_INVALID_HANDLE;
	*st = capturing(s) ? CU_STREAM_CAPTURE_STATUS_ACTIVE : CU_STREAM_CAPTURE_STATUS_NONE;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuStreamIsCapturing(CUstream hStream, CUstreamCaptureStatus *captureStatus)
{
	API_ENTER(cuStreamIsCapturing);
	return is_capturing(hStream, captureStatus, 0);
}

EXPORT CUresult cuStreamIsCapturing_ptsz(CUstream hStream, CUstreamCaptureStatus *captureStatus)
{
	API_ENTER(cuStreamIsCapturing_ptsz);
	return is_capturing(hStream, captureStatus, 1);
}

#pragma GCC visibility pop
