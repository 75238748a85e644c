/* SPDX-License-Identifier: MIT */
/*
 * bench_launch: launch-overhead micro-benchmark target.
 *
 * Usage: bench_launch [N]            (default 1000000)
 *
 * After setup (cuInit, cuDeviceGet, context, module, function) calls
 * cuLaunchKernel N times in a tight loop on one thread, on the NULL stream,
 * with a zero-duration kernel (_Z15bench_noop__ns0v: the "__ns0" suffix
 * keeps it at zero even under FAKECUDA_KERNEL_NS), then cuCtxSynchronize.
 * Prints one line on stdout, the only workload that does:
 *
 *   calls=N ns_per_call=X
 *
 * where X is the loop's CLOCK_MONOTONIC time divided by N (the loop only:
 * no setup, no synchronize). The manifest counts the loop's launches in
 * one go rather than one by one, to keep the loop as bare as possible.
 */
#define _GNU_SOURCE
#include <cuda.h>

#include "manifest.h"

#define K_NOOP "_Z15bench_noop__ns0v"

static const unsigned char module_image[] = "\x7f" "ELF fake cubin for cgbpf bench";

int main(int argc, char **argv)
{
	unsigned long n = 1000000, failed = 0;
	struct timespec t0, t1;
	CUfunction fn;
	CUcontext ctx;
	CUmodule mod;
	double ns;
	char *end;

	if (argc > 2)
		wl_die("usage: bench_launch [N]");
	if (argc == 2) {
		errno = 0;
		n = strtoul(argv[1], &end, 10);
		if (errno || !*argv[1] || *end)
			wl_die("bad N: %s", argv[1]);
	}

	wl_gate();

	ctx = wl_context();
	CHECK(cuModuleLoadData, &mod, module_image);
	CHECK(cuModuleGetFunction, &fn, mod, K_NOOP);
	/* CGBPF_PAUSE_FILE: bench/gpu.sh starts the loop once a tracer is in. */
	wl_pause();

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (unsigned long i = 0; i < n; i++)
		failed += cuLaunchKernel(fn, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL) != CUDA_SUCCESS;
	clock_gettime(CLOCK_MONOTONIC, &t1);
	wl_calls(WL_SYM(cuLaunchKernel), n);
	wl_kernel(K_NOOP, n - failed);
	if (failed)
		wl_die("%lu of %lu launches failed", failed, n);

	CHECK(cuCtxSynchronize);
	CHECK(cuModuleUnload, mod);
	CHECK(cuCtxDestroy, ctx);

	ns = (double)(t1.tv_sec - t0.tv_sec) * 1e9 + (double)(t1.tv_nsec - t0.tv_nsec);
	printf("calls=%lu ns_per_call=%.1f\n", n, n ? ns / (double)n : 0.0);
	wl_manifest_write(NULL, NULL);
	return 0;
}
