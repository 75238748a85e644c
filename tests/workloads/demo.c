/* SPDX-License-Identifier: MIT */
/*
 * demo: a small "training run" for `make demo`, about 2 s long with
 * realistic kernel durations (the fake's "__ns<digits>" name suffix).
 *
 * Usage: demo [--steps N] [--ranks R]   (default 50 steps, ~41 ms each; 2 ranks)
 *
 * Built with the CUDA toolkit (CGBPF_DEMO_DIST: nccl.h and the NVTX v3
 * headers), it is a data-parallel job: R processes (ranks) forked after
 * ncclGetUniqueId, each with an NCCL communicator (the fake libnccl.so.2)
 * whose ncclAllReduce of a 64 MiB gradient bucket replaces the all-reduce
 * kernel, and NVTX ranges around each step and its phases ("step N" >
 * "forward", "backward", "optimizer"; a "checkpoint" mark every 10 steps).
 * Rank 1 starts each step 2 ms late, so the all-reduce shows it waiting.
 *
 * Four streams: s_data (input copies), s_compute (GEMMs, optimizer),
 * s_attn (attention, layer norm), s_comm (a NCCL-like all-reduce), chained
 * by events the way a data-parallel step is. Each step: batch HtoD copy,
 * a cuMemAllocAsync'ed activation buffer, 3 GEMMs (8 ms), 2 attention
 * (3 ms) and 2 layer-norm (0.4 ms) kernels, an all-reduce (9 ms), an
 * optimizer step (1.5 ms), cuMemFreeAsync, and a 4-byte loss read back
 * with the stream synchronized (loss.item()). 9 launches per step.
 *
 * Sizes are what a model would ask for (weights and gradients 350 MB
 * each, optimizer state 700 MB, activations 192 MiB per step); the fake
 * backs device memory lazily, so only the bytes touched cost memory.
 *
 * Manifest: the common fields plus "steps".
 */
#define _GNU_SOURCE
#include <cuda.h>
#include <stdio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#ifdef CGBPF_DEMO_DIST
#include <nccl.h>
#include <nvtx3/nvToolsExt.h>
#define RANGE_PUSH(name) nvtxRangePushA(name)
#define RANGE_POP() nvtxRangePop()
#else
#define RANGE_PUSH(name) ((void)0)
#define RANGE_POP() ((void)0)
#endif

#include "manifest.h"

#define K_GEMM "_ZN7cutlass15gemm__ns8000000ILi128ELi64EEEvPKfS2_Pfiii"
#define K_ATTN "_Z25flash_attn_fwd__ns3000000PKfS0_Pfi"
#define K_LN "_Z23layernorm_fwd__ns400000PfPKfi"
#define K_ADAM "_Z20adam_step__ns1500000PfS_S_fi"
#define K_ALLREDUCE "ncclKernel_AllReduce_RING_LL_Sum_float__ns9000000"

#define MB 1000000ul
enum {
	SZ_WEIGHTS = 350 * MB,
	SZ_GRADS = 350 * MB,
	SZ_ADAM = 700 * MB,
	SZ_ACT = 192ul << 20,
	SZ_BATCH = 4ul << 20,
	SZ_INIT = 1ul << 20,	/* the part of the weights actually initialized */
};

static const unsigned char module_image[] = "\x7f" "ELF fake cubin for cgbpf demo";

static void launch(CUfunction f, const char *name, unsigned int gx, unsigned int gy,
		   unsigned int bx, unsigned int smem, CUstream s, void **args)
{
	CHECK(cuLaunchKernel, f, gx, gy, 1, bx, 1, 1, smem, s, args, NULL);
	wl_kernel(name, 1);
}

static void write_extra(FILE *f, void *arg)
{
	fprintf(f, ",\n  \"steps\": %lu", *(unsigned long *)arg);
}

#ifdef CGBPF_DEMO_DIST
#define BUCKET_FLOATS (16ul << 20)	/* a 64 MiB gradient bucket */

static void nccl_check(ncclResult_t r, const char *what)
{
	if (r != ncclSuccess)
		wl_die("%s: %s", what, ncclGetErrorString(r));
}

/*
 * Starts ranks 1..n-1 the way torchrun and mp.spawn do: fork and exec, so
 * each rank is a fresh program. The id goes in the environment as hex.
 */
static void start_ranks(unsigned long n, unsigned long steps, ncclUniqueId *id)
{
	char hex[2 * NCCL_UNIQUE_ID_BYTES + 1], arg_rank[16], arg_n[16], arg_steps[24];

	nccl_check(ncclGetUniqueId(id), "ncclGetUniqueId");
	for (size_t i = 0; i < NCCL_UNIQUE_ID_BYTES; i++)
		snprintf(hex + 2 * i, 3, "%02x", (unsigned char)id->internal[i]);
	if (setenv("CGBPF_DEMO_NCCL_ID", hex, 1))
		wl_die("setenv: %s", strerror(errno));
	snprintf(arg_n, sizeof(arg_n), "%lu", n);
	snprintf(arg_steps, sizeof(arg_steps), "%lu", steps);
	for (unsigned long r = 1; r < n; r++) {
		pid_t pid;

		snprintf(arg_rank, sizeof(arg_rank), "%lu", r);
		pid = fork();
		if (pid < 0)
			wl_die("fork");
		if (pid == 0) {
			execl("/proc/self/exe", "demo", "--ranks", arg_n, "--steps", arg_steps,
			      "--rank", arg_rank, (char *)NULL);
			wl_die("exec /proc/self/exe: %s", strerror(errno));
		}
	}
}

/* A rank started by start_ranks: the id its parent made. */
static void rank_id(ncclUniqueId *id)
{
	const char *hex = getenv("CGBPF_DEMO_NCCL_ID");

	if (!hex || strlen(hex) != 2 * NCCL_UNIQUE_ID_BYTES)
		wl_die("--rank: CGBPF_DEMO_NCCL_ID is not set (ranks are started by rank 0)");
	for (size_t i = 0; i < NCCL_UNIQUE_ID_BYTES; i++) {
		unsigned int b;

		if (sscanf(hex + 2 * i, "%2x", &b) != 1)
			wl_die("CGBPF_DEMO_NCCL_ID: not hex");
		id->internal[i] = (char)b;
	}
}
#endif

static void late(int rank)
{
	struct timespec ts = { 0, 2000000 };

	if (rank == 1)
		nanosleep(&ts, NULL);
}

int main(int argc, char **argv)
{
	unsigned long steps = 50, nranks = 2;
	int rank = 0;
	CUfunction gemm, attn, ln, adam, allreduce;
	CUstream s_data, s_compute, s_attn, s_comm;
	CUevent ev_data, ev_fwd, ev_attn, ev_comm;
	CUdeviceptr weights, grads, adam_state, act, batch, loss;
	CUcontext ctx;
	CUmodule mod;
	void *h_batch;
	float h_loss;
	int n = 4096;
	void *args[] = { &weights, &act, &n };

#ifdef CGBPF_DEMO_DIST
	ncclUniqueId id;
	ncclComm_t comm;
#endif

	for (int i = 1; i < argc; i++) {
		unsigned long r;

		if (wl_arg_ul(argc, argv, &i, "--rank", &r)) {
			rank = (int)r;
			continue;
		}
		if (!wl_arg_ul(argc, argv, &i, "--steps", &steps) &&
		    !wl_arg_ul(argc, argv, &i, "--ranks", &nranks))
			wl_die("usage: demo [--steps N] [--ranks R]");
	}
	if (nranks < 1 || nranks > 8)
		wl_die("--ranks: 1 to 8");

	wl_gate();
#ifdef CGBPF_DEMO_DIST
	if (rank == 0) {
		start_ranks(nranks, steps, &id);
	} else {
		/* A real rank spends seconds importing its framework before
		 * its first CUDA call; 50 ms stands in for that. (cgbpf
		 * gives a forked child probes of its own a few ms after the
		 * fork: calls made before them are missed, and reported.) */
		struct timespec startup = { 0, 50000000 };

		rank_id(&id);
		nanosleep(&startup, NULL);
	}
#else
	nranks = 1;
#endif

	ctx = wl_context();
	CHECK(cuModuleLoadData, &mod, module_image);
	CHECK(cuModuleGetFunction, &gemm, mod, K_GEMM);
	CHECK(cuModuleGetFunction, &attn, mod, K_ATTN);
	CHECK(cuModuleGetFunction, &ln, mod, K_LN);
	CHECK(cuModuleGetFunction, &adam, mod, K_ADAM);
	CHECK(cuModuleGetFunction, &allreduce, mod, K_ALLREDUCE);

	CHECK(cuStreamCreate, &s_data, CU_STREAM_NON_BLOCKING);
	CHECK(cuStreamCreateWithPriority, &s_compute, CU_STREAM_NON_BLOCKING, 0);
	CHECK(cuStreamCreate, &s_attn, CU_STREAM_NON_BLOCKING);
	CHECK(cuStreamCreateWithPriority, &s_comm, CU_STREAM_NON_BLOCKING, -5);
	CHECK(cuEventCreate, &ev_data, CU_EVENT_DISABLE_TIMING);
	CHECK(cuEventCreate, &ev_fwd, CU_EVENT_DISABLE_TIMING);
	CHECK(cuEventCreate, &ev_attn, CU_EVENT_DISABLE_TIMING);
	CHECK(cuEventCreate, &ev_comm, CU_EVENT_DISABLE_TIMING);

	CHECK(cuMemAlloc, &weights, SZ_WEIGHTS);
	wl_dev_alloc(SZ_WEIGHTS);
	CHECK(cuMemAlloc, &grads, SZ_GRADS);
	wl_dev_alloc(SZ_GRADS);
	CHECK(cuMemAlloc, &adam_state, SZ_ADAM);
	wl_dev_alloc(SZ_ADAM);
	CHECK(cuMemAlloc, &batch, SZ_BATCH);
	wl_dev_alloc(SZ_BATCH);
	CHECK(cuMemAlloc, &loss, sizeof(h_loss));
	wl_dev_alloc(sizeof(h_loss));
	CHECK(cuMemAllocHost, &h_batch, SZ_BATCH);
	wl_host_alloc(SZ_BATCH);
	memset(h_batch, 1, SZ_BATCH);

	CHECK(cuMemsetD32, weights, 0x3c23d70au, SZ_INIT / 4);
	wl_bytes(WL_MEMSET, SZ_INIT);
	CHECK(cuMemsetD8, loss, 0, sizeof(h_loss));
	wl_bytes(WL_MEMSET, sizeof(h_loss));
#ifdef CGBPF_DEMO_DIST
	nccl_check(ncclCommInitRank(&comm, (int)nranks, id, rank), "ncclCommInitRank");
#endif

	for (unsigned long step = 0; step < steps; step++) {
#ifdef CGBPF_DEMO_DIST
		char step_name[32];

		snprintf(step_name, sizeof(step_name), "step %lu", step);
		nvtxRangePushA(step_name);
		if (step % 10 == 0)
			nvtxMarkA("checkpoint");
#endif
		late(rank);
		RANGE_PUSH("forward");
		CHECK(cuMemcpyHtoDAsync, batch, h_batch, SZ_BATCH, s_data);
		wl_bytes(WL_HTOD, SZ_BATCH);
		CHECK(cuEventRecord, ev_data, s_data);

		CHECK(cuMemAllocAsync, &act, SZ_ACT, s_compute);
		wl_dev_alloc(SZ_ACT);
		CHECK(cuStreamWaitEvent, s_compute, ev_data, 0);
		for (int i = 0; i < 3; i++)
			launch(gemm, K_GEMM, 256, 8, 128, 49152, s_compute, args);
		CHECK(cuEventRecord, ev_fwd, s_compute);

		CHECK(cuStreamWaitEvent, s_attn, ev_fwd, 0);
		for (int i = 0; i < 2; i++) {
			launch(attn, K_ATTN, 128, 16, 256, 65536, s_attn, args);
			launch(ln, K_LN, 1024, 1, 256, 0, s_attn, args);
		}
		CHECK(cuEventRecord, ev_attn, s_attn);

		RANGE_POP();
		RANGE_PUSH("backward");
		CHECK(cuStreamWaitEvent, s_comm, ev_attn, 0);
#ifdef CGBPF_DEMO_DIST
		(void)allreduce;
		nccl_check(ncclAllReduce((void *)grads, (void *)grads, BUCKET_FLOATS, ncclFloat,
					 ncclSum, comm, s_comm), "ncclAllReduce");
#else
		launch(allreduce, K_ALLREDUCE, 32, 1, 512, 0, s_comm, args);
#endif
		CHECK(cuEventRecord, ev_comm, s_comm);
		RANGE_POP();

		RANGE_PUSH("optimizer");
		CHECK(cuStreamWaitEvent, s_compute, ev_comm, 0);
		launch(adam, K_ADAM, 2048, 1, 256, 0, s_compute, args);
		CHECK(cuMemFreeAsync, act, s_compute);
		wl_dev_free(SZ_ACT);

		CHECK(cuMemcpyDtoHAsync, &h_loss, loss, sizeof(h_loss), s_compute);
		wl_bytes(WL_DTOH, sizeof(h_loss));
		CHECK(cuStreamSynchronize, s_compute);
		RANGE_POP();
#ifdef CGBPF_DEMO_DIST
		nvtxRangePop();
#endif
	}
#ifdef CGBPF_DEMO_DIST
	nccl_check(ncclCommDestroy(comm), "ncclCommDestroy");
#endif

	CHECK(cuCtxSynchronize);
	CHECK(cuMemFreeHost, h_batch);
	wl_host_free(SZ_BATCH);
	CHECK(cuMemFree, loss);
	wl_dev_free(sizeof(h_loss));
	CHECK(cuMemFree, batch);
	wl_dev_free(SZ_BATCH);
	CHECK(cuMemFree, adam_state);
	wl_dev_free(SZ_ADAM);
	CHECK(cuMemFree, grads);
	wl_dev_free(SZ_GRADS);
	CHECK(cuMemFree, weights);
	wl_dev_free(SZ_WEIGHTS);
	CHECK(cuEventDestroy, ev_data);
	CHECK(cuEventDestroy, ev_fwd);
	CHECK(cuEventDestroy, ev_attn);
	CHECK(cuEventDestroy, ev_comm);
	CHECK(cuStreamDestroy, s_data);
	CHECK(cuStreamDestroy, s_compute);
	CHECK(cuStreamDestroy, s_attn);
	CHECK(cuStreamDestroy, s_comm);
	CHECK(cuModuleUnload, mod);
	CHECK(cuCtxDestroy, ctx);

	if (rank == 0) {
		wl_manifest_write(write_extra, &steps);
		/* The other ranks are this process's children. */
		while (wait(NULL) > 0)
			;
	}
	return 0;
}
