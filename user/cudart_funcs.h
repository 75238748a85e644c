/* SPDX-License-Identifier: MIT */
/*
 * The CUDA runtime API functions cgbpf probes (libcudart.so.*, or a copy
 * linked into the executable): X(symbol, class, flags) with the driver
 * table's classes where the arguments have the same shape
 * (bpf/cuda_funcs.h), the runtime's own otherwise. Signatures from
 * cuda_runtime_api.h; x86-64 SysV: dim3 is passed in two registers.
 */
#ifndef CGBPF_CUDART_FUNCS_H
#define CGBPF_CUDART_FUNCS_H

#include "cuda_funcs.h"

#define CUDART_FUNCS(X) \
	X(cudaLaunchKernel,		CU_C_RT_LAUNCH, 0) \
	X(cudaLaunchKernel_ptsz,	CU_C_RT_LAUNCH, 0) \
	X(cudaLaunchKernelExC,		CU_C_LAUNCH_EX, 0) \
	X(cudaLaunchKernelExC_ptsz,	CU_C_LAUNCH_EX, 0) \
	X(cudaMemcpy,			CU_C_RT_MEMCPY, 0) \
	X(cudaMemcpy_ptds,		CU_C_RT_MEMCPY, 0) \
	X(cudaMemcpyAsync,		CU_C_RT_MEMCPY, CU_F_ASYNC) \
	X(cudaMemcpyAsync_ptsz,		CU_C_RT_MEMCPY, CU_F_ASYNC) \
	X(cudaMemcpy2D,			CU_C_RT_MEMCPY2D, 0) \
	X(cudaMemcpy2DAsync,		CU_C_RT_MEMCPY2D, CU_F_ASYNC) \
	X(cudaMemset,			CU_C_MEMSET, 1) \
	X(cudaMemsetAsync,		CU_C_MEMSET, 1 | CU_F_ASYNC) \
	X(cudaMalloc,			CU_C_ALLOC, CU_F_DEVICE) \
	X(cudaMallocManaged,		CU_C_ALLOC, CU_F_DEVICE | CU_F_MANAGED) \
	X(cudaMallocAsync,		CU_C_ALLOC, CU_F_DEVICE | CU_F_ASYNC) \
	X(cudaFree,			CU_C_FREE, CU_F_DEVICE) \
	X(cudaFreeAsync,		CU_C_FREE, CU_F_DEVICE | CU_F_ASYNC) \
	X(cudaMallocHost,		CU_C_ALLOC, CU_F_HOST) \
	X(cudaHostAlloc,		CU_C_ALLOC, CU_F_HOST) \
	X(cudaFreeHost,			CU_C_FREE, CU_F_HOST) \
	X(cudaDeviceSynchronize,	CU_C_SYNC, CU_F_SYNC) \
	X(cudaStreamSynchronize,	CU_C_STREAM, CU_F_SYNC) \
	X(cudaStreamSynchronize_ptsz,	CU_C_STREAM, CU_F_SYNC) \
	X(cudaEventSynchronize,		CU_C_EVENT, CU_F_SYNC) \
	X(cudaStreamWaitEvent,		CU_C_STREAM_WAIT_EVENT, 0) \
	X(cudaStreamWaitEvent_ptsz,	CU_C_STREAM_WAIT_EVENT, 0) \
	X(cudaEventRecord,		CU_C_EVENT_RECORD, 0) \
	X(cudaEventRecord_ptsz,		CU_C_EVENT_RECORD, 0) \
	X(cudaGraphLaunch,		CU_C_GRAPH_LAUNCH, 0) \
	X(cudaGraphLaunch_ptsz,		CU_C_GRAPH_LAUNCH, 0) \
	X(cudaStreamCreate,		CU_C_STREAM_CREATE, 0) \
	X(cudaStreamCreateWithFlags,	CU_C_STREAM_CREATE, 0) \
	X(cudaStreamCreateWithPriority,	CU_C_STREAM_CREATE, 0) \
	X(cudaStreamDestroy,		CU_C_STREAM, 0) \
	X(cudaSetDevice,		CU_C_RT_DEVICE, 0)

#define CR_FUNC_ENUM(sym, cls, flags) CR_FN_##sym,
enum cudart_func_id {
	CUDART_FUNCS(CR_FUNC_ENUM)
	CR_FN__COUNT
};
#undef CR_FUNC_ENUM

#endif
