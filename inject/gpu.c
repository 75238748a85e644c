// SPDX-License-Identifier: MIT
/*
 * The injection library's GPU part: CUDA_INJECTION64_PATH's
 * InitializeInjection, CUPTI's activity API, and the probe sites through
 * which cgbpf receives what the GPU ran (bpf/gpu_rec.h has the entries).
 *
 * Nothing happens until a cgbpf attaches. InitializeInjection (called by
 * the driver at cuInit, or by anyone at any later time: it is idempotent
 * and assumes nothing about CUDA's state) starts one thread that reads
 * the first byte of the two probe sites every POLL_MS (less often after
 * a while with nobody attached: IDLE_SLOW_MS). A site is a 5-byte
 * nop; cgbpf's uprobe on it changes that byte in this process's view of
 * the page (int3, or a jump where the kernel optimizes uprobes on nops).
 * When the batch site is probed the library loads CUPTI, enables the
 * activity kinds and sends what CUPTI completes, as batches, to that site;
 * when the probe goes away it flushes and disables what it enabled; when
 * the flush site is probed it flushes and says GPU_ST_FLUSHED.
 *
 * CUPTI allows one subscriber per process and one set of activity buffer
 * callbacks. The library never holds a subscriber: it subscribes only to
 * ask whether another tool (Nsight, DCGM, torch.profiler's Kineto) holds
 * CUPTI, at start and at stop, and unsubscribes at once. A tool that holds
 * it at start wins: the library enables nothing and says GPU_ST_HELD with
 * the tool's name. A tool that comes later takes the buffer callbacks (the
 * latest registration wins): the library notices that a buffer it handed
 * CUPTI never comes back (CUPTI gave it to the new callbacks), asks once
 * who subscribed, says GPU_ST_TAKEN with that name, and from then on calls
 * nothing in CUPTI (no flush, no disable, not at stop or exit either):
 * CUPTI is the tool's. docs/gpu-activity.md has the whole reasoning.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/syscall.h>

#include <cupti.h>

#include "gpu_rec.h"
#include "gpu_cbids.h"
#include "inject.h"

#define EXPORT __attribute__((visibility("default")))

#if !defined(__x86_64__)
#error "the probe sites are x86-64 5-byte nops"
#endif

/* How often the watcher reads the sites while a cgbpf is attached, and for
 * IDLE_FAST_MS after one left (or after the start): 50 wakeups a second. */
#define POLL_MS 20
/* Then, with nobody attached, less often: every IDLE_MID_MS until
 * IDLE_SLOW_AFTER_MS, then every IDLE_SLOW_MS (2 wakeups a second). The
 * next attach waits at most that long for collection to start. */
#define IDLE_FAST_MS 2000
#define IDLE_MID_MS 100
#define IDLE_SLOW_AFTER_MS 7000
#define IDLE_SLOW_MS 500
/* Completed records are asked for every this many polls (0.5 s). */
#define FLUSH_EVERY 25
/* GPU_ST_COLLECTING is said again with this many periodic flushes (2 s). */
#define STATUS_REPEATS 4
/* CUPTI's activity buffers: bounded memory; a full set drops records,
 * which CUPTI counts and the library reports (GPU_DROPPED). */
#define BUF_SIZE (512u << 10)
#define BUF_MAX 16
/* Kernel names remembered per process (pointer -> id); past it, names are
 * sent again under new ids. */
#define NAMES 4096
#define DEVICES 64
/* A buffer of ours that CUPTI has not given back for this many periodic
 * flushes (2 s) went to another client's callbacks, or holds a record of
 * work still running (a default flush keeps those): the library asks
 * CUPTI whether a tool subscribed. */
#define STALE_FLUSHES 4
/* With no subscriber to name, the same evidence must last this long
 * (30 s) before the library concludes that a client took the callbacks
 * without subscribing (the activity API allows it; cgbpf does it too). */
#define STALE_NOSUB_FLUSHES 60
/* The other sign: CUPTI asked for a buffer in each of at least this many
 * flush periods in a row (it asks after each flush, at the next record),
 * then in none of STALE_FLUSHES: the process went idle, or its records go
 * to another client's buffers. Asked about after 2, 4, 8, ... s of such
 * a silence. */
#define BUSY_FLUSHES 2

/* ------------------------------------------------------------ probe sites */

/*
 * cgbpf_gpu_batch(batch, len), cgbpf_gpu_flush() and cgbpf_gpu_window():
 * a 5-byte nop and a ret each, exported under the names cgbpf looks up,
 * protected so the library's own calls go straight to them.
 */
#define SITE(name)                                                                         \
	".globl " name "\n"                                                                 \
	".protected " name "\n"                                                             \
	".type " name ", @function\n"                                                       \
	".p2align 4\n" name ":\n"                                                           \
	"	.byte 0x0f, 0x1f, 0x44, 0x00, 0x00\n"                                          \
	"	ret\n"                                                                        \
	".size " name ", . - " name "\n"
__asm__(".text\n" SITE(GPU_PROBE_SITE) SITE(GPU_FLUSH_SITE) SITE(GPU_WINDOW_SITE));

void cgbpf_gpu_batch(const void *batch, uint32_t len);
void cgbpf_gpu_flush(void);
void cgbpf_gpu_window(void);

/* Whether a probe sits on a site: its first byte is no longer the nop's. */
static bool probed(void (*site)(void))
{
	return *(const volatile uint8_t *)(uintptr_t)site != 0x0f;
}

/* ------------------------------------------------------------------ CUPTI */

struct cupti {
	void *h;
	char path[256];
	CUptiResult (*get_result_string)(CUptiResult, const char **);
	CUptiResult (*subscribe_v2)(CUpti_SubscriberHandle *, CUpti_CallbackFunc, void *,
				    CUpti_SubscriberParams *);
	CUptiResult (*subscribe)(CUpti_SubscriberHandle *, CUpti_CallbackFunc, void *);
	CUptiResult (*unsubscribe)(CUpti_SubscriberHandle);
	CUptiResult (*register_callbacks)(CUpti_BuffersCallbackRequestFunc,
					  CUpti_BuffersCallbackCompleteFunc);
	CUptiResult (*enable)(CUpti_ActivityKind);
	CUptiResult (*disable)(CUpti_ActivityKind);
	CUptiResult (*flush_all)(uint32_t);
	CUptiResult (*next_record)(uint8_t *, size_t, CUpti_Activity **);
	CUptiResult (*dropped)(CUcontext, uint32_t, size_t *);
	CUptiResult (*register_timestamp)(CUpti_TimestampCallbackFunc);
	CUptiResult (*enable_driver_api)(CUpti_CallbackId, uint8_t);
	CUptiResult (*enable_runtime_api)(CUpti_CallbackId, uint8_t);
	CUptiResult (*get_tid_type)(CUpti_ActivityThreadIdType *);
	CUptiResult (*set_tid_type)(CUpti_ActivityThreadIdType);
};

/* The activity kinds collected, in the order they are enabled. */
static const CUpti_ActivityKind kinds[] = {
	CUPTI_ACTIVITY_KIND_DEVICE,
	CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
	CUPTI_ACTIVITY_KIND_MEMCPY,
	CUPTI_ACTIVITY_KIND_MEMCPY2,
	CUPTI_ACTIVITY_KIND_MEMSET,
	CUPTI_ACTIVITY_KIND_SYNCHRONIZATION,
};

static struct {
	pthread_mutex_t lock;		/* the batch, the names, the state below */
	bool started;			/* the watcher runs */
	bool collecting;
	bool loaded;			/* CUPTI loaded and its functions found */
	bool callbacks;			/* our buffer callbacks are registered */
	bool enabled[sizeof(kinds) / sizeof(kinds[0])];
	bool api_enabled;
	bool api_by_kind;		/* API records enabled by kind (see start) */
	bool forked;			/* a child of fork: see forked() */
	bool tid_set;			/* we set CUPTI's thread id type to SYSTEM */
	CUpti_ActivityThreadIdType tid_old;	/* the type it had before */
	bool taken;			/* another client took the callbacks: hands off */
	bool taken_nosub;		/* and it holds no subscriber (it may still use them) */
	bool asked_nosub;		/* a stale buffer, and no subscriber to name */
	uint32_t flushes;		/* periodic flushes since collection started */
	int requested;			/* CUPTI asked for a buffer since the last check */
	uint32_t busy_run;		/* periods in a row it asked, up to the last one */
	uint32_t silent;		/* periods since, in which it did not */
	uint32_t ask_silent;		/* the silence asked about next (doubles) */
	struct cupti c;
	uint8_t batch[GPU_BATCH_MAX] __attribute__((aligned(8)));
	uint32_t len;
	const char *name_ptr[NAMES];
	uint32_t name_id[NAMES];
	uint32_t next_name;
	uint32_t devices_sent[DEVICES];	/* device id + 1 */
	uint64_t bufs_refused;		/* requests refused at BUF_MAX */
	char collecting_text[256];	/* the last GPU_ST_COLLECTING's text */
	uint32_t status_repeats;	/* periodic flushes that still repeat it */
} g = { .lock = PTHREAD_MUTEX_INITIALIZER };

/*
 * The activity buffers handed to CUPTI and not yet given back, with the
 * periodic flush count when each was handed out: a buffer that never
 * comes back is the sign that another client's callbacks replaced ours.
 * Its own lock: CUPTI calls the buffer callbacks from any thread, and
 * the request callback must not wait for the batch lock.
 */
static struct {
	pthread_mutex_t lock;
	uint8_t *buf[BUF_MAX];
	uint32_t flush[BUF_MAX];
	uint32_t n;
} out = { .lock = PTHREAD_MUTEX_INITIALIZER };

/* ---------------------------------------------------------------- batches */

/* Hands the batch to cgbpf (the probe copies it) and starts a new one.
 * Never in a child of fork (forked()). */
static void send_batch(void)
{
	if (g.len && !g.forked)
		cgbpf_gpu_batch(g.batch, g.len);
	g.len = 0;
}

/* Room for an entry of size bytes (a multiple of 8), in the batch. */
static void *entry(uint16_t kind, uint32_t size)
{
	struct gpu_ent *e;

	if (g.len + size > GPU_BATCH_MAX)
		send_batch();
	e = (struct gpu_ent *)(g.batch + g.len);
	memset(e, 0, size);
	e->kind = kind;
	e->size = (uint16_t)size;
	g.len += size;
	return e;
}

void gpu__send_entries(const uint8_t *ents, uint32_t len)
{
	pthread_mutex_lock(&g.lock);
	for (uint32_t at = 0; at + sizeof(struct gpu_ent) <= len;) {
		const struct gpu_ent *e = (const struct gpu_ent *)(ents + at);

		if (e->size < sizeof(*e) || e->size % 8 || e->size > len - at ||
		    e->size > GPU_BATCH_MAX)
			break;
		memcpy(entry(e->kind, e->size), e, e->size);
		at += e->size;
	}
	send_batch();
	pthread_mutex_unlock(&g.lock);
}

bool gpu__attached(void)
{
	return probed((void (*)(void))cgbpf_gpu_batch);
}

static uint32_t round8(size_t n)
{
	return (uint32_t)((n + 7) & ~(size_t)7);
}

static void status(uint32_t code, int32_t error, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void put_status(uint32_t code, int32_t error, uint32_t flags, const char *text)
{
	size_t n = strlen(text) + 1;
	struct gpu_status *s = entry(GPU_STATUS, round8(sizeof(*s) + n));

	s->code = code;
	s->error = error;
	s->flags = flags;
	memcpy(s->text, text, n);
}

static void status(uint32_t code, int32_t error, const char *fmt, ...)
{
	char text[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	put_status(code, error, 0, text);
	if (code == GPU_ST_COLLECTING) {
		memcpy(g.collecting_text, text, sizeof(text));
		g.status_repeats = STATUS_REPEATS;
	} else {
		g.status_repeats = 0;
	}
}

static const char *result_string(CUptiResult r)
{
	const char *s = NULL;

	if (g.c.get_result_string && g.c.get_result_string(r, &s) == CUPTI_SUCCESS && s)
		return s;
	return "unknown CUPTI error";
}

/* ------------------------------------------------------------- conversion */

static uint32_t name_of(const char *name)
{
	size_t h = ((uintptr_t)name >> 3) % NAMES, n;
	struct gpu_name *e;

	if (!name)
		return 0;
	for (size_t i = 0; i < NAMES; i++, h = (h + 1) % NAMES) {
		if (g.name_ptr[h] == name)
			return g.name_id[h];
		if (!g.name_ptr[h])
			break;
	}
	if (g.name_ptr[h]) {
		/* Full: start over; names are sent again under new ids. */
		memset(g.name_ptr, 0, sizeof(g.name_ptr));
		h = ((uintptr_t)name >> 3) % NAMES;
	}
	g.name_ptr[h] = name;
	g.name_id[h] = ++g.next_name;
	n = strnlen(name, GPU_NAME_MAX - 1);
	e = entry(GPU_NAME, round8(sizeof(*e) + n + 1));
	e->id = g.name_id[h];
	memcpy(e->name, name, n);
	e->name[n] = 0;
	return e->id;
}

static uint8_t dev8(uint32_t id)
{
	return id > 255 ? 255 : (uint8_t)id;
}

static void on_kernel(const CUpti_ActivityKernel10 *k)
{
	uint32_t name = name_of(k->name);
	struct gpu_kernel *e = entry(GPU_KERNEL, sizeof(*e));

	e->corr = k->correlationId;
	e->start = k->start;
	e->end = k->end;
	e->name_id = name;
	e->stream = k->streamId;
	e->context = k->contextId;
	e->graph_id = k->graphId;
	e->grid[0] = (uint32_t)k->gridX;
	e->grid[1] = (uint32_t)k->gridY;
	e->grid[2] = (uint32_t)k->gridZ;
	e->block[0] = (uint16_t)k->blockX;
	e->block[1] = (uint16_t)k->blockY;
	e->block[2] = (uint16_t)k->blockZ;
	e->regs = k->registersPerThread;
	e->smem_static = (uint32_t)k->staticSharedMemory;
	e->smem_dynamic = (uint32_t)k->dynamicSharedMemory;
	e->device = dev8(k->deviceId);
}

static void on_memcpy(const CUpti_ActivityMemcpy6 *m)
{
	struct gpu_memcpy *e = entry(GPU_MEMCPY, sizeof(*e));

	e->corr = m->correlationId;
	e->start = m->start;
	e->end = m->end;
	e->bytes = m->bytes;
	e->stream = m->streamId;
	e->context = m->contextId;
	e->graph_id = m->graphId;
	e->copy_kind = m->copyKind;
	e->src_kind = m->srcKind;
	e->dst_kind = m->dstKind;
	e->flags = (m->flags & CUPTI_ACTIVITY_FLAG_MEMCPY_ASYNC) ? GPU_COPY_ASYNC : 0;
	e->device = e->peer = dev8(m->deviceId);
}

static void on_peer(const CUpti_ActivityMemcpyPtoP4 *m)
{
	struct gpu_memcpy *e = entry(GPU_MEMCPY, sizeof(*e));

	e->corr = m->correlationId;
	e->start = m->start;
	e->end = m->end;
	e->bytes = m->bytes;
	e->stream = m->streamId;
	e->context = m->contextId;
	e->graph_id = m->graphId;
	e->copy_kind = GPU_COPY_PTOP;
	e->src_kind = m->srcKind;
	e->dst_kind = m->dstKind;
	e->flags = (m->flags & CUPTI_ACTIVITY_FLAG_MEMCPY_ASYNC) ? GPU_COPY_ASYNC : 0;
	e->device = dev8(m->deviceId);
	e->peer = dev8(m->deviceId == m->srcDeviceId ? m->dstDeviceId : m->srcDeviceId);
}

static void on_memset(const CUpti_ActivityMemset4 *m)
{
	struct gpu_memset *e = entry(GPU_MEMSET, sizeof(*e));

	e->corr = m->correlationId;
	e->start = m->start;
	e->end = m->end;
	e->bytes = m->bytes;
	e->value = m->value;
	e->stream = m->streamId;
	e->context = m->contextId;
	e->graph_id = m->graphId;
	e->device = dev8(m->deviceId);
	e->mem_kind = (uint8_t)m->memoryKind;
}

static void on_sync(const CUpti_ActivitySynchronization2 *s)
{
	struct gpu_sync *e = entry(GPU_SYNC, sizeof(*e));

	e->corr = s->correlationId;
	e->start = s->start;
	e->end = s->end;
	e->type = (uint32_t)s->type;
	e->stream = s->streamId;
	e->context = s->contextId;
}

/* Bit per callback id of a call that queues GPU work: [0] driver, [1]
 * runtime (API records of every call come when enabled by kind). */
#define CBID_BITS 4096
static uint64_t queue_cbids[2][CBID_BITS / 64];

static void mark_cbids(void)
{
	for (size_t i = 0; i < sizeof(driver_cbids) / sizeof(driver_cbids[0]); i++)
		if (driver_cbids[i] < CBID_BITS)
			queue_cbids[0][driver_cbids[i] / 64] |= 1ull << (driver_cbids[i] % 64);
	for (size_t i = 0; i < sizeof(runtime_cbids) / sizeof(runtime_cbids[0]); i++)
		if (runtime_cbids[i] < CBID_BITS)
			queue_cbids[1][runtime_cbids[i] / 64] |= 1ull << (runtime_cbids[i] % 64);
}

static void on_api(const CUpti_ActivityAPI *a)
{
	int rt = a->kind == CUPTI_ACTIVITY_KIND_RUNTIME;
	struct gpu_api *e;

	if (g.api_by_kind && (a->cbid >= CBID_BITS ||
			      !(queue_cbids[rt][a->cbid / 64] & (1ull << (a->cbid % 64)))))
		return;
	e = entry(GPU_API, sizeof(*e));

	e->corr = a->correlationId;
	e->start = a->start;
	e->end = a->end;
	e->tid = a->threadId;
	e->cbid = a->cbid;
	e->runtime = a->kind == CUPTI_ACTIVITY_KIND_RUNTIME;
}

static void on_device(const CUpti_ActivityDevice5 *d)
{
	struct gpu_device *e;

	if (d->id < DEVICES) {
		if (g.devices_sent[d->id] == d->id + 1)
			return;
		g.devices_sent[d->id] = d->id + 1;
	}
	e = entry(GPU_DEVICE, sizeof(*e));
	e->id = d->id;
	e->global_memory = d->globalMemorySize;
	memcpy(e->uuid, &d->uuid, sizeof(e->uuid));
	e->sm_count = d->numMultiprocessors;
	e->compute_major = d->computeCapabilityMajor;
	e->compute_minor = d->computeCapabilityMinor;
	if (d->name)
		snprintf(e->name, sizeof(e->name), "%s", d->name);
}

static void on_record(const CUpti_Activity *r)
{
	switch (r->kind) {
	case CUPTI_ACTIVITY_KIND_KERNEL:
	case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
		on_kernel((const CUpti_ActivityKernel10 *)r);
		break;
	case CUPTI_ACTIVITY_KIND_MEMCPY:
		on_memcpy((const CUpti_ActivityMemcpy6 *)r);
		break;
	case CUPTI_ACTIVITY_KIND_MEMCPY2:
		on_peer((const CUpti_ActivityMemcpyPtoP4 *)r);
		break;
	case CUPTI_ACTIVITY_KIND_MEMSET:
		on_memset((const CUpti_ActivityMemset4 *)r);
		break;
	case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION:
		on_sync((const CUpti_ActivitySynchronization2 *)r);
		break;
	case CUPTI_ACTIVITY_KIND_DRIVER:
	case CUPTI_ACTIVITY_KIND_RUNTIME:
		on_api((const CUpti_ActivityAPI *)r);
		break;
	case CUPTI_ACTIVITY_KIND_DEVICE:
		on_device((const CUpti_ActivityDevice5 *)r);
		break;
	default:
		break;
	}
}

/* ------------------------------------------------------- buffer callbacks */

static void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records)
{
	uint8_t *b = NULL;

	*buffer = NULL;
	*size = 0;
	*max_records = 0;
	__atomic_store_n(&g.requested, 1, __ATOMIC_RELAXED);
	pthread_mutex_lock(&out.lock);
	if (out.n >= BUF_MAX) {
		/* CUPTI drops what does not fit and counts it. */
		__atomic_fetch_add(&g.bufs_refused, 1, __ATOMIC_RELAXED);
	} else if ((b = aligned_alloc(8, BUF_SIZE))) {
		for (int i = 0; i < BUF_MAX; i++)
			if (!out.buf[i]) {
				out.buf[i] = b;
				out.flush[i] = __atomic_load_n(&g.flushes, __ATOMIC_RELAXED);
				out.n++;
				break;
			}
		*buffer = b;
		*size = BUF_SIZE;
	}
	pthread_mutex_unlock(&out.lock);
}

/* Whether b is a buffer of ours that CUPTI had; it is forgotten. */
static bool buffer_back(const uint8_t *b)
{
	bool ours = false;

	pthread_mutex_lock(&out.lock);
	for (int i = 0; i < BUF_MAX && !ours; i++)
		if (out.buf[i] == b) {
			out.buf[i] = NULL;
			out.n--;
			ours = true;
		}
	pthread_mutex_unlock(&out.lock);
	return ours;
}

/* Whether CUPTI still holds a buffer of ours handed out before the flush
 * count was mark (one it asked for since may be a new one). */
static bool out_before(uint32_t mark)
{
	bool any = false;

	pthread_mutex_lock(&out.lock);
	for (int i = 0; i < BUF_MAX && !any; i++)
		any = out.buf[i] && (int)(mark - out.flush[i]) > 0;
	pthread_mutex_unlock(&out.lock);
	return any;
}

/* How many periodic flushes the oldest buffer CUPTI holds of ours has
 * stayed out; -1: none is out. */
static int oldest_out(void)
{
	uint32_t now = __atomic_load_n(&g.flushes, __ATOMIC_RELAXED);
	int age = -1;

	pthread_mutex_lock(&out.lock);
	for (int i = 0; i < BUF_MAX; i++)
		if (out.buf[i] && (int)(now - out.flush[i]) > age)
			age = (int)(now - out.flush[i]);
	pthread_mutex_unlock(&out.lock);
	return age;
}

static void send_dropped(void)
{
	size_t n = 0;

	if (g.c.dropped && g.c.dropped(NULL, 0, &n) == CUPTI_SUCCESS && n) {
		struct gpu_dropped *d = entry(GPU_DROPPED, sizeof(*d));

		d->where = 1;
		d->count = n;
	}
}

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer,
				      size_t size, size_t valid)
{
	CUpti_Activity *r = NULL;

	(void)ctx;
	(void)stream;
	(void)size;
	/* A buffer we never handed out is another client's (CUPTI gave it
	 * to us by mistake, or that client is gone): not ours to read or
	 * free. */
	if (!buffer_back(buffer))
		return;
	pthread_mutex_lock(&g.lock);
	/* Records completed after cgbpf went away are dropped with the
	 * buffer: nobody reads the site. */
	if (g.collecting && probed((void (*)(void))cgbpf_gpu_batch)) {
		while (g.c.next_record(buffer, valid, &r) == CUPTI_SUCCESS)
			on_record(r);
		send_dropped();
		send_batch();
	}
	pthread_mutex_unlock(&g.lock);
	free(buffer);
}

/* CLOCK_BOOTTIME, the clock of every cgbpf record. */
static uint64_t CUPTIAPI boottime_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_BOOTTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* -------------------------------------------------------- loading CUPTI */

#define SYM(field, name) (*(void **)&g.c.field = dlsym(g.c.h, name))

static bool try_load(const char *path)
{
	g.c.h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!g.c.h)
		return false;
	if (dlinfo(g.c.h, RTLD_DI_ORIGIN, g.c.path) == 0) {
		size_t n = strlen(g.c.path);
		const char *base = strrchr(path, '/');

		snprintf(g.c.path + n, sizeof(g.c.path) - n, "/%s", base ? base + 1 : path);
	} else {
		snprintf(g.c.path, sizeof(g.c.path), "%s", path);
	}
	return true;
}

/* CGBPF_CUPTI_PATH, then by soname (LD_LIBRARY_PATH finds pip's copies),
 * then the toolkit's directories. 0, or -ENOENT with what was tried in
 * tried. */
static int load_cupti(char *tried, size_t cap)
{
	static const char *const sonames[] = { "libcupti.so.13", "libcupti.so.12",
					       "libcupti.so.11", NULL };
	static const char *const dirs[] = { "lib64", "extras/CUPTI/lib64", NULL };
	const char *env = getenv("CGBPF_CUPTI_PATH");
	const char *homes[] = { getenv("CUDA_HOME"), "/usr/local/cuda", NULL };
	char path[512];

	if (g.loaded)
		return 0;
	if (env && *env) {
		if (!try_load(env)) {
			snprintf(tried, cap, "CGBPF_CUPTI_PATH=%s: %s", env, dlerror());
			return -ENOENT;
		}
	}
	for (int i = 0; !g.c.h && sonames[i]; i++)
		try_load(sonames[i]);
	for (int h = 0; !g.c.h && h < 2; h++) {
		if (!homes[h] || !*homes[h])
			continue;
		for (int d = 0; !g.c.h && dirs[d]; d++)
			for (int i = 0; !g.c.h && sonames[i]; i++) {
				snprintf(path, sizeof(path), "%s/%s/%s", homes[h], dirs[d],
					 sonames[i]);
				try_load(path);
			}
	}
	if (!g.c.h) {
		snprintf(tried, cap,
			 "libcupti.so.13/.12/.11 by soname (LD_LIBRARY_PATH, ld.so.cache), "
			 "%s%s/usr/local/cuda (lib64, extras/CUPTI/lib64); set CGBPF_CUPTI_PATH",
			 homes[0] ? homes[0] : "", homes[0] ? ", " : "");
		return -ENOENT;
	}
	SYM(get_result_string, "cuptiGetResultString");
	SYM(subscribe_v2, "cuptiSubscribe_v2");
	SYM(subscribe, "cuptiSubscribe");
	SYM(unsubscribe, "cuptiUnsubscribe");
	SYM(register_callbacks, "cuptiActivityRegisterCallbacks");
	SYM(enable, "cuptiActivityEnable");
	SYM(disable, "cuptiActivityDisable");
	SYM(flush_all, "cuptiActivityFlushAll");
	SYM(next_record, "cuptiActivityGetNextRecord");
	SYM(dropped, "cuptiActivityGetNumDroppedRecords");
	SYM(register_timestamp, "cuptiActivityRegisterTimestampCallback");
	SYM(enable_driver_api, "cuptiActivityEnableDriverApi");
	SYM(enable_runtime_api, "cuptiActivityEnableRuntimeApi");
	SYM(get_tid_type, "cuptiGetThreadIdType");
	SYM(set_tid_type, "cuptiSetThreadIdType");
	if (!g.c.register_callbacks || !g.c.enable || !g.c.disable || !g.c.flush_all ||
	    !g.c.next_record || !g.c.unsubscribe || !(g.c.subscribe || g.c.subscribe_v2)) {
		snprintf(tried, cap, "%s lacks the activity API functions", g.c.path);
		dlclose(g.c.h);
		memset(&g.c, 0, sizeof(g.c));
		return -ENOENT;
	}
	g.loaded = true;
	return 0;
}

static void CUPTIAPI no_callback(void *ud, CUpti_CallbackDomain d, CUpti_CallbackId id,
				 const void *data)
{
	(void)ud;
	(void)d;
	(void)id;
	(void)data;
}

/*
 * Whether another tool holds CUPTI: subscribe and unsubscribe at once
 * (holding the one subscriber would lock Kineto, Nsight or DCGM out).
 * Returns CUPTI_SUCCESS, CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED
 * with the holder's name in who when CUPTI says it, or another error.
 */
static CUptiResult other_tool(char *who, size_t cap)
{
	CUpti_SubscriberHandle sub = NULL;
	char old[CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN * 2] = "";
	CUptiResult r;

	snprintf(who, cap, "another tool");
	if (g.c.subscribe_v2) {
		CUpti_SubscriberParams p = {
			.structSize = CUpti_SubscriberParams_STRUCT_SIZE,
			.subscriberName = "cgbpf",
			.oldSubscriberName = old,
			.oldSubscriberSize = sizeof(old),
		};

		r = g.c.subscribe_v2(&sub, no_callback, NULL, &p);
	} else {
		r = g.c.subscribe(&sub, no_callback, NULL);
	}
	if (r == CUPTI_SUCCESS) {
		g.c.unsubscribe(sub);
		return r;
	}
	if (*old) {
		size_t n = strnlen(old, cap - 1);

		memcpy(who, old, n);
		who[n] = 0;
	}
	return r;
}

/* ---------------------------------------------------------- start / stop */

/*
 * API records of the calls that queue GPU work, enabled by callback id,
 * or (g.api_by_kind) of every driver and runtime call, of which on_api
 * keeps those. Returns the first error; *failed counts the refusals.
 */
static CUptiResult enable_api(uint8_t on, unsigned *failed)
{
	CUptiResult first = CUPTI_SUCCESS, r;

	*failed = 0;
	if (g.api_by_kind) {
		static const CUpti_ActivityKind api_kinds[] = { CUPTI_ACTIVITY_KIND_DRIVER,
								 CUPTI_ACTIVITY_KIND_RUNTIME };

		for (size_t i = 0; i < 2; i++) {
			r = on ? g.c.enable(api_kinds[i]) : g.c.disable(api_kinds[i]);
			if (r != CUPTI_SUCCESS && !(*failed)++)
				first = r;
		}
		return first;
	}
	if (g.c.enable_driver_api)
		for (size_t i = 0; i < sizeof(driver_cbids) / sizeof(driver_cbids[0]); i++)
			if ((r = g.c.enable_driver_api(driver_cbids[i], on)) != CUPTI_SUCCESS &&
			    !(*failed)++)
				first = r;
	if (g.c.enable_runtime_api)
		for (size_t i = 0; i < sizeof(runtime_cbids) / sizeof(runtime_cbids[0]); i++)
			if ((r = g.c.enable_runtime_api(runtime_cbids[i], on)) != CUPTI_SUCCESS &&
			    !(*failed)++)
				first = r;
	return first;
}

/*
 * CUPTI's API records name the calling thread by pthread_self() unless
 * told otherwise (CUPTI_ACTIVITY_THREAD_ID_TYPE_DEFAULT, cupti_activity.h);
 * cgbpf's calls carry the kernel's thread id (gettid), so the library asks
 * for SYSTEM ids, process-wide, while it collects, and gives the old type
 * back when it stops or another tool takes CUPTI (Kineto reads the
 * default). false: no system thread ids, so no API records are worth
 * enabling. Called locked.
 */
static bool system_tids(void)
{
	CUpti_ActivityThreadIdType now = CUPTI_ACTIVITY_THREAD_ID_TYPE_DEFAULT;

	if (!g.c.set_tid_type)
		return false;
	if (g.c.get_tid_type && g.c.get_tid_type(&now) == CUPTI_SUCCESS &&
	    now == CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM)
		return true;
	if (g.c.set_tid_type(CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM) != CUPTI_SUCCESS)
		return false;
	g.tid_old = now;
	g.tid_set = true;
	return true;
}

/* Gives back the thread id type system_tids() changed, unless someone
 * changed it since. Called locked. */
static void restore_tids(void)
{
	CUpti_ActivityThreadIdType now = CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM;

	if (!g.tid_set)
		return;
	g.tid_set = false;
	if (g.c.get_tid_type && g.c.get_tid_type(&now) != CUPTI_SUCCESS)
		return;
	if (now == CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM)
		g.c.set_tid_type(g.tid_old);
}

static void disable_all(void)
{
	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
		if (g.enabled[i]) {
			g.c.disable(kinds[i]);
			g.enabled[i] = false;
		}
	if (g.api_enabled) {
		unsigned failed;

		enable_api(0, &failed);
		g.api_enabled = false;
	}
	restore_tids();
}

/* cgbpf attached: start collecting, or say why not. in_init: inside
 * InitializeInjection, before CUDA did any work. Called locked. */
static void start(bool in_init)
{
	char why[400], who[CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN * 2], api_note[160] = "";
	CUptiResult r, api_err = CUPTI_SUCCESS;
	unsigned api_failed = 0;
	const char *how;
	bool no_api;

	if (load_cupti(why, sizeof(why))) {
		status(GPU_ST_NO_CUPTI, 0, "no CUPTI library found; tried %s", why);
		return;
	}
	if (g.taken_nosub) {
		/* Nothing says when that client is done with them. */
		status(GPU_ST_HELD, 0, "a client that registered its own CUPTI activity callbacks "
		       "without subscribing took them during an earlier capture; cgbpf does not "
		       "take them back");
		return;
	}
	/* Buffers that went to the client that took CUPTI last time are its
	 * (or lost): forgotten. */
	pthread_mutex_lock(&out.lock);
	memset(out.buf, 0, sizeof(out.buf));
	out.n = 0;
	pthread_mutex_unlock(&out.lock);
	g.taken = g.asked_nosub = false;
	g.busy_run = g.silent = 0;
	g.ask_silent = STALE_FLUSHES;
	__atomic_store_n(&g.requested, 0, __ATOMIC_RELAXED);
	r = other_tool(who, sizeof(who));
	if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
		status(GPU_ST_HELD, r, "%s holds CUPTI; its profiling goes on undisturbed", who);
		return;
	}
	if (r != CUPTI_SUCCESS) {
		status(GPU_ST_CUPTI_FAILED, r,
		       "cuptiSubscribe (%s): %s", g.c.path, result_string(r));
		return;
	}
	if (g.c.register_timestamp && (r = g.c.register_timestamp(boottime_ns)) != CUPTI_SUCCESS) {
		status(GPU_ST_CUPTI_FAILED, r, "cuptiActivityRegisterTimestampCallback: %s",
		       result_string(r));
		return;
	}
	if (!g.c.register_timestamp) {
		status(GPU_ST_CUPTI_FAILED, 0, "%s has no cuptiActivityRegisterTimestampCallback "
		       "(CUPTI 12.x or newer needed): GPU times would not match the CPU's",
		       g.c.path);
		return;
	}
	if ((r = g.c.register_callbacks(buffer_requested, buffer_completed)) != CUPTI_SUCCESS) {
		status(GPU_ST_CUPTI_FAILED, r, "cuptiActivityRegisterCallbacks: %s",
		       result_string(r));
		return;
	}
	g.callbacks = true;
	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
		r = g.c.enable(kinds[i]);
		if (r == CUPTI_SUCCESS) {
			g.enabled[i] = true;
			continue;
		}
		/* MEMCPY2 and DEVICE are optional; the rest is the timeline. */
		if (kinds[i] == CUPTI_ACTIVITY_KIND_MEMCPY2 || kinds[i] == CUPTI_ACTIVITY_KIND_DEVICE)
			continue;
		disable_all();
		status(GPU_ST_CUPTI_FAILED, r,
		       "cuptiActivityEnable(%d): %s", (int)kinds[i], result_string(r));
		return;
	}
	/* Only the calls that queue GPU work, to link it to them, and only
	 * with thread ids that name cgbpf's threads. */
	/*
	 * By callback id where CUPTI starts inside cuInit (record -- CMD).
	 * Started later, in a process whose CUDA runs already (record -p),
	 * CUPTI 13.0 with driver 580 on an H200 gave no API record for calls
	 * enabled by id, and gave them for the kinds: there, the kinds, and
	 * on_api keeps the calls that queue work (CGBPF_CUPTI_API=id|kind
	 * chooses; none: no API records, to measure what they cost).
	 */
	how = getenv("CGBPF_CUPTI_API");
	no_api = how && !strcmp(how, "none");
	g.api_by_kind = how && !strcmp(how, "kind") ? true :
			how && !strcmp(how, "id") ? false : !in_init;
	if (!no_api && (g.api_by_kind || g.c.enable_driver_api || g.c.enable_runtime_api) &&
	    system_tids()) {
		api_err = enable_api(1, &api_failed);
		g.api_enabled = true;
	}
	if (api_failed)
		snprintf(api_note, sizeof(api_note),
			 " (CUPTI refused API records of %u calls: %s; their flows are missing)",
			 api_failed, result_string(api_err));
	g.collecting = true;
	status(GPU_ST_COLLECTING, 0, "%s%s", g.c.path,
	       g.api_enabled ? api_note :
	       no_api ? " (CGBPF_CUPTI_API=none: no per-call API records, no flows)" :
	       !(g.c.enable_driver_api || g.c.enable_runtime_api) ?
	       " (no per-call API records: flows unavailable)" :
	       " (CUPTI cannot name threads by their system id: flows unavailable)");
}

#define NOSUB_NAME "a client that registered its own CUPTI activity callbacks " \
	"(it holds no subscriber, so CUPTI gives no name)"

/* Another client took the activity callbacks: say so, once, and call
 * CUPTI no more (its kinds, buffers and flushes are that client's now).
 * Called locked. */
static void taken(const char *who, CUptiResult r, bool nosub)
{
	g.taken = true;
	g.taken_nosub = nosub;
	g.collecting = false;
	/* Kinds stay as they are: the client may use them. */
	memset(g.enabled, 0, sizeof(g.enabled));
	g.api_enabled = false;
	/* The one setting it reads differently: its thread ids. */
	restore_tids();
	status(GPU_ST_TAKEN, r == CUPTI_SUCCESS ? 0 : (int32_t)r, "%s", who);
	send_batch();
}

/*
 * After a periodic (default) flush: whether the callbacks are still ours.
 * A buffer of ours out for STALE_FLUSHES flushes is the evidence, or CUPTI
 * no longer asking for buffers after it asked steadily; CUPTI is asked for
 * a subscriber only then (the question holds the subscriber for an
 * instant, and a tool subscribing in that instant would fail), at most
 * twice per stale buffer and log2 times per silence. A silence with a
 * subscriber is taken for a tool (one that subscribed only for callbacks,
 * while the process idles, is mistaken for one); a silence without one is
 * an idle process. Called unlocked, while collecting.
 */
static void check_taken(void)
{
	char who[CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN * 2];
	int age = oldest_out();
	CUptiResult r;

	if (__atomic_exchange_n(&g.requested, 0, __ATOMIC_RELAXED)) {
		if (g.silent)
			g.busy_run = g.silent = 0;
		g.busy_run++;
		g.ask_silent = STALE_FLUSHES;
	} else {
		g.silent++;
	}
	if (age < 0)
		g.asked_nosub = false;
	if (g.silent == g.ask_silent && g.busy_run >= BUSY_FLUSHES) {
		/* No buffer of ours went astray (the client came while none
		 * was out), but CUPTI stopped asking us for buffers: asked
		 * after 2, 4, 8, ... s of silence (the process may have been
		 * idle when the client came). */
		g.ask_silent *= 2;
		r = other_tool(who, sizeof(who));
		if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
			pthread_mutex_lock(&g.lock);
			taken(who, r, false);
			pthread_mutex_unlock(&g.lock);
			return;
		}
	}
	if (age < STALE_FLUSHES || (g.asked_nosub && age < STALE_NOSUB_FLUSHES))
		return;
	r = other_tool(who, sizeof(who));
	pthread_mutex_lock(&g.lock);
	if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED)
		taken(who, r, false);
	else if (age >= STALE_NOSUB_FLUSHES)
		taken(NOSUB_NAME, 0, true);
	else
		g.asked_nosub = true;	/* maybe work still running: wait longer */
	pthread_mutex_unlock(&g.lock);
}

/*
 * The end of a collection (cgbpf stops, leaves, or the process exits):
 * what CUPTI holds of ours is asked for, unless another client may have
 * the callbacks: a forced flush would hand that client its records
 * unfinished, so with a subscriber present only finished buffers are
 * asked for. A buffer of ours still out after that went to another
 * client: GPU_ST_TAKEN. Called unlocked. *tool: a subscriber is present
 * (its kinds are not ours to disable).
 */
static void final_flush(bool *tool)
{
	char who[CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN * 2];
	uint32_t mark;
	CUptiResult r;

	*tool = false;
	if (g.taken || !g.callbacks || !g.loaded)
		return;
	r = other_tool(who, sizeof(who));
	*tool = r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
	/* Buffers asked for during the flush (the process works on) are
	 * not evidence: only those out before it. */
	mark = __atomic_add_fetch(&g.flushes, 1, __ATOMIC_RELAXED);
	g.c.flush_all(*tool ? 0 : CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
	if (!out_before(mark))
		return;
	pthread_mutex_lock(&g.lock);
	if (*tool)
		taken(who, r, false);
	else
		taken(NOSUB_NAME, 0, true);
	pthread_mutex_unlock(&g.lock);
}

/* cgbpf went away: stop and disable what the library enabled, unless
 * another tool took CUPTI or subscribed meanwhile (then it is that tool's
 * to configure). Called unlocked. */
static void stop(void)
{
	bool tool = false;

	if (g.collecting)
		final_flush(&tool);
	pthread_mutex_lock(&g.lock);
	g.collecting = false;
	if (!g.taken && !tool)
		disable_all();
	restore_tids();
	memset(g.enabled, 0, sizeof(g.enabled));
	g.api_enabled = false;
	g.len = 0;
	memset(g.name_ptr, 0, sizeof(g.name_ptr));
	memset(g.devices_sent, 0, sizeof(g.devices_sent));
	pthread_mutex_unlock(&g.lock);
}

/* What CUPTI completed, to whoever has the callbacks (harmless to a tool
 * that took them: it notices that). Called unlocked. */
static void flush_completed(void)
{
	g.c.flush_all(0);
	__atomic_add_fetch(&g.flushes, 1, __ATOMIC_RELAXED);
	check_taken();
}

static void *watch(void *arg)
{
	/* Probed already: InitializeInjection started. */
	bool was_probed = arg != NULL, was_flush = false, was_window = false;
	unsigned polls = 0;
	unsigned long idle_ms = 0;	/* since a probe was last seen */

	for (;;) {
		long sleep_ms;
		bool on = probed((void (*)(void))cgbpf_gpu_batch);
		bool fl = probed(cgbpf_gpu_flush);
		bool win = probed(cgbpf_gpu_window);

		if (on && !was_probed) {
			pthread_mutex_lock(&g.lock);
			start(false);
			send_batch();
			pthread_mutex_unlock(&g.lock);
		} else if (!on && was_probed) {
			stop();
		}
		/* Leaving (the flush site probed): every span held. */
		ncclprof__poll(on, on && fl);
		if (on && fl && !was_flush && !g.taken) {
			bool tool, was = g.collecting;

			if (was)
				final_flush(&tool);
			pthread_mutex_lock(&g.lock);
			/* Drops counted since the last completed buffer (none may
			 * complete again before cgbpf leaves). */
			if (g.collecting)
				send_dropped();
			/* Taken: GPU_ST_TAKEN went out instead, and answers. */
			if (!g.taken)
				status(GPU_ST_FLUSHED, 0, "%s", was ? "all activity sent" :
				       "nothing was collected");
			send_batch();
			pthread_mutex_unlock(&g.lock);
		}
		/* A window ended: completed records every poll while the site
		 * is probed; said once, after the first. */
		if (on && win && g.collecting && g.loaded && !g.taken) {
			flush_completed();
			if (!was_window) {
				pthread_mutex_lock(&g.lock);
				status(GPU_ST_FLUSHED, 0, "completed activity sent (a window ended)");
				send_batch();
				pthread_mutex_unlock(&g.lock);
			}
		}
		/* Completed records every FLUSH_EVERY polls, not only when a
		 * buffer fills: a trace shows the GPU while it runs. Only
		 * finished buffers, to whoever has the callbacks: harmless to
		 * a tool that took them. */
		if (on && g.collecting && ++polls % FLUSH_EVERY == 0 && g.loaded) {
			pthread_mutex_lock(&g.lock);
			if (g.status_repeats && g.collecting) {
				g.status_repeats--;
				put_status(GPU_ST_COLLECTING, 0, GPU_STATUS_REPEAT,
					   g.collecting_text);
				send_batch();
			}
			pthread_mutex_unlock(&g.lock);
			flush_completed();
		}
		was_probed = on;
		was_flush = fl;
		was_window = win;
		if (on || fl || win)
			idle_ms = 0;
		sleep_ms = idle_ms < IDLE_FAST_MS ? POLL_MS :
			   idle_ms < IDLE_SLOW_AFTER_MS ? IDLE_MID_MS : IDLE_SLOW_MS;
		idle_ms += (unsigned long)sleep_ms;
		nanosleep(&(struct timespec){ sleep_ms / 1000, (sleep_ms % 1000) * 1000000L }, NULL);
	}
	return NULL;
}

/*
 * The child of a fork (a DataLoader worker, a multiprocessing pool): the
 * parent's collection is not its own, and this library does nothing more
 * in it. Its CUPTI, like its CUDA, is not usable after a fork, and the
 * probe site may be dead: a probed 5-byte nop the kernel optimized (Linux
 * 6.18) is a call into a trampoline page that fork does not copy, so the
 * child would crash calling it (seen: the tests' fork workload, SIGSEGV
 * in its exit handler's last flush). The locks may have been held by a
 * thread the child does not have.
 */
static void forked(void)
{
	pthread_mutex_init(&g.lock, NULL);
	pthread_mutex_init(&out.lock, NULL);
	g.forked = true;
	ncclprof__forked();
	g.collecting = false;
	g.status_repeats = 0;
	g.len = 0;
}

/* The process is exiting: what CUPTI still holds goes to cgbpf now, while
 * the probe is there to take it. */
static void at_exit(void)
{
	bool tool;

	if (g.collecting && probed((void (*)(void))cgbpf_gpu_batch))
		final_flush(&tool);
	if (!g.forked && probed((void (*)(void))cgbpf_gpu_batch))
		ncclprof__poll(true, true);
}

/*
 * CUDA_INJECTION64_PATH's entry point: the driver calls it once, at
 * cuInit. Anyone may call it again, at any time (a library loaded into a
 * running process): only the first call starts the watcher. Returns 1
 * (success) unless the watcher cannot start.
 */
/* ------------------------------------------------- the driver's probes */

/* Driver functions cgbpf probes by default: one of them probed says that
 * this process's driver file is (cuInit is running: it may be probed
 * already, or not yet). */
static const char *const driver_funcs[] = {
	"cuLaunchKernel", "cuMemAlloc_v2", "cuCtxCreate_v2", "cuModuleLoadData",
	"cuStreamSynchronize", "cuCtxSynchronize", "cuInit",
};

#define MAP_WAIT_MS 100		/* CGBPF_MAP_WAIT_MS's default */
/*
 * cgbpf attaches a driver file's return probes (one link: the first bytes
 * change), then its entry probes (a second link), then GPU_DRIVER_PROBED_LAST
 * (bpf/gpu_rec.h): that one's byte says all are live. A driver without
 * that function is read by the functions above, whose bytes cannot tell
 * the links apart: a probed one is then given this long more, also when
 * it was probed at the first look. The entry link came 0.04-0.6 ms after
 * the first bytes changed idle here, and once in CI all 200 launches of a
 * short program were missing with this settle: the mark is the wait to
 * trust (docs/design.md).
 */
#define MAP_SETTLE_US 5000

struct map_wait {
	bool waited;		/* the driver file was not probed at first: waited */
	bool probed;
	uint64_t us;
	char file[160];
};

static uint64_t mono_us(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000u + (uint64_t)t.tv_nsec / 1000u;
}

/*
 * cgbpf is attached (the batch site is probed) and the driver calls
 * InitializeInjection inside cuInit, before any CUDA work: when the
 * driver file this process mapped is not probed yet (a file no search
 * named, loaded by an absolute path: cgbpf probes it only once it sees
 * the mapping), wait here until it is, at most CGBPF_MAP_WAIT_MS (100 ms;
 * 0: never), so that the program's calls after cuInit are all traced. A
 * process with nobody attached never gets here. Reads the first byte of
 * GPU_DRIVER_PROBED_LAST every 200 us until it is int3 (or, in a driver
 * without it, of a few functions, then MAP_SETTLE_US more). w->waited:
 * the file was not probed at the first look (what cgbpf is told,
 * GPU_ST_WAITED); a file probed in advance costs one look.
 */
static void wait_for_driver(void *caller, struct map_wait *w)
{
	const char *env = getenv("CGBPF_MAP_WAIT_MS");
	const volatile uint8_t *fn[sizeof(driver_funcs) / sizeof(driver_funcs[0])];
	uint64_t limit = env && *env ? strtoull(env, NULL, 10) : MAP_WAIT_MS, t0;
	void *h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
	void *last;
	size_t n = 0;
	Dl_info di;

	memset(w, 0, sizeof(*w));
	if (!h && caller && dladdr(caller, &di) && di.dli_fname)
		h = dlopen(di.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
	if (!h || !limit)
		goto out;
	last = dlsym(h, GPU_DRIVER_PROBED_LAST);
	if (last)
		fn[n++] = last;
	for (size_t i = 0; i < sizeof(fn) / sizeof(fn[0]) && !last; i++) {
		void *f = dlsym(h, driver_funcs[i]);

		if (f)
			fn[n++] = f;
	}
	if (!n)
		goto out;
	if (dladdr((void *)(uintptr_t)fn[0], &di) && di.dli_fname)
		snprintf(w->file, sizeof(w->file), "%s", di.dli_fname);
	t0 = mono_us();
	for (;;) {
		for (size_t i = 0; i < n && !w->probed; i++)
			w->probed = *fn[i] == 0xcc;
		w->us = mono_us() - t0;
		if (w->probed || w->us >= limit * 1000)
			break;
		w->waited = true;
		usleep(200);
	}
	if (w->probed && !last) {
		usleep(MAP_SETTLE_US);
		w->us = mono_us() - t0;
	}
out:
	if (h)
		dlclose(h);	/* NOLOAD: only the reference just taken */
}

EXPORT int InitializeInjection(void)
{
	static pthread_mutex_t once = PTHREAD_MUTEX_INITIALIZER;
	pthread_attr_t a;
	pthread_t t;
	sigset_t all, old;
	bool probed_now;
	int ok = 1;

	pthread_mutex_lock(&once);
	if (g.started)
		goto out;
	mark_cbids();
	pthread_atfork(NULL, NULL, forked);
	/*
	 * cgbpf probed the site before the process ran (record -- CMD):
	 * collect from here, inside cuInit, before the first kernel, as
	 * CUPTI's own injection samples do. A poll later, a short program
	 * could be over.
	 */
	probed_now = probed((void (*)(void))cgbpf_gpu_batch);
	if (probed_now) {
		struct map_wait w;

		wait_for_driver(__builtin_return_address(0), &w);
		pthread_mutex_lock(&g.lock);
		start(true);
		if (w.waited) {
			char text[200];

			snprintf(text, sizeof(text), "%llu %s", (unsigned long long)w.us, w.file);
			put_status(GPU_ST_WAITED, !w.probed, 0, text);
		}
		send_batch();
		pthread_mutex_unlock(&g.lock);
	}
	/* The watcher takes no signals: they are the application's. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pthread_attr_init(&a);
	pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&a, 64 << 10);
	if (pthread_create(&t, &a, watch, probed_now ? (void *)1 : NULL) == 0) {
		pthread_setname_np(t, "cgbpf-inject");
		atexit(at_exit);
		g.started = true;
	} else {
		ok = 0;
	}
	pthread_attr_destroy(&a);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
out:
	pthread_mutex_unlock(&once);
	return ok;
}
