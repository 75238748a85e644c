// SPDX-License-Identifier: MIT
/*
 * GPU activity in user space, alone (no BPF, no CUPTI): N kernel records
 * of a launch loop through gpu__record into the Perfetto writer, in
 * batches as the injection library packs them (GPU_API + GPU_KERNEL, up
 * to GPU_BATCH_MAX bytes), with the launch calls built through the model
 * as the uprobes' records would. Prints the trace bytes each kernel adds
 * (its GPU slice with args and the flow's end, and the flow id its launch
 * slice gains) and the consumer's CPU per kernel record.
 * Usage: gpubytes [N [TRACE]]   (docs/performance.md has the numbers);
 * TRACE: also write the second capture there, to decode its packets.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include "sources/cuda/cuda.h"
#include "sources/gpu/gpu.h"
#include "gpu_rec.h"
#include "core/model.h"
#include "out/perfetto.h"
#include "out/pfsink.h"
#include "sources/sources.h"

#define PID 4300001
#define NAMES 8
#define STREAMS 4

static const char *const names[NAMES] = {
	"_Z6vecAddPfS_S_i", "_ZN2at6native29vectorized_elementwise_kernelILi4EEEvi",
	"_Z10layer_normPKfPfii", "_Z4gemmILi128ELi64EEvPKfS1_Pfiii", "_Z7softmaxPfi",
	"ncclDevKernel_AllReduce_Sum_f32_RING_LL", "_Z4reluPfi", "_Z9embeddingPKiPKfPfi",
};

static uint64_t cpu_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
	return (uint64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* The capture's times start now, as the uprobes' would: the writer's
 * sequences start at its clock snapshot, and events before it would be
 * written with absolute timestamps, as no real capture's are. */
static uint64_t boot_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_BOOTTIME, &t);
	return (uint64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static void feed(struct gpu *g, const uint8_t *b, size_t n, uint64_t ts)
{
	static uint8_t rec[sizeof(struct rec_hdr) + GPU_BATCH_MAX];
	struct rec_hdr h = { .type = REC_GPU_BATCH, .size = sizeof(h) + n, .pid = PID, .tid = PID,
			     .ts = ts };

	memcpy(rec, &h, sizeof(h));
	memcpy(rec + sizeof(h), b, n);
	gpu__record(g, rec, sizeof(h) + n);
}

static void put(uint8_t *b, size_t *n, const void *e, size_t size)
{
	memcpy(b + *n, e, size);
	*n += size;
}

/* One capture of n launches; with_gpu: their kernels' records too.
 * Returns the trace's bytes; *cpu: the CPU gpu__record took. */
static uint64_t capture(uint64_t n, bool with_gpu, uint64_t *cpu, const char *path)
{
	struct pftrace *pt = path ? pftrace__create(path)
				  : pftrace__fdopen(memfd_create("gpubytes", MFD_CLOEXEC));
	struct model m;
	struct gpu *g;
	struct sink sk;
	uint8_t b[GPU_BATCH_MAX];
	size_t bn = 0;
	uint64_t now = boot_ns(), gpu_t = now, bytes, t0;
	uint64_t *call_ts = malloc(n * sizeof(*call_ts));

	if (!pt || !call_ts) {
		fprintf(stderr, "gpubytes: out of memory\n");
		exit(1);
	}
	model__init(&m);
	sk = pfsink__sink(pt);
	model__add_sink(&m, &sk);
	g = gpu__new(&m, pt);
	if (!g) {
		fprintf(stderr, "gpubytes: out of memory\n");
		exit(1);
	}
	sk = gpu__sink(g);
	model__add_sink(&m, &sk);
	pftrace__clock_snapshot(pt);
	*cpu = 0;
	{
		uint8_t st[64] = { 0 };
		struct gpu_status s = { .e = { GPU_STATUS, 24 }, .code = GPU_ST_COLLECTING };

		memcpy(st, &s, sizeof(s));
		if (with_gpu) {
			put(b, &bn, st, 24);
			for (int i = 0; i < NAMES; i++) {
				uint8_t e[128] = { 0 };
				struct gpu_name nm = { .e = { GPU_NAME, 0 }, .id = i + 1 };
				size_t len = strlen(names[i]) + 1;

				nm.e.size = (sizeof(nm) + len + 7) & ~7u;
				memcpy(e, &nm, sizeof(nm));
				memcpy(e + sizeof(nm), names[i], len);
				put(b, &bn, e, nm.e.size);
			}
			feed(g, b, bn, now);
			bn = 0;
		}
	}
	for (uint64_t i = 0; i < n; i++) {
		struct rec_call_enter e = { .hdr = { .type = REC_CALL_ENTER, .size = sizeof(e),
						     .pid = PID, .tid = PID, .ts = now } };
		struct rec_call_exit x = { .hdr = { .type = REC_CALL_EXIT, .size = sizeof(x),
						    .pid = PID, .tid = PID } };

		e.lib = x.lib = LIB_CUDA;
		e.func = x.func = CU_FN_cuLaunchKernel;
		e.args[0] = 0xf00 + i % NAMES;
		e.args[1] = 64 + i % 7;
		e.args[2] = e.args[3] = 1;
		e.args[4] = 256;
		e.args[5] = e.args[6] = 1;
		e.args[8] = 0x7000 + i % STREAMS;
		call_ts[i] = now;
		model__call_enter(&m, &e);
		now += 3000;
		x.hdr.ts = now;
		model__call_exit(&m, &x);
		now += 2000;
		if (!with_gpu)
			goto flush;
		{
			struct gpu_api a = { .e = { GPU_API, sizeof(a) }, .corr = i + 1,
					     .start = call_ts[i] + 100, .end = call_ts[i] + 2900,
					     .tid = PID, .cbid = 307 };
			struct gpu_kernel k = { .e = { GPU_KERNEL, sizeof(k) }, .corr = i + 1,
						.name_id = 1 + i % NAMES, .stream = 7 + i % STREAMS,
						.context = 1, .grid = { 64 + i % 7, 1, 1 },
						.block = { 256, 1, 1 }, .regs = 32,
						.smem_static = 0, .smem_dynamic = (i % 3) * 1024 };

			if (gpu_t < call_ts[i] + 8000)
				gpu_t = call_ts[i] + 8000;
			k.start = gpu_t;
			k.end = gpu_t + 2000 + i % 5 * 1000;
			gpu_t = k.end + 500;
			if (bn + sizeof(a) + sizeof(k) > GPU_BATCH_MAX) {
				t0 = cpu_ns();
				feed(g, b, bn, now);
				*cpu += cpu_ns() - t0;
				bn = 0;
			}
			put(b, &bn, &a, sizeof(a));
			put(b, &bn, &k, sizeof(k));
		}
flush:
		if (i % 4096 == 4095)
			pftrace__flush(pt);
	}
	if (bn) {
		t0 = cpu_ns();
		feed(g, b, bn, now);
		*cpu += cpu_ns() - t0;
	}
	t0 = cpu_ns();
	gpu__finish(g, now);
	*cpu += cpu_ns() - t0;
	pftrace__flush(pt);
	bytes = pftrace__bytes(pt);
	gpu__free(g);
	pftrace__close(pt);
	model__free(&m);
	free(call_ts);
	return bytes;
}

int main(int argc, char **argv)
{
	sources__init();
	uint64_t n = argc > 1 ? strtoull(argv[1], NULL, 10) : 200000, cpu0, cpu1;
	uint64_t calls, both;

	if (!n || argc > 3) {
		fprintf(stderr, "usage: gpubytes [N > 0 [TRACE]]\n");
		return 2;
	}
	calls = capture(n, false, &cpu0, NULL);
	both = capture(n, true, &cpu1, argc > 2 ? argv[2] : NULL);
	printf("launches: %llu\n", (unsigned long long)n);
	printf("trace bytes, launches only: %llu (%.1f per launch)\n", (unsigned long long)calls,
	       (double)calls / n);
	printf("trace bytes, launches and their kernels: %llu\n", (unsigned long long)both);
	printf("bytes per kernel (GPU slice with args, flow end, flow id on its launch): %.1f\n",
	       (double)(both - calls) / n);
	printf("consumer CPU per kernel record (gpu__record, ordering, writing): %.0f ns\n",
	       (double)cpu1 / n);
	return 0;
}
