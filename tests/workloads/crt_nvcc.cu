// SPDX-License-Identifier: MIT
// crt_nvcc: a CUDA program as nvcc builds it (tests/integration/test_cudart.py
// compiles it with the toolkit's nvcc, once against the shared libcudart.so.13
// and once with nvcc's default static runtime). Run on the fake driver, NVIDIA's
// runtime fails every call (no GPU; the fake lacks its private export tables)
// but makes them: cudaMalloc x2, __cudaGetKernel + __cudaLaunchKernel per
// kernel launch (nvcc 13's launch path), cudaDeviceSynchronize.
#include <cstdio>

namespace ns {
template <int N> __global__ void scale(float *x, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i < n)
		x[i] *= N;
}
}

__global__ void plain(int *p)
{
	*p = 1;
}

int main()
{
	float *d = nullptr;
	int *q = nullptr;
	cudaError_t e = cudaMalloc(&d, 4096);

	printf("cudaMalloc=%d\n", e);
	cudaMalloc(&q, 4);
	ns::scale<2><<<dim3(4, 2, 1), dim3(256, 1, 1), 128>>>(d, 1024);
	plain<<<1, 1>>>(q);
	e = cudaDeviceSynchronize();
	printf("sync=%d\n", e);
	return 0;
}
