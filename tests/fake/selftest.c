/* SPDX-License-Identifier: MIT */
/*
 * Self-test of the fake libcuda: the driver behaviour the tests rely on
 * (error codes, handles, stream ordering and timing, legacy-stream
 * semantics, events, copies, cuGetProcAddress, fork, threads). Run by
 * tests/fake/selftest.sh; prints failures and exits non-zero.
 *
 * Timing checks use kernels of tens of milliseconds and generous upper
 * bounds, so that a loaded machine does not make them flaky.
 */
#define _GNU_SOURCE
#include <cuda.h>

#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
			     unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY,
			     unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream,
			     void **kernelParams, void **extra);
CUresult cuStreamSynchronize_ptsz(CUstream hStream);

static int failures;

#define EQ(want, expr) do { \
	long long w_ = (long long)(want), g_ = (long long)(expr); \
	if (w_ != g_) { \
		fprintf(stderr, "selftest:%d: %s = %lld, want %lld\n", __LINE__, #expr, g_, w_); \
		failures++; \
	} \
} while (0)

#define TRUE(expr) do { \
	if (!(expr)) { \
		fprintf(stderr, "selftest:%d: %s is false\n", __LINE__, #expr); \
		failures++; \
	} \
} while (0)

static double ms_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static CUresult launch(CUfunction f, CUstream s)
{
	return cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, s, NULL, NULL);
}

static CUresult new_ctx(CUcontext *ctx)
{
#if CUDA_VERSION >= 13000
	return cuCtxCreate(ctx, NULL, 0, 0);
#else
	return cuCtxCreate(ctx, 0, 0);
#endif
}

static CUfunction g_fn0;	/* zero-duration kernel shared by the threads */
static CUcontext g_ctx;
static CUfunction g_thread_fn[8];

static void *thread_main(void *arg)
{
	long idx = (long)arg;
	unsigned char h[256], back[256];
	CUdeviceptr d;
	CUmodule mod;
	CUstream s;
	int ok = 1;

	memset(h, (int)idx, sizeof(h));
	ok &= cuCtxSetCurrent(g_ctx) == CUDA_SUCCESS;
	ok &= cuStreamCreate(&s, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS;
	ok &= cuMemAlloc(&d, sizeof(h)) == CUDA_SUCCESS;
	ok &= cuModuleLoadData(&mod, "img") == CUDA_SUCCESS;
	ok &= cuModuleGetFunction(&g_thread_fn[idx], mod, "same_name") == CUDA_SUCCESS;
	for (int i = 0; i < 20000 && ok; i++) {
		ok &= launch(g_fn0, s) == CUDA_SUCCESS;
		ok &= launch(g_fn0, NULL) == CUDA_SUCCESS;
		if (i % 1000 == 0) {
			ok &= cuMemcpyHtoDAsync(d, h, sizeof(h), s) == CUDA_SUCCESS;
			ok &= cuMemcpyDtoH(back, d, sizeof(back)) == CUDA_SUCCESS;
			ok &= cuStreamSynchronize(s) == CUDA_SUCCESS;
			ok &= memcmp(h, back, sizeof(h)) == 0;
		}
	}
	ok &= cuMemFree(d) == CUDA_SUCCESS;
	ok &= cuStreamDestroy(s) == CUDA_SUCCESS;
	return ok ? NULL : (void *)1;
}

int main(void)
{
	CUfunction f, f2, f_slow, f_30, f_def, fk, fk2, missing;
	CUstream s1, s2, sb, snb;
	CUevent e1, e2, e_nt;
	CUdeviceptr d, d2;
	CUcontext ctx, ctx2, cur;
	CUlibrary lib;
	CUkernel k, k2;
	CUmodule mod;
	CUdevice dev;
	const char *str;
	float elapsed;
	double t0, dt;
	int v, count;
	char name[64];
	void *p;
	CUdriverProcAddressQueryResult st;

	/* Before cuInit. */
	EQ(CUDA_SUCCESS, cuDriverGetVersion(&v));
	EQ(CUDA_VERSION, v);
	EQ(CUDA_ERROR_INVALID_VALUE, cuDriverGetVersion(NULL));
	EQ(CUDA_ERROR_NOT_INITIALIZED, cuDeviceGet(&dev, 0));
	EQ(CUDA_ERROR_NOT_INITIALIZED, new_ctx(&ctx));
	EQ(CUDA_SUCCESS, cuGetErrorName(CUDA_ERROR_NOT_FOUND, &str));
	EQ(0, strcmp(str, "CUDA_ERROR_NOT_FOUND"));
	EQ(CUDA_ERROR_INVALID_VALUE, cuGetErrorString((CUresult)12345, &str));

	/* Every kernel without a "__ns" suffix runs 20 ms from here on. */
	setenv("FAKECUDA_KERNEL_NS", "20000000", 1);
	EQ(CUDA_ERROR_INVALID_VALUE, cuInit(1));
	EQ(CUDA_SUCCESS, cuInit(0));
	EQ(CUDA_SUCCESS, cuDeviceGetCount(&count));
	EQ(1, count);
	EQ(CUDA_ERROR_INVALID_DEVICE, cuDeviceGet(&dev, 1));
	EQ(CUDA_SUCCESS, cuDeviceGet(&dev, 0));
	EQ(CUDA_SUCCESS, cuDeviceGetName(name, sizeof(name), dev));
	EQ(CUDA_ERROR_INVALID_CONTEXT, cuMemAlloc(&d, 16));
	EQ(CUDA_SUCCESS, cuCtxGetCurrent(&cur));
	EQ(0, cur);

	EQ(CUDA_SUCCESS, new_ctx(&ctx));
	EQ(CUDA_SUCCESS, cuCtxGetCurrent(&cur));
	EQ((intptr_t)ctx, (intptr_t)cur);

	/* Memory. */
	EQ(CUDA_ERROR_INVALID_VALUE, cuMemAlloc(NULL, 16));
	EQ(CUDA_ERROR_INVALID_VALUE, cuMemAlloc(&d, 0));
	EQ(CUDA_ERROR_OUT_OF_MEMORY, cuMemAlloc(&d, 1ull << 50));
	EQ(CUDA_SUCCESS, cuMemAlloc(&d, 4096));
	EQ(CUDA_SUCCESS, cuMemAlloc(&d2, 4096));
	EQ(CUDA_ERROR_INVALID_VALUE, cuMemFree((CUdeviceptr)0xdeadbeef00ull));
	EQ(CUDA_ERROR_INVALID_VALUE, cuMemFree(d + 8));
	EQ(CUDA_SUCCESS, cuMemFree(0));
	{
		unsigned char h[4096], back[4096];
		uint16_t h16[8];
		uint32_t h32[8];

		for (size_t i = 0; i < sizeof(h); i++)
			h[i] = (unsigned char)i;
		EQ(CUDA_SUCCESS, cuMemcpyHtoD(d, h, sizeof(h)));
		EQ(CUDA_SUCCESS, cuMemcpyDtoD(d2, d, sizeof(h)));
		EQ(CUDA_SUCCESS, cuMemcpyDtoH(back, d2, sizeof(back)));
		EQ(0, memcmp(h, back, sizeof(h)));
		EQ(CUDA_ERROR_INVALID_VALUE, cuMemcpyHtoD(d + 1, h, sizeof(h)));
		EQ(CUDA_ERROR_INVALID_VALUE, cuMemcpyHtoD((CUdeviceptr)h, h, 16));
		EQ(CUDA_ERROR_INVALID_VALUE, cuMemcpyDtoH(NULL, d, 16));
		EQ(CUDA_SUCCESS, cuMemsetD16(d, 0xbeef, 8));
		EQ(CUDA_SUCCESS, cuMemcpyDtoH(h16, d, sizeof(h16)));
		EQ(0xbeef, h16[7]);
		EQ(CUDA_SUCCESS, cuMemsetD32Async(d, 0x12345678, 8, NULL));
		EQ(CUDA_SUCCESS, cuMemcpyDtoH(h32, d, sizeof(h32)));
		EQ(0x12345678, h32[7]);
		EQ(CUDA_ERROR_INVALID_VALUE, cuMemsetD32(d + 2, 0, 4));
		EQ(CUDA_ERROR_INVALID_VALUE, cuMemsetD8(d, 0, 4097));
		EQ(CUDA_SUCCESS, cuMemAllocHost(&p, 64));
		/* Unified addressing: cuMemcpy between pinned host and device memory. */
		EQ(CUDA_SUCCESS, cuMemcpy((CUdeviceptr)p, d, 64));
		EQ(0x78, ((unsigned char *)p)[0]);
		EQ(CUDA_ERROR_INVALID_VALUE, cuMemFree((CUdeviceptr)p));
		EQ(CUDA_SUCCESS, cuMemFreeHost(p));
		EQ(CUDA_ERROR_INVALID_VALUE, cuMemFreeHost(p));
		EQ(CUDA_SUCCESS, cuMemAllocManaged(&d2 + 0, 64, CU_MEM_ATTACH_GLOBAL) == CUDA_SUCCESS ?
					 cuMemFree(d2) : CUDA_ERROR_UNKNOWN);
		EQ(CUDA_ERROR_INVALID_VALUE, cuMemAllocManaged(&d2, 64, 0));
	}

	/* Modules, libraries, functions, kernels. */
	EQ(CUDA_ERROR_FILE_NOT_FOUND, cuModuleLoad(&mod, "/nonexistent/x.cubin"));
	EQ(CUDA_SUCCESS, cuModuleLoad(&mod, "/proc/self/exe"));
	EQ(CUDA_SUCCESS, cuModuleUnload(mod));
	EQ(CUDA_ERROR_INVALID_HANDLE, cuModuleUnload(mod));
	EQ(CUDA_ERROR_INVALID_VALUE, cuModuleLoadData(&mod, NULL));
	EQ(CUDA_SUCCESS, cuModuleLoadData(&mod, "image"));
	EQ(CUDA_SUCCESS, cuModuleGetFunction(&f, mod, "zero__ns0"));
	EQ(CUDA_SUCCESS, cuModuleGetFunction(&f2, mod, "zero__ns0"));
	EQ((intptr_t)f, (intptr_t)f2);
	EQ(CUDA_SUCCESS, cuModuleGetFunction(&f_slow, mod, "_Z4slow__ns60000000v"));
	EQ(CUDA_SUCCESS, cuModuleGetFunction(&f_30, mod, "k__ns30000000"));
	EQ(CUDA_SUCCESS, cuModuleGetFunction(&f_def, mod, "plain_kernel"));
	TRUE(f != f_slow && f_slow != f_30);
	EQ(CUDA_ERROR_NOT_FOUND, cuModuleGetFunction(&missing, mod, "missing_kernel"));
	EQ(CUDA_ERROR_INVALID_VALUE, cuModuleGetFunction(NULL, mod, "x"));
	EQ(CUDA_ERROR_INVALID_HANDLE, cuModuleGetFunction(&f2, (CUmodule)0x1234, "x"));
	EQ(CUDA_ERROR_INVALID_HANDLE, cuModuleGetFunction(&f2, (CUmodule)f, "x"));
	EQ(CUDA_SUCCESS, cuLibraryLoadData(&lib, "lib", NULL, NULL, 0, NULL, NULL, 0));
	EQ(CUDA_SUCCESS, cuLibraryGetKernel(&k, lib, "lk__ns0"));
	EQ(CUDA_SUCCESS, cuLibraryGetKernel(&k2, lib, "lk__ns0"));
	EQ((intptr_t)k, (intptr_t)k2);
	EQ(CUDA_ERROR_NOT_FOUND, cuLibraryGetKernel(&k2, lib, "missing"));
	EQ(CUDA_SUCCESS, cuKernelGetFunction(&fk, k));
	EQ(CUDA_SUCCESS, cuKernelGetFunction(&fk2, k));
	EQ((intptr_t)fk, (intptr_t)fk2);
	TRUE((void *)fk != (void *)k);
	EQ(CUDA_SUCCESS, launch(fk, NULL));
	EQ(CUDA_SUCCESS, launch((CUfunction)k, NULL));

	/* Launch argument checks. */
	EQ(CUDA_ERROR_INVALID_HANDLE, launch((CUfunction)0x1234, NULL));
	EQ(CUDA_ERROR_INVALID_HANDLE, launch((CUfunction)mod, NULL));
	EQ(CUDA_ERROR_INVALID_HANDLE, launch(NULL, NULL));
	EQ(CUDA_ERROR_INVALID_HANDLE, launch(f, (CUstream)0x5678));
	EQ(CUDA_ERROR_INVALID_VALUE, cuLaunchKernel(f, 0, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL));
	EQ(CUDA_ERROR_INVALID_VALUE, cuLaunchKernel(f, 1, 1, 1, 2048, 1, 1, 0, NULL, NULL, NULL));
	EQ(CUDA_ERROR_INVALID_VALUE, cuLaunchKernelEx(NULL, f, NULL, NULL));

	/* Stream ordering and timing. */
	EQ(CUDA_SUCCESS, cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING));
	EQ(CUDA_SUCCESS, cuStreamCreateWithPriority(&s2, CU_STREAM_NON_BLOCKING, -3));
	EQ(CUDA_ERROR_INVALID_VALUE, cuStreamCreate(&sb, 0x10));
	t0 = ms_now();
	EQ(CUDA_SUCCESS, launch(f_30, s1));
	EQ(CUDA_SUCCESS, launch(f_30, s1));
	EQ(CUDA_ERROR_NOT_READY, cuStreamQuery(s1));
	EQ(CUDA_SUCCESS, cuStreamQuery(s2));
	EQ(CUDA_SUCCESS, cuStreamSynchronize(s1));
	dt = ms_now() - t0;
	TRUE(dt >= 60 && dt < 1000);
	EQ(CUDA_SUCCESS, cuStreamQuery(s1));

	/* Two streams run concurrently. */
	t0 = ms_now();
	EQ(CUDA_SUCCESS, launch(f_slow, s1));
	EQ(CUDA_SUCCESS, launch(f_slow, s2));
	EQ(CUDA_SUCCESS, cuCtxSynchronize());
	dt = ms_now() - t0;
	TRUE(dt >= 60 && dt < 110);

	/* FAKECUDA_KERNEL_NS applies to kernels without a suffix. */
	t0 = ms_now();
	EQ(CUDA_SUCCESS, launch(f_def, s1));
	EQ(CUDA_SUCCESS, cuStreamSynchronize(s1));
	dt = ms_now() - t0;
	TRUE(dt >= 20 && dt < 1000);

	/* Events: a cross-stream wait, timing, and the error cases. */
	EQ(CUDA_SUCCESS, cuEventCreate(&e1, CU_EVENT_DEFAULT));
	EQ(CUDA_SUCCESS, cuEventCreate(&e2, CU_EVENT_DEFAULT));
	EQ(CUDA_SUCCESS, cuEventCreate(&e_nt, CU_EVENT_DISABLE_TIMING));
	EQ(CUDA_ERROR_INVALID_HANDLE, cuEventElapsedTime(&elapsed, e1, e2));
	EQ(CUDA_SUCCESS, cuEventQuery(e1));
	t0 = ms_now();
	EQ(CUDA_SUCCESS, cuEventRecord(e1, s1));
	EQ(CUDA_SUCCESS, launch(f_30, s1));
	EQ(CUDA_SUCCESS, cuEventRecord(e2, s1));
	EQ(CUDA_ERROR_NOT_READY, cuEventQuery(e2));
	EQ(CUDA_ERROR_NOT_READY, cuEventElapsedTime(&elapsed, e1, e2));
	EQ(CUDA_SUCCESS, cuStreamWaitEvent(s2, e2, 0));
	EQ(CUDA_SUCCESS, launch(f, s2));
	EQ(CUDA_ERROR_NOT_READY, cuStreamQuery(s2));
	EQ(CUDA_SUCCESS, cuStreamSynchronize(s2));
	dt = ms_now() - t0;
	TRUE(dt >= 30 && dt < 1000);
	EQ(CUDA_SUCCESS, cuEventSynchronize(e2));
	EQ(CUDA_SUCCESS, cuEventQuery(e2));
	EQ(CUDA_SUCCESS, cuEventElapsedTime(&elapsed, e1, e2));
	TRUE(elapsed >= 29.9f && elapsed < 40.0f);
	EQ(CUDA_SUCCESS, cuEventRecord(e_nt, s1));
	EQ(CUDA_ERROR_INVALID_HANDLE, cuEventElapsedTime(&elapsed, e1, e_nt));
	EQ(CUDA_ERROR_INVALID_VALUE, cuEventElapsedTime(NULL, e1, e2));

	/* Legacy stream: NULL-stream work waits for blocking streams, not non-blocking ones. */
	EQ(CUDA_SUCCESS, cuStreamCreate(&sb, CU_STREAM_DEFAULT));
	EQ(CUDA_SUCCESS, cuStreamCreate(&snb, CU_STREAM_NON_BLOCKING));
	t0 = ms_now();
	EQ(CUDA_SUCCESS, launch(f_30, snb));
	EQ(CUDA_SUCCESS, launch(f, NULL));
	EQ(CUDA_SUCCESS, cuStreamSynchronize(NULL));
	dt = ms_now() - t0;
	TRUE(dt < 25);
	EQ(CUDA_SUCCESS, launch(f_30, sb));
	EQ(CUDA_SUCCESS, launch(f, CU_STREAM_LEGACY));
	EQ(CUDA_SUCCESS, cuStreamSynchronize(NULL));
	dt = ms_now() - t0;
	TRUE(dt >= 30 && dt < 1000);
	/* ... and blocking-stream work waits for earlier NULL-stream work. */
	t0 = ms_now();
	EQ(CUDA_SUCCESS, launch(f_30, NULL));
	EQ(CUDA_SUCCESS, launch(f, sb));
	EQ(CUDA_SUCCESS, cuStreamSynchronize(sb));
	dt = ms_now() - t0;
	TRUE(dt >= 30 && dt < 1000);

	/* Per-thread default stream via _ptsz. */
	t0 = ms_now();
	EQ(CUDA_SUCCESS, cuLaunchKernel_ptsz(f_30, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL));
	EQ(CUDA_SUCCESS, cuStreamQuery(CU_STREAM_LEGACY));
	EQ(CUDA_ERROR_NOT_READY, cuStreamQuery(CU_STREAM_PER_THREAD));
	EQ(CUDA_SUCCESS, cuStreamSynchronize_ptsz(NULL));
	dt = ms_now() - t0;
	TRUE(dt >= 30 && dt < 1000);

	EQ(CUDA_SUCCESS, cuEventDestroy(e1));
	EQ(CUDA_ERROR_INVALID_HANDLE, cuEventDestroy(e1));
	EQ(CUDA_ERROR_INVALID_HANDLE, cuEventRecord(e1, s1));
	EQ(CUDA_SUCCESS, cuStreamDestroy(sb));
	EQ(CUDA_ERROR_INVALID_HANDLE, cuStreamDestroy(sb));
	EQ(CUDA_ERROR_INVALID_HANDLE, launch(f, sb));
	EQ(CUDA_ERROR_INVALID_HANDLE, cuStreamDestroy(NULL));

	/* cuGetProcAddress resolves versioned and per-thread names to this library. */
	EQ(CUDA_SUCCESS, cuGetProcAddress("cuMemAlloc", &p, 12000, 0, &st));
	EQ((intptr_t)dlsym(RTLD_DEFAULT, "cuMemAlloc_v2"), (intptr_t)p);
	EQ(CUDA_SUCCESS, cuGetProcAddress("cuCtxCreate", &p, 12000, 0, &st));
	EQ((intptr_t)dlsym(RTLD_DEFAULT, "cuCtxCreate_v2"), (intptr_t)p);
	EQ(CUDA_SUCCESS, cuGetProcAddress("cuCtxCreate", &p, 13000, 0, &st));
	EQ((intptr_t)dlsym(RTLD_DEFAULT, "cuCtxCreate_v4"), (intptr_t)p);
	EQ(CUDA_SUCCESS, cuGetProcAddress("cuLaunchKernel", &p, 12000,
					  CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &st));
	EQ((intptr_t)dlsym(RTLD_DEFAULT, "cuLaunchKernel_ptsz"), (intptr_t)p);
	EQ(CUDA_SUCCESS, cuGetProcAddress("cuMemcpyHtoD", &p, 12000,
					  CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &st));
	EQ((intptr_t)dlsym(RTLD_DEFAULT, "cuMemcpyHtoD_v2_ptds"), (intptr_t)p);
	EQ(CUDA_ERROR_NOT_FOUND, cuGetProcAddress("cuNoSuchThing", &p, 12000, 0, &st));
	EQ(CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND, st);
	EQ(CUDA_ERROR_NOT_FOUND, cuGetProcAddress("cuserid", &p, 12000, 0, &st));
	EQ(CUDA_ERROR_NOT_FOUND, cuGetProcAddress("malloc", &p, 12000, 0, &st));

	/* Threads: one context, concurrent launches, one function per (module, name)... */
	g_ctx = ctx;
	g_fn0 = f;
	{
		pthread_t th[8];
		void *ret;

		for (long i = 0; i < 8; i++)
			pthread_create(&th[i], NULL, thread_main, (void *)i);
		for (int i = 0; i < 8; i++) {
			pthread_join(th[i], &ret);
			EQ(0, (intptr_t)ret);
		}
		/* ...which differs between modules. */
		EQ(0, g_thread_fn[0] == g_thread_fn[1]);
	}

	/* Graphs: nodes run in order on the launch's stream, after instantiation
	 * changes to the graph do not reach the executable one, stream capture
	 * turns launches into nodes. */
	{
		CUDA_KERNEL_NODE_PARAMS kp = { .func = f_30, .gridDimX = 1, .gridDimY = 1,
					       .gridDimZ = 1, .blockDimX = 32, .blockDimY = 1,
					       .blockDimZ = 1 };
		CUDA_MEMSET_NODE_PARAMS mp = { .value = 0x01020304, .elementSize = 4, .width = 64,
					       .height = 1 };
		CUgraphNode n1, n2, nodes[4];
		CUgraph g, g2, other;
		CUgraphExec ex, ex2;
		CUstreamCaptureStatus cs;
		CUdeviceptr dm;
		uint32_t back[64];
		size_t nn = 0;

		EQ(CUDA_SUCCESS, cuMemAlloc(&dm, sizeof(back)));
		EQ(CUDA_SUCCESS, cuMemsetD8(dm, 0, sizeof(back)));
		mp.dst = dm;
		EQ(CUDA_SUCCESS, cuGraphCreate(&g, 0));
		EQ(CUDA_SUCCESS, cuGraphCreate(&other, 0));
		EQ(CUDA_ERROR_INVALID_VALUE, cuGraphCreate(&g2, 1));
		EQ(CUDA_SUCCESS, cuGraphAddKernelNode(&n1, g, NULL, 0, &kp));
		EQ(CUDA_SUCCESS, cuGraphAddKernelNode(&n2, g, &n1, 1, &kp));
		EQ(CUDA_ERROR_INVALID_VALUE, cuGraphAddKernelNode(&nodes[0], other, &n1, 1, &kp));
		kp.blockDimX = 2048;
		EQ(CUDA_ERROR_INVALID_VALUE, cuGraphAddKernelNode(&nodes[0], g, NULL, 0, &kp));
		EQ(CUDA_SUCCESS, cuGraphInstantiate(&ex, g, 0));
		/* Added after instantiation: the executable graph does not run it. */
		EQ(CUDA_SUCCESS, cuGraphAddMemsetNode(&nodes[0], g, &n2, 1, &mp, ctx));
		EQ(CUDA_SUCCESS, cuGraphGetNodes(g, NULL, &nn));
		EQ(3, nn);
		nn = 2;
		EQ(CUDA_SUCCESS, cuGraphGetNodes(g, nodes, &nn));
		TRUE(nn == 2 && nodes[0] == n1 && nodes[1] == n2);
		t0 = ms_now();
		EQ(CUDA_SUCCESS, cuGraphLaunch(ex, s1));
		EQ(CUDA_ERROR_NOT_READY, cuStreamQuery(s1));
		EQ(CUDA_SUCCESS, cuStreamSynchronize(s1));
		dt = ms_now() - t0;
		TRUE(dt >= 60 && dt < 1000);
		EQ(CUDA_SUCCESS, cuMemcpyDtoH(back, dm, sizeof(back)));
		EQ(0, back[0]);
		EQ(CUDA_SUCCESS, cuGraphInstantiate(&ex2, g, 0));
		EQ(CUDA_SUCCESS, cuGraphLaunch(ex2, s1));
		EQ(CUDA_SUCCESS, cuStreamSynchronize(s1));
		EQ(CUDA_SUCCESS, cuMemcpyDtoH(back, dm, sizeof(back)));
		TRUE(back[0] == 0x01020304 && back[63] == 0x01020304);
		EQ(CUDA_ERROR_INVALID_VALUE, cuGraphLaunch(NULL, s1));
		EQ(CUDA_SUCCESS, cuGraphExecDestroy(ex));
		EQ(CUDA_ERROR_INVALID_VALUE, cuGraphLaunch(ex, s1));
		EQ(CUDA_SUCCESS, cuGraphExecDestroy(ex2));
		EQ(CUDA_SUCCESS, cuGraphDestroy(g));
		EQ(CUDA_ERROR_INVALID_VALUE, cuGraphAddKernelNode(&nodes[0], g, NULL, 0, &kp));
		EQ(CUDA_SUCCESS, cuGraphDestroy(other));

		/* Capture: launches queue nothing, synchronizing is refused. */
		EQ(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED,
		   cuStreamBeginCapture(NULL, CU_STREAM_CAPTURE_MODE_GLOBAL));
		EQ(CUDA_ERROR_ILLEGAL_STATE, cuStreamEndCapture(s1, &g2));
		EQ(CUDA_SUCCESS, cuStreamBeginCapture(s1, CU_STREAM_CAPTURE_MODE_GLOBAL));
		EQ(CUDA_ERROR_ILLEGAL_STATE, cuStreamBeginCapture(s1, CU_STREAM_CAPTURE_MODE_GLOBAL));
		EQ(CUDA_SUCCESS, cuStreamIsCapturing(s1, &cs));
		EQ(CU_STREAM_CAPTURE_STATUS_ACTIVE, cs);
		EQ(CUDA_SUCCESS, launch(f_30, s1));
		EQ(CUDA_SUCCESS, launch(f_30, s1));
		EQ(CUDA_SUCCESS, cuMemsetD32Async(dm, 7, 64, s1));
		EQ(CUDA_SUCCESS, cuStreamQuery(s1));
		EQ(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, cuStreamSynchronize(s1));
		EQ(CUDA_SUCCESS, cuStreamEndCapture(s1, &g2));
		EQ(CUDA_SUCCESS, cuStreamIsCapturing(s1, &cs));
		EQ(CU_STREAM_CAPTURE_STATUS_NONE, cs);
		EQ(CUDA_SUCCESS, cuGraphGetNodes(g2, NULL, &nn));
		EQ(3, nn);
		EQ(CUDA_SUCCESS, cuMemcpyDtoH(back, dm, sizeof(back)));
		EQ(0x01020304, back[0]);
		EQ(CUDA_SUCCESS, cuGraphInstantiate(&ex2, g2, 0));
		t0 = ms_now();
		EQ(CUDA_SUCCESS, cuGraphLaunch(ex2, s1));
		EQ(CUDA_SUCCESS, cuStreamSynchronize(s1));
		dt = ms_now() - t0;
		TRUE(dt >= 60 && dt < 1000);
		EQ(CUDA_SUCCESS, cuMemcpyDtoH(back, dm, sizeof(back)));
		EQ(7, back[63]);
		EQ(CUDA_SUCCESS, cuGetProcAddress("cuGraphInstantiate", &p, 12000, 0, &st));
		EQ((intptr_t)dlsym(RTLD_DEFAULT, "cuGraphInstantiateWithFlags"), (intptr_t)p);
		EQ(CUDA_SUCCESS, cuGetProcAddress("cuStreamBeginCapture", &p, 12000,
						  CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &st));
		EQ((intptr_t)dlsym(RTLD_DEFAULT, "cuStreamBeginCapture_v2_ptsz"), (intptr_t)p);
		EQ(CUDA_SUCCESS, cuGraphExecDestroy(ex2));
		EQ(CUDA_SUCCESS, cuGraphDestroy(g2));
		EQ(CUDA_SUCCESS, cuMemFree(dm));
	}

	/* Fork: the child starts uninitialized and must not see the parent's handles. */
	fflush(NULL);
	{
		pid_t pid = fork();
		int status;

		if (pid == 0) {
			int bad = 0;

			bad |= cuDeviceGet(&dev, 0) != CUDA_ERROR_NOT_INITIALIZED;
			bad |= cuInit(0) != CUDA_SUCCESS;
			bad |= cuCtxSetCurrent(ctx) != CUDA_ERROR_INVALID_CONTEXT;
			bad |= launch(f, NULL) != CUDA_ERROR_INVALID_CONTEXT;
			bad |= new_ctx(&ctx2) != CUDA_SUCCESS;
			bad |= launch(f, NULL) != CUDA_ERROR_INVALID_HANDLE;
			bad |= cuMemFree(d) != CUDA_ERROR_INVALID_VALUE;
			bad |= cuModuleLoadData(&mod, "img") != CUDA_SUCCESS;
			bad |= cuModuleGetFunction(&f2, mod, "child__ns10000000") != CUDA_SUCCESS;
			bad |= launch(f2, NULL) != CUDA_SUCCESS;
			bad |= cuCtxSynchronize() != CUDA_SUCCESS;
			_exit(bad);
		}
		TRUE(pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
		     WEXITSTATUS(status) == 0);
	}

	/* Destroying a context invalidates what it owned. */
	EQ(CUDA_SUCCESS, new_ctx(&ctx2));
	EQ(CUDA_SUCCESS, cuCtxDestroy(ctx));
	EQ(CUDA_ERROR_INVALID_CONTEXT, cuCtxSetCurrent(ctx));
	EQ(CUDA_SUCCESS, cuCtxSetCurrent(ctx2));
	EQ(CUDA_ERROR_INVALID_HANDLE, launch(f, NULL));
	EQ(CUDA_ERROR_INVALID_HANDLE, launch(f, s1));
	EQ(CUDA_ERROR_INVALID_VALUE, cuMemFree(d));
	EQ(CUDA_SUCCESS, launch(fk, NULL) == CUDA_ERROR_INVALID_HANDLE &&
			 cuKernelGetFunction(&fk2, k) == CUDA_SUCCESS ? launch(fk2, NULL) : 1);
	EQ(CUDA_SUCCESS, cuLibraryUnload(lib));
	EQ(CUDA_ERROR_INVALID_HANDLE, launch(fk2, NULL));
	EQ(CUDA_SUCCESS, cuCtxDestroy(ctx2));
	EQ(CUDA_ERROR_INVALID_CONTEXT, cuCtxSynchronize());

	if (failures) {
		fprintf(stderr, "selftest: %d failure(s)\n", failures);
		return 1;
	}
	return 0;
}
