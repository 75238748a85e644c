/* SPDX-License-Identifier: MIT */
/*
 * gpu_rate: a launch loop at a chosen rate, the producer of bench/gpurate.sh.
 *
 * Usage: gpu_rate N [RATE]   (RATE: launches per second; 0 or absent:
 *                             as fast as one thread goes)
 *
 * After setup (as bench_launch), and CGBPF_PAUSE_FILE's gate, calls
 * cuLaunchKernel N times on one thread, on the NULL stream, with a
 * zero-duration kernel; with RATE it sleeps between millisecond slices of
 * launches to hold it (CLOCK_MONOTONIC, absolute: lateness is made up, not
 * accumulated). With the fake CUPTI's CGBPF_FAKE_CUPTI_BURST=K each launch
 * yields K kernel records. Prints one line on stdout:
 *
 *   calls=N seconds=S rate=R
 *
 * the loop's own time and launches per second achieved.
 */
#define _GNU_SOURCE
#include <cuda.h>

#include "manifest.h"

#define K_NOOP "_Z13gpu_rate__ns0v"

static const unsigned char module_image[] = "\x7f" "ELF fake cubin for cgbpf bench";

static unsigned long arg_ul(const char *s)
{
	unsigned long v;
	char *end;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || !*s || *end)
		wl_die("bad number: %s", s);
	return v;
}

static uint64_t mono_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

int main(int argc, char **argv)
{
	unsigned long n, rate = 0, slice, done = 0;
	uint64_t t0, t1;
	CUfunction fn;
	CUcontext ctx;
	CUmodule mod;

	if (argc < 2 || argc > 3)
		wl_die("usage: gpu_rate N [RATE]");
	n = arg_ul(argv[1]);
	if (argc == 3)
		rate = arg_ul(argv[2]);
	/* Launches per sleep: a millisecond's worth. */
	slice = rate ? (rate + 999) / 1000 : n;

	wl_gate();
	ctx = wl_context();
	CHECK(cuModuleLoadData, &mod, module_image);
	CHECK(cuModuleGetFunction, &fn, mod, K_NOOP);
	wl_pause();

	t0 = mono_ns();
	while (done < n) {
		unsigned long m = n - done < slice ? n - done : slice;

		for (unsigned long i = 0; i < m; i++)
			if (cuLaunchKernel(fn, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL) != CUDA_SUCCESS)
				wl_die("launch %lu failed", done + i);
		done += m;
		if (rate) {
			uint64_t due = t0 + (uint64_t)((double)done * 1e9 / (double)rate);
			struct timespec ts = { (time_t)(due / 1000000000u), (long)(due % 1000000000u) };

			clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
		}
	}
	t1 = mono_ns();
	wl_calls(WL_SYM(cuLaunchKernel), n);
	wl_kernel(K_NOOP, n);
	CHECK(cuCtxSynchronize);
	CHECK(cuModuleUnload, mod);
	CHECK(cuCtxDestroy, ctx);
	printf("calls=%lu seconds=%.6f rate=%.0f\n", n, (double)(t1 - t0) / 1e9,
	       (double)n * 1e9 / (double)(t1 - t0));
	wl_manifest_write(NULL, NULL);
	return 0;
}
