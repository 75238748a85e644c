// SPDX-License-Identifier: MIT
/*
 * GPU activity: the per-process tables (user/sources/gpu/gpuproc.h) that
 * the decoder (gpu.c), the trace writer (gpupf.c), the summary
 * (gpusum.c) and the estimate (gpuest.c) share: processes by pid, their
 * devices, streams and kernel names, and what is freed when a process
 * ends or is forgotten.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "sources/gpu/gpuproc.h"

#define STREAMS_MAX 4096		/* streams per process; more share one track */

struct gpu_proc *gpuproc__find(const struct gpu *g, uint32_t pid)
{
	uint64_t *v = hmap__get(&g->procs, pid);

	return v ? (void *)(uintptr_t)*v : NULL;
}

struct gpu_proc *gpuproc__get(struct gpu *g, uint32_t pid, bool announce)
{
	struct gpu_proc *p = gpuproc__find(g, pid);

	if (p)
		return p;
	p = calloc(1, sizeof(*p));
	if (!p || hmap__put(&g->procs, pid, (uintptr_t)p)) {
		free(p);
		return NULL;
	}
	p->pid = pid;
	p->corr_seed = hash__u64(pid ^ (uint64_t)(uintptr_t)g);
	/* Its tracks hang under its process track: make it known. */
	if (announce)
		model__proc(g->m, pid);
	return p;
}

struct gpu_dev *gpuproc__dev(struct gpu_proc *p, uint8_t index)
{
	struct gpu_dev *d = gpuproc__dev_at(p, index);

	if (d)
		return d;
	/* Most processes never report a device: no table for them. */
	if (!p->devs && !(p->devs = calloc(GPU_DEVS, sizeof(*p->devs))))
		return NULL;
	d = calloc(1, sizeof(*d));
	if (!d)
		return NULL;
	d->index = index;
	p->devs[index] = d;
	return d;
}

static uint64_t stream_hash(uint8_t device, uint32_t context, uint32_t id)
{
	return hash__u64(((uint64_t)device << 32 | context) ^ hash__u64(id));
}

struct gstream *gpuproc__stream(struct gpu_proc *p, uint8_t device, uint32_t context, uint32_t id)
{
	uint64_t h = stream_hash(device, context, id);
	struct gstream *s;
	uint64_t *v;

	for (; (v = hmap__get(&p->streams, h)); h++) {
		s = (void *)(uintptr_t)*v;
		if (s->device == device && s->context == context && s->id == id)
			return s;
	}
	/* The process chooses its stream ids: past the bound they share a
	 * track ("other streams"), so memory stays bounded. */
	if (p->streams.count >= STREAMS_MAX && !(context == UINT32_MAX && id == UINT32_MAX))
		return gpuproc__stream(p, device, UINT32_MAX, UINT32_MAX);
	s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->device = device;
	s->context = context;
	s->id = id;
	if (hmap__put(&p->streams, h, (uintptr_t)s)) {
		free(s);
		return NULL;
	}
	return s;
}

const char *gpuproc__kernel_name(const struct gpu_proc *p, const struct gpu_op *op, char *buf,
				 size_t len)
{
	uint64_t *v;

	if (!op->k.name_id)
		return "(unnamed kernel)";
	v = hmap__get(&p->names, op->k.name_id);
	if (v)
		return (const char *)(uintptr_t)*v;
	snprintf(buf, len, "kernel #%" PRIu32 " (name not received)", op->k.name_id);
	return buf;
}

static void free_names(struct hmap *h)
{
	uint64_t v;

	for (size_t it = 0; hmap__next(h, &it, NULL, &v);)
		free((void *)(uintptr_t)v);
	hmap__free(h);
}

void gpuproc__free_bulk(struct gpu_proc *p)
{
	uint64_t v;

	free_names(&p->names);
	p->name_bytes = 0;
	free_names(&p->streams);
	for (size_t it = 0; hmap__next(&p->threads, &it, NULL, &v);) {
		struct gpu_thread *t = (void *)(uintptr_t)v;

		free(t->calls);
		free(t);
	}
	hmap__free(&p->threads);
	free(p->corr_tab);
	p->corr_tab = NULL;
	p->corr_slots = p->corr_count = 0;
	free(p->corr_fifo);
	p->corr_fifo = NULL;
	p->corr_head = p->corr_n = p->corr_cap = 0;
	free(p->run);
	p->run = NULL;
	p->run_head = p->run_n = p->run_cap = 0;
	free(p->heap);
	p->heap = NULL;
	p->nheap = p->heap_n = p->capheap = 0;
	memset(p->sync_lanes, 0, sizeof(p->sync_lanes));
}

void gpuproc__free(struct gpu_proc *p)
{
	gpuproc__free_bulk(p);
	for (int i = 0; i < GPU_DEVS; i++)
		free(gpuproc__dev_at(p, i));
	free(p->devs);
	for (int i = 0; i < GPU_ST__COUNT; i++)
		free(p->status_text[i]);
	free(p);
}
