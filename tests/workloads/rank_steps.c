/* SPDX-License-Identifier: MIT */
/*
 * rank_steps: one rank of a data-parallel job as the profiling recipes
 * see it (docs/recipes.md): a training loop whose every iteration is an
 * NVTX range "step" (the toolkit's header-only NVTX v3, as
 * torch.cuda.nvtx.range writes it) around a known number of launches.
 *
 * Usage: rank_steps [--steps S] [--launches K]   (defaults 12, 3)
 *
 * After wl_gate(): a context, a module, a stream; then S times
 * { nvtxRangePushA("step"); K x cuLaunchKernel(_Z9rank_stepPfi) with grid
 * (step + 1, 1, 1); cuStreamSynchronize; nvtxRangePop() }: a trace's
 * launches say which steps they belong to by their grid.
 *
 * Manifest: the common fields plus "rank" (RANK from the environment, -1
 * when unset), "steps" and "launches_per_step".
 *
 * RANK_STEPS_LINGER=PATH: after writing the manifest, wait (at most 60 s)
 * until PATH exists before exiting, so that a test can let cgbpf read the
 * process's /proc entries however late it handles its records.
 */
#define _GNU_SOURCE
#include <cuda.h>
#include <nvtx3/nvToolsExt.h>

#include "manifest.h"

#define K_STEP "_Z9rank_stepPfi"

static const unsigned char module_image[] = "\x7f" "ELF fake cubin for cgbpf rank_steps";

struct info {
	long rank;
	unsigned long steps, launches;
};

static void extra(FILE *f, void *arg)
{
	const struct info *in = arg;

	fprintf(f, ",\n  \"rank\": %ld,\n  \"steps\": %lu,\n  \"launches_per_step\": %lu",
		in->rank, in->steps, in->launches);
}

int main(int argc, char **argv)
{
	struct info in = { .rank = -1, .steps = 12, .launches = 3 };
	const char *rank = getenv("RANK");
	CUfunction fn;
	CUdeviceptr d;
	CUmodule mod;
	CUstream s;
	int n = 256;
	void *args[] = { &d, &n };

	for (int i = 1; i < argc; i++) {
		if (wl_arg_ul(argc, argv, &i, "--steps", &in.steps) ||
		    wl_arg_ul(argc, argv, &i, "--launches", &in.launches))
			continue;
		wl_die("usage: rank_steps [--steps S] [--launches K]");
	}
	if (rank && *rank)
		in.rank = strtol(rank, NULL, 10);
	wl_gate();
	wl_context();
	CHECK(cuModuleLoadData, &mod, module_image);
	CHECK(cuModuleGetFunction, &fn, mod, K_STEP);
	CHECK(cuStreamCreate, &s, CU_STREAM_NON_BLOCKING);
	CHECK(cuMemAlloc, &d, 1024);
	wl_dev_alloc(1024);
	for (unsigned long step = 0; step < in.steps; step++) {
		nvtxRangePushA("step");
		for (unsigned long k = 0; k < in.launches; k++) {
			CHECK(cuLaunchKernel, fn, (unsigned int)step + 1, 1, 1, 64, 1, 1, 0, s, args,
			      NULL);
			wl_kernel(K_STEP, 1);
		}
		CHECK(cuStreamSynchronize, s);
		nvtxRangePop();
	}
	CHECK(cuMemFree, d);
	wl_dev_free(1024);
	CHECK(cuStreamDestroy, s);
	CHECK(cuModuleUnload, mod);
	wl_manifest_write(extra, &in);
	if (getenv("RANK_STEPS_LINGER") && *getenv("RANK_STEPS_LINGER")) {
		struct timespec ms = { 0, 1000000 };

		for (int i = 0; i < 60000 && access(getenv("RANK_STEPS_LINGER"), F_OK); i++)
			nanosleep(&ms, NULL);
	}
	return 0;
}
