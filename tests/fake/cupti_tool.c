// SPDX-License-Identifier: MIT
/*
 * A stand-in for a CUPTI tool that starts while cgbpf collects: what
 * torch.profiler's Kineto does when a profiling session begins and ends
 * (libkineto's CuptiActivityApi), on whatever libcupti CGBPF_CUPTI_PATH
 * names (the fake one, tests/fake/libcupti.c).
 *
 * Loaded with LD_PRELOAD; CGBPF_FAKE_TOOL_DIR=DIR arms it. Its thread
 * waits for DIR/start, then: cuptiSubscribe_v2 (named "Kineto (cgbpf test
 * tool)"), cuptiActivityRegisterCallbacks with its own buffer callbacks,
 * cuptiActivityEnable(CONCURRENT_KERNEL), and writes DIR/started. It
 * waits for DIR/stop, then: cuptiActivityFlushAll(FORCED),
 * cuptiActivityDisable(CONCURRENT_KERNEL), cuptiUnsubscribe, and writes
 * DIR/result:
 *
 *   subscribe <CUptiResult> <the old subscriber's name, or ->
 *   kernels <kernel records found in its own buffers>
 *   foreign_buffers <completed buffers it never handed out>
 *
 * Like Kineto, it reads only buffers it allocated (a foreign one is
 * neither read nor freed) and skips record kinds it did not ask for.

 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cupti.h>

#define BUF_SIZE (256u << 10)
#define BUFS 64

static struct {
	char dir[512];
	CUptiResult (*subscribe_v2)(CUpti_SubscriberHandle *, CUpti_CallbackFunc, void *,
				    CUpti_SubscriberParams *);
	CUptiResult (*unsubscribe)(CUpti_SubscriberHandle);
	CUptiResult (*register_callbacks)(CUpti_BuffersCallbackRequestFunc,
					  CUpti_BuffersCallbackCompleteFunc);
	CUptiResult (*enable)(CUpti_ActivityKind);
	CUptiResult (*disable)(CUpti_ActivityKind);
	CUptiResult (*flush_all)(uint32_t);
	CUptiResult (*next_record)(uint8_t *, size_t, CUpti_Activity **);
	CUptiResult (*get_tid_type)(CUpti_ActivityThreadIdType *);
	pthread_mutex_t lock;
	uint8_t *bufs[BUFS];
	unsigned long kernels, foreign;
} t = { .lock = PTHREAD_MUTEX_INITIALIZER };

static void CUPTIAPI requested(uint8_t **buffer, size_t *size, size_t *max_records)
{
	uint8_t *b = aligned_alloc(8, BUF_SIZE);

	*buffer = NULL;
	*size = 0;
	*max_records = 0;
	if (!b)
		return;
	pthread_mutex_lock(&t.lock);
	for (int i = 0; i < BUFS; i++)
		if (!t.bufs[i]) {
			t.bufs[i] = b;
			*buffer = b;
			*size = BUF_SIZE;
			break;
		}
	pthread_mutex_unlock(&t.lock);
	if (!*buffer)
		free(b);
}

static void CUPTIAPI completed(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size,
			       size_t valid)
{
	CUpti_Activity *r = NULL;
	int mine = 0;

	(void)ctx;
	(void)stream;
	(void)size;
	pthread_mutex_lock(&t.lock);
	for (int i = 0; i < BUFS && !mine; i++)
		if (t.bufs[i] == buffer) {
			t.bufs[i] = NULL;
			mine = 1;
		}
	if (!mine) {
		t.foreign++;
		pthread_mutex_unlock(&t.lock);
		return;
	}
	while (t.next_record(buffer, valid, &r) == CUPTI_SUCCESS)
		if (r->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL)
			t.kernels++;
	pthread_mutex_unlock(&t.lock);
	free(buffer);
}

static void CUPTIAPI no_callback(void *ud, CUpti_CallbackDomain d, CUpti_CallbackId id,
				 const void *data)
{
	(void)ud;
	(void)d;
	(void)id;
	(void)data;
}

static int exists(const char *name)
{
	char p[600];

	snprintf(p, sizeof(p), "%s/%s", t.dir, name);
	return access(p, F_OK) == 0;
}

static void wait_file(const char *name)
{
	struct timespec ts = { 0, 10 * 1000000L };

	while (!exists(name))
		nanosleep(&ts, NULL);
}

/* DIR/name, whole or not at all (written aside, then renamed). */
static void put_file(const char *name, const char *text)
{
	char p[600], tmp[610];
	FILE *f;

	snprintf(p, sizeof(p), "%s/%s", t.dir, name);
	snprintf(tmp, sizeof(tmp), "%s.tmp", p);
	if (!(f = fopen(tmp, "w")))
		return;
	fputs(text, f);
	if (fclose(f) == 0)
		rename(tmp, p);
}

#define SYM(field, name) (*(void **)&t.field = dlsym(h, name))

static void *tool(void *arg)
{
	const char *path = getenv("CGBPF_CUPTI_PATH");
	char old[128] = "", text[512];
	CUpti_SubscriberHandle sub = NULL;
	CUpti_SubscriberParams p = {
		.structSize = CUpti_SubscriberParams_STRUCT_SIZE,
		.subscriberName = "Kineto (cgbpf test tool)",
		.oldSubscriberName = old,
		.oldSubscriberSize = sizeof(old),
	};
	CUpti_ActivityThreadIdType tid_type;
	CUptiResult r;
	void *h;

	(void)arg;
	wait_file("start");
	if (!path || !(h = dlopen(path, RTLD_NOW | RTLD_LOCAL))) {
		snprintf(text, sizeof(text), "error cannot load CUPTI (CGBPF_CUPTI_PATH=%s): %s\n",
			 path ? path : "(unset)", dlerror());
		put_file("result", text);
		return NULL;
	}
	SYM(subscribe_v2, "cuptiSubscribe_v2");
	SYM(unsubscribe, "cuptiUnsubscribe");
	SYM(register_callbacks, "cuptiActivityRegisterCallbacks");
	SYM(enable, "cuptiActivityEnable");
	SYM(disable, "cuptiActivityDisable");
	SYM(flush_all, "cuptiActivityFlushAll");
	SYM(next_record, "cuptiActivityGetNextRecord");
	SYM(get_tid_type, "cuptiGetThreadIdType");
	r = t.subscribe_v2(&sub, no_callback, NULL, &p);
	if (r != CUPTI_SUCCESS) {
		/* What Kineto does: no GPU activity for this session. */
		snprintf(text, sizeof(text), "subscribe %d %s\nkernels 0\nforeign_buffers 0\n",
			 (int)r, *old ? old : "-");
		put_file("started", "");
		put_file("result", text);
		return NULL;
	}
	t.register_callbacks(requested, completed);
	t.enable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
	put_file("started", "");
	wait_file("stop");
	t.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
	t.disable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
	t.unsubscribe(sub);
	/* The thread id type its API records would carry (Kineto reads the
	 * default, pthread_self()). */
	if (!t.get_tid_type || t.get_tid_type(&tid_type) != CUPTI_SUCCESS)
		tid_type = -1;
	pthread_mutex_lock(&t.lock);
	snprintf(text, sizeof(text), "subscribe 0 -\nkernels %lu\nforeign_buffers %lu\ntid_type %d\n",
		 t.kernels, t.foreign, (int)tid_type);
	pthread_mutex_unlock(&t.lock);
	put_file("result", text);
	return NULL;
}

static __attribute__((constructor)) void init(void)
{
	const char *dir = getenv("CGBPF_FAKE_TOOL_DIR");
	sigset_t all, old;
	pthread_t th;

	if (!dir || !*dir)
		return;
	snprintf(t.dir, sizeof(t.dir), "%s", dir);
	/* Signals are the application's. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	if (pthread_create(&th, NULL, tool, NULL) == 0)
		pthread_detach(th);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
}
