/* SPDX-License-Identifier: MIT */
/*
 * nvtx_ranges: exercises every NVTX v3 call libcgbpf-inject.so implements,
 * through the toolkit's real header-only NVTX (nvtx3/nvToolsExt.h), so
 * that a test can compare the probes fired with what the program did.
 *
 * Usage: nvtx_ranges [--wait] | --stress THREADS N
 *   --wait: after a first mark ("before-attach", which loads the injection
 *   library), print {"ready": pid} and wait for a line on stdin, so that a
 *   tracer can attach to the running process first.
 *
 *   --stress: THREADS threads each do N x (nvtxRangeStartA("s") ..
 *   nvtxRangePushA("p"), nvtxRangePop, nvtxRangeEnd) at once, then print
 *   {"stress_tids": [...], "n": N, "ids_unique": true|false}: every id
 *   any thread got is distinct and non-zero.
 *
 * Run with NVTX_INJECTION64_PATH=.../libcgbpf-inject.so. The calls, in order
 * (main thread unless said):
 *   nvtxNameOsThreadA(main tid, "nvtx-main"); nvtxNameCategoryA(7, "io");
 *   push "outer"; push "inner"; mark "mark-a"; pop; pop;
 *   push W "wide-é中"; pop;
 *   pushEx {"attr-push", ARGB 0xff00ff00, category 7, u64 payload 42}; pop;
 *   markEx {"attr-mark", double payload 2.5}; markEx {W "wide-mark",
 *   int32 payload -3}; markEx {"float-mark", float 1.5, ARGB 0x80123456};
 *   domain "cgbpf-test": register "registered-msg";
 *   domain pushEx {registered, ARGB 0xffff0000, category 3}; domain pop;
 *   nvtxDomainNameCategoryA(domain, 3, "dom-cat");
 *   domain markEx {"dom-mark", i64 payload -5};
 *   domain startEx {"dom-range", u32 payload 9} .. domain end;
 *   startA "cross" on main, ended by thread "nvtx-worker", which also
 *   names itself (nvtxNameOsThreadA) and pushes/pops "worker-range";
 *   startW "wide-range" .. end; startEx {"ex-range", ARGB 0xff0000ff,
 *   category 7} .. end; nvtxNameCategoryW(8, "wide-cat");
 *   domain W "dom-wide-é": register W "reg-wide", nvtxDomainNameCategoryW
 *   (1, "cat-wide"), destroy; nvtxDomainDestroy(domain).
 * Prints one JSON line at the end with what the tracer cannot know:
 *   {"pid", "main_tid", "worker_tid", "domain", "registered", "cross_id",
 *    "dom_range_id", "wide_range_id", "ex_range_id", "domain2", "registered2",
 *    "push_levels", "pop_levels"}
 */
#define _GNU_SOURCE
#include <nvtx3/nvToolsExt.h>

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static nvtxRangeId_t cross_id;
static pid_t worker_tid;

static void *worker(void *arg)
{
	worker_tid = gettid();
	nvtxNameOsThreadA((uint32_t)worker_tid, "nvtx-worker");
	nvtxRangePushA("worker-range");
	nvtxRangeEnd(cross_id);
	nvtxRangePop();
	return NULL;
}

static long stress_n;
static nvtxRangeId_t *stress_ids;
static pthread_barrier_t stress_go;

struct stress_arg {
	long index;
	pid_t tid;
};

static void *stress_thread(void *p)
{
	struct stress_arg *a = p;
	long i;

	a->tid = gettid();
	pthread_barrier_wait(&stress_go);
	for (i = 0; i < stress_n; i++) {
		nvtxRangeId_t id = nvtxRangeStartA("s");

		stress_ids[a->index * stress_n + i] = id;
		nvtxRangePushA("p");
		nvtxRangePop();
		nvtxRangeEnd(id);
	}
	return NULL;
}

static int cmp_id(const void *a, const void *b)
{
	nvtxRangeId_t x = *(const nvtxRangeId_t *)a, y = *(const nvtxRangeId_t *)b;

	return x < y ? -1 : x > y;
}

static int stress(int threads, long n)
{
	struct stress_arg args[64];
	pthread_t th[64];
	long i, total = threads * n;
	int unique = 1;

	if (threads < 1 || threads > 64 || n < 1)
		return 2;
	stress_n = n;
	stress_ids = calloc((size_t)total, sizeof(*stress_ids));
	if (!stress_ids || pthread_barrier_init(&stress_go, NULL, (unsigned)threads))
		return 1;
	for (i = 0; i < threads; i++) {
		args[i].index = i;
		if (pthread_create(&th[i], NULL, stress_thread, &args[i]))
			return 1;
	}
	for (i = 0; i < threads; i++)
		pthread_join(th[i], NULL);
	qsort(stress_ids, (size_t)total, sizeof(*stress_ids), cmp_id);
	for (i = 0; i < total; i++)
		if (!stress_ids[i] || (i && stress_ids[i] == stress_ids[i - 1]))
			unique = 0;
	printf("{\"stress_tids\": [");
	for (i = 0; i < threads; i++)
		printf("%s%d", i ? ", " : "", args[i].tid);
	printf("], \"n\": %ld, \"ids_unique\": %s}\n", n, unique ? "true" : "false");
	return 0;
}

static nvtxEventAttributes_t attrs(void)
{
	nvtxEventAttributes_t a;

	memset(&a, 0, sizeof(a));
	a.version = NVTX_VERSION;
	a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
	return a;
}

int main(int argc, char **argv)
{
	int levels[6], pops[6], np = 0, npop = 0;
	nvtxEventAttributes_t a;
	nvtxDomainHandle_t dom;
	nvtxStringHandle_t reg;
	nvtxRangeId_t dom_id, wide_id, ex_id;
	nvtxDomainHandle_t dom2;
	nvtxStringHandle_t reg2;
	pthread_t t;

	if (argc > 3 && !strcmp(argv[1], "--stress"))
		return stress(atoi(argv[2]), atol(argv[3]));
	if (argc > 1 && !strcmp(argv[1], "--wait")) {
		char line[16];

		nvtxMarkA("before-attach");
		printf("{\"ready\": %d}\n", getpid());
		fflush(stdout);
		if (!fgets(line, sizeof(line), stdin))
			return 1;
	}

	nvtxNameOsThreadA((uint32_t)gettid(), "nvtx-main");
	nvtxNameCategoryA(7, "io");

	levels[np++] = nvtxRangePushA("outer");
	levels[np++] = nvtxRangePushA("inner");
	nvtxMarkA("mark-a");
	pops[npop++] = nvtxRangePop();
	pops[npop++] = nvtxRangePop();

	levels[np++] = nvtxRangePushW(L"wide-\u00e9\u4e2d");
	pops[npop++] = nvtxRangePop();

	a = attrs();
	a.colorType = NVTX_COLOR_ARGB;
	a.color = 0xff00ff00;
	a.category = 7;
	a.payloadType = NVTX_PAYLOAD_TYPE_UNSIGNED_INT64;
	a.payload.ullValue = 42;
	a.messageType = NVTX_MESSAGE_TYPE_ASCII;
	a.message.ascii = "attr-push";
	levels[np++] = nvtxRangePushEx(&a);
	pops[npop++] = nvtxRangePop();

	a = attrs();
	a.payloadType = NVTX_PAYLOAD_TYPE_DOUBLE;
	a.payload.dValue = 2.5;
	a.messageType = NVTX_MESSAGE_TYPE_ASCII;
	a.message.ascii = "attr-mark";
	nvtxMarkEx(&a);

	a = attrs();
	a.payloadType = NVTX_PAYLOAD_TYPE_INT32;
	a.payload.iValue = -3;
	a.messageType = NVTX_MESSAGE_TYPE_UNICODE;
	a.message.unicode = L"wide-mark";
	nvtxMarkEx(&a);

	a = attrs();
	a.colorType = NVTX_COLOR_ARGB;
	a.color = 0x80123456;
	a.payloadType = NVTX_PAYLOAD_TYPE_FLOAT;
	a.payload.fValue = 1.5f;
	a.messageType = NVTX_MESSAGE_TYPE_ASCII;
	a.message.ascii = "float-mark";
	nvtxMarkEx(&a);

	dom = nvtxDomainCreateA("cgbpf-test");
	reg = nvtxDomainRegisterStringA(dom, "registered-msg");
	a = attrs();
	a.colorType = NVTX_COLOR_ARGB;
	a.color = 0xffff0000;
	a.category = 3;
	a.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
	a.message.registered = reg;
	levels[np++] = nvtxDomainRangePushEx(dom, &a);
	pops[npop++] = nvtxDomainRangePop(dom);
	nvtxDomainNameCategoryA(dom, 3, "dom-cat");

	a = attrs();
	a.payloadType = NVTX_PAYLOAD_TYPE_INT64;
	a.payload.llValue = -5;
	a.messageType = NVTX_MESSAGE_TYPE_ASCII;
	a.message.ascii = "dom-mark";
	nvtxDomainMarkEx(dom, &a);

	a = attrs();
	a.payloadType = NVTX_PAYLOAD_TYPE_UNSIGNED_INT32;
	a.payload.uiValue = 9;
	a.messageType = NVTX_MESSAGE_TYPE_ASCII;
	a.message.ascii = "dom-range";
	dom_id = nvtxDomainRangeStartEx(dom, &a);
	nvtxDomainRangeEnd(dom, dom_id);

	cross_id = nvtxRangeStartA("cross");
	if (pthread_create(&t, NULL, worker, NULL) || pthread_join(t, NULL))
		return 1;

	wide_id = nvtxRangeStartW(L"wide-range");
	nvtxRangeEnd(wide_id);

	a = attrs();
	a.colorType = NVTX_COLOR_ARGB;
	a.color = 0xff0000ff;
	a.category = 7;
	a.messageType = NVTX_MESSAGE_TYPE_ASCII;
	a.message.ascii = "ex-range";
	ex_id = nvtxRangeStartEx(&a);
	nvtxRangeEnd(ex_id);
	nvtxNameCategoryW(8, L"wide-cat");

	dom2 = nvtxDomainCreateW(L"dom-wide-\u00e9");
	reg2 = nvtxDomainRegisterStringW(dom2, L"reg-wide");
	nvtxDomainNameCategoryW(dom2, 1, L"cat-wide");

	printf("{\"pid\": %d, \"main_tid\": %d, \"worker_tid\": %d, \"domain\": %llu, "
	       "\"registered\": %llu, \"cross_id\": %llu, \"dom_range_id\": %llu, "
	       "\"wide_range_id\": %llu, \"ex_range_id\": %llu, \"domain2\": %llu, "
	       "\"registered2\": %llu, \"push_levels\": [%d, %d, %d, %d, %d], "
	       "\"pop_levels\": [%d, %d, %d, %d, %d]}\n",
	       getpid(), gettid(), worker_tid, (unsigned long long)(uintptr_t)dom,
	       (unsigned long long)(uintptr_t)reg, (unsigned long long)cross_id,
	       (unsigned long long)dom_id, (unsigned long long)wide_id, (unsigned long long)ex_id,
	       (unsigned long long)(uintptr_t)dom2, (unsigned long long)(uintptr_t)reg2,
	       levels[0], levels[1], levels[2], levels[3], levels[4],
	       pops[0], pops[1], pops[2], pops[3], pops[4]);
	nvtxDomainDestroy(dom2);
	nvtxDomainDestroy(dom);
	return 0;
}
