/* SPDX-License-Identifier: MIT */
/*
 * graph: CUDA graphs built both ways and launched several times, for the
 * GPU timeline's graph checks (tests/integration/test_gpu.py).
 *
 * Setup, then CGBPF_PAUSE_FILE (wl_pause), then the checked part:
 *   - "explicit" on s1, built node by node: k_graph_a -> k_graph_b ->
 *     a 4096-byte memset -> k_graph_c;
 *   - "captured" on s2, from stream capture: k_cap_x, a 2048-byte
 *     cuMemsetD32Async, k_cap_y launched on s2 while it captures (they run
 *     nothing: they become the graph's nodes);
 *   - each instantiated, then launched --launches N times (default 3),
 *     with one plain kernel k_plain on s1 after each explicit launch;
 *   - a context synchronization.
 *
 * Manifest: the common fields (manifest.h) plus "program": "graph" and
 * "graph": {"graphs": [{"name", "stream", "launches", "nodes": [names in
 * order, "[CUDA memset]" for a memset]}], "plain": {"name", "stream",
 * "count"}, "captured_calls": [call symbols made while capturing],
 * "capture_from_ns", "capture_until_ns" (CLOCK_BOOTTIME around the
 * capture), "checked_from_ns", "checked_until_ns" (around the launches)}.
 */
#define _GNU_SOURCE
#include <cuda.h>

#include "manifest.h"

static const unsigned char module_image[] = "\x7f" "ELF fake cubin for cgbpf graph";

static unsigned long launches = 3, plain_count;
static unsigned long long t_cap_from, t_cap_until, t_from, t_until;
static const char *captured_calls[3];

static unsigned long long boottime_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_BOOTTIME, &ts);
	return (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec;
}

static CUgraphNode kernel_node(CUgraph g, CUgraphNode *dep, CUfunction f, unsigned int grid,
			       unsigned int smem, void **args)
{
	CUDA_KERNEL_NODE_PARAMS p = {
		.func = f, .gridDimX = grid, .gridDimY = 1, .gridDimZ = 1, .blockDimX = 128,
		.blockDimY = 1, .blockDimZ = 1, .sharedMemBytes = smem, .kernelParams = args,
	};
	CUgraphNode n;

	CHECK(cuGraphAddKernelNode, &n, g, dep, dep ? 1 : 0, &p);
	return n;
}

static void write_extra(FILE *f, void *arg)
{
	(void)arg;
	fprintf(f, ",\n  \"program\": \"graph\",\n  \"graph\": {\n    \"graphs\": [\n"
		"      {\"name\": \"explicit\", \"stream\": \"s1\", \"launches\": %lu, \"nodes\": "
		"[\"k_graph_a\", \"k_graph_b\", \"[CUDA memset]\", \"k_graph_c\"]},\n"
		"      {\"name\": \"captured\", \"stream\": \"s2\", \"launches\": %lu, \"nodes\": "
		"[\"k_cap_x\", \"[CUDA memset]\", \"k_cap_y\"]}\n    ],\n"
		"    \"plain\": {\"name\": \"k_plain\", \"stream\": \"s1\", \"count\": %lu},\n"
		"    \"captured_calls\": [\"%s\", \"%s\", \"%s\"],\n"
		"    \"capture_from_ns\": %llu, \"capture_until_ns\": %llu,\n"
		"    \"checked_from_ns\": %llu, \"checked_until_ns\": %llu\n  }",
		launches, launches, plain_count, captured_calls[0], captured_calls[1],
		captured_calls[2], t_cap_from, t_cap_until, t_from, t_until);
}

int main(int argc, char **argv)
{
	CUfunction fa, fb, fc, fx, fy, fplain;
	CUgraphExec exec_explicit, exec_captured;
	CUgraph explicit_g, captured_g;
	CUgraphNode na, nb, nm;
	CUstreamCaptureStatus st;
	CUdeviceptr d_a, d_b;
	CUstream s1, s2;
	CUcontext ctx;
	CUmodule mod;
	int n = 1024;
	void *args[] = { &d_a, &n };
	size_t nodes = 0;

	for (int i = 1; i < argc; i++) {
		if (wl_arg_ul(argc, argv, &i, "--launches", &launches))
			continue;
		wl_die("usage: graph [--launches N]\n");
	}
	wl_gate();
	ctx = wl_context();
	CHECK(cuModuleLoadData, &mod, module_image);
	CHECK(cuModuleGetFunction, &fa, mod, "k_graph_a");
	CHECK(cuModuleGetFunction, &fb, mod, "k_graph_b");
	CHECK(cuModuleGetFunction, &fc, mod, "k_graph_c");
	CHECK(cuModuleGetFunction, &fx, mod, "k_cap_x");
	CHECK(cuModuleGetFunction, &fy, mod, "k_cap_y");
	CHECK(cuModuleGetFunction, &fplain, mod, "k_plain");
	CHECK(cuStreamCreate, &s1, CU_STREAM_NON_BLOCKING);
	CHECK(cuStreamCreate, &s2, CU_STREAM_NON_BLOCKING);
	CHECK(cuMemAlloc, &d_a, 65536);
	CHECK(cuMemAlloc, &d_b, 65536);

	/* Node by node: a -> b -> memset -> c. */
	CHECK(cuGraphCreate, &explicit_g, 0);
	na = kernel_node(explicit_g, NULL, fa, 8, 0, args);
	nb = kernel_node(explicit_g, &na, fb, 16, 256, args);
	{
		CUDA_MEMSET_NODE_PARAMS m = { .dst = d_b, .value = 7, .elementSize = 4,
					      .width = 1024, .height = 1 };

		CHECK(cuGraphAddMemsetNode, &nm, explicit_g, &nb, 1, &m, ctx);
	}
	kernel_node(explicit_g, &nm, fc, 4, 0, args);
	CHECK(cuGraphGetNodes, explicit_g, NULL, &nodes);
	if (nodes != 4)
		wl_die("graph: cuGraphGetNodes says %zu nodes, 4 were added\n", nodes);
	CHECK(cuGraphInstantiate, &exec_explicit, explicit_g, 0);

	wl_pause();

	/* Captured: the calls on s2 queue nothing, they become nodes. */
	t_cap_from = boottime_ns();
	CHECK(cuStreamBeginCapture, s2, CU_STREAM_CAPTURE_MODE_GLOBAL);
	CHECK(cuStreamIsCapturing, s2, &st);
	if (st != CU_STREAM_CAPTURE_STATUS_ACTIVE)
		wl_die("graph: s2 is not capturing after cuStreamBeginCapture\n");
	CHECK(cuLaunchKernel, fx, 2, 1, 1, 64, 1, 1, 0, s2, args, NULL);
	captured_calls[0] = WL_SYM(cuLaunchKernel);
	CHECK(cuMemsetD32Async, d_b, 0, 512, s2);
	captured_calls[1] = WL_SYM(cuMemsetD32Async);
	CHECK(cuLaunchKernel, fy, 2, 2, 1, 64, 1, 1, 512, s2, args, NULL);
	captured_calls[2] = WL_SYM(cuLaunchKernel);
	CHECK(cuStreamEndCapture, s2, &captured_g);
	CHECK(cuStreamIsCapturing, s2, &st);
	if (st != CU_STREAM_CAPTURE_STATUS_NONE)
		wl_die("graph: s2 still captures after cuStreamEndCapture\n");
	t_cap_until = boottime_ns();
	CHECK(cuGraphInstantiate, &exec_captured, captured_g, 0);

	t_from = boottime_ns();
	for (unsigned long i = 0; i < launches; i++) {
		CHECK(cuGraphLaunch, exec_explicit, s1);
		CHECK(cuGraphLaunch, exec_captured, s2);
		CHECK(cuLaunchKernel, fplain, 1, 1, 1, 32, 1, 1, 0, s1, args, NULL);
		plain_count++;
		wl_kernel("k_plain", 1);
	}
	CHECK(cuCtxSynchronize);
	t_until = boottime_ns();

	CHECK(cuGraphExecDestroy, exec_explicit);
	CHECK(cuGraphExecDestroy, exec_captured);
	CHECK(cuGraphDestroy, explicit_g);
	CHECK(cuGraphDestroy, captured_g);
	CHECK(cuMemFree, d_a);
	CHECK(cuMemFree, d_b);
	CHECK(cuStreamDestroy, s1);
	CHECK(cuStreamDestroy, s2);
	CHECK(cuModuleUnload, mod);
	CHECK(cuCtxDestroy, ctx);
	wl_manifest_write(write_extra, NULL);
	return 0;
}
