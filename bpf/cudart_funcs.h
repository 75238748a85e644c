/* SPDX-License-Identifier: MIT */
/*
 * The CUDA runtime API functions cgbpf probes (libcudart.so.*, or a static
 * copy inside an executable): one line per symbol, X(symbol, class, flags).
 * Signatures from cuda_runtime_api.h (and crt/device_functions.h for the
 * __cuda* entry points nvcc 13 generates); user/sources/cuda/cudart.c decodes them.
 */
#ifndef CGBPF_CUDART_FUNCS_H
#define CGBPF_CUDART_FUNCS_H

/* Argument classes. */
enum crt_class {
	CRT_C_PLAIN = 0,	/* no arguments worth decoding */
	CRT_C_LAUNCH,		/* a0 = host stub or cudaKernel_t, a1..a4 = dim3 x2, x6 smem, x7 stream */
	CRT_C_LAUNCH_EX,	/* a0 = cudaLaunchConfig_t * (copied into x6..x10), a1 = host stub */
	CRT_C_GET_KERNEL,	/* *a0 = cudaKernel_t out, a1 = host stub */
	CRT_C_MEMCPY,		/* a0 = dst, a1 = src, a2 = bytes, a3 = kind [, a4 = stream] */
	CRT_C_MEMCPY2D,		/* a0 dst, a1 dpitch, a2 src, a3 spitch, a4 width, a5 height, x6 kind [, x7 stream] */
	CRT_C_MEMSET,		/* a0 = dst, a1 = value, a2 = bytes [, a3 = stream] */
	CRT_C_ALLOC,		/* *a0 = pointer out, a1 = bytes [, a2 = stream if ASYNC, flags if FLAGS] */
	CRT_C_FREE,		/* a0 = pointer [, a1 = stream if ASYNC] */
	CRT_C_SYNC,		/* device synchronize */
	CRT_C_STREAM,		/* a0 = stream */
	CRT_C_STREAM_CREATE,	/* *a0 = stream out [, a1 = flags [, a2 = priority]] */
	CRT_C_STREAM_WAIT_EVENT,/* a0 = stream, a1 = event, a2 = flags */
	CRT_C_EVENT_RECORD,	/* a0 = event, a1 = stream */
	CRT_C_EVENT,		/* a0 = event */
	CRT_C_GRAPH_LAUNCH,	/* a0 = graph exec, a1 = stream */
	CRT_C_SET_DEVICE,	/* a0 = device */
};

/* Flags. */
#define CRT_F_ASYNC	(1u << 0)	/* takes a stream argument */
#define CRT_F_PTSZ	(1u << 1)	/* per-thread default stream variant (_ptsz, _ptds) */
#define CRT_F_DEVICE	(1u << 2)	/* device memory (GPU memory counter) */
#define CRT_F_HOST	(1u << 3)	/* page-locked host memory */
#define CRT_F_FLAGS	(1u << 4)	/* ALLOC: a2 = flags; STREAM_CREATE: a1 = flags */
#define CRT_F_PRIO	(1u << 5)	/* STREAM_CREATE: a2 = priority */
#define CRT_F_SYNC	(1u << 6)	/* the call waits for the GPU */
#define CRT_F_HANDLE	(1u << 7)	/* LAUNCH: a0 is a cudaKernel_t, not a host stub */

#define CRT_FUNCS(X) \
	X(cudaLaunchKernel,			CRT_C_LAUNCH, 0) \
	X(cudaLaunchKernel_ptsz,		CRT_C_LAUNCH, CRT_F_PTSZ) \
	X(cudaLaunchKernelExC,			CRT_C_LAUNCH_EX, 0) \
	X(cudaLaunchKernelExC_ptsz,		CRT_C_LAUNCH_EX, CRT_F_PTSZ) \
	X(cudaLaunchCooperativeKernel,		CRT_C_LAUNCH, 0) \
	X(cudaLaunchCooperativeKernel_ptsz,	CRT_C_LAUNCH, CRT_F_PTSZ) \
	X(__cudaLaunchKernel,			CRT_C_LAUNCH, CRT_F_HANDLE) \
	X(__cudaLaunchKernel_ptsz,		CRT_C_LAUNCH, CRT_F_HANDLE | CRT_F_PTSZ) \
	X(__cudaGetKernel,			CRT_C_GET_KERNEL, 0) \
	X(cudaGetKernel,			CRT_C_GET_KERNEL, 0) \
	X(cudaMemcpy,				CRT_C_MEMCPY, 0) \
	X(cudaMemcpy_ptds,			CRT_C_MEMCPY, CRT_F_PTSZ) \
	X(cudaMemcpyAsync,			CRT_C_MEMCPY, CRT_F_ASYNC) \
	X(cudaMemcpyAsync_ptsz,			CRT_C_MEMCPY, CRT_F_ASYNC | CRT_F_PTSZ) \
	X(cudaMemcpy2D,				CRT_C_MEMCPY2D, 0) \
	X(cudaMemcpy2D_ptds,			CRT_C_MEMCPY2D, CRT_F_PTSZ) \
	X(cudaMemcpy2DAsync,			CRT_C_MEMCPY2D, CRT_F_ASYNC) \
	X(cudaMemcpy2DAsync_ptsz,		CRT_C_MEMCPY2D, CRT_F_ASYNC | CRT_F_PTSZ) \
	X(cudaMemset,				CRT_C_MEMSET, 0) \
	X(cudaMemset_ptds,			CRT_C_MEMSET, CRT_F_PTSZ) \
	X(cudaMemsetAsync,			CRT_C_MEMSET, CRT_F_ASYNC) \
	X(cudaMemsetAsync_ptsz,			CRT_C_MEMSET, CRT_F_ASYNC | CRT_F_PTSZ) \
	X(cudaMalloc,				CRT_C_ALLOC, CRT_F_DEVICE) \
	X(cudaMallocManaged,			CRT_C_ALLOC, CRT_F_DEVICE | CRT_F_FLAGS) \
	X(cudaMallocAsync,			CRT_C_ALLOC, CRT_F_DEVICE | CRT_F_ASYNC) \
	X(cudaMallocAsync_ptsz,			CRT_C_ALLOC, CRT_F_DEVICE | CRT_F_ASYNC | CRT_F_PTSZ) \
	X(cudaMallocHost,			CRT_C_ALLOC, CRT_F_HOST) \
	X(cudaHostAlloc,			CRT_C_ALLOC, CRT_F_HOST | CRT_F_FLAGS) \
	X(cudaFree,				CRT_C_FREE, CRT_F_DEVICE) \
	X(cudaFreeAsync,			CRT_C_FREE, CRT_F_DEVICE | CRT_F_ASYNC) \
	X(cudaFreeAsync_ptsz,			CRT_C_FREE, CRT_F_DEVICE | CRT_F_ASYNC | CRT_F_PTSZ) \
	X(cudaFreeHost,				CRT_C_FREE, CRT_F_HOST) \
	X(cudaDeviceSynchronize,		CRT_C_SYNC, CRT_F_SYNC) \
	X(cudaStreamSynchronize,		CRT_C_STREAM, CRT_F_SYNC) \
	X(cudaStreamSynchronize_ptsz,		CRT_C_STREAM, CRT_F_SYNC | CRT_F_PTSZ) \
	X(cudaEventSynchronize,			CRT_C_EVENT, CRT_F_SYNC) \
	X(cudaStreamWaitEvent,			CRT_C_STREAM_WAIT_EVENT, 0) \
	X(cudaStreamWaitEvent_ptsz,		CRT_C_STREAM_WAIT_EVENT, CRT_F_PTSZ) \
	X(cudaEventRecord,			CRT_C_EVENT_RECORD, 0) \
	X(cudaEventRecord_ptsz,			CRT_C_EVENT_RECORD, CRT_F_PTSZ) \
	X(cudaGraphLaunch,			CRT_C_GRAPH_LAUNCH, 0) \
	X(cudaGraphLaunch_ptsz,			CRT_C_GRAPH_LAUNCH, CRT_F_PTSZ) \
	X(cudaStreamCreate,			CRT_C_STREAM_CREATE, 0) \
	X(cudaStreamCreateWithFlags,		CRT_C_STREAM_CREATE, CRT_F_FLAGS) \
	X(cudaStreamCreateWithPriority,		CRT_C_STREAM_CREATE, CRT_F_FLAGS | CRT_F_PRIO) \
	X(cudaStreamDestroy,			CRT_C_STREAM, 0) \
	X(cudaSetDevice,			CRT_C_SET_DEVICE, 0) \
	X(cudaProfilerStart,			CRT_C_PLAIN, 0) \
	X(cudaProfilerStop,			CRT_C_PLAIN, 0)

#define CRT_FUNC_ENUM(sym, cls, flags) CRT_FN_##sym,
enum crt_func_id {
	CRT_FUNCS(CRT_FUNC_ENUM)
	CRT_FN__COUNT
};
#undef CRT_FUNC_ENUM

#endif
