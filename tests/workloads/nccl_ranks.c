/* SPDX-License-Identifier: MIT */
/*
 * nccl_ranks: N ranks of one NCCL communicator doing every kind of
 * collective and point-to-point call, grouped and ungrouped, linked
 * against libnccl.so.2 as a real application links it (the fake one in
 * tests; the toolkit's nccl.h).
 *
 * Usage: nccl_ranks [--ranks N] [--iters K] [--procs | --rank R --id-file PATH]
 *                   [--late-ms MS] [--deadlock] [--start-delay-ms MS]
 *                   [--slow-rank R --slow-us US] [--hang-rank R --hang-ms MS] [--sync]
 *                   [--reinit-after J]
 *   N ranks (default 4) as threads of this process, or with --procs as
 *   child processes, or with --rank R as just rank R of N in this process
 *   (one-rank mode: a shell or launcher starts N such processes, each
 *   exec'ed with its own environment, as torchrun starts its workers; they
 *   meet through PATH, see below); K (default 2) ungrouped all-reduces;
 *   --start-delay-ms makes every rank wait MS milliseconds after its
 *   ncclCommInitRank, before its first all-reduce (time for a profiler to
 *   attach once the communicators exist; default 0), calling
 *   cuStreamSynchronize on its idle stream every 100 ms meanwhile;
 *   --late-ms makes the last rank enter its first all-reduce MS
 *   milliseconds late;
 *   --slow-rank makes rank R sleep US microseconds before each of its K
 *   ungrouped all-reduces (the rank the others wait for); --hang-rank
 *   makes rank R stop for MS milliseconds before its all-reduce number
 *   K/2 + 1 (the others wait inside theirs: a hang, until it comes).
 *   --sync: cuStreamSynchronize(rank's stream) after each of the K
 *   ungrouped all-reduces (an error if it fails). With the fake's
 *   FAKENCCL_ASYNC=1 the host then looks like a GPU job's: each
 *   all-reduce returns at once and the rank waits in cuStreamSynchronize
 *   (for a --slow-rank, --late-ms or --hang-rank rank, which still enters
 *   its all-reduce late: it sleeps before the call). Without
 *   FAKENCCL_ASYNC the synchronize has nothing left to wait for.
 *   --reinit-after J (threads mode, --ranks 1): after J of the K
 *   all-reduces, ncclCommDestroy the communicator, ncclGetUniqueId and
 *   ncclCommInitRank another (which the fake's allocator usually puts at
 *   the freed handle), printing "reinit OLD NEW" (the two handles) on
 *   stdout at once, and go on with the other K - J on the new one.
 *   --deadlock: instead of the script below, every rank sends to rank
 *   r+1 outside a group (a deadlock on real NCCL too) and expects
 *   ncclSystemError once FAKENCCL_TIMEOUT_S has passed (the synchronous
 *   fake only: with FAKENCCL_ASYNC=1 the sends return ncclSuccess and the
 *   timeout is met, and ignored, in ncclCommAbort).
 *
 * First, in the main thread: ncclGetVersion, then the error cases
 * (ncclAllReduce on a NULL comm -> ncclInvalidArgument, ncclGroupEnd
 * without ncclGroupStart -> ncclInvalidUsage), each followed by
 * ncclGetErrorString and ncclGetLastError; ncclGetUniqueId.
 * One-rank mode (--rank R) instead: create the CUDA context; the error
 * cases (in every rank's process); rank 0 calls ncclGetUniqueId and writes
 * the ncclUniqueId's bytes to PATH atomically (PATH.tmp, then rename); the
 * other ranks poll for PATH every 10 ms (failing after 30 s) and read it.
 * PATH must not exist before the job starts (remove a previous job's).
 * Then each rank r of N (rank thread named "rank-r"; a child process with
 * --procs, which creates its own CUDA context; this process's main thread
 * for r = R in one-rank mode), on its own stream:
 *   ncclCommInitRank(N, id, r) (odd r: ncclCommInitRankConfig with
 *   NCCL_CONFIG_INITIALIZER); sleep --start-delay-ms; ncclCommCount;
 *   ncclCommUserRank; ncclCommCuDevice;
 *   K x ncclAllReduce(1024 x float32, sum) (--sync: each followed by
 *   cuStreamSynchronize);
 *   ncclAllGather(256 x int32); ncclReduceScatter(128 x float64, sum);
 *   ncclBroadcast(4096 x uint8, root 0); ncclBcast(2048 x int64, root N-1);
 *   ncclReduce(512 x bfloat16, max, root 0); ncclAlltoAll(64 x float16);
 *   group { ncclAllReduce(2048 x float32); ncclAllReduce(16 x float64) };
 *   group { ncclSend(1000 x float32 to r+1); ncclRecv(1000 x float32 from r-1) }
 *     (ring, mod N; N >= 2);
 *   ungrouped ncclSend(333 x int8) 0 -> 1 and ncclRecv on 1 (N >= 2);
 *   ncclCommSplit(color r % 2, key -r): ncclCommCount, ncclCommUserRank,
 *   ncclAllReduce(100 x uint32) on the child, ncclCommDestroy(child)
 *   (odd r: ncclCommAbort(child));
 *   ncclCommDestroy.
 * Then, threads mode only, in the main thread: ncclCommInitAll(N),
 * group { ncclAllReduce(4096 x float32) on each of the N communicators },
 * ncclCommDestroy each.
 *
 * Prints one JSON line: {"pid", "ranks", "iters", "procs", "rank_tids":
 * [tid of rank r, ...] (threads mode; 0s with --procs),
 * "first_allreduce_ms": [per rank], "errors": n}; in one-rank mode
 * {"pid", "ranks": N, "rank": R, "iters", "procs": false, "rank_tids":
 * [tid of this rank], "first_allreduce_ms": [this rank's], "errors": n}.
 * first_allreduce_ms is the first ungrouped ncclAllReduce call alone (not
 * its --sync synchronize).
 * Exits 1 if any result was not the expected one (in one-rank mode: any
 * of this process's), 0 otherwise.
 */
#define _GNU_SOURCE
#include <cuda.h>
#include <nccl.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>

#include "child_gate.h"
#include <unistd.h>

#define MAX_RANKS 64

static int nranks = 4, iters = 2, late_ms, deadlock, slow_rank = -1, slow_us, hang_rank = -1,
	   hang_ms, start_delay_ms, sync_each, reinit_after;
static ncclUniqueId uid;
static CUcontext ctx;

/* Shared with child processes in --procs mode. */
struct shared {
	_Atomic int errors;
	int tids[MAX_RANKS];
	double first_ms[MAX_RANKS];
};
static struct shared *sh;

#define EXPECT(call, want)                                                                 \
	do {                                                                               \
		ncclResult_t r_ = (call);                                                  \
		if (r_ != (want)) {                                                        \
			fprintf(stderr, "nccl_ranks: %s:%d: %s = %d (%s), want %d\n", __FILE__, \
				__LINE__, #call, (int)r_, ncclGetLastError(NULL), (int)(want)); \
			atomic_fetch_add(&sh->errors, 1);                                  \
		}                                                                          \
	} while (0)
#define OK(call) EXPECT(call, ncclSuccess)

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void check_int(int got, int want, const char *what)
{
	if (got != want) {
		fprintf(stderr, "nccl_ranks: %s = %d, want %d\n", what, got, want);
		atomic_fetch_add(&sh->errors, 1);
	}
}

static void rank_main(int r)
{
	ncclComm_t comm, child;
	CUstream s = NULL;
	CUdeviceptr sb = 0, rb = 0;
	void *send, *recv;
	int v, n = nranks, i;
	double t0;

	if (cuCtxSetCurrent(ctx) || cuStreamCreate(&s, CU_STREAM_NON_BLOCKING) ||
	    cuMemAlloc(&sb, 1 << 20) || cuMemAlloc(&rb, 1 << 20)) {
		fprintf(stderr, "nccl_ranks: rank %d: CUDA setup failed\n", r);
		atomic_fetch_add(&sh->errors, 1);
		return;
	}
	send = (void *)(uintptr_t)sb;
	recv = (void *)(uintptr_t)rb;
	sh->tids[r] = gettid();

	if (r % 2) {
		ncclConfig_t config = NCCL_CONFIG_INITIALIZER;

		OK(ncclCommInitRankConfig(&comm, n, uid, r, &config));
	} else {
		OK(ncclCommInitRank(&comm, n, uid, r));
	}
	/* The wait goes on calling the driver every 100 ms, as a job's host
	 * keeps doing: a profiler attached meanwhile sees the process call
	 * (and turns on what it turns on at a first call). */
	for (int waited = 0; waited < start_delay_ms; waited += 100) {
		int left = start_delay_ms - waited;

		usleep((useconds_t)(left < 100 ? left : 100) * 1000);
		cuStreamSynchronize(s);
	}
	OK(ncclCommCount(comm, &v));
	check_int(v, n, "ncclCommCount");
	OK(ncclCommUserRank(comm, &v));
	check_int(v, r, "ncclCommUserRank");
	OK(ncclCommCuDevice(comm, &v));
	if (deadlock) {
		EXPECT(ncclSend(send, 8, ncclInt8, (r + 1) % n, comm, (cudaStream_t)s), ncclSystemError);
		OK(ncclCommAbort(comm));
		return;
	}

	if (late_ms && r == n - 1)
		usleep(late_ms * 1000);
	for (i = 0; i < iters; i++) {
		if (reinit_after && i == reinit_after) {
			ncclComm_t old = comm;

			OK(ncclCommDestroy(comm));
			OK(ncclGetUniqueId(&uid));
			OK(ncclCommInitRank(&comm, n, uid, r));
			printf("reinit %p %p\n", (void *)old, (void *)comm);
			fflush(stdout);
		}
		if (r == slow_rank && slow_us)
			usleep(slow_us);
		if (r == hang_rank && i == iters / 2)
			usleep((useconds_t)hang_ms * 1000);
		t0 = now_ms();
		OK(ncclAllReduce(send, recv, 1024, ncclFloat32, ncclSum, comm, (cudaStream_t)s));
		if (i == 0)
			sh->first_ms[r] = now_ms() - t0;
		if (sync_each && cuStreamSynchronize(s)) {
			fprintf(stderr, "nccl_ranks: rank %d: cuStreamSynchronize after all-reduce %d "
				"failed\n", r, i);
			atomic_fetch_add(&sh->errors, 1);
		}
	}
	OK(ncclAllGather(send, recv, 256, ncclInt32, comm, (cudaStream_t)s));
	OK(ncclReduceScatter(send, recv, 128, ncclFloat64, ncclSum, comm, (cudaStream_t)s));
	OK(ncclBroadcast(send, recv, 4096, ncclUint8, 0, comm, (cudaStream_t)s));
	OK(ncclBcast(recv, 2048, ncclInt64, n - 1, comm, (cudaStream_t)s));
	OK(ncclReduce(send, recv, 512, ncclBfloat16, ncclMax, 0, comm, (cudaStream_t)s));
	OK(ncclAlltoAll(send, recv, 64, ncclFloat16, comm, (cudaStream_t)s));

	OK(ncclGroupStart());
	OK(ncclAllReduce(send, recv, 2048, ncclFloat32, ncclSum, comm, (cudaStream_t)s));
	OK(ncclAllReduce(send, recv, 16, ncclFloat64, ncclSum, comm, (cudaStream_t)s));
	OK(ncclGroupEnd());

	if (n >= 2) {
		OK(ncclGroupStart());
		OK(ncclSend(send, 1000, ncclFloat32, (r + 1) % n, comm, (cudaStream_t)s));
		OK(ncclRecv(recv, 1000, ncclFloat32, (r + n - 1) % n, comm, (cudaStream_t)s));
		OK(ncclGroupEnd());
		if (r == 0)
			OK(ncclSend(send, 333, ncclInt8, 1, comm, (cudaStream_t)s));
		else if (r == 1)
			OK(ncclRecv(recv, 333, ncclInt8, 0, comm, (cudaStream_t)s));
	}

	OK(ncclCommSplit(comm, r % 2, -r, &child, NULL));
	if (child) {
		OK(ncclCommCount(child, &v));
		check_int(v, (n + 1 - r % 2) / 2, "child ncclCommCount");
		OK(ncclCommUserRank(child, &v));
		/* Keys -r: the highest old rank of each color is new rank 0. */
		check_int(v, ((n + 1 - r % 2) / 2) - 1 - r / 2, "child ncclCommUserRank");
		OK(ncclAllReduce(send, recv, 100, ncclUint32, ncclSum, child, (cudaStream_t)s));
		if (r % 2)
			OK(ncclCommAbort(child));
		else
			OK(ncclCommDestroy(child));
	} else {
		fprintf(stderr, "nccl_ranks: rank %d: no child communicator\n", r);
		atomic_fetch_add(&sh->errors, 1);
	}
	OK(ncclCommDestroy(comm));
	cuMemFree(sb);
	cuMemFree(rb);
	cuStreamDestroy(s);
}

static void *rank_thread(void *arg)
{
	int r = (int)(intptr_t)arg;
	char name[16];

	snprintf(name, sizeof(name), "rank-%d", r);
	pthread_setname_np(pthread_self(), name);
	rank_main(r);
	return NULL;
}

static void init_all(void)
{
	ncclComm_t comms[MAX_RANKS];
	CUdeviceptr b = 0;
	int i;

	if (cuMemAlloc(&b, 1 << 16)) {
		atomic_fetch_add(&sh->errors, 1);
		return;
	}
	OK(ncclCommInitAll(comms, nranks, NULL));
	OK(ncclGroupStart());
	for (i = 0; i < nranks; i++)
		OK(ncclAllReduce((void *)(uintptr_t)b, (void *)(uintptr_t)b, 4096, ncclFloat32, ncclSum,
				 comms[i], NULL));
	OK(ncclGroupEnd());
	for (i = 0; i < nranks; i++)
		OK(ncclCommDestroy(comms[i]));
	cuMemFree(b);
}

static void error_cases(void)
{
	int v = 0;

	OK(ncclGetVersion(&v));
	check_int(v, NCCL_VERSION_CODE, "ncclGetVersion");
	EXPECT(ncclAllReduce(NULL, NULL, 1, ncclFloat32, ncclSum, NULL, NULL), ncclInvalidArgument);
	if (!ncclGetErrorString(ncclInvalidArgument) || !*ncclGetLastError(NULL)) {
		fprintf(stderr, "nccl_ranks: no error string\n");
		atomic_fetch_add(&sh->errors, 1);
	}
	EXPECT(ncclGroupEnd(), ncclInvalidUsage);
	if (!ncclGetErrorString(ncclInvalidUsage) || !*ncclGetLastError(NULL)) {
		fprintf(stderr, "nccl_ranks: no error string\n");
		atomic_fetch_add(&sh->errors, 1);
	}
}

static int cuda_setup(void)
{
	CUdevice dev;

	if (cuInit(0) || cuDeviceGet(&dev, 0))
		return -1;
#if CUDA_VERSION >= 13000
	return cuCtxCreate(&ctx, NULL, 0, dev) ? -1 : 0;
#else
	return cuCtxCreate(&ctx, 0, dev) ? -1 : 0;
#endif
}

/* One-rank mode, rank 0: PATH.tmp, then rename, so a reader never sees
 * part of the id. */
static int write_id(const char *path)
{
	char tmp[PATH_MAX];
	ssize_t w;
	int fd;

	if (snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= (int)sizeof(tmp)) {
		fprintf(stderr, "nccl_ranks: --id-file %s: path too long\n", path);
		return -1;
	}
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0) {
		fprintf(stderr, "nccl_ranks: %s: %s\n", tmp, strerror(errno));
		return -1;
	}
	w = write(fd, &uid, sizeof(uid));
	if (w != (ssize_t)sizeof(uid) || close(fd)) {
		fprintf(stderr, "nccl_ranks: writing %s failed\n", tmp);
		unlink(tmp);
		return -1;
	}
	if (rename(tmp, path)) {
		fprintf(stderr, "nccl_ranks: rename %s -> %s: %s\n", tmp, path, strerror(errno));
		unlink(tmp);
		return -1;
	}
	return 0;
}

/* One-rank mode, ranks 1..N-1: wait for rank 0's PATH (every 10 ms, at
 * most 30 s), then read the id from it. */
static int read_id(const char *path, int r)
{
	struct timespec ms10 = { 0, 10 * 1000000 };
	ssize_t got;
	int fd = -1, i;

	for (i = 0; i <= 3000; i++) {
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd >= 0 || errno != ENOENT)
			break;
		if (i < 3000)
			nanosleep(&ms10, NULL);
	}
	if (fd < 0) {
		if (errno == ENOENT)
			fprintf(stderr, "nccl_ranks: rank %d: --id-file %s did not appear within 30 s "
				"(is rank 0 running?)\n", r, path);
		else
			fprintf(stderr, "nccl_ranks: rank %d: %s: %s\n", r, path, strerror(errno));
		return -1;
	}
	got = read(fd, &uid, sizeof(uid));
	close(fd);
	if (got != (ssize_t)sizeof(uid)) {
		fprintf(stderr, "nccl_ranks: rank %d: %s holds %zd bytes, want %zu (a ncclUniqueId)\n",
			r, path, got, sizeof(uid));
		return -1;
	}
	return 0;
}

static int num(const char *s)
{
	char *end;
	long v = strtol(s, &end, 10);

	if (*end || v < 0 || v > 1000000) {
		fprintf(stderr, "nccl_ranks: bad number %s\n", s);
		exit(2);
	}
	return (int)v;
}

int main(int argc, char **argv)
{
	pthread_t th[MAX_RANKS];
	pid_t kids[MAX_RANKS];
	int procs = 0, one_rank = -1, i, status;
	const char *id_file = NULL;

	wl_child_gate();
	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--ranks") && i + 1 < argc)
			nranks = num(argv[++i]);
		else if (!strcmp(argv[i], "--iters") && i + 1 < argc)
			iters = num(argv[++i]);
		else if (!strcmp(argv[i], "--late-ms") && i + 1 < argc)
			late_ms = num(argv[++i]);
		else if (!strcmp(argv[i], "--slow-rank") && i + 1 < argc)
			slow_rank = num(argv[++i]);
		else if (!strcmp(argv[i], "--slow-us") && i + 1 < argc)
			slow_us = num(argv[++i]);
		else if (!strcmp(argv[i], "--hang-rank") && i + 1 < argc)
			hang_rank = num(argv[++i]);
		else if (!strcmp(argv[i], "--hang-ms") && i + 1 < argc)
			hang_ms = num(argv[++i]);
		else if (!strcmp(argv[i], "--rank") && i + 1 < argc)
			one_rank = num(argv[++i]);
		else if (!strcmp(argv[i], "--id-file") && i + 1 < argc)
			id_file = argv[++i];
		else if (!strcmp(argv[i], "--start-delay-ms") && i + 1 < argc)
			start_delay_ms = num(argv[++i]);
		else if (!strcmp(argv[i], "--procs"))
			procs = 1;
		else if (!strcmp(argv[i], "--deadlock"))
			deadlock = 1;
		else if (!strcmp(argv[i], "--sync"))
			sync_each = 1;
		else if (!strcmp(argv[i], "--reinit-after") && i + 1 < argc)
			reinit_after = num(argv[++i]);
		else {
			fprintf(stderr, "usage: nccl_ranks [--ranks N] [--iters K] "
				"[--procs | --rank R --id-file PATH] [--late-ms MS] [--deadlock] "
				"[--start-delay-ms MS] [--slow-rank R --slow-us US] "
				"[--hang-rank R --hang-ms MS] [--sync] [--reinit-after J]\n");
			return 2;
		}
	}
	if (nranks < 1 || nranks > MAX_RANKS) {
		fprintf(stderr, "nccl_ranks: --ranks must be 1..%d\n", MAX_RANKS);
		return 2;
	}
	if ((one_rank >= 0) != (id_file != NULL) || (one_rank >= 0 && procs) ||
	    (id_file && !*id_file)) {
		fprintf(stderr, "nccl_ranks: --rank and --id-file go together, without --procs\n");
		return 2;
	}
	if (reinit_after && (nranks != 1 || procs || one_rank >= 0)) {
		fprintf(stderr, "nccl_ranks: --reinit-after needs --ranks 1 in threads mode\n");
		return 2;
	}
	if (one_rank >= nranks) {
		fprintf(stderr, "nccl_ranks: --rank must be 0..%d (--ranks %d)\n", nranks - 1, nranks);
		return 2;
	}
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED || (!procs && one_rank < 0 && cuda_setup())) {
		fprintf(stderr, "nccl_ranks: setup failed\n");
		return 1;
	}
	if (one_rank >= 0) {
		/* This process is rank one_rank of nranks, started on its own. */
		if (cuda_setup()) {
			fprintf(stderr, "nccl_ranks: rank %d: setup failed\n", one_rank);
			return 1;
		}
		error_cases();
		if (one_rank == 0) {
			OK(ncclGetUniqueId(&uid));
			if (write_id(id_file))
				return 1;
		} else if (read_id(id_file, one_rank)) {
			return 1;
		}
		rank_main(one_rank);
		printf("{\"pid\": %d, \"ranks\": %d, \"rank\": %d, \"iters\": %d, \"procs\": false, "
		       "\"rank_tids\": [%d], \"first_allreduce_ms\": [%.3f], \"errors\": %d}\n",
		       getpid(), nranks, one_rank, iters, sh->tids[one_rank], sh->first_ms[one_rank],
		       atomic_load(&sh->errors));
		return atomic_load(&sh->errors) ? 1 : 0;
	}
	error_cases();
	OK(ncclGetUniqueId(&uid));

	if (procs) {
		for (i = 0; i < nranks; i++) {
			kids[i] = fork();
			if (kids[i] == 0) {
				wl_child_gate();
				/* CUDA does not survive fork: start from scratch. */
				if (cuda_setup())
					atomic_fetch_add(&sh->errors, 1);
				else
					rank_main(i);
				exit(0);	/* runs the fake's exit-time stats */
			}
		}
		for (i = 0; i < nranks; i++)
			if (waitpid(kids[i], &status, 0) != kids[i] || !WIFEXITED(status) ||
			    WEXITSTATUS(status))
				atomic_fetch_add(&sh->errors, 1);
	} else {
		for (i = 0; i < nranks; i++)
			pthread_create(&th[i], NULL, rank_thread, (void *)(intptr_t)i);
		for (i = 0; i < nranks; i++)
			pthread_join(th[i], NULL);
		if (!deadlock)
			init_all();
	}

	printf("{\"pid\": %d, \"ranks\": %d, \"iters\": %d, \"procs\": %s, \"rank_tids\": [",
	       getpid(), nranks, iters, procs ? "true" : "false");
	for (i = 0; i < nranks; i++)
		printf("%s%d", i ? ", " : "", procs ? 0 : sh->tids[i]);
	printf("], \"first_allreduce_ms\": [");
	for (i = 0; i < nranks; i++)
		printf("%s%.3f", i ? ", " : "", sh->first_ms[i]);
	printf("], \"errors\": %d}\n", atomic_load(&sh->errors));
	return atomic_load(&sh->errors) ? 1 : 0;
}
