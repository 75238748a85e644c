/* SPDX-License-Identifier: MIT */
/*
 * A fake CUDA runtime (libcudart.so.13) for testing cgbpf without a GPU.
 * NVIDIA's real libcudart cannot run on the fake driver: after fetching
 * ~440 entry points through cuGetProcAddress_v2 it asks cuGetExportTable
 * for private, undocumented tables (UUIDs f8cff951-2146-8b4e-b9e2-
 * fb469e7c0dd9 and 6bd5fb6c-5bf4-e74a-8987-d93912fd9df9) and fails every
 * call with cudaErrorNotSupported when they are missing (docs/design.md).
 *
 * This one exports the real names with the real signatures (the toolkit's
 * cuda_runtime_api.h) and implements each call on the fake driver's
 * exported functions, as the real runtime does on the real driver, so a
 * traced runtime call really contains the driver calls it makes.
 * Kernels are found like the real runtime finds them: nvcc's startup code
 * registers each host stub's address with the kernel's name
 * (__cudaRegisterFunction), and a launch of that address runs the function
 * of that name in one fake module. __cudaLaunchKernel jumps into
 * cudaLaunchKernel, as the real one does.
 */
#define _GNU_SOURCE
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <cudaProfiler.h>
#include <cuda_profiler_api.h>

#include <pthread.h>
#include <stdint.h>
#include <string.h>

/* Driver entry points cuda.h declares only under other names or modes. */
CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev);
CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
			     unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY,
			     unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream,
			     void **kernelParams, void **extra);

#pragma GCC visibility push(hidden)

#define EXPORT __attribute__((visibility("default")))

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static CUcontext g_ctx;
static CUmodule g_mod;
static CUlibrary g_lib;
static cudaError_t g_init_err;

static const char g_image[] = "fake cubin";

static void init_once(void)
{
	CUresult r = cuInit(0);

	if (!r)
		r = cuCtxCreate_v2(&g_ctx, 0, 0);
	if (!r)
		r = cuModuleLoadData(&g_mod, g_image);
	if (!r)
		r = cuLibraryLoadData(&g_lib, g_image, NULL, NULL, 0, NULL, NULL, 0);
	g_init_err = (cudaError_t)r;
}

/* Lazy initialization, and the context current on the calling thread. */
static cudaError_t ready(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;

	pthread_once(&once, init_once);
	if (g_init_err)
		return g_init_err;
	return (cudaError_t)cuCtxSetCurrent(g_ctx);
}

#define READY() do { cudaError_t e_ = ready(); if (e_) return e_; } while (0)

/* Kernel handles from __cudaGetKernel and registered host stubs (a few
 * per program). */
#define MAX_KERNELS 64
static CUkernel g_kernels[MAX_KERNELS];
static int g_nkernels;
static struct { const void *host; const char *name; } g_funcs[MAX_KERNELS];
static int g_nfuncs;

EXPORT void __cudaRegisterFunction(void **fatCubinHandle, const char *hostFun, char *deviceFun,
				   const char *deviceName, int thread_limit, uint3 *tid, uint3 *bid,
				   dim3 *bDim, dim3 *gDim, int *wSize)
{
	pthread_mutex_lock(&g_lock);
	if (g_nfuncs < MAX_KERNELS) {
		g_funcs[g_nfuncs].host = hostFun;
		g_funcs[g_nfuncs].name = deviceName;
		g_nfuncs++;
	}
	pthread_mutex_unlock(&g_lock);
}

/* The kernel name registered for a host stub, or NULL. */
static const char *registered(const void *host)
{
	const char *name = NULL;

	pthread_mutex_lock(&g_lock);
	for (int i = 0; i < g_nfuncs && !name; i++)
		if (g_funcs[i].host == host)
			name = g_funcs[i].name;
	pthread_mutex_unlock(&g_lock);
	return name;
}

static int known_kernel(const void *p)
{
	int found = 0;

	pthread_mutex_lock(&g_lock);
	for (int i = 0; i < g_nkernels && !found; i++)
		found = (const void *)g_kernels[i] == p;
	pthread_mutex_unlock(&g_lock);
	return found;
}

/* The CUfunction (or CUkernel) a host stub or kernel handle stands for. */
static cudaError_t function_of(const void *func, CUfunction *f)
{
	const char *name;

	if (known_kernel(func)) {
		*f = (CUfunction)(uintptr_t)func;	/* a CUkernel launches as is */
		return cudaSuccess;
	}
	name = registered(func);
	if (!name)
		return cudaErrorInvalidDeviceFunction;
	return (cudaError_t)cuModuleGetFunction(f, g_mod, name);
}

static cudaError_t launch(const void *func, dim3 g, dim3 b, void **args, size_t smem,
			  cudaStream_t s, int ptsz)
{
	CUfunction f;
	cudaError_t e;

	READY();
	e = function_of(func, &f);
	if (e)
		return e;
	if (ptsz)
		return (cudaError_t)cuLaunchKernel_ptsz(f, g.x, g.y, g.z, b.x, b.y, b.z,
							 (unsigned int)smem, s, args, NULL);
	return (cudaError_t)cuLaunchKernel(f, g.x, g.y, g.z, b.x, b.y, b.z, (unsigned int)smem, s,
					   args, NULL);
}

EXPORT cudaError_t cudaLaunchKernel(const void *func, dim3 gridDim, dim3 blockDim, void **args,
				    size_t sharedMem, cudaStream_t stream)
{
	return launch(func, gridDim, blockDim, args, sharedMem, stream, 0);
}

EXPORT cudaError_t cudaLaunchKernel_ptsz(const void *func, dim3 gridDim, dim3 blockDim,
					 void **args, size_t sharedMem, cudaStream_t stream)
{
	return launch(func, gridDim, blockDim, args, sharedMem, stream, 1);
}

EXPORT cudaError_t cudaLaunchKernelExC(const cudaLaunchConfig_t *config, const void *func,
				       void **args)
{
	CUlaunchConfig c = { 0 };
	CUfunction f;
	cudaError_t e;

	READY();
	if (!config)
		return cudaErrorInvalidValue;
	e = function_of(func, &f);
	if (e)
		return e;
	c.gridDimX = config->gridDim.x;
	c.gridDimY = config->gridDim.y;
	c.gridDimZ = config->gridDim.z;
	c.blockDimX = config->blockDim.x;
	c.blockDimY = config->blockDim.y;
	c.blockDimZ = config->blockDim.z;
	c.sharedMemBytes = (unsigned int)config->dynamicSmemBytes;
	c.hStream = config->stream;
	return (cudaError_t)cuLaunchKernelEx(&c, f, args, NULL);
}

EXPORT cudaError_t __cudaGetKernel(cudaKernel_t *kernel, const void *func)
{
	const char *name;
	CUkernel k;
	CUresult r;

	if (!kernel || !func)
		return cudaErrorInvalidValue;
	/* What NVIDIA's does too: the stub stands in when the rest fails. */
	*kernel = (cudaKernel_t)(uintptr_t)func;
	READY();
	name = registered(func);
	if (!name)
		return cudaErrorInvalidDeviceFunction;
	r = cuLibraryGetKernel(&k, g_lib, name);
	if (r)
		return (cudaError_t)r;
	pthread_mutex_lock(&g_lock);
	if (g_nkernels < MAX_KERNELS)
		g_kernels[g_nkernels++] = k;
	pthread_mutex_unlock(&g_lock);
	*kernel = (cudaKernel_t)k;
	return cudaSuccess;
}

EXPORT cudaError_t __cudaLaunchKernel(cudaKernel_t kernel, dim3 gridDim, dim3 blockDim,
				      void **args, size_t sharedMem, cudaStream_t stream)
{
	return cudaLaunchKernel((const void *)kernel, gridDim, blockDim, args, sharedMem, stream);
}

/* ------------------------------------------------------------ memory */

static cudaError_t copy(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind,
			cudaStream_t s, int async)
{
	CUdeviceptr d = (CUdeviceptr)(uintptr_t)dst, sr = (CUdeviceptr)(uintptr_t)src;

	READY();
	switch (kind) {
	case cudaMemcpyHostToHost:
		memcpy(dst, src, n);
		return cudaSuccess;
	case cudaMemcpyHostToDevice:
		return (cudaError_t)(async ? cuMemcpyHtoDAsync_v2(d, src, n, s) :
					     cuMemcpyHtoD_v2(d, src, n));
	case cudaMemcpyDeviceToHost:
		return (cudaError_t)(async ? cuMemcpyDtoHAsync_v2(dst, sr, n, s) :
					     cuMemcpyDtoH_v2(dst, sr, n));
	case cudaMemcpyDeviceToDevice:
		return (cudaError_t)(async ? cuMemcpyDtoDAsync_v2(d, sr, n, s) :
					     cuMemcpyDtoD_v2(d, sr, n));
	case cudaMemcpyDefault:
		return (cudaError_t)(async ? cuMemcpyAsync(d, sr, n, s) : cuMemcpy(d, sr, n));
	}
	return cudaErrorInvalidMemcpyDirection;
}

EXPORT cudaError_t cudaMemcpy(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind)
{
	return copy(dst, src, count, kind, NULL, 0);
}

EXPORT cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t count,
				   enum cudaMemcpyKind kind, cudaStream_t stream)
{
	return copy(dst, src, count, kind, stream, 1);
}

static cudaError_t copy2d(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
			  size_t height, enum cudaMemcpyKind kind, cudaStream_t s, int async)
{
	if (width > dpitch || width > spitch)
		return cudaErrorInvalidPitchValue;
	/* Row by row: one driver copy per row. */
	for (size_t r = 0; r < height; r++) {
		cudaError_t e = copy((char *)dst + r * dpitch, (const char *)src + r * spitch, width,
				     kind, s, async);

		if (e)
			return e;
	}
	return cudaSuccess;
}

EXPORT cudaError_t cudaMemcpy2D(void *dst, size_t dpitch, const void *src, size_t spitch,
				size_t width, size_t height, enum cudaMemcpyKind kind)
{
	return copy2d(dst, dpitch, src, spitch, width, height, kind, NULL, 0);
}

EXPORT cudaError_t cudaMemcpy2DAsync(void *dst, size_t dpitch, const void *src, size_t spitch,
				     size_t width, size_t height, enum cudaMemcpyKind kind,
				     cudaStream_t stream)
{
	return copy2d(dst, dpitch, src, spitch, width, height, kind, stream, 1);
}

EXPORT cudaError_t cudaMemset(void *devPtr, int value, size_t count)
{
	READY();
	return (cudaError_t)cuMemsetD8_v2((CUdeviceptr)(uintptr_t)devPtr, (unsigned char)value,
					   count);
}

EXPORT cudaError_t cudaMemsetAsync(void *devPtr, int value, size_t count, cudaStream_t stream)
{
	READY();
	return (cudaError_t)cuMemsetD8Async((CUdeviceptr)(uintptr_t)devPtr, (unsigned char)value,
					     count, stream);
}

EXPORT cudaError_t cudaMalloc(void **devPtr, size_t size)
{
	READY();
	if (!devPtr)
		return cudaErrorInvalidValue;
	return (cudaError_t)cuMemAlloc_v2((CUdeviceptr *)devPtr, size);
}

EXPORT cudaError_t cudaMallocManaged(void **devPtr, size_t size, unsigned int flags)
{
	READY();
	if (!devPtr)
		return cudaErrorInvalidValue;
	return (cudaError_t)cuMemAllocManaged((CUdeviceptr *)devPtr, size, flags);
}

EXPORT cudaError_t cudaMallocAsync(void **devPtr, size_t size, cudaStream_t hStream)
{
	READY();
	if (!devPtr)
		return cudaErrorInvalidValue;
	return (cudaError_t)cuMemAllocAsync((CUdeviceptr *)devPtr, size, hStream);
}

EXPORT cudaError_t cudaMallocHost(void **ptr, size_t size)
{
	READY();
	return (cudaError_t)cuMemAllocHost_v2(ptr, size);
}

EXPORT cudaError_t cudaHostAlloc(void **pHost, size_t size, unsigned int flags)
{
	READY();
	return (cudaError_t)cuMemHostAlloc(pHost, size, flags);
}

EXPORT cudaError_t cudaFree(void *devPtr)
{
	READY();
	if (!devPtr)
		return cudaSuccess;
	return (cudaError_t)cuMemFree_v2((CUdeviceptr)(uintptr_t)devPtr);
}

EXPORT cudaError_t cudaFreeAsync(void *devPtr, cudaStream_t hStream)
{
	READY();
	return (cudaError_t)cuMemFreeAsync((CUdeviceptr)(uintptr_t)devPtr, hStream);
}

EXPORT cudaError_t cudaFreeHost(void *ptr)
{
	READY();
	return (cudaError_t)cuMemFreeHost(ptr);
}

/* ------------------------------------------------------------ sync, streams, events */

EXPORT cudaError_t cudaSetDevice(int device)
{
	if (device != 0)
		return cudaErrorInvalidDevice;
	READY();
	return cudaSuccess;
}

/* cuda_profiler_api.h: the runtime's pair enters the driver's, as
 * NVIDIA's does. */
EXPORT cudaError_t cudaProfilerStart(void)
{
	READY();
	return (cudaError_t)cuProfilerStart();
}

EXPORT cudaError_t cudaProfilerStop(void)
{
	READY();
	return (cudaError_t)cuProfilerStop();
}

EXPORT cudaError_t cudaDeviceSynchronize(void)
{
	READY();
	return (cudaError_t)cuCtxSynchronize();
}

EXPORT cudaError_t cudaStreamSynchronize(cudaStream_t stream)
{
	READY();
	return (cudaError_t)cuStreamSynchronize(stream);
}

EXPORT cudaError_t cudaStreamCreate(cudaStream_t *pStream)
{
	READY();
	return (cudaError_t)cuStreamCreate(pStream, 0);
}

EXPORT cudaError_t cudaStreamCreateWithFlags(cudaStream_t *pStream, unsigned int flags)
{
	READY();
	return (cudaError_t)cuStreamCreate(pStream, flags);
}

EXPORT cudaError_t cudaStreamCreateWithPriority(cudaStream_t *pStream, unsigned int flags,
						int priority)
{
	READY();
	return (cudaError_t)cuStreamCreateWithPriority(pStream, flags, priority);
}

EXPORT cudaError_t cudaStreamDestroy(cudaStream_t stream)
{
	READY();
	return (cudaError_t)cuStreamDestroy_v2(stream);
}

EXPORT cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags)
{
	READY();
	return (cudaError_t)cuStreamWaitEvent(stream, event, flags);
}

EXPORT cudaError_t cudaEventCreate(cudaEvent_t *event)
{
	READY();
	return (cudaError_t)cuEventCreate(event, 0);
}

EXPORT cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream)
{
	READY();
	return (cudaError_t)cuEventRecord(event, stream);
}

EXPORT cudaError_t cudaEventSynchronize(cudaEvent_t event)
{
	READY();
	return (cudaError_t)cuEventSynchronize(event);
}

EXPORT cudaError_t cudaGraphLaunch(cudaGraphExec_t graphExec, cudaStream_t stream)
{
	READY();
	return (cudaError_t)cuGraphLaunch(graphExec, stream);
}
