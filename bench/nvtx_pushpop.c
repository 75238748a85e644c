/* SPDX-License-Identifier: MIT */
/*
 * The NVTX benchmark's workload: N nvtxRangePushA/nvtxRangePop pairs
 * through the toolkit's header-only NVTX v3, timed as a whole after one
 * warm-up pair (which loads the injection library, if any). Prints
 * "ns_per_pair=X". Usage: nvtx_pushpop N
 */
#define _GNU_SOURCE
#include <nvtx3/nvToolsExt.h>

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

int main(int argc, char **argv)
{
	long n = argc > 1 ? strtol(argv[1], NULL, 10) : 1000000, i;
	struct timespec a, b;
	double ns;

	if (n <= 0)
		return 2;
	nvtxRangePushA("warm-up");
	nvtxRangePop();
	clock_gettime(CLOCK_MONOTONIC, &a);
	for (i = 0; i < n; i++) {
		nvtxRangePushA("bench");
		nvtxRangePop();
	}
	clock_gettime(CLOCK_MONOTONIC, &b);
	ns = (double)(b.tv_sec - a.tv_sec) * 1e9 + (double)(b.tv_nsec - a.tv_nsec);
	printf("ns_per_pair=%.2f\n", ns / (double)n);
	return 0;
}
