/* SPDX-License-Identifier: MIT */
/*
 * nvtx_v2cap: NVTX v2 start/end ranges (libnvToolsExt.so.1, the fake in
 * tests/fake) as capture ranges (--capture-range nvtx --nvtx-capture cap).
 *
 * Usage: nvtx_v2cap WINDOWS
 *   context, module, cuModuleGetFunction "k_in" and "k_out"; 2 launches
 *   of k_out; then for w = 0 .. WINDOWS-1: id = nvtxRangeStartA("cap");
 *   nvtxMarkA("in"); w + 2 launches of k_in; cuCtxSynchronize;
 *   nvtxRangeEnd(id); 1 launch of k_out inside nvtxRangeStartA("other")
 *   .. end (not a capture range).
 * Manifest extra: "windows": [k_in launches per window], "outside": n.
 */
#define _GNU_SOURCE
#include <cuda.h>
#include "nvtx_v2.h"

#include "manifest.h"

#define MAXW 16

static const unsigned char module_image[] = "\x7f" "ELF fake cubin for cgbpf nvtx_v2cap";
static unsigned long win[MAXW], nwin, outside;

static void extra(FILE *f, void *arg)
{
	(void)arg;
	fprintf(f, ", \"windows\": [");
	for (unsigned long w = 0; w < nwin; w++)
		fprintf(f, "%s%lu", w ? ", " : "", win[w]);
	fprintf(f, "], \"outside\": %lu", outside);
}

static void launch(CUfunction fn, const char *name)
{
	CHECK(cuLaunchKernel, fn, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL);
	wl_kernel(name, 1);
}

int main(int argc, char **argv)
{
	CUfunction in, out;
	nvtxRangeId_t id;
	CUcontext ctx;
	CUmodule mod;
	char *end;

	if (argc != 2)
		wl_die("usage: nvtx_v2cap WINDOWS");
	nwin = strtoul(argv[1], &end, 10);
	if (*end || !nwin || nwin > MAXW)
		wl_die("WINDOWS: 1 to %d", MAXW);
	wl_gate();
	ctx = wl_context();
	CHECK(cuModuleLoadData, &mod, module_image);
	CHECK(cuModuleGetFunction, &in, mod, "k_in");
	CHECK(cuModuleGetFunction, &out, mod, "k_out");
	for (int i = 0; i < 2; i++, outside++)
		launch(out, "k_out");
	for (unsigned long w = 0; w < nwin; w++) {
		id = nvtxRangeStartA("cap");
		nvtxMarkA("in");
		for (unsigned long i = 0; i < w + 2; i++, win[w]++)
			launch(in, "k_in");
		CHECK(cuCtxSynchronize);
		nvtxRangeEnd(id);
		id = nvtxRangeStartA("other");
		launch(out, "k_out");
		outside++;
		nvtxRangeEnd(id);
	}
	CHECK(cuModuleUnload, mod);
	CHECK(cuCtxDestroy, ctx);
	wl_manifest_write(extra, NULL);
	return 0;
}
