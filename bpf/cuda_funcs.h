/* SPDX-License-Identifier: MIT */
/*
 * The CUDA driver API functions cgbpf probes: one line per exported symbol.
 * X(symbol, class, flags). The class says how user space reads the
 * arguments (user/sources/cuda/cuda.c); the flags refine it. Adding a function is one
 * line here; the BPF side is generic and never needs to change for it.
 */
#ifndef CGBPF_CUDA_FUNCS_H
#define CGBPF_CUDA_FUNCS_H

/* Argument classes. */
enum cu_class {
	CU_C_PLAIN = 0,		/* no arguments worth decoding */
	CU_C_INIT,		/* a0 = flags */
	CU_C_CTX_CREATE,	/* *a0 = context out */
	CU_C_SYNC,		/* context synchronize */
	CU_C_MODULE_LOAD,	/* *a0 = module out, a1 = image or path */
	CU_C_LIBRARY_LOAD,	/* *a0 = library out, a1 = image or path */
	CU_C_GET_FUNCTION,	/* *a0 = handle out, a1 = module/library, a2 = name */
	CU_C_KERNEL_GET_FUNCTION, /* *a0 = CUfunction out, a1 = CUkernel */
	CU_C_LAUNCH,		/* a0 = f, a1..a5 + x6 = grid/block, x7 smem, x8 stream */
	CU_C_LAUNCH_EX,		/* a0 = config (copied into x6..x9), a1 = f */
	CU_C_GRAPH_LAUNCH,	/* a0 = graph exec, a1 = stream */
	CU_C_ALLOC,		/* *a0 = pointer out, a1 = bytes [, a2 = stream if ASYNC] */
	CU_C_FREE,		/* a0 = pointer [, a1 = stream if ASYNC] */
	CU_C_MEMCPY,		/* a0 = dst, a1 = src, a2 = bytes [, a3 = stream] */
	CU_C_MEMSET,		/* a0 = dst, a1 = value, a2 = count [, a3 = stream] */
	CU_C_STREAM_CREATE,	/* *a0 = stream out, a1 = flags [, a2 = priority] */
	CU_C_STREAM,		/* a0 = stream */
	CU_C_STREAM_WAIT_EVENT,	/* a0 = stream, a1 = event, a2 = flags */
	CU_C_EVENT_RECORD,	/* a0 = event, a1 = stream */
	CU_C_EVENT,		/* a0 = event */
};

/* Flags. The low byte of MEMSET's flags is the element size. */
#define CU_F_ASYNC	(1u << 8)	/* takes a stream argument */
#define CU_F_DEVICE	(1u << 9)	/* device memory (GPU memory counter) */
#define CU_F_HOST	(1u << 10)	/* page-locked host memory */
#define CU_F_MANAGED	(1u << 11)	/* managed (unified) memory */
#define CU_F_HTOD	(1u << 12)
#define CU_F_DTOH	(1u << 13)
#define CU_F_DTOD	(1u << 14)
#define CU_F_ANY	(1u << 15)	/* direction from unified addressing */
#define CU_F_STR1	(1u << 16)	/* a1 is a C string worth copying */
#define CU_F_STR2	(1u << 17)	/* a2 is a C string worth copying */
#define CU_F_SYNC	(1u << 18)	/* the call waits for the GPU */

#define CU_FUNCS(X) \
	X(cuInit,				CU_C_INIT, 0) \
	X(cuCtxCreate,				CU_C_CTX_CREATE, 0) \
	X(cuCtxCreate_v2,			CU_C_CTX_CREATE, 0) \
	X(cuCtxCreate_v3,			CU_C_CTX_CREATE, 0) \
	X(cuCtxCreate_v4,			CU_C_CTX_CREATE, 0) \
	X(cuCtxSynchronize,			CU_C_SYNC, CU_F_SYNC) \
	X(cuCtxSynchronize_v2,			CU_C_SYNC, CU_F_SYNC) \
	X(cuModuleLoad,				CU_C_MODULE_LOAD, CU_F_STR1) \
	X(cuModuleLoadData,			CU_C_MODULE_LOAD, 0) \
	X(cuModuleLoadDataEx,			CU_C_MODULE_LOAD, 0) \
	X(cuModuleLoadFatBinary,		CU_C_MODULE_LOAD, 0) \
	X(cuModuleGetFunction,			CU_C_GET_FUNCTION, CU_F_STR2) \
	X(cuLibraryLoadData,			CU_C_LIBRARY_LOAD, 0) \
	X(cuLibraryLoadFromFile,		CU_C_LIBRARY_LOAD, CU_F_STR1) \
	X(cuLibraryGetKernel,			CU_C_GET_FUNCTION, CU_F_STR2) \
	X(cuKernelGetFunction,			CU_C_KERNEL_GET_FUNCTION, 0) \
	X(cuLaunchKernel,			CU_C_LAUNCH, 0) \
	X(cuLaunchKernel_ptsz,			CU_C_LAUNCH, 0) \
	X(cuLaunchKernelEx,			CU_C_LAUNCH_EX, 0) \
	X(cuLaunchKernelEx_ptsz,		CU_C_LAUNCH_EX, 0) \
	X(cuLaunchCooperativeKernel,		CU_C_LAUNCH, 0) \
	X(cuLaunchCooperativeKernel_ptsz,	CU_C_LAUNCH, 0) \
	X(cuGraphLaunch,			CU_C_GRAPH_LAUNCH, 0) \
	X(cuGraphLaunch_ptsz,			CU_C_GRAPH_LAUNCH, 0) \
	X(cuMemAlloc_v2,			CU_C_ALLOC, CU_F_DEVICE) \
	X(cuMemAllocAsync,			CU_C_ALLOC, CU_F_DEVICE | CU_F_ASYNC) \
	X(cuMemAllocAsync_ptsz,			CU_C_ALLOC, CU_F_DEVICE | CU_F_ASYNC) \
	X(cuMemAllocManaged,			CU_C_ALLOC, CU_F_DEVICE | CU_F_MANAGED) \
	X(cuMemFree_v2,				CU_C_FREE, CU_F_DEVICE) \
	X(cuMemFreeAsync,			CU_C_FREE, CU_F_DEVICE | CU_F_ASYNC) \
	X(cuMemFreeAsync_ptsz,			CU_C_FREE, CU_F_DEVICE | CU_F_ASYNC) \
	X(cuMemAllocHost_v2,			CU_C_ALLOC, CU_F_HOST) \
	X(cuMemHostAlloc,			CU_C_ALLOC, CU_F_HOST) \
	X(cuMemFreeHost,			CU_C_FREE, CU_F_HOST) \
	X(cuMemcpy,				CU_C_MEMCPY, CU_F_ANY) \
	X(cuMemcpy_ptds,			CU_C_MEMCPY, CU_F_ANY) \
	X(cuMemcpyAsync,			CU_C_MEMCPY, CU_F_ANY | CU_F_ASYNC) \
	X(cuMemcpyAsync_ptsz,			CU_C_MEMCPY, CU_F_ANY | CU_F_ASYNC) \
	X(cuMemcpyHtoD_v2,			CU_C_MEMCPY, CU_F_HTOD) \
	X(cuMemcpyHtoD_v2_ptds,			CU_C_MEMCPY, CU_F_HTOD) \
	X(cuMemcpyHtoDAsync_v2,			CU_C_MEMCPY, CU_F_HTOD | CU_F_ASYNC) \
	X(cuMemcpyHtoDAsync_v2_ptsz,		CU_C_MEMCPY, CU_F_HTOD | CU_F_ASYNC) \
	X(cuMemcpyDtoH_v2,			CU_C_MEMCPY, CU_F_DTOH) \
	X(cuMemcpyDtoH_v2_ptds,			CU_C_MEMCPY, CU_F_DTOH) \
	X(cuMemcpyDtoHAsync_v2,			CU_C_MEMCPY, CU_F_DTOH | CU_F_ASYNC) \
	X(cuMemcpyDtoHAsync_v2_ptsz,		CU_C_MEMCPY, CU_F_DTOH | CU_F_ASYNC) \
	X(cuMemcpyDtoD_v2,			CU_C_MEMCPY, CU_F_DTOD) \
	X(cuMemcpyDtoD_v2_ptds,			CU_C_MEMCPY, CU_F_DTOD) \
	X(cuMemcpyDtoDAsync_v2,			CU_C_MEMCPY, CU_F_DTOD | CU_F_ASYNC) \
	X(cuMemcpyDtoDAsync_v2_ptsz,		CU_C_MEMCPY, CU_F_DTOD | CU_F_ASYNC) \
	X(cuMemsetD8_v2,			CU_C_MEMSET, 1) \
	X(cuMemsetD8_v2_ptds,			CU_C_MEMSET, 1) \
	X(cuMemsetD8Async,			CU_C_MEMSET, 1 | CU_F_ASYNC) \
	X(cuMemsetD8Async_ptsz,			CU_C_MEMSET, 1 | CU_F_ASYNC) \
	X(cuMemsetD16_v2,			CU_C_MEMSET, 2) \
	X(cuMemsetD16_v2_ptds,			CU_C_MEMSET, 2) \
	X(cuMemsetD16Async,			CU_C_MEMSET, 2 | CU_F_ASYNC) \
	X(cuMemsetD16Async_ptsz,		CU_C_MEMSET, 2 | CU_F_ASYNC) \
	X(cuMemsetD32_v2,			CU_C_MEMSET, 4) \
	X(cuMemsetD32_v2_ptds,			CU_C_MEMSET, 4) \
	X(cuMemsetD32Async,			CU_C_MEMSET, 4 | CU_F_ASYNC) \
	X(cuMemsetD32Async_ptsz,		CU_C_MEMSET, 4 | CU_F_ASYNC) \
	X(cuStreamCreate,			CU_C_STREAM_CREATE, 0) \
	X(cuStreamCreateWithPriority,		CU_C_STREAM_CREATE, 0) \
	X(cuStreamDestroy_v2,			CU_C_STREAM, 0) \
	X(cuStreamSynchronize,			CU_C_STREAM, CU_F_SYNC) \
	X(cuStreamSynchronize_ptsz,		CU_C_STREAM, CU_F_SYNC) \
	X(cuStreamWaitEvent,			CU_C_STREAM_WAIT_EVENT, 0) \
	X(cuStreamWaitEvent_ptsz,		CU_C_STREAM_WAIT_EVENT, 0) \
	X(cuEventRecord,			CU_C_EVENT_RECORD, 0) \
	X(cuEventRecord_ptsz,			CU_C_EVENT_RECORD, 0) \
	X(cuEventSynchronize,			CU_C_EVENT, CU_F_SYNC) \
	X(cuProfilerStart,			CU_C_PLAIN, 0) \
	X(cuProfilerStop,			CU_C_PLAIN, 0)

#define CU_FUNC_ENUM(sym, cls, flags) CU_FN_##sym,
enum cu_func_id {
	CU_FUNCS(CU_FUNC_ENUM)
	CU_FN__COUNT
};
#undef CU_FUNC_ENUM

#endif
