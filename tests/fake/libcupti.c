// SPDX-License-Identifier: MIT
/*
 * A fake CUPTI (libcupti.so.13) for testing cgbpf's injection library on
 * machines without a GPU: the activity API's real exported names and
 * signatures (the toolkit's cupti.h) and the real record layouts of
 * cupti_activity.h (CUpti_ActivityKernel10, Memcpy6, Memset4,
 * Synchronization2, API, Device5), filled from the fake driver's simulated
 * GPU (tests/fake/fake_activity.h: the fake libcuda calls this library for
 * every launch, copy, memset and synchronization once activity is enabled).
 *
 * The documented rules a client must live with are enforced: one
 * subscriber per process (the second cuptiSubscribe fails with
 * CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED, and cuptiSubscribe_v2
 * names the holder); one set of activity buffer callbacks per process
 * (cuptiActivityRegisterCallbacks replaces the previous ones, whoever
 * registered them, and a buffer handed out through the old request
 * callback is completed through the new completion callback: what a
 * client sees when another one registers after it); records reach the
 * client only in buffers it gave through its request callback, returned
 * through its completion callback when full or flushed (cuptiActivityFlushAll
 * fails before any callbacks were registered); records only of the
 * enabled kinds, which are process-wide (API records
 * only of the enabled callback ids); records that find no buffer are
 * dropped and counted; timestamps come from the registered timestamp
 * callback's clock.
 *
 * A record is complete once the work it describes ended (the fake driver
 * knows when each simulated operation ends, ahead of time): a default
 * flush (cuptiActivityFlushAll(0)) returns the buffer only when every
 * record in it is complete; a forced flush returns it anyway, and the
 * records of work still running have no timestamps (0), as NVIDIA's
 * CUPTI hands over a kernel still running at a forced flush.
 *
 * CGBPF_FAKE_CUPTI_HOLDER=NAME: another tool named NAME subscribed before
 * anyone (Nsight, DCGM, Kineto), and holds CUPTI for the process's life.
 * Graphs, as CUPTI reports them: a graph launch's API record (cbid
 * cuGraphLaunch) and one kernel or memset record per node it ran, each
 * with the launch's correlation id, graphId (the executable graph's) and
 * graphNodeId; a launch or memset captured into a graph has its API
 * record and no activity.
 * CGBPF_FAKE_CUPTI_BURST=K (bench/gpurate.sh, never the tests): each kernel
 * launch yields K kernels, each with an API record of its own correlation
 * id inside the launch call, the K kernels splitting the launch's time on
 * its stream: a producer of records K times faster than a launch loop,
 * through the whole path (CUPTI buffers, the library, the probe, the ring,
 * cgbpf).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cupti.h>

#include "fake_activity.h"

#define EXPORT __attribute__((visibility("default")))

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static int g_subscribed;
static char g_holder[128];
static CUpti_BuffersCallbackRequestFunc g_req;
static CUpti_BuffersCallbackCompleteFunc g_done;
static CUpti_TimestampCallbackFunc g_ts;
static uint8_t g_kind_on[64];
static uint8_t g_driver_cbid_on[1024];
/* API records' threadId: as CUPTI, pthread_self() by default, gettid()
 * after cuptiSetThreadIdType(CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM). */
static CUpti_ActivityThreadIdType g_tid_type = CUPTI_ACTIVITY_THREAD_ID_TYPE_DEFAULT;
static int g_hooked;
static uint8_t *g_buf;
static size_t g_size, g_used;
static size_t g_dropped;
/* The current buffer's records of GPU work: where each is, and when (on
 * CLOCK_MONOTONIC) the work ends. */
static struct pending {
	size_t at;		/* offset in g_buf */
	uint64_t end;
} *g_pend;
static size_t g_npend, g_cappend;
static uint32_t g_burst = 1;
static uint64_t g_api_widen;
/* getpid() once, not per record (a syscall, which a tracer's syscall
 * probes make dearer still); forks read it again. */
static uint32_t g_pid;
/* Burst kernels' correlation ids: apart from the fake driver's. */
static uint32_t g_burst_corr = 0x80000000u;

#define CBID_ON(id) ((id) < sizeof(g_driver_cbid_on) && g_driver_cbid_on[id])

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The client's clock minus CLOCK_MONOTONIC, read once when the callback
 * was registered (a fresh read per record would jitter by the reads' own
 * cost and make back-to-back work overlap). */
static int64_t g_ts_offset;

/* A fake-driver time (CLOCK_MONOTONIC) on the client's clock. */
static uint64_t stamp(uint64_t mono)
{
	return mono + (uint64_t)g_ts_offset;
}

static void forked(void)
{
	g_pid = (uint32_t)getpid();
}

static __attribute__((constructor)) void init(void)
{
	const char *h = getenv("CGBPF_FAKE_CUPTI_HOLDER");
	const char *b = getenv("CGBPF_FAKE_CUPTI_BURST");
	const char *w = getenv("CGBPF_FAKE_CUPTI_API_WIDEN");

	g_pid = (uint32_t)getpid();
	if (w && *w)
		g_api_widen = strtoull(w, NULL, 10) % 1000000;
	pthread_atfork(NULL, NULL, forked);
	if (b && *b) {
		unsigned long k = strtoul(b, NULL, 10);

		g_burst = k >= 1 && k <= 4096 ? (uint32_t)k : 1;
	}
	if (h && *h) {
		g_subscribed = 1;
		snprintf(g_holder, sizeof(g_holder), "%s", h);
	}
}

EXPORT CUptiResult cuptiGetVersion(uint32_t *version)
{
	if (!version)
		return CUPTI_ERROR_INVALID_PARAMETER;
	*version = CUPTI_API_VERSION;
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiGetResultString(CUptiResult result, const char **str)
{
	static const char *const names[] = {
		[CUPTI_SUCCESS] = "CUPTI_SUCCESS",
		[CUPTI_ERROR_INVALID_PARAMETER] = "CUPTI_ERROR_INVALID_PARAMETER",
		[CUPTI_ERROR_INVALID_KIND] = "CUPTI_ERROR_INVALID_KIND",
		[CUPTI_ERROR_NOT_INITIALIZED] = "CUPTI_ERROR_NOT_INITIALIZED",
		[CUPTI_ERROR_MAX_LIMIT_REACHED] = "CUPTI_ERROR_MAX_LIMIT_REACHED",
		[CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED] =
			"CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED",
		[CUPTI_ERROR_INVALID_OPERATION] = "CUPTI_ERROR_INVALID_OPERATION",
	};

	if (!str)
		return CUPTI_ERROR_INVALID_PARAMETER;
	*str = (unsigned)result < sizeof(names) / sizeof(names[0]) && names[result] ?
		       names[result] : "CUPTI_ERROR_UNKNOWN";
	return CUPTI_SUCCESS;
}

static CUptiResult subscribe(CUpti_SubscriberHandle *sub, const char *name, char *old,
			     size_t old_size)
{
	CUptiResult r = CUPTI_SUCCESS;

	if (!sub)
		return CUPTI_ERROR_INVALID_PARAMETER;
	pthread_mutex_lock(&g_lock);
	if (g_subscribed) {
		if (old && old_size)
			snprintf(old, old_size, "%s", g_holder);
		r = CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
	} else {
		g_subscribed = 1;
		snprintf(g_holder, sizeof(g_holder), "CUPTI for %s", name ? name : "a client");
		*sub = (CUpti_SubscriberHandle)&g_subscribed;
	}
	pthread_mutex_unlock(&g_lock);
	return r;
}

EXPORT CUptiResult cuptiSubscribe(CUpti_SubscriberHandle *subscriber, CUpti_CallbackFunc callback,
				  void *userdata)
{
	(void)callback;
	(void)userdata;
	return subscribe(subscriber, NULL, NULL, 0);
}

EXPORT CUptiResult cuptiSubscribe_v2(CUpti_SubscriberHandle *subscriber,
				     CUpti_CallbackFunc callback, void *userdata,
				     CUpti_SubscriberParams *p)
{
	(void)callback;
	(void)userdata;
	if (p && p->structSize < CUpti_SubscriberParams_STRUCT_SIZE)
		return CUPTI_ERROR_INVALID_PARAMETER;
	return subscribe(subscriber, p ? p->subscriberName : NULL, p ? p->oldSubscriberName : NULL,
			 p ? p->oldSubscriberSize : 0);
}

EXPORT CUptiResult cuptiUnsubscribe(CUpti_SubscriberHandle subscriber)
{
	if (subscriber != (CUpti_SubscriberHandle)&g_subscribed)
		return CUPTI_ERROR_INVALID_PARAMETER;
	pthread_mutex_lock(&g_lock);
	g_subscribed = 0;
	pthread_mutex_unlock(&g_lock);
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc req,
						  CUpti_BuffersCallbackCompleteFunc done)
{
	if (!req || !done)
		return CUPTI_ERROR_INVALID_PARAMETER;
	pthread_mutex_lock(&g_lock);
	g_req = req;
	g_done = done;
	pthread_mutex_unlock(&g_lock);
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiActivityRegisterTimestampCallback(CUpti_TimestampCallbackFunc f)
{
	uint64_t best = UINT64_MAX;

	g_ts = f;
	if (!f) {
		g_ts_offset = 0;
		return CUPTI_SUCCESS;
	}
	/* The tightest of 16 reads: one read preempted between its two
	 * CLOCK_MONOTONIC reads put the offset off by as much (seen: a
	 * 0-ns kernel 0.5 us before the uprobe entry of its own launch,
	 * so no flow; test_profiler_api_windows_hold_their_gpu_activity). */
	for (int i = 0; i < 16; i++) {
		uint64_t a = mono_ns(), m = f(), b = mono_ns();

		if (b - a < best) {
			best = b - a;
			g_ts_offset = (int64_t)(m - (a + (b - a) / 2));
		}
	}
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiGetTimestamp(uint64_t *timestamp)
{
	if (!timestamp)
		return CUPTI_ERROR_INVALID_PARAMETER;
	*timestamp = g_ts ? g_ts() : mono_ns();
	return CUPTI_SUCCESS;
}

/* Hands the current buffer back (called locked; the callback runs
 * unlocked, as CUPTI runs it on its own thread). */
static void complete(void)
{
	uint8_t *b = g_buf;
	size_t size = g_size, used = g_used;
	CUpti_BuffersCallbackCompleteFunc done = g_done;

	g_buf = NULL;
	g_size = g_used = 0;
	g_npend = 0;
	if (!b)
		return;
	pthread_mutex_unlock(&g_lock);
	done(NULL, 0, b, size, used);
	pthread_mutex_lock(&g_lock);
}

/* Room for a record of size bytes, in a client's buffer; NULL: dropped.
 * Called locked. */
static void *room(size_t size)
{
	void *r;

	size = (size + 7) & ~(size_t)7;
	if (g_buf && g_used + size > g_size)
		complete();
	if (!g_buf) {
		uint8_t *b = NULL;
		size_t sz = 0, max = 0;

		if (!g_req) {
			g_dropped++;
			return NULL;
		}
		pthread_mutex_unlock(&g_lock);
		g_req(&b, &sz, &max);
		pthread_mutex_lock(&g_lock);
		if (g_buf) {
			/* Another thread got one meanwhile: give this back empty. */
			if (b) {
				pthread_mutex_unlock(&g_lock);
				g_done(NULL, 0, b, sz, 0);
				pthread_mutex_lock(&g_lock);
			}
		} else if (!b || sz < size || ((uintptr_t)b & 7)) {
			g_dropped++;
			return NULL;
		} else {
			g_buf = b;
			g_size = sz;
			g_used = 0;
		}
		if (g_used + size > g_size) {
			g_dropped++;
			return NULL;
		}
	}
	r = g_buf + g_used;
	memset(r, 0, size);
	g_used += size;
	return r;
}

/* Remembers a record of work ending at end (CLOCK_MONOTONIC) until its
 * buffer goes. Called locked. */
static void pending(const void *rec, uint64_t end)
{
	if (g_npend == g_cappend) {
		size_t cap = g_cappend ? 2 * g_cappend : 256;
		struct pending *p = realloc(g_pend, cap * sizeof(*p));

		if (!p)
			return;		/* then taken as complete */
		g_pend = p;
		g_cappend = cap;
	}
	g_pend[g_npend].at = (size_t)((const uint8_t *)rec - g_buf);
	g_pend[g_npend++].end = end;
}

/* A record of running work at a forced flush: no timestamps. */
static void unfinished(CUpti_Activity *r)
{
	switch (r->kind) {
	case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
		((CUpti_ActivityKernel10 *)r)->start = ((CUpti_ActivityKernel10 *)r)->end = 0;
		break;
	case CUPTI_ACTIVITY_KIND_MEMCPY:
		((CUpti_ActivityMemcpy6 *)r)->start = ((CUpti_ActivityMemcpy6 *)r)->end = 0;
		break;
	case CUPTI_ACTIVITY_KIND_MEMSET:
		((CUpti_ActivityMemset4 *)r)->start = ((CUpti_ActivityMemset4 *)r)->end = 0;
		break;
	default:
		break;
	}
}

/* CUPTI's kernel names live as long as the process (the driver's may
 * go with their module). Called locked. */
static const char *intern(const char *name)
{
	static char *names[4096];
	static size_t n;

	if (!name)
		return NULL;
	for (size_t i = 0; i < n; i++)
		if (!strcmp(names[i], name))
			return names[i];
	if (n == sizeof(names) / sizeof(names[0]))
		return "(too many kernel names for the fake CUPTI)";
	names[n] = strdup(name);
	return names[n] ? names[n++] : "(out of memory)";
}

/* The driver callback ids of the fake's calls, by class. */
static CUpti_CallbackId cbid_of(const struct fake_activity *a)
{
	switch (a->kind) {
	case FA_KERNEL:
		return CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel;
	case FA_MEMCPY:
		if (a->copy_kind == FA_HTOD)
			return a->async ? CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoDAsync_v2 :
					  CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoD_v2;
		if (a->copy_kind == FA_DTOH)
			return a->async ? CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoHAsync_v2 :
					  CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoH_v2;
		return a->async ? CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoDAsync_v2 :
				  CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoD_v2;
	case FA_MEMSET:
		return a->async ? CUPTI_DRIVER_TRACE_CBID_cuMemsetD32Async :
				  CUPTI_DRIVER_TRACE_CBID_cuMemsetD32_v2;
	case FA_SYNC:
		return a->sync_type == FA_SYNC_CONTEXT ? CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize :
							 CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize;
	case FA_GRAPH:
		return a->api && !strcmp(a->api, "cuGraphLaunch_ptsz") ?
			       CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz :
			       CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch;
	}
	return 0;
}

/* The record of the work a did on the GPU, with correlation id corr.
 * Called locked. */
static void op_record(const struct fake_activity *a, uint32_t corr)
{
	if (a->captured)
		return;
	switch (a->kind) {
	case FA_KERNEL:
		if (g_kind_on[CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL]) {
			CUpti_ActivityKernel10 *k = room(sizeof(*k));

			if (!k)
				break;
			pending(k, a->end);
			k->kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
			k->start = stamp(a->start);
			k->end = stamp(a->end);
			k->deviceId = a->device;
			k->contextId = a->context;
			k->streamId = a->stream;
			k->gridX = (int32_t)a->grid[0];
			k->gridY = (int32_t)a->grid[1];
			k->gridZ = (int32_t)a->grid[2];
			k->blockX = (int32_t)a->block[0];
			k->blockY = (int32_t)a->block[1];
			k->blockZ = (int32_t)a->block[2];
			k->registersPerThread = 32;
			k->dynamicSharedMemory = (int32_t)a->smem_dynamic;
			k->correlationId = corr;
			k->graphId = a->graph_id;
			k->graphNodeId = a->graph_node_id;
			k->name = intern(a->name);
		}
		break;
	case FA_MEMCPY:
		if (g_kind_on[CUPTI_ACTIVITY_KIND_MEMCPY]) {
			CUpti_ActivityMemcpy6 *m = room(sizeof(*m));

			if (!m)
				break;
			pending(m, a->end);
			m->kind = CUPTI_ACTIVITY_KIND_MEMCPY;
			m->copyKind = (uint8_t)a->copy_kind;
			m->srcKind = a->copy_kind == FA_HTOD || a->copy_kind == FA_HTOH ?
					     CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE :
					     CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
			m->dstKind = a->copy_kind == FA_DTOH || a->copy_kind == FA_HTOH ?
					     CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE :
					     CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
			m->flags = a->async ? CUPTI_ACTIVITY_FLAG_MEMCPY_ASYNC : 0;
			m->bytes = a->bytes;
			m->start = stamp(a->start);
			m->end = stamp(a->end);
			m->deviceId = a->device;
			m->contextId = a->context;
			m->streamId = a->stream;
			m->correlationId = corr;
			m->graphId = a->graph_id;
			m->graphNodeId = a->graph_node_id;
		}
		break;
	case FA_MEMSET:
		if (g_kind_on[CUPTI_ACTIVITY_KIND_MEMSET]) {
			CUpti_ActivityMemset4 *m = room(sizeof(*m));

			if (!m)
				break;
			pending(m, a->end);
			m->kind = CUPTI_ACTIVITY_KIND_MEMSET;
			m->value = a->value;
			m->bytes = a->bytes;
			m->start = stamp(a->start);
			m->end = stamp(a->end);
			m->deviceId = a->device;
			m->contextId = a->context;
			m->streamId = a->stream;
			m->correlationId = corr;
			m->graphId = a->graph_id;
			m->graphNodeId = a->graph_node_id;
			m->flags = a->async ? CUPTI_ACTIVITY_FLAG_MEMSET_ASYNC : 0;
			m->memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
		}
		break;
	case FA_SYNC:
		if (g_kind_on[CUPTI_ACTIVITY_KIND_SYNCHRONIZATION]) {
			CUpti_ActivitySynchronization2 *s = room(sizeof(*s));

			if (!s)
				break;
			s->kind = CUPTI_ACTIVITY_KIND_SYNCHRONIZATION;
			s->type = (CUpti_ActivitySynchronizationType)a->sync_type;
			s->start = stamp(a->start);
			s->end = stamp(a->end);
			s->correlationId = corr;
			s->contextId = a->context;
			s->streamId = a->stream;
			s->cudaEventId = CUPTI_SYNCHRONIZATION_INVALID_VALUE;
		}
		break;
	case FA_GRAPH:
		/* The nodes it ran, all with the launch's correlation id. */
		for (uint32_t i = 0; i < a->nnodes; i++)
			op_record(&a->nodes[i], corr);
		break;
	}
}

static void one_activity(const struct fake_activity *a);

static void on_activity(const struct fake_activity *a)
{
	struct fake_activity b;
	uint64_t api = a->api_end - a->api_start, gpu = a->end - a->start, base = a->start;

	if (g_burst == 1 || a->kind != FA_KERNEL) {
		one_activity(a);
		return;
	}
	/* K kernels in the launch's interval on its stream (a zero-length
	 * launch: in the call's interval), K API records in the call. */
	if (!gpu) {
		base = a->api_start;
		gpu = api;
	}
	b = *a;
	for (uint32_t i = 0; i < g_burst; i++) {
		b.corr = __atomic_add_fetch(&g_burst_corr, 1, __ATOMIC_RELAXED);
		b.api_start = a->api_start + api * i / g_burst;
		b.api_end = a->api_start + api * (i + 1) / g_burst;
		b.start = base + gpu * i / g_burst;
		b.end = base + gpu * (i + 1) / g_burst;
		one_activity(&b);
	}
}

static void one_activity(const struct fake_activity *a)
{
	CUpti_CallbackId cbid = cbid_of(a);

	pthread_mutex_lock(&g_lock);
	if (g_kind_on[CUPTI_ACTIVITY_KIND_DRIVER] || CBID_ON(cbid)) {
		CUpti_ActivityAPI *r = room(sizeof(*r));

		if (r) {
			r->kind = CUPTI_ACTIVITY_KIND_DRIVER;
			r->cbid = cbid;
			/* CGBPF_FAKE_CUPTI_API_WIDEN=NS: the record of a runtime
			 * call around the driver call, one that no uprobe sees
			 * (a CUDA runtime linked statically into a library). */
			r->start = stamp(a->api_start - g_api_widen);
			r->end = stamp(a->api_end + g_api_widen);
			r->processId = g_pid;
			/* As CUPTI: pthread_self() unless told otherwise. */
			r->threadId = g_tid_type == CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM ? a->tid : a->ptid;
			r->correlationId = a->corr;
		}
	}
	op_record(a, a->corr);
	pthread_mutex_unlock(&g_lock);
}

static void device_record(void)
{
	static char name[] = "Fake GPU (cgbpf tests)";
	CUpti_ActivityDevice5 *d = room(sizeof(*d));

	if (!d)
		return;
	d->kind = CUPTI_ACTIVITY_KIND_DEVICE;
	d->id = 0;
	d->name = name;
	d->numMultiprocessors = 132;
	d->computeCapabilityMajor = 9;
	d->computeCapabilityMinor = 0;
	d->globalMemorySize = 80ull << 30;
	memcpy(&d->uuid, "cgbpf-fake-gpu-0", sizeof(d->uuid));
}

EXPORT CUptiResult cuptiActivityEnable(CUpti_ActivityKind kind)
{
	void (*hook)(fake_activity_fn);

	if ((unsigned)kind >= sizeof(g_kind_on))
		return CUPTI_ERROR_INVALID_KIND;
	if (!g_hooked) {
		/* The fake driver, in this process: the only GPU there is. */
		*(void **)&hook = dlsym(RTLD_DEFAULT, "fakecuda_activity_hook");
		if (!hook)
			return CUPTI_ERROR_NOT_INITIALIZED;
		hook(on_activity);
		g_hooked = 1;
	}
	pthread_mutex_lock(&g_lock);
	g_kind_on[kind] = 1;
	if (kind == CUPTI_ACTIVITY_KIND_DEVICE)
		device_record();
	pthread_mutex_unlock(&g_lock);
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiActivityDisable(CUpti_ActivityKind kind)
{
	void (*hook)(fake_activity_fn);
	bool any = false;

	if ((unsigned)kind >= sizeof(g_kind_on))
		return CUPTI_ERROR_INVALID_KIND;
	pthread_mutex_lock(&g_lock);
	g_kind_on[kind] = 0;
	for (size_t k = 0; k < sizeof(g_kind_on); k++)
		any |= g_kind_on[k] != 0;
	/* Nothing enabled, with CGBPF_FAKE_CUPTI_UNHOOK set: the driver's
	 * launch path goes back to costing nothing for activity, as NVIDIA's
	 * does (bench/inject_phases.sh). Not by default: the tests' timing
	 * of a tool taking CUPTI (test_tool_takes_cupti_mid_run) was made
	 * with the hook kept. */
	if (!any && g_hooked && getenv("CGBPF_FAKE_CUPTI_UNHOOK")) {
		*(void **)&hook = dlsym(RTLD_DEFAULT, "fakecuda_activity_hook");
		if (hook)
			hook(NULL);
		g_hooked = 0;
	}
	pthread_mutex_unlock(&g_lock);
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiActivityEnableDriverApi(CUpti_CallbackId cbid, uint8_t enable)
{
	if (cbid >= sizeof(g_driver_cbid_on))
		return CUPTI_ERROR_INVALID_PARAMETER;
	g_driver_cbid_on[cbid] = enable != 0;
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiActivityEnableRuntimeApi(CUpti_CallbackId cbid, uint8_t enable)
{
	/* The fake runtime's calls reach the fake driver's. */
	(void)cbid;
	(void)enable;
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiSetThreadIdType(CUpti_ActivityThreadIdType type)
{
	if (type != CUPTI_ACTIVITY_THREAD_ID_TYPE_DEFAULT && type != CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM)
		return CUPTI_ERROR_INVALID_PARAMETER;
	/* Tests: a CUPTI that cannot give system thread ids. */
	if (getenv("CGBPF_FAKE_CUPTI_NO_TID_TYPE"))
		return CUPTI_ERROR_NOT_SUPPORTED;
	__atomic_store_n(&g_tid_type, type, __ATOMIC_RELAXED);
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiGetThreadIdType(CUpti_ActivityThreadIdType *type)
{
	if (!type)
		return CUPTI_ERROR_INVALID_PARAMETER;
	*type = __atomic_load_n(&g_tid_type, __ATOMIC_RELAXED);
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult cuptiActivityFlushAll(uint32_t flag)
{
	CUptiResult r = CUPTI_SUCCESS;

	uint64_t now = mono_ns();
	bool busy = false;

	pthread_mutex_lock(&g_lock);
	for (size_t i = 0; i < g_npend && g_buf; i++) {
		if (g_pend[i].end <= now)
			continue;
		busy = true;
		if (flag & CUPTI_ACTIVITY_FLAG_FLUSH_FORCED)
			unfinished((CUpti_Activity *)(g_buf + g_pend[i].at));
	}
	if (!g_done)
		r = CUPTI_ERROR_INVALID_OPERATION;
	else if (!busy || (flag & CUPTI_ACTIVITY_FLAG_FLUSH_FORCED))
		complete();
	pthread_mutex_unlock(&g_lock);
	return r;
}

EXPORT CUptiResult cuptiActivityGetNumDroppedRecords(CUcontext context, uint32_t streamId,
						     size_t *dropped)
{
	(void)context;
	(void)streamId;
	if (!dropped)
		return CUPTI_ERROR_INVALID_PARAMETER;
	pthread_mutex_lock(&g_lock);
	*dropped = g_dropped;
	g_dropped = 0;
	pthread_mutex_unlock(&g_lock);
	return CUPTI_SUCCESS;
}

static size_t record_size(const CUpti_Activity *r)
{
	size_t n;

	switch (r->kind) {
	case CUPTI_ACTIVITY_KIND_DRIVER:
	case CUPTI_ACTIVITY_KIND_RUNTIME:
		n = sizeof(CUpti_ActivityAPI);
		break;
	case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
		n = sizeof(CUpti_ActivityKernel10);
		break;
	case CUPTI_ACTIVITY_KIND_MEMCPY:
		n = sizeof(CUpti_ActivityMemcpy6);
		break;
	case CUPTI_ACTIVITY_KIND_MEMSET:
		n = sizeof(CUpti_ActivityMemset4);
		break;
	case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION:
		n = sizeof(CUpti_ActivitySynchronization2);
		break;
	case CUPTI_ACTIVITY_KIND_DEVICE:
		n = sizeof(CUpti_ActivityDevice5);
		break;
	default:
		return 0;
	}
	return (n + 7) & ~(size_t)7;
}

EXPORT CUptiResult cuptiActivityGetNextRecord(uint8_t *buffer, size_t valid, CUpti_Activity **record)
{
	size_t off, n;

	if (!buffer || !record)
		return CUPTI_ERROR_INVALID_PARAMETER;
	off = *record ? (size_t)((uint8_t *)*record - buffer) + record_size(*record) : 0;
	if (off >= valid)
		return CUPTI_ERROR_MAX_LIMIT_REACHED;
	n = record_size((CUpti_Activity *)(buffer + off));
	if (!n || off + n > valid)
		return CUPTI_ERROR_INVALID_KIND;
	*record = (CUpti_Activity *)(buffer + off);
	return CUPTI_SUCCESS;
}
