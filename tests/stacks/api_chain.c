/* SPDX-License-Identifier: MIT */
/*
 * api_chain: a known call chain for the CPU stack tests of cgbpf record.
 *
 *   main -> level_a -> level_b -> level_c
 *
 * level_c spins for SPIN_MS of its own CPU time (CPU samples land in it:
 * as many on a loaded host as on an idle one), then
 * launches a fake kernel lasting SYNC_MS and waits for it with
 * cuStreamSynchronize (a slow API call whose backtrace is the chain).
 *
 * Usage: chain_<flavour> SPIN_MS SYNC_MS
 *
 * Built in several flavours by the Makefile (frame pointers or not, PIE or
 * not, the chain in a shared library, stripped with a debuglink file);
 * CHAIN_LIB_ONLY / CHAIN_MAIN_ONLY split it into library and program.
 */
#define _GNU_SOURCE
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define NOINLINE __attribute__((noinline, noclone, used))

void level_a(long spin_ms, long sync_ms);

/* Keeps calls from becoming tail calls and loops from being folded. */
volatile unsigned long chain_sink;

#ifndef CHAIN_MAIN_ONLY
static double cpu_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void die(const char *what, CUresult r)
{
	fprintf(stderr, "chain: %s failed: %d\n", what, (int)r);
	exit(1);
}

NOINLINE void level_c(long spin_ms, long sync_ms)
{
	static const unsigned char image[] = "\x7f" "ELF fake cubin for the stack tests";
	char name[64];
	double end = cpu_ms() + spin_ms;
	CUfunction fn;
	CUcontext ctx;
	CUmodule mod;
	CUdevice dev;
	CUresult r;

	/* The clock is read rarely: samples should land in this loop. */
	while (cpu_ms() < end)
		for (unsigned long i = 0; i < 2000000; i++)
			chain_sink += i ^ (chain_sink >> 3);
	if (sync_ms <= 0)
		return;
	if ((r = cuInit(0)) || (r = cuDeviceGet(&dev, 0)))
		die("cuInit", r);
#if CUDA_VERSION >= 13000
	r = cuCtxCreate(&ctx, NULL, 0, dev);
#else
	r = cuCtxCreate(&ctx, 0, dev);
#endif
	if (r)
		die("cuCtxCreate", r);
	snprintf(name, sizeof(name), "chain_kernel__ns%ld", sync_ms * 1000000);
	if ((r = cuModuleLoadData(&mod, image)) || (r = cuModuleGetFunction(&fn, mod, name)))
		die("cuModuleGetFunction", r);
	if ((r = cuLaunchKernel(fn, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL)))
		die("cuLaunchKernel", r);
	if ((r = cuStreamSynchronize(NULL)))
		die("cuStreamSynchronize", r);
	chain_sink++;
}

NOINLINE void level_b(long spin_ms, long sync_ms)
{
	level_c(spin_ms, sync_ms);
	chain_sink++;
}

NOINLINE void level_a(long spin_ms, long sync_ms)
{
	level_b(spin_ms, sync_ms);
	chain_sink++;
}
#endif

#ifndef CHAIN_LIB_ONLY
int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: chain SPIN_MS SYNC_MS\n");
		return 2;
	}
	level_a(atol(argv[1]), atol(argv[2]));
	chain_sink++;
	return 0;
}
#endif
