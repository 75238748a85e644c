/* SPDX-License-Identifier: MIT */
/*
 * mt: several application threads using one context concurrently.
 *
 * Usage: mt [--threads T] [--iters N]     (defaults 4 and 100)
 *
 * The main thread creates the context and loads the module, then starts T
 * threads named "worker-0".. (pthread_setname_np, before their first CUDA
 * call) which start together (barrier) and each: makes the context
 * current, creates its own non-blocking stream, allocates a device buffer
 * and a page-locked host buffer of 4096 * (i + 1) bytes, then N times
 * launches _Z9mt_workerPfi with grid (i+1, 1, 1) and block (32 * (i%32 + 1),
 * 1, 1), copies the host buffer to the device buffer (cuMemcpyHtoDAsync) and
 * synchronizes its stream; then frees everything. All workers hold their
 * buffers at once, so "alloc_bytes_peak" is 4096 * T * (T + 1) / 2.
 *
 * Manifest: the common fields; "per_thread" gives each thread's name and
 * call counts; "workers": [{"tid", "name", "stream", "grid", "block",
 * "bytes"}] per worker; "iters".
 */
#define _GNU_SOURCE
#include <cuda.h>

#include "manifest.h"

#define K_MT "_Z9mt_workerPfi"

static const unsigned char module_image[] = "\x7f" "ELF fake cubin for cgbpf mt";

struct worker {
	pthread_t thread;
	int index;
	long tid;
	char name[16];
	CUstream stream;
	unsigned int grid, block;
	size_t bytes;
};

static CUcontext g_ctx;
static CUfunction g_fn;
static unsigned long g_iters = 100;
static pthread_barrier_t g_start, g_allocated;

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	CUdeviceptr d;
	void *h;
	int n = (int)(w->bytes / 4);
	void *args[] = { &d, &n };

	snprintf(w->name, sizeof(w->name), "worker-%d", w->index);
	wl_set_thread_name(w->name);
	w->tid = wl_gettid();
	pthread_barrier_wait(&g_start);

	CHECK(cuCtxSetCurrent, g_ctx);
	CHECK(cuStreamCreate, &w->stream, CU_STREAM_NON_BLOCKING);
	CHECK(cuMemAlloc, &d, w->bytes);
	wl_dev_alloc(w->bytes);
	CHECK(cuMemAllocHost, &h, w->bytes);
	wl_host_alloc(w->bytes);
	memset(h, w->index, w->bytes);
	/* All buffers live at once, so alloc_bytes_peak is their exact sum. */
	pthread_barrier_wait(&g_allocated);

	for (unsigned long i = 0; i < g_iters; i++) {
		CHECK(cuLaunchKernel, g_fn, w->grid, 1, 1, w->block, 1, 1, 0, w->stream, args, NULL);
		wl_kernel(K_MT, 1);
		CHECK(cuMemcpyHtoDAsync, d, h, w->bytes, w->stream);
		wl_bytes(WL_HTOD, w->bytes);
		CHECK(cuStreamSynchronize, w->stream);
	}

	CHECK(cuMemFreeHost, h);
	wl_host_free(w->bytes);
	CHECK(cuMemFree, d);
	wl_dev_free(w->bytes);
	CHECK(cuStreamDestroy, w->stream);
	return NULL;
}

struct workers {
	struct worker *v;
	unsigned long n;
};

static void write_extra(FILE *f, void *arg)
{
	struct workers *ws = arg;

	fprintf(f, ",\n  \"iters\": %lu,\n  \"workers\": [", g_iters);
	for (unsigned long i = 0; i < ws->n; i++) {
		struct worker *w = &ws->v[i];

		fprintf(f, "%s\n    {\"tid\": %ld, \"name\": \"%s\", \"stream\": \"%p\", "
			"\"grid\": [%u, 1, 1], \"block\": [%u, 1, 1], \"bytes\": %zu}",
			i ? "," : "", w->tid, w->name, (void *)w->stream, w->grid, w->block,
			w->bytes);
	}
	fputs("\n  ]", f);
}

int main(int argc, char **argv)
{
	struct workers ws = { .n = 4 };
	CUmodule mod;
	CUdevice dev;
	int err;

	for (int i = 1; i < argc; i++) {
		if (!wl_arg_ul(argc, argv, &i, "--threads", &ws.n) &&
		    !wl_arg_ul(argc, argv, &i, "--iters", &g_iters))
			wl_die("usage: mt [--threads T] [--iters N]");
	}
	if (ws.n == 0 || ws.n > 1024)
		wl_die("--threads must be 1..1024");
	if (!(ws.v = calloc(ws.n, sizeof(*ws.v))))
		wl_die("out of memory");

	wl_gate();

	CHECK(cuInit, 0);
	CHECK(cuDeviceGet, &dev, 0);
#if CUDA_VERSION >= 13000
	CHECK(cuCtxCreate, &g_ctx, NULL, 0, dev);
#else
	CHECK(cuCtxCreate, &g_ctx, 0, dev);
#endif
	CHECK(cuModuleLoadData, &mod, module_image);
	CHECK(cuModuleGetFunction, &g_fn, mod, K_MT);

	pthread_barrier_init(&g_start, NULL, (unsigned int)ws.n);
	pthread_barrier_init(&g_allocated, NULL, (unsigned int)ws.n);
	for (unsigned long i = 0; i < ws.n; i++) {
		struct worker *w = &ws.v[i];

		w->index = (int)i;
		w->grid = (unsigned int)i + 1;
		w->block = 32 * ((unsigned int)i % 32 + 1);
		w->bytes = 4096 * (i + 1);
		if ((err = pthread_create(&w->thread, NULL, worker_main, w)))
			wl_die("pthread_create: %s", strerror(err));
	}
	for (unsigned long i = 0; i < ws.n; i++)
		pthread_join(ws.v[i].thread, NULL);
	pthread_barrier_destroy(&g_start);
	pthread_barrier_destroy(&g_allocated);

	CHECK(cuCtxSynchronize);
	CHECK(cuModuleUnload, mod);
	CHECK(cuCtxDestroy, g_ctx);

	wl_manifest_write(write_extra, &ws);
	free(ws.v);
	return 0;
}
