/* SPDX-License-Identifier: MIT */
/*
 * gpu_mix: tests/gpu/kernels.cu's pattern on the fake driver API, so
 * tests/gpu/check.py runs on a machine without a GPU (with the fake
 * libcupti: tests/integration/test_gpu_check.py).
 *
 * Setup, then CGBPF_PAUSE_FILE (wl_pause), then the checked part: kernels
 * on the NULL stream, s1 and s2 with distinct names and known launch
 * configurations, copies HtoD/DtoH/DtoD and memsets of known sizes (async
 * on streams, and one synchronous copy and memset), a 3-kernel graph built
 * node by node (k_graph_a -> k_graph_b -> k_graph_c) launched 3 times on
 * s2, stream and context synchronizations.
 *
 * Manifest: the common fields (manifest.h) plus "program": "gpu_mix" and
 * "gpu" in tests/gpu/README.md's format, with the CLOCK_BOOTTIME span of
 * the checked part ("checked_from_ns", "checked_until_ns").
 *
 * gpu_mix --windows: kernels.cu --windows's twin (profiler windows, each
 * ending while its last kernel, k_spin, still runs: 50 ms here by its name's
 * __ns suffix); its manifest is that program's, "program": "windows".
 */
#define _GNU_SOURCE
#include <cuda.h>
#if __has_include(<cudaProfiler.h>)
#include <cudaProfiler.h>
#else
CUresult cuProfilerStart(void);
CUresult cuProfilerStop(void);
#endif

#include "manifest.h"

struct launch {
	const char *name;	/* as the trace shows it (demangled) */
	const char *symbol;	/* as the module names it */
	const char *stream;
	unsigned int grid[3], block[3], smem;
	unsigned long count;
	CUfunction fn;
};

static struct launch launches[] = {
	{ "k_default_fill", "k_default_fill", "default", { 64, 1, 1 }, { 128, 1, 1 }, 0, 0, NULL },
	{ "k_s1_axpy", "k_s1_axpy", "s1", { 32, 2, 1 }, { 256, 1, 1 }, 3072, 0, NULL },
	{ "k_s2_reduce", "k_s2_reduce", "s2", { 16, 1, 1 }, { 256, 1, 1 }, 0, 0, NULL },
	{ "cgbpf_gpu::scale<float>", "_ZN9cgbpf_gpu5scaleIfEEvPT_S1_i", "s2", { 8, 4, 2 },
	  { 32, 4, 1 }, 512, 0, NULL },
};

enum { L_FILL, L_AXPY, L_REDUCE, L_SCALE, L__COUNT };

/* The graph's nodes, in order; count: graph launches. */
static struct launch graph_nodes[] = {
	{ "k_graph_a", "k_graph_a", "s2", { 4, 1, 1 }, { 64, 1, 1 }, 0, 0, NULL },
	{ "k_graph_b", "k_graph_b", "s2", { 4, 1, 1 }, { 64, 1, 1 }, 256, 0, NULL },
	{ "k_graph_c", "k_graph_c", "s2", { 4, 1, 1 }, { 64, 1, 1 }, 0, 0, NULL },
};
static unsigned long graph_launches;

struct op {
	const char *kind, *stream;
	unsigned long bytes, count;
};

static struct op copies[] = {
	{ "HtoD", "s1", 262144, 0 },
	{ "DtoH", "s2", 65536, 0 },
	{ "DtoD", "default", 131072, 0 },
	{ "HtoD", "default", 65536, 0 },	/* the synchronous cuMemcpyHtoD */
};
static struct op memsets[] = {
	{ "memset", "s1", 65536, 0 },
	{ "memset", "default", 4096, 0 },	/* the synchronous cuMemsetD8 */
};

static unsigned long stream_syncs, device_syncs;
static unsigned long long t_from, t_until;

static const unsigned char module_image[] = "\x7f" "ELF fake cubin for cgbpf gpu_mix";

static unsigned long long boottime_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_BOOTTIME, &ts);
	return (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec;
}

static void go(int which, CUstream s, void **args)
{
	struct launch *l = &launches[which];

	CHECK(cuLaunchKernel, l->fn, l->grid[0], l->grid[1], l->grid[2], l->block[0], l->block[1],
	      l->block[2], l->smem, s, args, NULL);
	l->count++;
	wl_kernel(l->symbol, 1);
}

static void put_ops(FILE *f, const char *key, const struct op *v, size_t n)
{
	fprintf(f, ",\n    \"%s\": [", key);
	for (size_t i = 0; i < n; i++)
		fprintf(f, "%s\n      {\"kind\": \"%s\", \"stream\": \"%s\", \"bytes\": %lu, "
			"\"count\": %lu}", i ? "," : "", v[i].kind, v[i].stream, v[i].bytes,
			v[i].count);
	fputs("\n    ]", f);
}

static void put_launch(FILE *f, const struct launch *l, int first)
{
	fprintf(f, "%s\n      {\"name\": \"%s\", \"stream\": \"%s\", \"grid\": [%u, %u, %u], "
		"\"block\": [%u, %u, %u], \"shared_dynamic\": %u, \"count\": %lu}",
		first ? "" : ",", l->name, l->stream, l->grid[0], l->grid[1], l->grid[2],
		l->block[0], l->block[1], l->block[2], l->smem, l->count);
}

static void write_extra(FILE *f, void *arg)
{
	(void)arg;
	fputs(",\n  \"program\": \"gpu_mix\",\n  \"gpu\": {\n"
	      "    \"streams\": [\"default\", \"s1\", \"s2\"],\n    \"launches\": [", f);
	for (int i = 0; i < L__COUNT; i++)
		put_launch(f, &launches[i], !i);
	fprintf(f, "\n    ],\n    \"graphs\": [\n      {\"stream\": \"s2\", \"launches\": %lu, "
		"\"kernels\": [", graph_launches);
	for (int i = 0; i < 3; i++)
		put_launch(f, &graph_nodes[i], !i);
	fputs("]}\n    ]", f);
	put_ops(f, "copies", copies, sizeof(copies) / sizeof(copies[0]));
	put_ops(f, "memsets", memsets, sizeof(memsets) / sizeof(memsets[0]));
	fprintf(f, ",\n    \"syncs\": {\"stream\": %lu, \"device\": %lu},\n"
		"    \"unchecked_kernels\": [],\n"
		"    \"checked_from_ns\": %llu,\n    \"checked_until_ns\": %llu\n  }",
		stream_syncs, device_syncs, t_from, t_until);
}

enum { WINDOWS = 3, IN_PER_WINDOW = 5, GAP_MS = 600 };
#define SPIN "k_spin__ns50000000"

static struct {
	unsigned long long from[WINDOWS], until[WINDOWS];
	int outside;
} win;

static void write_windows(FILE *f, void *arg)
{
	(void)arg;
	fprintf(f, ",\n  \"program\": \"windows\", \"spin_ns\": 50000000, \"names\": "
		"{\"in\": \"k_in\", \"spin\": \"%s\", \"out\": \"k_out\"},\n  \"windows\": [", SPIN);
	for (int w = 0; w < WINDOWS; w++)
		fprintf(f, "%s{\"in\": %d, \"spin\": 1, \"from_ns\": %llu, \"until_ns\": %llu}",
			w ? ", " : "", IN_PER_WINDOW, win.from[w], win.until[w]);
	fprintf(f, "],\n  \"outside\": %d", win.outside);
}

static int windows(void)
{
	struct timespec gap = { GAP_MS / 1000, (GAP_MS % 1000) * 1000000L };
	CUfunction k_in, k_out, k_spin;
	CUdeviceptr d;
	CUcontext ctx;
	CUmodule mod;
	CUstream s;
	int n = 4096;
	void *args[] = { &d, &n };

	ctx = wl_context();
	CHECK(cuModuleLoadData, &mod, module_image);
	CHECK(cuModuleGetFunction, &k_in, mod, "k_in");
	CHECK(cuModuleGetFunction, &k_out, mod, "k_out");
	CHECK(cuModuleGetFunction, &k_spin, mod, SPIN);
	CHECK(cuStreamCreate, &s, CU_STREAM_NON_BLOCKING);
	CHECK(cuMemAlloc, &d, n * sizeof(float));
	wl_pause();
	for (int w = 0; w < WINDOWS; w++) {
		for (int i = 0; i < 2; i++, win.outside++)
			CHECK(cuLaunchKernel, k_out, 4, 1, 1, 128, 1, 1, 0, s, args, NULL);
		CHECK(cuStreamSynchronize, s);
		win.from[w] = boottime_ns();
		CHECK(cuProfilerStart);
		for (int i = 0; i < IN_PER_WINDOW; i++)
			CHECK(cuLaunchKernel, k_in, 4, 1, 1, 128, 1, 1, 0, s, args, NULL);
		CHECK(cuLaunchKernel, k_spin, 1, 1, 1, 32, 1, 1, 0, s, args, NULL);
		CHECK(cuProfilerStop);
		win.until[w] = boottime_ns();
		CHECK(cuStreamSynchronize, s);
		nanosleep(&gap, NULL);
	}
	CHECK(cuMemFree, d);
	CHECK(cuStreamDestroy, s);
	CHECK(cuModuleUnload, mod);
	CHECK(cuCtxDestroy, ctx);
	wl_manifest_write(write_windows, NULL);
	return 0;
}

int main(int argc, char **argv)
{
	CUdeviceptr d_a, d_b, d_c, d_red;
	CUgraphNode nodes[3];
	CUgraphExec exec;
	CUgraph graph;
	CUstream s1, s2;
	CUcontext ctx;
	CUmodule mod;
	void *h_in, *h_out;
	int n = 65536;
	float v = 1.0f, a = 0.5f;
	void *fill_args[] = { &d_b, &v, &n };
	void *axpy_args[] = { &d_a, &d_b, &a, &n };
	void *red_args[] = { &d_a, &d_red, &n };
	void *scale_args[] = { &d_b, &a, &n };

	wl_gate();
	if (argc > 1 && !strcmp(argv[1], "--windows"))
		return windows();
	ctx = wl_context();
	CHECK(cuModuleLoadData, &mod, module_image);
	for (int i = 0; i < L__COUNT; i++)
		CHECK(cuModuleGetFunction, &launches[i].fn, mod, launches[i].symbol);
	CHECK(cuStreamCreate, &s1, CU_STREAM_NON_BLOCKING);
	CHECK(cuStreamCreate, &s2, CU_STREAM_NON_BLOCKING);
	CHECK(cuMemAlloc, &d_a, 262144);
	CHECK(cuMemAlloc, &d_b, 262144);
	CHECK(cuMemAlloc, &d_c, 262144);
	CHECK(cuMemAlloc, &d_red, 4096);
	CHECK(cuMemAllocHost, &h_in, 262144);
	CHECK(cuMemAllocHost, &h_out, 262144);
	memset(h_in, 0x3c, 262144);
	/* The graph, node by node: a -> b -> c on d_c. */
	CHECK(cuGraphCreate, &graph, 0);
	for (int i = 0; i < 3; i++) {
		struct launch *l = &graph_nodes[i];
		void *args[] = { &d_c, &n };
		CUDA_KERNEL_NODE_PARAMS p = {
			.gridDimX = l->grid[0], .gridDimY = l->grid[1], .gridDimZ = l->grid[2],
			.blockDimX = l->block[0], .blockDimY = l->block[1], .blockDimZ = l->block[2],
			.sharedMemBytes = l->smem, .kernelParams = args,
		};

		CHECK(cuModuleGetFunction, &l->fn, mod, l->symbol);
		p.func = l->fn;
		CHECK(cuGraphAddKernelNode, &nodes[i], graph, i ? &nodes[i - 1] : NULL, i ? 1 : 0, &p);
	}
	CHECK(cuGraphInstantiate, &exec, graph, 0);

	wl_pause();
	t_from = boottime_ns();
	CHECK(cuMemcpyHtoD, d_a, h_in, copies[3].bytes);
	copies[3].count++;
	CHECK(cuMemsetD8, d_red, 0, memsets[1].bytes);
	memsets[1].count++;
	for (int it = 0; it < 8; it++) {
		if (it < 3) {
			CHECK(cuMemcpyHtoDAsync, d_a, h_in, copies[0].bytes, s1);
			copies[0].count++;
			CHECK(cuMemsetD32Async, d_c, 0, memsets[0].bytes / 4, s1);
			memsets[0].count++;
		}
		if (it < 5)
			go(L_FILL, NULL, fill_args);
		go(L_AXPY, s1, axpy_args);
		if (it < 6)
			go(L_REDUCE, s2, red_args);
		if (it < 4)
			go(L_SCALE, s2, scale_args);
		if (it < 2) {
			CHECK(cuMemcpyDtoHAsync, h_out, d_b, copies[1].bytes, s2);
			copies[1].count++;
			CHECK(cuMemcpyDtoDAsync, d_c, d_a, copies[2].bytes, NULL);
			copies[2].count++;
		}
		if (it % 3 == 0) {
			CHECK(cuGraphLaunch, exec, s2);
			graph_launches++;
		}
		if (it % 4 == 3) {
			CHECK(cuStreamSynchronize, s1);
			CHECK(cuStreamSynchronize, s2);
			stream_syncs += 2;
		}
	}
	CHECK(cuCtxSynchronize);
	device_syncs++;
	t_until = boottime_ns();
	for (int i = 0; i < 3; i++)
		graph_nodes[i].count = graph_launches;
	CHECK(cuGraphExecDestroy, exec);
	CHECK(cuGraphDestroy, graph);

	CHECK(cuMemFree, d_a);
	CHECK(cuMemFree, d_b);
	CHECK(cuMemFree, d_c);
	CHECK(cuMemFree, d_red);
	CHECK(cuMemFreeHost, h_in);
	CHECK(cuMemFreeHost, h_out);
	CHECK(cuStreamDestroy, s1);
	CHECK(cuStreamDestroy, s2);
	CHECK(cuModuleUnload, mod);
	CHECK(cuCtxDestroy, ctx);
	wl_manifest_write(write_extra, NULL);
	return 0;
}
