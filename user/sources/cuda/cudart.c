// SPDX-License-Identifier: MIT
/*
 * The CUDA runtime API (libcudart.so.*, or the copy nvcc links statically
 * into an executable): its function table and call decoding. Streams,
 * launch configurations and annotations use user/sources/cuda/cuda.c's helpers, so a
 * stream has one ordinal whether the runtime or the driver names it.
 *
 * Kernel names: cudaLaunchKernel's first argument is the address of the
 * host stub nvcc generated for the kernel (a function named like the
 * kernel), symbolized against the process's ELF symbols and demangled,
 * once per (process, address). nvcc 13 code instead asks __cudaGetKernel
 * once per kernel for a cudaKernel_t and launches that through
 * __cudaLaunchKernel: the handle -> name pair is learned from the
 * __cudaGetKernel call, in the same per-process map the driver decoder
 * fills (a cudaKernel_t is a CUkernel).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "agg.h"
#include "cudart_funcs.h"
#include "core/apilib.h"
#include "core/model.h"
#include "lib/elf/symbolize.h"
#include "sources/cuda/cuda.h"
#include "sources/cuda/cudart.h"

struct crt_desc {
	const char *name;
	uint8_t cls;		/* enum crt_class */
	uint32_t flags;
};

#define CRT_FUNC_DESC(sym, cls_, flags_) [CRT_FN_##sym] = { #sym, cls_, flags_ },
static const struct crt_desc crt_funcs[CRT_FN__COUNT] = { CRT_FUNCS(CRT_FUNC_DESC) };
#undef CRT_FUNC_DESC

static const char *func_name(uint16_t func)
{
	return func < CRT_FN__COUNT ? crt_funcs[func].name : "cuda?";
}

static uint64_t cookie(uint16_t func)
{
	const struct crt_desc *f = &crt_funcs[func < CRT_FN__COUNT ? func : 0];
	int kind = PK_REGS;
	bool stash = false;

	switch (f->cls) {
	case CRT_C_LAUNCH:	/* x86-64: the two dim3 take four registers */
	case CRT_C_MEMCPY2D:
		kind = PK_STACK3;
		break;
	case CRT_C_LAUNCH_EX:
		kind = PK_DEREF_A0;
		break;
	case CRT_C_GET_KERNEL:
	case CRT_C_ALLOC:
	case CRT_C_STREAM_CREATE:
		stash = true;
		break;
	}
	return CK_MAKE(LIB_CUDART, func, kind, stash, 0);
}

static const struct {
	int code;
	const char *name;
} results[] = {
	{ 1, "cudaErrorInvalidValue" },
	{ 2, "cudaErrorMemoryAllocation" },
	{ 3, "cudaErrorInitializationError" },
	{ 4, "cudaErrorCudartUnloading" },
	{ 34, "cudaErrorStubLibrary" },
	{ 35, "cudaErrorInsufficientDriver" },
	{ 36, "cudaErrorCallRequiresNewerDriver" },
	{ 46, "cudaErrorDevicesUnavailable" },
	{ 98, "cudaErrorInvalidDeviceFunction" },
	{ 100, "cudaErrorNoDevice" },
	{ 101, "cudaErrorInvalidDevice" },
	{ 200, "cudaErrorInvalidKernelImage" },
	{ 209, "cudaErrorNoKernelImageForDevice" },
	{ 400, "cudaErrorInvalidResourceHandle" },
	{ 500, "cudaErrorSymbolNotFound" },
	{ 600, "cudaErrorNotReady" },
	{ 700, "cudaErrorIllegalAddress" },
	{ 701, "cudaErrorLaunchOutOfResources" },
	{ 702, "cudaErrorLaunchTimeout" },
	{ 719, "cudaErrorLaunchFailure" },
	{ 800, "cudaErrorNotPermitted" },
	{ 801, "cudaErrorNotSupported" },
	{ 999, "cudaErrorUnknown" },
};

static const char *result_name(int64_t code)
{
	for (size_t i = 0; i < sizeof(results) / sizeof(results[0]); i++)
		if (results[i].code == code)
			return results[i].name;
	return NULL;
}

/*
 * The demangled name of the function at addr in process p, or NULL: the
 * host stub of a kernel. Cached per process (misses too, as ""), so a
 * training loop's launches cost one symbolizer lookup per kernel.
 */
static const char *stub_name(struct model *m, struct proc *p, uint64_t addr)
{
	uint64_t *v = hmap__get(&p->stubs, addr);
	struct sym_frame f = { 0 };
	char *name = NULL;

	if (v)
		return *(const char *)(uintptr_t)*v ? (const char *)(uintptr_t)*v : NULL;
	if (m->sym && symbolizer__user(m->sym, p->pid, addr, &f) == 0 && f.function) {
		/* An address inside a function is no host stub; say where. */
		if (f.function_off == 0)
			name = strdup(f.function);
		else if (asprintf(&name, "%s+0x%" PRIx64, f.function, f.function_off) < 0)
			name = NULL;
	}
	if (!name)
		name = strdup("");
	if (!name || hmap__put(&p->stubs, addr, (uintptr_t)name)) {
		free(name);
		return NULL;
	}
	return *name ? name : NULL;
}

/* copy_dir of a cudaMemcpyKind. */
static enum copy_dir copy_dir(uint64_t kind)
{
	switch ((uint32_t)kind) {
	case 0:
		return DIR_HTOH;
	case 1:
		return DIR_HTOD;
	case 2:
		return DIR_DTOH;
	case 3:
		return DIR_DTOD;
	default:	/* cudaMemcpyDefault: by unified addressing */
		return DIR_ANY;
	}
}

static void annot_stream(struct proc *p, struct call *c, uint64_t h)
{
	cuda__annot_s(c->begin, &c->nbegin, "stream",
		      model__stream_name(p, h, crt_funcs[c->func].flags & CRT_F_PTSZ,
					 c->scratch[2], sizeof(c->scratch[2])));
}

static void decode_launch(struct model *m, struct proc *p, struct call *c, const uint32_t g[3],
			  const uint32_t b[3], uint32_t smem, uint64_t fn, uint64_t stream)
{
	uint64_t *known = hmap__get(&p->names, fn);
	bool ptsz = crt_funcs[c->func].flags & CRT_F_PTSZ;

	c->is_launch = true;
	c->handle = fn;
	/* A cudaKernel_t learned from __cudaGetKernel, else a host stub
	 * (__cudaGetKernel stores the stub itself when it fails; a handle
	 * never symbolizes, and the miss is cached). */
	c->kernel = known ? (const char *)(uintptr_t)*known : stub_name(m, p, fn);
	if (c->kernel) {
		cuda__annot_s(c->begin, &c->nbegin, "kernel", c->kernel);
	} else {
		snprintf(c->scratch[0], sizeof(c->scratch[0]), "unnamed 0x%" PRIx64, fn);
		cuda__annot_s(c->begin, &c->nbegin, "kernel", c->scratch[0]);
	}
	cuda__annot_s(c->begin, &c->nbegin, "launch",
		      cuda__launch_fmt(p, c, g, b, smem, stream, ptsz));
}

/* What the call does to the GPU's queues (struct call's gpu fields). */
static void gpu_class(struct call *c, const struct crt_desc *f)
{
	const uint64_t *a = c->args;
	bool ptsz = f->flags & CRT_F_PTSZ;

	switch (f->cls) {
	case CRT_C_LAUNCH:
		c->gpu = GC_LAUNCH;
		c->stream = cuda__stream_key(a[7], ptsz);
		break;
	case CRT_C_LAUNCH_EX:
		c->gpu = GC_LAUNCH;
		c->stream = cuda__stream_key(a[10], ptsz);
		break;
	case CRT_C_GRAPH_LAUNCH:
		c->gpu = GC_GRAPH;
		c->stream = cuda__stream_key(a[1], ptsz);
		break;
	case CRT_C_MEMCPY:
	case CRT_C_MEMCPY2D:
	case CRT_C_MEMSET:
		c->gpu = f->cls == CRT_C_MEMSET ? GC_MEMSET : GC_COPY;
		c->gpu_async = f->flags & CRT_F_ASYNC;
		if (c->gpu_async)
			c->stream = f->cls == CRT_C_MEMCPY2D ? a[7] : f->cls == CRT_C_MEMCPY ? a[4] : a[3];
		c->stream = cuda__stream_key(c->stream, ptsz);
		break;
	case CRT_C_SYNC:
		c->gpu = GC_SYNC_DEVICE;
		break;
	case CRT_C_STREAM:
		if (f->flags & CRT_F_SYNC) {
			c->gpu = GC_SYNC_STREAM;
			c->stream = cuda__stream_key(a[0], ptsz);
		}
		break;
	case CRT_C_EVENT:
		if (f->flags & CRT_F_SYNC) {
			c->gpu = GC_SYNC_EVENT;
			c->event = a[0];
		}
		break;
	case CRT_C_EVENT_RECORD:
		c->gpu = GC_EVENT_RECORD;
		c->event = a[0];
		c->stream = cuda__stream_key(a[1], ptsz);
		break;
	}
}

static void enter(struct model *m, struct thread *t, struct call *c)
{
	const struct crt_desc *f = &crt_funcs[c->func];
	struct proc *p = t->proc;
	const uint64_t *a = c->args;
	bool async = f->flags & CRT_F_ASYNC;
	int *n = &c->nbegin;

	c->nbegin = 0;
	gpu_class(c, f);
	switch (f->cls) {
	case CRT_C_LAUNCH: {
		/* dim3 {x, y, z}: x and y packed in one register, z in the next. */
		uint32_t g[3] = { a[1], a[1] >> 32, a[2] }, b[3] = { a[3], a[3] >> 32, a[4] };

		decode_launch(m, p, c, g, b, a[6], a[0], a[7]);
		break;
	}
	case CRT_C_LAUNCH_EX: {
		/* cudaLaunchConfig_t: gridDim, blockDim, size_t dynamicSmemBytes,
		 * stream (args[6..10] hold its first 40 bytes). */
		uint32_t g[3] = { a[6], a[6] >> 32, a[7] }, b[3] = { a[7] >> 32, a[8], a[8] >> 32 };

		decode_launch(m, p, c, g, b, a[9], a[1], a[10]);
		break;
	}
	case CRT_C_GET_KERNEL: {
		const char *k = stub_name(m, p, a[1]);

		cuda__annot_p(c->begin, n, "host_func", a[1]);
		if (k)
			cuda__annot_s(c->begin, n, "kernel", k);
		break;
	}
	case CRT_C_MEMCPY:
	case CRT_C_MEMCPY2D: {
		bool two_d = f->cls == CRT_C_MEMCPY2D;
		uint64_t kind = two_d ? a[6] : a[3];

		c->bytes = two_d ? a[4] * a[5] : a[2];
		c->dir = copy_dir(kind);
		cuda__annot_u(c->begin, n, "bytes", c->bytes);
		cuda__annot_s(c->begin, n, "kind", cuda__dir_name(c->dir));
		cuda__annot_p(c->begin, n, "dst", a[0]);
		cuda__annot_p(c->begin, n, "src", two_d ? a[2] : a[1]);
		if (two_d) {
			snprintf(c->scratch[1], sizeof(c->scratch[1]),
				 "%" PRIu64 " x %" PRIu64 " (dpitch %" PRIu64 ", spitch %" PRIu64 ")",
				 a[4], a[5], a[1], a[3]);
			cuda__annot_s(c->begin, n, "shape", c->scratch[1]);
		}
		if (async)
			annot_stream(p, c, two_d ? a[7] : a[4]);
		break;
	}
	case CRT_C_MEMSET:
		c->bytes = a[2];
		cuda__annot_u(c->begin, n, "bytes", a[2]);
		cuda__annot_p(c->begin, n, "dst", a[0]);
		cuda__annot_u(c->begin, n, "value", (uint32_t)a[1]);
		if (async)
			annot_stream(p, c, a[3]);
		break;
	case CRT_C_ALLOC:
		c->bytes = a[1];
		cuda__annot_u(c->begin, n, "bytes", a[1]);
		if (f->flags & CRT_F_FLAGS)
			cuda__annot_u(c->begin, n, "flags", (uint32_t)a[2]);
		if (async)
			annot_stream(p, c, a[2]);
		break;
	case CRT_C_FREE: {
		uint64_t *v = hmap__get(&p->allocs, a[0]);

		/* Its size now: the driver's free inside it forgets the pointer. */
		c->bytes = v ? *v >> 1 : 0;
		cuda__annot_p(c->begin, n, "ptr", a[0]);
		if (async)
			annot_stream(p, c, a[1]);
		break;
	}
	case CRT_C_STREAM:
		annot_stream(p, c, a[0]);
		break;
	case CRT_C_STREAM_CREATE:
		if (f->flags & CRT_F_FLAGS)
			cuda__annot_u(c->begin, n, "flags", (uint32_t)a[1]);
		if (f->flags & CRT_F_PRIO)
			cuda__annot_u(c->begin, n, "priority", (uint32_t)a[2]);
		break;
	case CRT_C_STREAM_WAIT_EVENT:
		annot_stream(p, c, a[0]);
		cuda__annot_p(c->begin, n, "event", a[1]);
		break;
	case CRT_C_EVENT_RECORD:
		cuda__annot_p(c->begin, n, "event", a[0]);
		annot_stream(p, c, a[1]);
		break;
	case CRT_C_EVENT:
		cuda__annot_p(c->begin, n, "event", a[0]);
		break;
	case CRT_C_GRAPH_LAUNCH:
		cuda__annot_p(c->begin, n, "graph_exec", a[0]);
		annot_stream(p, c, a[1]);
		break;
	case CRT_C_SET_DEVICE:
		cuda__annot_u(c->begin, n, "device", (uint32_t)a[0]);
		break;
	}
}

static void exit_(struct model *m, struct thread *t, struct call *c)
{
	const struct crt_desc *f = &crt_funcs[c->func];
	struct proc *p = t->proc;
	int *n = &c->nend;

	c->nend = 0;
	if (c->ret != 0) {
		const char *r = result_name(c->ret);

		if (r)
			snprintf(c->scratch[0], sizeof(c->scratch[0]), "%s (%" PRId64 ")", r, c->ret);
		else
			snprintf(c->scratch[0], sizeof(c->scratch[0]), "cudaError %" PRId64, c->ret);
		cuda__annot_s(c->end, n, "result", c->scratch[0]);
		return;
	}
	switch (f->cls) {
	case CRT_C_GET_KERNEL:
		if (c->has_out) {
			const char *k = stub_name(m, p, c->args[1]);

			cuda__annot_p(c->end, n, "handle", c->out);
			if (k)
				cuda__remember_name(p, c->out, k);
		}
		break;
	case CRT_C_ALLOC:
		if (c->has_out) {
			bool host = f->flags & CRT_F_HOST;

			cuda__annot_p(c->end, n, "ptr", c->out);
			/* Counted already when the runtime's own cuMemAlloc* was
			 * traced inside this call: one allocation, counted once. */
			if (!hmap__get(&p->allocs, c->out) &&
			    !hmap__put(&p->allocs, c->out, c->bytes << 1 | host))
				model__mem(m, t, host ? CTR_HOST_PINNED : CTR_GPU_MEM, c->end_ts,
					   (int64_t)c->bytes);
		}
		break;
	case CRT_C_FREE: {
		uint64_t v;

		/* Already gone (and counted) when the driver's free inside it
		 * was traced. */
		if (hmap__del(&p->allocs, c->args[0], &v)) {
			c->bytes = v >> 1;
			model__mem(m, t, v & 1 ? CTR_HOST_PINNED : CTR_GPU_MEM, c->end_ts,
				   -(int64_t)c->bytes);
		}
		if (c->bytes)
			cuda__annot_u(c->end, n, "bytes", c->bytes);
		break;
	}
	case CRT_C_STREAM_CREATE:
		if (c->has_out)
			cuda__annot_s(c->end, n, "stream",
				      model__stream_name(p, c->out, false, c->scratch[2],
							 sizeof(c->scratch[2])));
		break;
	}
}

bool cudart__is_memset(uint16_t func)
{
	return func < CRT_FN__COUNT && crt_funcs[func].cls == CRT_C_MEMSET;
}

static const struct lib_ops ops = {
	.name = "cudart",
	.func_name = func_name,
	.enter = enter,
	.exit = exit_,
};

static const char *const watch[] = { "libcudart.so", NULL };

/* monitor: as the driver's (user/sources/cuda/cuda.c); cudaErrorNotReady is 600 too. */
static void agg_cfg(uint16_t func, struct agg_cfg *c)
{
	const struct crt_desc *f = &crt_funcs[func];

	switch (f->cls) {
	case CRT_C_MEMCPY:
	case CRT_C_MEMSET:
		c->bytes_arg = 3;
		break;
	case CRT_C_ALLOC:
		c->bytes_arg = 2;
		break;
	}
	c->flags = AGG_F_ERRORS | (f->flags & CRT_F_SYNC ? AGG_F_SLOW : 0);
	if (f->flags & CRT_F_DEVICE) {
		c->flags |= f->cls == CRT_C_ALLOC ? AGG_F_ALLOC : f->cls == CRT_C_FREE ? AGG_F_FREE : 0;
		c->ptr_arg = 1;
	}
	c->ok_ret2 = 600;
}

const struct api_lib cudart_lib = {
	.id = LIB_CUDART,
	.name = "cudart",
	.title = "CUDA runtime",
	.watch = watch,
	.nfuncs = CRT_FN__COUNT,
	.symbol = func_name,
	.cookie = cookie,
	.ops = &ops,
	.agg_cfg = agg_cfg,
	.is_memset = cudart__is_memset,
};
