// SPDX-License-Identifier: MIT
/*
 * sources/cuda/: the CUDA driver (cuda.c) and runtime (cudart.c) API
 * libraries: their descriptors (core/apilib.h) and the decoders that turn
 * their calls into model events: arguments, kernel names, streams,
 * memory.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "agg.h"
#include "gpu_rec.h"
#include "core/apilib.h"
#include "lib/elf/symbolize.h"
#include "sources/cuda/cuda.h"

#define CU_FUNC_DESC(sym, cls_, flags_) [CU_FN_##sym] = { #sym, cls_, flags_ },
const struct func_desc cuda_funcs[CU_FN__COUNT] = { CU_FUNCS(CU_FUNC_DESC) };
#undef CU_FUNC_DESC

uint64_t cuda__cookie(uint16_t func)
{
	const struct func_desc *f = &cuda_funcs[func];
	int kind = PK_REGS, str = 0;
	bool stash = false;

	switch (f->cls) {
	case CU_C_LAUNCH:
		kind = PK_STACK3;
		break;
	case CU_C_LAUNCH_EX:
		kind = PK_DEREF_A0;
		break;
	case CU_C_CTX_CREATE:
	case CU_C_MODULE_LOAD:
	case CU_C_LIBRARY_LOAD:
	case CU_C_GET_FUNCTION:
	case CU_C_KERNEL_GET_FUNCTION:
	case CU_C_ALLOC:
	case CU_C_STREAM_CREATE:
		stash = true;
		break;
	}
	if (f->flags & CU_F_STR1)
		str = 2;
	else if (f->flags & CU_F_STR2)
		str = 3;
	return CK_MAKE(LIB_CUDA, func, kind, stash, str);
}

static const struct {
	int code;
	const char *name;
} results[] = {
	{ 1, "CUDA_ERROR_INVALID_VALUE" },
	{ 2, "CUDA_ERROR_OUT_OF_MEMORY" },
	{ 3, "CUDA_ERROR_NOT_INITIALIZED" },
	{ 4, "CUDA_ERROR_DEINITIALIZED" },
	{ 34, "CUDA_ERROR_STUB_LIBRARY" },
	{ 46, "CUDA_ERROR_DEVICE_UNAVAILABLE" },
	{ 100, "CUDA_ERROR_NO_DEVICE" },
	{ 101, "CUDA_ERROR_INVALID_DEVICE" },
	{ 200, "CUDA_ERROR_INVALID_IMAGE" },
	{ 201, "CUDA_ERROR_INVALID_CONTEXT" },
	{ 209, "CUDA_ERROR_NO_BINARY_FOR_GPU" },
	{ 218, "CUDA_ERROR_INVALID_PTX" },
	{ 301, "CUDA_ERROR_FILE_NOT_FOUND" },
	{ 400, "CUDA_ERROR_INVALID_HANDLE" },
	{ 500, "CUDA_ERROR_NOT_FOUND" },
	{ 600, "CUDA_ERROR_NOT_READY" },
	{ 700, "CUDA_ERROR_ILLEGAL_ADDRESS" },
	{ 701, "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES" },
	{ 702, "CUDA_ERROR_LAUNCH_TIMEOUT" },
	{ 719, "CUDA_ERROR_LAUNCH_FAILED" },
	{ 800, "CUDA_ERROR_NOT_PERMITTED" },
	{ 801, "CUDA_ERROR_NOT_SUPPORTED" },
	{ 999, "CUDA_ERROR_UNKNOWN" },
};

const char *cuda__result_name(int64_t code)
{
	for (size_t i = 0; i < sizeof(results) / sizeof(results[0]); i++)
		if (results[i].code == code)
			return results[i].name;
	return NULL;
}

static const char *func_name(uint16_t func)
{
	return func < CU_FN__COUNT ? cuda_funcs[func].name : "cu?";
}

static bool has_string(uint16_t func)
{
	return func < CU_FN__COUNT && (cuda_funcs[func].flags & (CU_F_STR1 | CU_F_STR2));
}

void cuda__annot_u(struct pf_annot *a, int *n, const char *name, uint64_t v)
{
	if (*n >= CALL_ANNOTS)
		return;
	a[*n] = (struct pf_annot){ .name = name, .type = PA_UINT, .u = v };
	(*n)++;
}

void cuda__annot_p(struct pf_annot *a, int *n, const char *name, uint64_t v)
{
	if (*n >= CALL_ANNOTS)
		return;
	a[*n] = (struct pf_annot){ .name = name, .type = PA_PTR, .u = v };
	(*n)++;
}

void cuda__annot_s(struct pf_annot *a, int *n, const char *name, const char *v)
{
	if (*n >= CALL_ANNOTS)
		return;
	a[*n] = (struct pf_annot){ .name = name, .type = PA_STR, .s = v };
	(*n)++;
}

static const char *const dir_names[DIR__COUNT] = { "", "HtoD", "DtoH", "DtoD", "any", "HtoH" };

const char *cuda__dir_name(enum copy_dir d)
{
	return d < DIR__COUNT ? dir_names[d] : "?";
}

static bool ptsz_of[CU_FN__COUNT];
static pthread_once_t ptsz_once = PTHREAD_ONCE_INIT;

static void ptsz_init(void)
{
	for (int i = 0; i < CU_FN__COUNT; i++) {
		const char *n = cuda_funcs[i].name;
		size_t l = strlen(n);

		ptsz_of[i] = l > 5 && (!strcmp(n + l - 5, "_ptsz") || !strcmp(n + l - 5, "_ptds"));
	}
}

/* A per-thread default stream entry point (its name ends in _ptsz or
 * _ptds): looked up, not compared, as every launch asks twice. */
static bool is_ptsz(uint16_t func)
{
	pthread_once(&ptsz_once, ptsz_init);
	return func < CU_FN__COUNT && ptsz_of[func];
}

/* The "stream" annotation of a call's begin event. */
static void annot_stream(struct proc *p, struct call *c, uint64_t h)
{
	cuda__annot_s(c->begin, &c->nbegin, "stream",
		model__stream_name(p, h, is_ptsz(c->func), c->scratch[2], sizeof(c->scratch[2])));
}

#define LAUNCH_FMT_SLOTS 64

/* A formatted launch configuration, cached: a training loop repeats a few
 * configurations millions of times, and snprintf was a third of the
 * consumer's time per launch. */
struct launch_fmt {
	uint64_t key[5];
	char str[112];
};

/* CUDA's own launch syntax, <<<grid, block, shared memory, stream>>>, as
 * one interned string: readable, and small per launch. */
const char *cuda__launch_fmt(struct proc *p, struct call *c, const uint32_t g[3],
			     const uint32_t b[3], uint32_t smem, uint64_t stream, bool ptsz)
{
	uint64_t key[5] = {
		g[0] | (uint64_t)g[1] << 32, g[2] | (uint64_t)b[0] << 32,
		b[1] | (uint64_t)b[2] << 32, smem | (uint64_t)ptsz << 32, stream,
	};
	struct launch_fmt *slot;

	if (!p->launch_fmt)
		p->launch_fmt = calloc(LAUNCH_FMT_SLOTS, sizeof(struct launch_fmt));
	if (!p->launch_fmt) {
		slot = (struct launch_fmt *)c->scratch[1];	/* no cache: format in place */
		_Static_assert(sizeof(c->scratch[1]) >= sizeof(struct launch_fmt),
			       "scratch holds one entry");
	} else {
		slot = (struct launch_fmt *)p->launch_fmt +
		       (hash__bytes(key, sizeof(key)) & (LAUNCH_FMT_SLOTS - 1));
		if (slot->str[0] && !memcmp(slot->key, key, sizeof(key)))
			return slot->str;
	}
	memcpy(slot->key, key, sizeof(key));
	snprintf(slot->str, sizeof(slot->str), "<<<(%u,%u,%u), (%u,%u,%u), %u, %s>>>", g[0],
		 g[1], g[2], b[0], b[1], b[2], smem,
		 model__stream_name(p, stream, ptsz, c->scratch[2], sizeof(c->scratch[2])));
	return slot->str;
}

static void decode_launch(struct proc *p, struct call *c, uint32_t g[3], uint32_t b[3],
			  uint32_t smem, uint64_t fn, uint64_t stream)
{
	uint64_t *name = hmap__get(&p->names, fn);

	c->is_launch = true;
	c->handle = fn;
	c->kernel = name ? (const char *)(uintptr_t)*name : NULL;
	if (c->kernel) {
		cuda__annot_s(c->begin, &c->nbegin, "kernel", c->kernel);
	} else {
		snprintf(c->scratch[0], sizeof(c->scratch[0]), "unnamed 0x%" PRIx64, fn);
		cuda__annot_s(c->begin, &c->nbegin, "kernel", c->scratch[0]);
	}
	cuda__annot_s(c->begin, &c->nbegin, "launch",
		      cuda__launch_fmt(p, c, g, b, smem, stream, is_ptsz(c->func)));
}

/* The queue a call uses: a _ptsz / _ptds entry point's NULL stream is the
 * calling thread's own. */
uint64_t cuda__stream_key(uint64_t h, bool ptsz)
{
	return h == 0 && ptsz ? GPU_STREAM_PER_THREAD : h;
}

/* What the call does to the GPU's queues (struct call's gpu fields). */
static void gpu_class(struct call *c, const struct func_desc *f)
{
	const uint64_t *a = c->args;
	bool ptsz = is_ptsz(c->func);

	switch (f->cls) {
	case CU_C_LAUNCH:
		c->gpu = GC_LAUNCH;
		c->stream = cuda__stream_key(a[8], ptsz);
		break;
	case CU_C_LAUNCH_EX:
		c->gpu = GC_LAUNCH;
		c->stream = cuda__stream_key(a[10], ptsz);
		break;
	case CU_C_GRAPH_LAUNCH:
		c->gpu = GC_GRAPH;
		c->stream = cuda__stream_key(a[1], ptsz);
		break;
	case CU_C_MEMCPY:
	case CU_C_MEMSET:
		c->gpu = f->cls == CU_C_MEMCPY ? GC_COPY : GC_MEMSET;
		c->gpu_async = f->flags & CU_F_ASYNC;
		c->stream = cuda__stream_key(c->gpu_async ? a[3] : 0, ptsz);
		break;
	case CU_C_SYNC:
		c->gpu = GC_SYNC_DEVICE;
		break;
	case CU_C_STREAM:
		if (f->flags & CU_F_SYNC) {
			c->gpu = GC_SYNC_STREAM;
			c->stream = cuda__stream_key(a[0], ptsz);
		}
		break;
	case CU_C_EVENT:
		c->gpu = GC_SYNC_EVENT;
		c->event = a[0];
		break;
	case CU_C_EVENT_RECORD:
		c->gpu = GC_EVENT_RECORD;
		c->event = a[0];
		c->stream = cuda__stream_key(a[1], ptsz);
		break;
	}
}

static void enter(struct model *m, struct thread *t, struct call *c)
{
	const struct func_desc *f = &cuda_funcs[c->func];
	struct proc *p = t->proc;
	const uint64_t *a = c->args;
	bool async = f->flags & CU_F_ASYNC;
	int *n = &c->nbegin;

	c->nbegin = 0;
	gpu_class(c, f);
	switch (f->cls) {
	case CU_C_INIT:
		cuda__annot_u(c->begin, n, "flags", (uint32_t)a[0]);
		break;
	case CU_C_LAUNCH: {
		uint32_t g[3] = { a[1], a[2], a[3] }, b[3] = { a[4], a[5], a[6] };

		decode_launch(p, c, g, b, (uint32_t)a[7], a[0], a[8]);
		break;
	}
	case CU_C_LAUNCH_EX: {
		/* args[6..10] hold the CUlaunchConfig: seven uint32 dimensions and
		 * shared memory, padding, then hStream. */
		uint32_t g[3] = { a[6], a[6] >> 32, a[7] }, b[3] = { a[7] >> 32, a[8], a[8] >> 32 };

		decode_launch(p, c, g, b, (uint32_t)a[9], a[1], a[10]);
		break;
	}
	case CU_C_GRAPH_LAUNCH:
		cuda__annot_p(c->begin, n, "graph_exec", a[0]);
		annot_stream(p, c, a[1]);
		break;
	case CU_C_ALLOC:
		c->bytes = a[1];
		cuda__annot_u(c->begin, n, "bytes", a[1]);
		if (async)
			annot_stream(p, c, a[2]);
		break;
	case CU_C_FREE:
		cuda__annot_p(c->begin, n, "ptr", a[0]);
		if (async)
			annot_stream(p, c, a[1]);
		break;
	case CU_C_MEMCPY:
		c->bytes = a[2];
		c->dir = f->flags & CU_F_HTOD ? DIR_HTOD : f->flags & CU_F_DTOH ? DIR_DTOH :
			 f->flags & CU_F_DTOD ? DIR_DTOD : DIR_ANY;
		cuda__annot_u(c->begin, n, "bytes", a[2]);
		cuda__annot_s(c->begin, n, "kind", cuda__dir_name(c->dir));
		cuda__annot_p(c->begin, n, "dst", a[0]);
		cuda__annot_p(c->begin, n, "src", a[1]);
		if (async)
			annot_stream(p, c, a[3]);
		break;
	case CU_C_MEMSET:
		c->bytes = a[2] * (f->flags & 0xff);
		cuda__annot_u(c->begin, n, "bytes", c->bytes);
		cuda__annot_p(c->begin, n, "dst", a[0]);
		cuda__annot_u(c->begin, n, "value", (uint32_t)a[1]);
		if (async)
			annot_stream(p, c, a[3]);
		break;
	case CU_C_STREAM_CREATE:
		cuda__annot_u(c->begin, n, "flags", (uint32_t)a[1]);
		if (c->func == CU_FN_cuStreamCreateWithPriority)
			cuda__annot_u(c->begin, n, "priority", (uint32_t)a[2]);
		break;
	case CU_C_STREAM:
		annot_stream(p, c, a[0]);
		break;
	case CU_C_STREAM_WAIT_EVENT:
		annot_stream(p, c, a[0]);
		cuda__annot_p(c->begin, n, "event", a[1]);
		break;
	case CU_C_EVENT_RECORD:
		cuda__annot_p(c->begin, n, "event", a[0]);
		annot_stream(p, c, a[1]);
		break;
	case CU_C_EVENT:
		cuda__annot_p(c->begin, n, "event", a[0]);
		break;
	case CU_C_GET_FUNCTION:
		cuda__annot_p(c->begin, n, c->func == CU_FN_cuLibraryGetKernel ? "library" : "module",
			a[1]);
		if (c->str)
			cuda__annot_s(c->begin, n, "name", c->str);
		break;
	case CU_C_KERNEL_GET_FUNCTION: {
		uint64_t *name = hmap__get(&p->names, a[1]);

		cuda__annot_p(c->begin, n, "kernel_handle", a[1]);
		if (name)
			cuda__annot_s(c->begin, n, "kernel", (const char *)(uintptr_t)*name);
		break;
	}
	case CU_C_MODULE_LOAD:
	case CU_C_LIBRARY_LOAD:
		if (c->str)
			cuda__annot_s(c->begin, n, "path", c->str);
		break;
	}
}

/* Remembers handle -> demangled name for later launches. */
void cuda__remember_name(struct proc *p, uint64_t handle, const char *name)
{
	char *d = symbolizer__demangle_dup(name);
	uint64_t old;

	if (!d)
		return;
	if (hmap__del(&p->names, handle, &old))
		free((void *)(uintptr_t)old);
	if (hmap__put(&p->names, handle, (uintptr_t)d))
		free(d);
}

static void exit_(struct model *m, struct thread *t, struct call *c)
{
	const struct func_desc *f = &cuda_funcs[c->func];
	struct proc *p = t->proc;
	int *n = &c->nend;
	bool ok = c->ret == 0;

	c->nend = 0;
	/* Read at the return (its page was not resident at the entry): the
	 * begin event went out without it. */
	if (c->str_late && c->str)
		cuda__annot_s(c->end, n, f->cls == CU_C_GET_FUNCTION ? "name" : "path", c->str);
	if (!ok) {
		const char *r = cuda__result_name(c->ret);

		if (r)
			snprintf(c->scratch[0], sizeof(c->scratch[0]), "%s (%" PRId64 ")", r, c->ret);
		else
			snprintf(c->scratch[0], sizeof(c->scratch[0]), "CUresult %" PRId64, c->ret);
		cuda__annot_s(c->end, n, "result", c->scratch[0]);
		return;
	}
	switch (f->cls) {
	case CU_C_CTX_CREATE:
		if (c->has_out)
			cuda__annot_p(c->end, n, "context", c->out);
		break;
	case CU_C_MODULE_LOAD:
	case CU_C_LIBRARY_LOAD:
		if (c->has_out)
			cuda__annot_p(c->end, n, f->cls == CU_C_MODULE_LOAD ? "module" : "library", c->out);
		break;
	case CU_C_GET_FUNCTION:
		if (c->has_out) {
			cuda__annot_p(c->end, n, "handle", c->out);
			if (c->str)
				cuda__remember_name(p, c->out, c->str);
		}
		break;
	case CU_C_KERNEL_GET_FUNCTION:
		if (c->has_out) {
			uint64_t *name = hmap__get(&p->names, c->args[1]);

			cuda__annot_p(c->end, n, "function", c->out);
			if (name) {
				char *d = strdup((const char *)(uintptr_t)*name);
				uint64_t old;

				if (d && hmap__del(&p->names, c->out, &old))
					free((void *)(uintptr_t)old);
				if (d && hmap__put(&p->names, c->out, (uintptr_t)d))
					free(d);
			}
		}
		break;
	case CU_C_ALLOC:
		if (c->has_out) {
			bool host = f->flags & CU_F_HOST;

			cuda__annot_p(c->end, n, "ptr", c->out);
			if (!hmap__put(&p->allocs, c->out, c->bytes << 1 | host))
				model__mem(m, t, host ? CTR_HOST_PINNED : CTR_GPU_MEM, c->end_ts,
					   (int64_t)c->bytes);
		}
		break;
	case CU_C_FREE: {
		uint64_t v;

		/* Memory allocated before cgbpf attached has no known size. */
		if (hmap__del(&p->allocs, c->args[0], &v)) {
			c->bytes = v >> 1;
			cuda__annot_u(c->end, n, "bytes", c->bytes);
			model__mem(m, t, v & 1 ? CTR_HOST_PINNED : CTR_GPU_MEM, c->end_ts,
				   -(int64_t)c->bytes);
		}
		break;
	}
	case CU_C_STREAM_CREATE:
		if (c->has_out)
			cuda__annot_s(c->end, n, "stream",
				model__stream_name(p, c->out, false, c->scratch[2],
					     sizeof(c->scratch[2])));
		break;
	}
}

const struct lib_ops cuda_ops = {
	.name = "cuda",
	.func_name = func_name,
	.has_string = has_string,
	.enter = enter,
	.exit = exit_,
};

/* monitor: bytes of copies, memsets and allocations; device memory held;
 * synchronizations may trigger a dump. */
static void agg_cfg(uint16_t func, struct agg_cfg *c)
{
	const struct func_desc *f = &cuda_funcs[func];

	switch (f->cls) {
	case CU_C_MEMCPY:
		c->bytes_arg = 3;
		break;
	case CU_C_MEMSET:
		c->bytes_arg = 3;
		c->mult = f->flags & 0xff;
		break;
	case CU_C_ALLOC:
		c->bytes_arg = 2;
		break;
	}
	c->flags = AGG_F_ERRORS | (f->flags & CU_F_SYNC ? AGG_F_SLOW : 0);
	/* cuMemAlloc* write the pointer through a0, the frees take it in a0. */
	if (f->flags & CU_F_DEVICE) {
		c->flags |= f->cls == CU_C_ALLOC ? AGG_F_ALLOC : f->cls == CU_C_FREE ? AGG_F_FREE : 0;
		c->ptr_arg = 1;
	}
	c->ok_ret2 = 600;	/* CUDA_ERROR_NOT_READY: a poll's "not yet" */
}

static const char *const watch[] = { "libcuda.so", NULL };

/* cuMemset*: bytes counted as a memset in the summary. */
static bool is_memset(uint16_t func)
{
	return func < CU_FN__COUNT && cuda_funcs[func].cls == CU_C_MEMSET;
}

const struct api_lib cuda_lib = {
	.id = LIB_CUDA,
	.name = "cuda",
	.title = "CUDA driver",
	.watch = watch,
	.nfuncs = CU_FN__COUNT,
	.symbol = func_name,
	.cookie = cuda__cookie,
	.ops = &cuda_ops,
	.agg_cfg = agg_cfg,
	.is_memset = is_memset,
	.probed_last = GPU_DRIVER_PROBED_LAST,
};
