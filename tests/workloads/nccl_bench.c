/* SPDX-License-Identifier: MIT */
/*
 * nccl_bench: NCCL call-overhead micro-benchmark target (bench/nccl.sh).
 *
 * Usage: nccl_bench [N] [RANKS]      (defaults 1000000, 1)
 *
 * After the start gate (CGBPF_WAIT_FILE), RANKS threads (1 or more) form
 * one communicator (ncclGetUniqueId, ncclCommInitRank each), then each
 * calls ncclAllReduce of one float N times in a tight loop, ungrouped; then
 * ncclCommDestroy. With several ranks every call also waits for the other
 * ranks (the fake library's rendezvous), as on a GPU. Prints one line:
 *
 *   calls=N ns_per_call=X
 *
 * X is rank 0's loop time (CLOCK_MONOTONIC) divided by N.
 */
#define _GNU_SOURCE
#include <nccl.h>

#include "manifest.h"

#define MAX_RANKS 16

static ncclUniqueId uid;
static unsigned long n = 1000000;
static int nranks = 1;
static double loop_ns;

static void *rank_main(void *arg)
{
	int r = (int)(intptr_t)arg;
	struct timespec t0, t1;
	ncclComm_t comm;
	static float buf[2];

	if (ncclCommInitRank(&comm, nranks, uid, r) != ncclSuccess)
		wl_die("ncclCommInitRank: %s", ncclGetLastError(NULL));
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (unsigned long i = 0; i < n; i++)
		if (ncclAllReduce(buf, buf + 1, 1, ncclFloat32, ncclSum, comm, NULL) != ncclSuccess)
			wl_die("ncclAllReduce: %s", ncclGetLastError(NULL));
	clock_gettime(CLOCK_MONOTONIC, &t1);
	if (r == 0)
		loop_ns = (t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec);
	ncclCommDestroy(comm);
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_t th[MAX_RANKS];
	char *end;
	int i;

	if (argc > 3)
		wl_die("usage: nccl_bench [N] [RANKS]");
	if (argc >= 2) {
		errno = 0;
		n = strtoul(argv[1], &end, 10);
		if (errno || !*argv[1] || *end || !n)
			wl_die("bad N: %s", argv[1]);
	}
	if (argc == 3) {
		nranks = (int)strtol(argv[2], &end, 10);
		if (*end || nranks < 1 || nranks > MAX_RANKS)
			wl_die("RANKS must be 1..%d", MAX_RANKS);
	}
	wl_gate();
	if (ncclGetUniqueId(&uid) != ncclSuccess)
		wl_die("ncclGetUniqueId failed");
	for (i = 0; i < nranks; i++)
		if (pthread_create(&th[i], NULL, rank_main, (void *)(intptr_t)i))
			wl_die("pthread_create failed");
	for (i = 0; i < nranks; i++)
		pthread_join(th[i], NULL);
	printf("calls=%lu ns_per_call=%.1f\n", n, loop_ns / n);
	return 0;
}
