/* SPDX-License-Identifier: MIT */
/*
 * train: a training-loop-like CUDA driver API workload.
 *
 * Usage: train [--iters N] [--until FILE] [--hold FILE]  (default 200 iterations)
 *
 * --until FILE: after N iterations, go on until FILE exists (a test ends
 * the loop at a moment it chooses; the manifest counts what ran).
 * --hold FILE: while FILE exists, wait between iterations (no CUDA call).
 *
 * Setup: cuInit, device queries, one context, a module (cuModuleLoadData)
 * with four kernels, a library (cuLibraryLoadData) with one kernel turned
 * into a CUfunction by cuKernelGetFunction, two streams, two events, four
 * device buffers and two page-locked host buffers, a synchronous weights
 * upload and one device-to-device copy.
 *
 * Each iteration: HtoD async copy on s_copy, event + cross-stream wait,
 * two launches on s_compute, event + wait back, two cuLaunchKernel and one
 * cuLaunchKernelEx on s_copy, a cuMemsetD32Async of the output, a DtoH
 * async copy of it (checked against the memset pattern), and both streams
 * synchronized. Iteration 0 also launches once with cuLaunchKernel_ptsz on
 * the per-thread default stream and synchronizes it.
 *
 * Launch configurations (exact values, for tests that check arguments):
 *
 *   kernel                              API                  grid      block    smem  stream
 *   _ZN5torch4gemmIfEEvPKT_S3_PS1_i     cuLaunchKernel       101,2,1   128,1,1  4352  s_compute
 *   _Z13softmax_fwd_kPfPKfii            cuLaunchKernel       7,5,3     32,4,2   1024  s_compute
 *   _ZN2at6native29vectorized_...T1_    cuLaunchKernel       203,1,1   256,1,1  0     s_copy
 *   relu_kernel                         cuLaunchKernel       13,1,1    64,1,1   0     s_copy
 *   _ZN4apex17layer_norm_kernel...ii    cuLaunchKernelEx     17,19,1   96,1,1   3072  s_copy
 *   relu_kernel (iteration 0 only)      cuLaunchKernel_ptsz  29,1,1    512,1,1  2048  NULL
 *
 * The Ex launch carries one attribute (CU_LAUNCH_ATTRIBUTE_PRIORITY = -1).
 * s_compute: cuStreamCreate(flags 0); s_copy: cuStreamCreateWithPriority
 * (CU_STREAM_NON_BLOCKING, priority -2).
 *
 * Buffers: device 4194304 (weights), 262144 (input), 65536 (output),
 * 1000000 (grad); host 262144 (cuMemAllocHost), 65536 (cuMemHostAlloc).
 * Per iteration: HtoD 262144, DtoH 65536, memset 65536 bytes. Setup:
 * HtoD 4194304, DtoD 1000000.
 *
 * Deliberate errors: cuModuleGetFunction("missing_kernel") ->
 * CUDA_ERROR_NOT_FOUND (500) and cuMemFree(0xdeadbeef00) ->
 * CUDA_ERROR_INVALID_VALUE (1), listed under "errors".
 *
 * CGBPF_PAUSE_FILE (see wl_pause) stops it between setup and the loop.
 *
 * Extra manifest fields: "iters", "launch_configs" (the table above with
 * "count"), "handles" (stream and function handle values as hex strings,
 * as the tracer sees them), "alloc_sizes".
 */
#define _GNU_SOURCE
#include <cuda.h>

#include "manifest.h"

/* The toolkit header declares the _ptsz names only for per-thread builds. */
CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
			     unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY,
			     unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream,
			     void **kernelParams, void **extra);
CUresult cuStreamSynchronize_ptsz(CUstream hStream);

#define K_GEMM "_ZN5torch4gemmIfEEvPKT_S3_PS1_i"
#define K_SOFTMAX "_Z13softmax_fwd_kPfPKfii"
#define K_FILL "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIfEENS_6detail5ArrayIPcLi1EEEEEviT0_T1_"
#define K_RELU "relu_kernel"
#define K_LN "_ZN4apex17layer_norm_kernelIfEEvPT_PKS1_S4_S4_ii"

enum { L_GEMM, L_SOFTMAX, L_FILL, L_RELU, L_LN, L_RELU_PTSZ, L__COUNT };

struct launch {
	const char *kernel;
	const char *api;
	unsigned int grid[3], block[3], smem;
	const char *stream;
	unsigned long count;
};

static struct launch launches[L__COUNT] = {
	[L_GEMM] = { K_GEMM, "cuLaunchKernel", { 101, 2, 1 }, { 128, 1, 1 }, 4352, "s_compute", 0 },
	[L_SOFTMAX] = { K_SOFTMAX, "cuLaunchKernel", { 7, 5, 3 }, { 32, 4, 2 }, 1024, "s_compute", 0 },
	[L_FILL] = { K_FILL, "cuLaunchKernel", { 203, 1, 1 }, { 256, 1, 1 }, 0, "s_copy", 0 },
	[L_RELU] = { K_RELU, "cuLaunchKernel", { 13, 1, 1 }, { 64, 1, 1 }, 0, "s_copy", 0 },
	[L_LN] = { K_LN, "cuLaunchKernelEx", { 17, 19, 1 }, { 96, 1, 1 }, 3072, "s_copy", 0 },
	[L_RELU_PTSZ] = { K_RELU, "cuLaunchKernel_ptsz", { 29, 1, 1 }, { 512, 1, 1 }, 2048, "NULL", 0 },
};

enum {
	SZ_WEIGHTS = 4194304,
	SZ_INPUT = 262144,
	SZ_OUTPUT = 65536,
	SZ_GRAD = 1000000,
};

/* Stands in for a cubin: the fake accepts any non-NULL image. */
static const unsigned char module_image[] = "\x7f" "ELF fake cubin for cgbpf train";
static const unsigned char library_image[] = "\x7f" "ELF fake library for cgbpf train";

struct state {
	unsigned long iters;
	CUstream s_compute, s_copy;
	CUfunction fn[L__COUNT];
};

static void launch(struct state *st, int which, CUstream s, void **args)
{
	struct launch *l = &launches[which];

	CHECK(cuLaunchKernel, st->fn[which], l->grid[0], l->grid[1], l->grid[2], l->block[0],
	      l->block[1], l->block[2], l->smem, s, args, NULL);
	l->count++;
	wl_kernel(l->kernel, 1);
}

static void write_extra(FILE *f, void *arg)
{
	struct state *st = arg;

	fprintf(f, ",\n  \"iters\": %lu,\n  \"launch_configs\": [", st->iters);
	for (int i = 0; i < L__COUNT; i++) {
		const struct launch *l = &launches[i];

		fprintf(f, "%s\n    {\"kernel\": \"%s\", \"api\": \"%s\", \"grid\": [%u, %u, %u], "
			"\"block\": [%u, %u, %u], \"smem\": %u, \"stream\": \"%s\", \"count\": %lu}",
			i ? "," : "", l->kernel, l->api, l->grid[0], l->grid[1], l->grid[2],
			l->block[0], l->block[1], l->block[2], l->smem, l->stream, l->count);
	}
	fprintf(f, "\n  ],\n  \"handles\": {\"s_compute\": \"%p\", \"s_copy\": \"%p\", "
		"\"functions\": {\"%s\": \"%p\", \"%s\": \"%p\", \"%s\": \"%p\", \"%s\": \"%p\", "
		"\"%s\": \"%p\"}},\n",
		(void *)st->s_compute, (void *)st->s_copy, K_GEMM, (void *)st->fn[L_GEMM], K_SOFTMAX,
		(void *)st->fn[L_SOFTMAX], K_FILL, (void *)st->fn[L_FILL], K_RELU,
		(void *)st->fn[L_RELU], K_LN, (void *)st->fn[L_LN]);
	fprintf(f, "  \"alloc_sizes\": {\"device\": [%d, %d, %d, %d], \"host\": [%d, %d]}",
		SZ_WEIGHTS, SZ_INPUT, SZ_OUTPUT, SZ_GRAD, SZ_INPUT, SZ_OUTPUT);
}

int main(int argc, char **argv)
{
	struct state st = { .iters = 200 };
	CUdeviceptr d_weights, d_input, d_output, d_grad;
	CUevent ev_copied, ev_done;
	CUfunction missing;
	CUlibrary lib;
	CUkernel kern;
	CUmodule mod;
	CUcontext ctx;
	CUdevice dev;
	void *h_in, *h_out, *weights;
	int version, ndev, n = SZ_OUTPUT / 4;
	const char *until = NULL, *hold = NULL;
	unsigned long it;
	char name[64];
	void *args[] = { &d_input, &d_output, &n };

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--until") && i + 1 < argc)
			until = argv[++i];
		else if (!strcmp(argv[i], "--hold") && i + 1 < argc)
			hold = argv[++i];
		else if (!wl_arg_ul(argc, argv, &i, "--iters", &st.iters))
			wl_die("usage: train [--iters N] [--until FILE] [--hold FILE]");
	}
	if (!(weights = calloc(1, SZ_WEIGHTS)))
		wl_die("out of memory");

	wl_gate();

	CHECK(cuInit, 0);
	CHECK(cuDriverGetVersion, &version);
	CHECK(cuDeviceGetCount, &ndev);
	CHECK(cuDeviceGet, &dev, 0);
	CHECK(cuDeviceGetName, name, (int)sizeof(name), dev);
#if CUDA_VERSION >= 13000
	CHECK(cuCtxCreate, &ctx, NULL, 0, dev);
#else
	CHECK(cuCtxCreate, &ctx, 0, dev);
#endif

	CHECK(cuModuleLoadData, &mod, module_image);
	CHECK(cuModuleGetFunction, &st.fn[L_GEMM], mod, K_GEMM);
	CHECK(cuModuleGetFunction, &st.fn[L_SOFTMAX], mod, K_SOFTMAX);
	CHECK(cuModuleGetFunction, &st.fn[L_FILL], mod, K_FILL);
	CHECK(cuModuleGetFunction, &st.fn[L_RELU], mod, K_RELU);
	st.fn[L_RELU_PTSZ] = st.fn[L_RELU];
	EXPECT(CUDA_ERROR_NOT_FOUND, cuModuleGetFunction, &missing, mod, "missing_kernel");

	CHECK(cuLibraryLoadData, &lib, library_image, NULL, NULL, 0, NULL, NULL, 0);
	CHECK(cuLibraryGetKernel, &kern, lib, K_LN);
	CHECK(cuKernelGetFunction, &st.fn[L_LN], kern);

	CHECK(cuStreamCreate, &st.s_compute, CU_STREAM_DEFAULT);
	CHECK(cuStreamCreateWithPriority, &st.s_copy, CU_STREAM_NON_BLOCKING, -2);
	CHECK(cuEventCreate, &ev_copied, CU_EVENT_DISABLE_TIMING);
	CHECK(cuEventCreate, &ev_done, CU_EVENT_DISABLE_TIMING);

	CHECK(cuMemAlloc, &d_weights, SZ_WEIGHTS);
	wl_dev_alloc(SZ_WEIGHTS);
	CHECK(cuMemAlloc, &d_input, SZ_INPUT);
	wl_dev_alloc(SZ_INPUT);
	CHECK(cuMemAlloc, &d_output, SZ_OUTPUT);
	wl_dev_alloc(SZ_OUTPUT);
	CHECK(cuMemAlloc, &d_grad, SZ_GRAD);
	wl_dev_alloc(SZ_GRAD);
	CHECK(cuMemAllocHost, &h_in, SZ_INPUT);
	wl_host_alloc(SZ_INPUT);
	CHECK(cuMemHostAlloc, &h_out, SZ_OUTPUT, CU_MEMHOSTALLOC_PORTABLE);
	wl_host_alloc(SZ_OUTPUT);
	memset(h_in, 0x5a, SZ_INPUT);

	CHECK(cuMemcpyHtoD, d_weights, weights, SZ_WEIGHTS);
	wl_bytes(WL_HTOD, SZ_WEIGHTS);
	CHECK(cuMemcpyDtoD, d_grad, d_weights, SZ_GRAD);
	wl_bytes(WL_DTOD, SZ_GRAD);

	wl_pause();
	for (it = 0; it < st.iters || (until && access(until, F_OK) != 0); it++) {
		unsigned int pattern = 0x3f800000u + (unsigned int)(it & 0xffff);
		const unsigned int *out = h_out;
		CUlaunchAttribute attr;
		CUlaunchConfig cfg;
		struct launch *l = &launches[L_LN];

		while (hold && access(hold, F_OK) == 0)
			usleep(10000);

		CHECK(cuMemcpyHtoDAsync, d_input, h_in, SZ_INPUT, st.s_copy);
		wl_bytes(WL_HTOD, SZ_INPUT);
		CHECK(cuEventRecord, ev_copied, st.s_copy);
		CHECK(cuStreamWaitEvent, st.s_compute, ev_copied, 0);

		launch(&st, L_GEMM, st.s_compute, args);
		launch(&st, L_SOFTMAX, st.s_compute, args);
		CHECK(cuEventRecord, ev_done, st.s_compute);
		CHECK(cuStreamWaitEvent, st.s_copy, ev_done, 0);

		launch(&st, L_FILL, st.s_copy, args);
		launch(&st, L_RELU, st.s_copy, args);

		memset(&attr, 0, sizeof(attr));
		attr.id = CU_LAUNCH_ATTRIBUTE_PRIORITY;
		attr.value.priority = -1;
		cfg = (CUlaunchConfig){
			.gridDimX = l->grid[0], .gridDimY = l->grid[1], .gridDimZ = l->grid[2],
			.blockDimX = l->block[0], .blockDimY = l->block[1], .blockDimZ = l->block[2],
			.sharedMemBytes = l->smem, .hStream = st.s_copy, .attrs = &attr, .numAttrs = 1,
		};
		CHECK(cuLaunchKernelEx, &cfg, st.fn[L_LN], args, NULL);
		l->count++;
		wl_kernel(l->kernel, 1);

		if (it == 0) {
			l = &launches[L_RELU_PTSZ];
			CHECK(cuLaunchKernel_ptsz, st.fn[L_RELU_PTSZ], l->grid[0], l->grid[1],
			      l->grid[2], l->block[0], l->block[1], l->block[2], l->smem, NULL, args,
			      NULL);
			l->count++;
			wl_kernel(l->kernel, 1);
			CHECK(cuStreamSynchronize_ptsz, NULL);
		}

		CHECK(cuMemsetD32Async, d_output, pattern, SZ_OUTPUT / 4, st.s_copy);
		wl_bytes(WL_MEMSET, SZ_OUTPUT);
		CHECK(cuMemcpyDtoHAsync, h_out, d_output, SZ_OUTPUT, st.s_copy);
		wl_bytes(WL_DTOH, SZ_OUTPUT);
		CHECK(cuStreamSynchronize, st.s_copy);
		CHECK(cuStreamSynchronize, st.s_compute);
		if (out[0] != pattern || out[SZ_OUTPUT / 4 - 1] != pattern)
			wl_die("iteration %lu: output 0x%x, expected 0x%x", it, out[0], pattern);
	}

	st.iters = it;
	CHECK(cuCtxSynchronize);
	EXPECT(CUDA_ERROR_INVALID_VALUE, cuMemFree, (CUdeviceptr)0xdeadbeef00ull);
	CHECK(cuMemFree, d_weights);
	wl_dev_free(SZ_WEIGHTS);
	CHECK(cuMemFree, d_input);
	wl_dev_free(SZ_INPUT);
	CHECK(cuMemFree, d_output);
	wl_dev_free(SZ_OUTPUT);
	CHECK(cuMemFree, d_grad);
	wl_dev_free(SZ_GRAD);
	CHECK(cuMemFreeHost, h_in);
	wl_host_free(SZ_INPUT);
	CHECK(cuMemFreeHost, h_out);
	wl_host_free(SZ_OUTPUT);
	CHECK(cuEventDestroy, ev_copied);
	CHECK(cuEventDestroy, ev_done);
	CHECK(cuStreamDestroy, st.s_compute);
	CHECK(cuStreamDestroy, st.s_copy);
	CHECK(cuModuleUnload, mod);
	CHECK(cuLibraryUnload, lib);
	CHECK(cuCtxDestroy, ctx);
	free(weights);

	wl_manifest_write(write_extra, &st);
	return 0;
}
