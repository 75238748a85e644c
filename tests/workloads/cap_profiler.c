/* SPDX-License-Identifier: MIT */
/*
 * cap_profiler: profiler-API capture ranges (--capture-range
 * cudaProfilerApi) around a known number of launches, with launches
 * outside them too.
 *
 * Usage: cap_profiler WINDOWS
 *   cuInit, context, module, cuModuleGetFunction of "k_in" and "k_out"
 *   (names known only from before any window), cuMemAlloc of 1 MiB; then
 *   3 launches of k_out; then for w = 0 .. WINDOWS-1: cuProfilerStart (or
 *   cudaProfilerStart when built as crt_capture), 5 + w launches of k_in,
 *   one cuStreamSynchronize, cuProfilerStop (cudaProfilerStop), 2
 *   launches of k_out; a cuProfilerStop with no window open; the free.
 * CAP_GAP_MS in the environment: sleep that long after each window's k_out
 * launches (a window's end then reaches cgbpf before the next one begins).
 * CAP_SPIN_MS: spin on the CPU that long before each window and again
 * inside it, after its launches (CPU samples up to both edges).
 * Manifest extra: "windows": [launches of k_in per window], "outside":
 * launches of k_out, "alloc_before": bytes allocated before the windows.
 */
#define _GNU_SOURCE
#include <cuda.h>
#if __has_include(<cudaProfiler.h>)
#include <cudaProfiler.h>
#else
CUresult cuProfilerStart(void);
CUresult cuProfilerStop(void);
#endif
#ifdef CAP_RUNTIME
#include <cuda_runtime_api.h>
#include <cuda_profiler_api.h>
#endif

#include "manifest.h"

#define K_IN "k_in"
#define K_OUT "k_out"
#define ALLOC (1u << 20)
#define MAXW 64

static const unsigned char module_image[] = "\x7f" "ELF fake cubin for cgbpf capture";
static unsigned long windows_n, win_launches[MAXW], outside;

static void extra(FILE *f, void *arg)
{
	fprintf(f, ", \"windows\": [");
	for (unsigned long w = 0; w < windows_n; w++)
		fprintf(f, "%s%lu", w ? ", " : "", win_launches[w]);
	fprintf(f, "], \"outside\": %lu, \"alloc_before\": %u", outside, ALLOC);
}

static void launch(CUfunction fn, const char *name)
{
	CHECK(cuLaunchKernel, fn, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL);
	wl_kernel(name, 1);
}

static void start(void)
{
#ifdef CAP_RUNTIME
	if (cudaProfilerStart() != cudaSuccess)
		wl_die("cudaProfilerStart failed");
	wl_call("cudaProfilerStart", 0);
#else
	CHECK(cuProfilerStart);
#endif
}

static void stop(void)
{
#ifdef CAP_RUNTIME
	if (cudaProfilerStop() != cudaSuccess)
		wl_die("cudaProfilerStop failed");
	wl_call("cudaProfilerStop", 0);
#else
	CHECK(cuProfilerStop);
#endif
}

static void spin(unsigned long ms)
{
	struct timespec a, b;
	volatile unsigned long x = 0;

	clock_gettime(CLOCK_MONOTONIC, &a);
	do {
		for (int i = 0; i < 10000; i++)
			x += i;
		clock_gettime(CLOCK_MONOTONIC, &b);
	} while ((b.tv_sec - a.tv_sec) * 1000 + (b.tv_nsec - a.tv_nsec) / 1000000 < (long)ms);
}

int main(int argc, char **argv)
{
	CUfunction in, out;
	CUdeviceptr p;
	CUcontext ctx;
	CUmodule mod;
	const char *gap = getenv("CAP_GAP_MS"), *spin_ms = getenv("CAP_SPIN_MS");
	char *end;

	if (argc != 2)
		wl_die("usage: cap_profiler WINDOWS");
	windows_n = strtoul(argv[1], &end, 10);
	if (*end || !windows_n || windows_n > MAXW)
		wl_die("WINDOWS: 1 to %d", MAXW);
	wl_gate();
	ctx = wl_context();
	CHECK(cuModuleLoadData, &mod, module_image);
	CHECK(cuModuleGetFunction, &in, mod, K_IN);
	CHECK(cuModuleGetFunction, &out, mod, K_OUT);
	CHECK(cuMemAlloc, &p, ALLOC);
	wl_dev_alloc(ALLOC);
	for (int i = 0; i < 3; i++, outside++)
		launch(out, K_OUT);
	for (unsigned long w = 0; w < windows_n; w++) {
		if (spin_ms)
			spin(strtoul(spin_ms, NULL, 10));
		start();
		for (unsigned long i = 0; i < 5 + w; i++, win_launches[w]++)
			launch(in, K_IN);
		if (spin_ms)
			spin(strtoul(spin_ms, NULL, 10));
		CHECK(cuStreamSynchronize, NULL);
		stop();
		for (int i = 0; i < 2; i++, outside++)
			launch(out, K_OUT);
		if (gap)
			usleep(strtoul(gap, NULL, 10) * 1000);
	}
	CHECK(cuProfilerStop);	/* not started: no window */
	CHECK(cuMemFree, p);
	wl_dev_free(ALLOC);
	CHECK(cuModuleUnload, mod);
	CHECK(cuCtxDestroy, ctx);
	wl_manifest_write(extra, NULL);
	return 0;
}
