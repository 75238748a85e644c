/* SPDX-License-Identifier: MIT */
/*
 * rt_train: a CUDA runtime API program (cuda_runtime_api.h) the way nvcc
 * output calls the runtime: a kernel's host stub (a function of the
 * program named like the kernel, _Z8rt_saxpyPfi = rt_saxpy(float*, int))
 * passed to cudaLaunchKernel, copies, a memset, synchronizations.
 * Linked against the fake libcudart.so.13 (tests/fake/libcudart.c) and
 * -rdynamic, so the fake can name the stub.
 *
 * Calls: cudaSetDevice(0), cudaStreamCreate, cudaMalloc(1 MiB),
 * cudaMallocHost(1 MiB), cudaMemcpy HtoD 1 MiB, then 5 x
 * (cudaLaunchKernel <<<(4,2,1), (128,1,1), 256, stream>>>,
 * cudaMemcpyAsync DtoH 4096, cudaStreamSynchronize), cudaMemset 1 MiB,
 * cudaDeviceSynchronize, cudaFreeHost, cudaFree, cudaStreamDestroy.
 * Prints {"pid": N, "iters": 5} at the end.
 */
#define _GNU_SOURCE
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define ITERS 5
#define MIB (1u << 20)

/* The host stub nvcc would generate for __global__ void rt_saxpy(float *, int). */
void rt_saxpy_stub(float *x, int n) __asm__("_Z8rt_saxpyPfi");
void rt_saxpy_stub(float *x, int n)
{
	(void)x;
	(void)n;
}

#define CK(call) do { cudaError_t e_ = (call); \
	if (e_) { fprintf(stderr, "%s: %d\n", #call, (int)e_); exit(1); } } while (0)

int main(void)
{
	cudaStream_t s;
	float *d;
	void *h;
	int n = 1024;
	void *args[] = { &d, &n };
	dim3 grid = { 4, 2, 1 }, block = { 128, 1, 1 };

	CK(cudaSetDevice(0));
	CK(cudaStreamCreate(&s));
	CK(cudaMalloc((void **)&d, MIB));
	CK(cudaMallocHost(&h, MIB));
	CK(cudaMemcpy(d, h, MIB, cudaMemcpyHostToDevice));
	for (int i = 0; i < ITERS; i++) {
		CK(cudaLaunchKernel((const void *)rt_saxpy_stub, grid, block, args, 256, s));
		CK(cudaMemcpyAsync(h, d, 4096, cudaMemcpyDeviceToHost, s));
		CK(cudaStreamSynchronize(s));
	}
	CK(cudaMemset(d, 0, MIB));
	CK(cudaDeviceSynchronize());
	CK(cudaFreeHost(h));
	CK(cudaFree(d));
	CK(cudaStreamDestroy(s));
	printf("{\"pid\": %d, \"iters\": %d}\n", getpid(), ITERS);
	return 0;
}
