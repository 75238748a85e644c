// SPDX-License-Identifier: MIT
/*
 * Fake libcudart.so.13: the CUDA runtime calls the tests use, with the
 * toolkit's names and signatures (cuda_runtime_api.h), implemented on the
 * fake driver (libcuda.so.1) the way the real runtime sits on the real
 * one: each runtime call makes the driver calls that do its work, so a
 * tracer sees runtime slices with driver slices nested inside.
 *
 * NVIDIA's runtime cannot run on the fake driver (it takes its entry
 * points through cuGetProcAddress and private export tables), hence this.
 * The implicit context is a cuCtxCreate at the first call. Kernels: the
 * host stub passed to cudaLaunchKernel is named through dladdr (link the
 * program with -rdynamic) and looked up with cuModuleGetFunction in one
 * module loaded at the first launch, as the runtime registers fatbins.
 */
#define _GNU_SOURCE
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>

#define EXPORT __attribute__((visibility("default")))

static pthread_once_t once = PTHREAD_ONCE_INIT;
static CUcontext ctx;
static CUmodule mod;
static cudaError_t init_err;

static cudaError_t err_of(CUresult r)
{
	switch (r) {
	case CUDA_SUCCESS:
		return cudaSuccess;
	case CUDA_ERROR_INVALID_VALUE:
		return cudaErrorInvalidValue;
	case CUDA_ERROR_OUT_OF_MEMORY:
		return cudaErrorMemoryAllocation;
	case CUDA_ERROR_NOT_FOUND:
		return cudaErrorSymbolNotFound;
	default:
		return cudaErrorUnknown;
	}
}

static void init(void)
{
	static const unsigned char image[] = "\x7f" "ELF fake fatbin for the fake runtime";
	CUdevice dev;
	CUresult r = cuInit(0);

	if (!r)
		r = cuDeviceGet(&dev, 0);
#if CUDA_VERSION >= 13000
	if (!r)
		r = cuCtxCreate(&ctx, NULL, 0, dev);
#else
	if (!r)
		r = cuCtxCreate(&ctx, 0, dev);
#endif
	if (!r)
		r = cuModuleLoadData(&mod, image);
	init_err = err_of(r);
}

static cudaError_t ready(void)
{
	pthread_once(&once, init);
	if (!init_err)
		cuCtxSetCurrent(ctx);
	return init_err;
}

EXPORT cudaError_t cudaSetDevice(int device)
{
	return device == 0 ? ready() : cudaErrorInvalidDevice;
}

EXPORT cudaError_t cudaMalloc(void **devPtr, size_t size)
{
	cudaError_t e = ready();

	return e ? e : err_of(cuMemAlloc((CUdeviceptr *)devPtr, size));
}

EXPORT cudaError_t cudaFree(void *devPtr)
{
	cudaError_t e = ready();

	return e ? e : err_of(cuMemFree((CUdeviceptr)devPtr));
}

EXPORT cudaError_t cudaMallocHost(void **ptr, size_t size)
{
	cudaError_t e = ready();

	return e ? e : err_of(cuMemAllocHost(ptr, size));
}

EXPORT cudaError_t cudaFreeHost(void *ptr)
{
	cudaError_t e = ready();

	return e ? e : err_of(cuMemFreeHost(ptr));
}

EXPORT cudaError_t cudaMemcpy(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind)
{
	cudaError_t e = ready();

	if (e)
		return e;
	switch (kind) {
	case cudaMemcpyHostToDevice:
		return err_of(cuMemcpyHtoD((CUdeviceptr)dst, src, count));
	case cudaMemcpyDeviceToHost:
		return err_of(cuMemcpyDtoH(dst, (CUdeviceptr)src, count));
	default:
		return err_of(cuMemcpy((CUdeviceptr)dst, (CUdeviceptr)src, count));
	}
}

EXPORT cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t count,
				   enum cudaMemcpyKind kind, cudaStream_t stream)
{
	cudaError_t e = ready();

	if (e)
		return e;
	switch (kind) {
	case cudaMemcpyHostToDevice:
		return err_of(cuMemcpyHtoDAsync((CUdeviceptr)dst, src, count, (CUstream)stream));
	case cudaMemcpyDeviceToHost:
		return err_of(cuMemcpyDtoHAsync(dst, (CUdeviceptr)src, count, (CUstream)stream));
	default:
		return err_of(cuMemcpyAsync((CUdeviceptr)dst, (CUdeviceptr)src, count,
					    (CUstream)stream));
	}
}

EXPORT cudaError_t cudaMemset(void *devPtr, int value, size_t count)
{
	cudaError_t e = ready();

	return e ? e : err_of(cuMemsetD8((CUdeviceptr)devPtr, (unsigned char)value, count));
}

EXPORT cudaError_t cudaStreamCreate(cudaStream_t *pStream)
{
	cudaError_t e = ready();

	return e ? e : err_of(cuStreamCreate((CUstream *)pStream, 0));
}

EXPORT cudaError_t cudaStreamDestroy(cudaStream_t stream)
{
	cudaError_t e = ready();

	return e ? e : err_of(cuStreamDestroy((CUstream)stream));
}

EXPORT cudaError_t cudaStreamSynchronize(cudaStream_t stream)
{
	cudaError_t e = ready();

	return e ? e : err_of(cuStreamSynchronize((CUstream)stream));
}

EXPORT cudaError_t cudaDeviceSynchronize(void)
{
	cudaError_t e = ready();

	return e ? e : err_of(cuCtxSynchronize());
}

EXPORT cudaError_t cudaLaunchKernel(const void *func, dim3 gridDim, dim3 blockDim, void **args,
				    size_t sharedMem, cudaStream_t stream)
{
	cudaError_t e = ready();
	CUfunction f;
	Dl_info info;

	if (e)
		return e;
	if (!dladdr(func, &info) || !info.dli_sname)
		return cudaErrorInvalidDeviceFunction;
	e = err_of(cuModuleGetFunction(&f, mod, info.dli_sname));
	if (e)
		return e;
	return err_of(cuLaunchKernel(f, gridDim.x, gridDim.y, gridDim.z, blockDim.x, blockDim.y,
				     blockDim.z, (unsigned int)sharedMem, (CUstream)stream, args,
				     NULL));
}
