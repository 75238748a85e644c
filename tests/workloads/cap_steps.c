/* SPDX-License-Identifier: MIT */
/*
 * cap_steps: a training loop of NVTX v3 "step" ranges (the toolkit's
 * header-only NVTX, through cgbpf's injection library), for
 * --capture-range nvtx and --schedule.
 *
 * Usage: cap_steps STEPS
 *   context, module, cuModuleGetFunction "k_step" and "k_between", a 1 MiB
 *   cuMemAlloc; then for s = 0 .. STEPS-1: push "step", push "fwd",
 *   s + 1 launches of k_step, pop, cuCtxSynchronize, pop; then 2 launches
 *   of k_between (outside every step); a range "step" in domain "other"
 *   (pushed and popped, with one k_between launch: not a step of the
 *   default domain when the capture names one); the free.
 * Manifest extra: "steps": [k_step launches per step], "between": n.
 */
#define _GNU_SOURCE
#include <cuda.h>
#include <nvtx3/nvToolsExt.h>

#include "manifest.h"

#define ALLOC (1u << 20)
#define MAXS 256

static const unsigned char module_image[] = "\x7f" "ELF fake cubin for cgbpf steps";
static unsigned long nsteps, per_step[MAXS], between;

static void extra(FILE *f, void *arg)
{
	fprintf(f, ", \"steps\": [");
	for (unsigned long s = 0; s < nsteps; s++)
		fprintf(f, "%s%lu", s ? ", " : "", per_step[s]);
	fprintf(f, "], \"between\": %lu, \"alloc_before\": %u", between, ALLOC);
}

static void launch(CUfunction fn, const char *name)
{
	CHECK(cuLaunchKernel, fn, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL);
	wl_kernel(name, 1);
}

int main(int argc, char **argv)
{
	nvtxDomainHandle_t other;
	nvtxEventAttributes_t a = { 0 };
	CUfunction step, btw;
	CUdeviceptr p;
	CUcontext ctx;
	CUmodule mod;
	char *end;

	if (argc != 2)
		wl_die("usage: cap_steps STEPS");
	nsteps = strtoul(argv[1], &end, 10);
	if (*end || !nsteps || nsteps > MAXS)
		wl_die("STEPS: 1 to %d", MAXS);
	wl_gate();
	ctx = wl_context();
	CHECK(cuModuleLoadData, &mod, module_image);
	CHECK(cuModuleGetFunction, &step, mod, "k_step");
	CHECK(cuModuleGetFunction, &btw, mod, "k_between");
	CHECK(cuMemAlloc, &p, ALLOC);
	wl_dev_alloc(ALLOC);
	other = nvtxDomainCreateA("other");
	for (unsigned long s = 0; s < nsteps; s++) {
		nvtxRangePushA("step");
		nvtxRangePushA("fwd");
		for (unsigned long i = 0; i <= s; i++, per_step[s]++)
			launch(step, "k_step");
		nvtxRangePop();
		CHECK(cuCtxSynchronize);
		nvtxRangePop();
		for (int i = 0; i < 2; i++, between++)
			launch(btw, "k_between");
	}
	a.version = NVTX_VERSION;
	a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
	a.messageType = NVTX_MESSAGE_TYPE_ASCII;
	a.message.ascii = "step";
	nvtxDomainRangePushEx(other, &a);
	launch(btw, "k_between");
	between++;
	nvtxDomainRangePop(other);
	nvtxDomainDestroy(other);
	CHECK(cuMemFree, p);
	wl_dev_free(ALLOC);
	CHECK(cuModuleUnload, mod);
	CHECK(cuCtxDestroy, ctx);
	wl_manifest_write(extra, NULL);
	return 0;
}
