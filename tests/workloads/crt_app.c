/* SPDX-License-Identifier: MIT */
/*
 * crt_app: a CUDA runtime API workload in C, linked against the fake
 * libcudart.so.13 (tests/fake/libcudart.c), which runs on the fake driver.
 * Its "kernels" are host stubs written the way nvcc writes them: a host
 * function named like the kernel (two with C++ mangled names, through asm
 * labels) whose address goes to the launch API.
 *
 * Usage: crt_app [--iters N]   (default 3)
 *
 * Setup: cudaSetDevice(0); cudaStreamCreateWithFlags(flags 1); cudaMalloc
 * 1048576 (d); cudaMallocHost 65536 (h); cudaMallocManaged 4096 (flags 1);
 * cudaEventCreate (not traced).
 *
 * Each iteration, all on the stream s unless said otherwise:
 *   cudaMemcpyAsync HtoD 65536
 *   saxpy   cudaLaunchKernel     grid (4,2,1)  block (128,1,1) smem 256
 *   relu    cudaLaunchKernelExC  grid (7,1,1)  block (64,1,1)  smem 512
 *   norm    __cudaGetKernel (first iteration only), then __cudaLaunchKernel
 *                                grid (3,3,1)  block (32,8,1)  smem 0
 *   cudaMemsetAsync 4096, cudaEventRecord, cudaStreamWaitEvent(NULL stream),
 *   cudaMemcpy DtoH 65536 (legacy stream), cudaStreamSynchronize.
 * Then: cudaMemcpy2D HtoD width 256 height 4 (dpitch 1024, spitch 512),
 * cudaMemset 100 bytes, cudaDeviceSynchronize, cudaEventSynchronize, a
 * deliberate cudaFree(0xdead00) failing with 1 (invalid value), cudaFree of
 * the managed and device buffers, cudaFreeHost, cudaStreamDestroy.
 *
 * Kernels (host stub symbol -> demangled):
 *   saxpy _ZN6thrust6detail5saxpyIfEEvT_PS2_i -> void thrust::detail::saxpy<float>(float, float*, int)
 *   relu  relu_kernel (a C name)
 *   norm  _Z9layernormPfi -> layernorm(float*, int)
 *
 * CGBPF_PAUSE_FILE (wl_pause) stops it after setup.
 */
#define _GNU_SOURCE
#include <cuda_runtime_api.h>

#include "manifest.h"

void __cudaRegisterFunction(void **fatCubinHandle, const char *hostFun, char *deviceFun,
			    const char *deviceName, int thread_limit, uint3 *tid, uint3 *bid,
			    dim3 *bDim, dim3 *gDim, int *wSize);
cudaError_t __cudaGetKernel(cudaKernel_t *kernel, const void *func);
cudaError_t __cudaLaunchKernel(cudaKernel_t kernel, dim3 gridDim, dim3 blockDim, void **args,
			       size_t sharedMem, cudaStream_t stream);

static cudaStream_t s;

#define CK(call) do { cudaError_t e_ = (call); if (e_) wl_die("%s: error %d", #call, e_); } while (0)

/* Host stubs, as nvcc generates them: named like their kernels, they
 * launch themselves. noinline/noclone keep one symbol at one address. */
#define STUB __attribute__((noinline, noclone, used))

STUB void saxpy(float a, float *x, int n) __asm__("_ZN6thrust6detail5saxpyIfEEvT_PS2_i");
STUB void saxpy(float a, float *x, int n)
{
	void *args[] = { &a, &x, &n };
	dim3 g = { 4, 2, 1 }, b = { 128, 1, 1 };

	CK(cudaLaunchKernel((const void *)saxpy, g, b, args, 256, s));
}

STUB void relu_kernel(float *x, int n)
{
	void *args[] = { &x, &n };
	cudaLaunchConfig_t cfg = { .gridDim = { 7, 1, 1 }, .blockDim = { 64, 1, 1 },
				   .dynamicSmemBytes = 512, .stream = s };

	CK(cudaLaunchKernelExC(&cfg, (const void *)relu_kernel, args));
}

STUB void layernorm(float *x, int n) __asm__("_Z9layernormPfi");
STUB void layernorm(float *x, int n)
{
	static cudaKernel_t handle;
	void *args[] = { &x, &n };
	dim3 g = { 3, 3, 1 }, b = { 32, 8, 1 };

	if (!handle)
		CK(__cudaGetKernel(&handle, (const void *)layernorm));
	CK(__cudaLaunchKernel(handle, g, b, args, 0, s));
}

/* What nvcc's startup code does: the runtime learns each stub's kernel
 * name from here, cgbpf from the ELF symbols. */
__attribute__((constructor)) static void register_kernels(void)
{
	static char *names[] = { "_ZN6thrust6detail5saxpyIfEEvT_PS2_i", "relu_kernel",
				 "_Z9layernormPfi" };
	const void *stubs[] = { (const void *)saxpy, (const void *)relu_kernel,
				(const void *)layernorm };

	for (int i = 0; i < 3; i++)
		__cudaRegisterFunction(NULL, stubs[i], names[i], names[i], -1, NULL, NULL, NULL,
				       NULL, NULL);
}

int main(int argc, char **argv)
{
	unsigned long iters = 3;
	void *d, *h, *m;
	cudaEvent_t ev;

	for (int i = 1; i < argc; i++)
		if (!wl_arg_ul(argc, argv, &i, "--iters", &iters))
			wl_die("usage: crt_app [--iters N]");
	CK(cudaSetDevice(0));
	CK(cudaStreamCreateWithFlags(&s, 1));
	CK(cudaMalloc(&d, 1048576));
	CK(cudaMallocHost(&h, 65536));
	CK(cudaMallocManaged(&m, 4096, 1));
	CK(cudaEventCreate(&ev));
	wl_pause();
	for (unsigned long i = 0; i < iters; i++) {
		CK(cudaMemcpyAsync(d, h, 65536, cudaMemcpyHostToDevice, s));
		saxpy(2.0f, d, 1024);
		relu_kernel(d, 1024);
		layernorm(d, 1024);
		CK(cudaMemsetAsync(d, 0, 4096, s));
		CK(cudaEventRecord(ev, s));
		CK(cudaStreamWaitEvent(NULL, ev, 0));
		CK(cudaMemcpy(h, d, 65536, cudaMemcpyDeviceToHost));
		CK(cudaStreamSynchronize(s));
	}
	CK(cudaMemcpy2D(d, 1024, h, 512, 256, 4, cudaMemcpyHostToDevice));
	CK(cudaMemset(d, 1, 100));
	CK(cudaDeviceSynchronize());
	CK(cudaEventSynchronize(ev));
	if (cudaFree((void *)0xdead00) != cudaErrorInvalidValue)
		wl_die("cudaFree(0xdead00) did not fail with cudaErrorInvalidValue");
	CK(cudaFree(m));
	CK(cudaFree(d));
	CK(cudaFreeHost(h));
	CK(cudaStreamDestroy(s));
	return 0;
}
