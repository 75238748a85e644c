// SPDX-License-Identifier: MIT
/*
 * nccl_plugin: what NCCL's profiler plugin in libcgbpf-inject.so costs
 * per collective, called as NCCL 2.28 calls it: on the calling thread
 * the GroupApi, CollApi, KernelLaunch and Group events NCCL starts with
 * any mask bit set (not tracked), and a Coll task started before the
 * (imaginary) kernel launch and stopped after it; on a second thread, standing for NCCL's proxy thread, one
 * kernel-channel event per channel (start, KernelChStop state, stop).
 *
 * Usage: nccl_plugin LIB N CHANNELS [WAIT_S [PACE_NS]] | nccl_plugin --trap N
 *   Loads LIB, calls init, prints "ready pid=P" and waits until the mask
 *   NCCL would read is non-zero (a cgbpf attached: record -p P) or 3 s
 *   passed (WAIT_S, default 3; nobody: then NCCL would call nothing, and this measures the
 *   callbacks called anyway, which return at once). Then N collectives;
 *   PACE_NS spaces the collectives (0: back to back);
 *   prints ns_per_call= (calling thread: start + stop of the task),
 *   mask=, and proxy_ns_per_channel=.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "nccl_prof_abi.h"

static const struct npa_profiler_v5 *P;
static void *ctx;
static int mask;
static int channels;
static void *_Atomic pending[1 << 12];
static atomic_ulong produced, consumed;
static atomic_int done;
static double proxy_ns;

static uint64_t now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static uint64_t gpu_now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_REALTIME, &t);
	return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* The proxy thread: channel events of each task the caller handed over. */
static void *proxy(void *arg)
{
	uint64_t t0, spent = 0, n = 0;

	(void)arg;
	for (;;) {
		unsigned long c = atomic_load(&consumed);

		if (c == atomic_load(&produced)) {
			if (atomic_load(&done))
				break;
			sched_yield();	/* a 2-CPU machine: leave the caller its CPU */
			continue;
		}
		void *task = atomic_load(&pending[c % (1 << 12)]);

		t0 = now();
		for (int ch = 0; ch < channels && task; ch++) {
			struct npa_descr_v5 d = { .type = NPA_KERNEL_CH, .parent = task };
			union npa_state_args_v5 a = { 0 };
			void *h = NULL;
			uint64_t g = gpu_now();

			d.kernel_ch.channel = (uint8_t)ch;
			d.kernel_ch.ptimer = g - 20000;
			P->start_event(ctx, &h, &d);
			if (h) {
				a.kernel_ch.ptimer = g - 1000;
				P->record_event_state(h, NPA_KERNEL_CH_STOP, &a);
				P->stop_event(h);
			}
		}
		spent += now() - t0;
		n += (uint64_t)channels;
		atomic_store(&consumed, c + 1);
	}
	proxy_ns = n ? (double)spent / (double)n : 0;
	return NULL;
}

/* The baseline: a function bench/nccl_plugin.sh puts an empty uprobe on
 * (the trap every traced NCCL host call pays). */
__attribute__((noinline)) void nccl_plugin_site(long i)
{
	__asm__ volatile("" : : "r"(i) : "memory");
}

static int trap(long n)
{
	uint64_t t0 = now();

	for (long i = 0; i < n; i++)
		nccl_plugin_site(i);
	printf("ns_per_call=%.1f\n", (double)(now() - t0) / (double)n);
	return 0;
}

int main(int argc, char **argv)
{
	void *lib;
	long n;
	uint64_t t0, t1, spent = 0, wait_ns, pace, next;
	pthread_t th;

	if (argc == 3 && !strcmp(argv[1], "--trap"))
		return trap(atol(argv[2]));
	if (argc < 4 || argc > 6) {
		fprintf(stderr, "usage: nccl_plugin LIB N CHANNELS [WAIT_S [PACE_NS]]\n");
		return 2;
	}
	n = atol(argv[2]);
	channels = atoi(argv[3]);
	lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
	if (!lib || !(P = dlsym(lib, "ncclProfiler_v5"))) {
		fprintf(stderr, "nccl_plugin: %s\n", dlerror());
		return 1;
	}
	if (P->init(&ctx, 0x1234567890abcdefull, &mask, "bench", 1, 2, 0, NULL)) {
		fprintf(stderr, "nccl_plugin: init failed\n");
		return 1;
	}
	printf("ready pid=%d\n", getpid());
	fflush(stdout);
	t0 = now();
	wait_ns = (argc >= 5 ? (uint64_t)atol(argv[4]) : 3) * 1000000000ull;
	pace = argc == 6 ? (uint64_t)atol(argv[5]) : 0;
	while (!__atomic_load_n(&mask, __ATOMIC_RELAXED) && now() - t0 < wait_ns)
		usleep(1000);
	pthread_create(&th, NULL, proxy, NULL);
	next = now();
	for (long i = 0; i < n; i++) {
		struct npa_descr_v5 d = { .type = NPA_COLL, .rank = 0 };
		void *h = NULL;

		/* PACE_NS: one collective every PACE_NS (a job's rate, not a
		 * burst the library's bounded queue would drop from). */
		if (pace) {
			next += pace;
			while (now() < next)
				;
		}
		/* Keep the proxy's queue from overflowing its ring. */
		while (atomic_load(&produced) - atomic_load(&consumed) >= (1 << 12) - 1)
			;
		d.coll.seq = (uint64_t)i;
		d.coll.func = "AllReduce";
		d.coll.count = 1 << 20;
		d.coll.root = -1;
		d.coll.datatype = "ncclFloat32";
		d.coll.nchannels = (uint8_t)channels;
		d.coll.nwarps = 16;
		d.coll.algo = "RING";
		d.coll.proto = "SIMPLE";
		t1 = now();
		/* NCCL 2.28 also starts these whenever any mask bit is set (the
		 * plugin returns NULL for them; NCCL then stops nothing). */
		for (int k = 0; k < 4; k++) {
			static const uint64_t other[4] = { NPA_GROUP_API, NPA_COLL_API,
							   NPA_KERNEL_LAUNCH, NPA_GROUP };
			struct npa_descr_v5 o = { .type = other[k] };
			void *oh = NULL;

			P->start_event(ctx, &oh, &o);
			if (oh)
				P->stop_event(oh);
		}
		P->start_event(ctx, &h, &d);
		if (h)
			P->stop_event(h);
		spent += now() - t1;
		atomic_store(&pending[atomic_load(&produced) % (1 << 12)], h);
		atomic_fetch_add(&produced, 1);
	}
	atomic_store(&done, 1);
	pthread_join(th, NULL);
	/* Give the watcher two polls to hand the last entries over. */
	usleep(100000);
	printf("ns_per_call=%.1f mask=%d proxy_ns_per_channel=%.1f\n", (double)spent / (double)n,
	       mask, proxy_ns);
	P->finalize(ctx);
	return 0;
}
