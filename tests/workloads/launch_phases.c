// SPDX-License-Identifier: MIT
/*
 * bench/inject_phases.sh: cuLaunchKernel in rounds of --round calls for
 * --seconds, printing "round UNIX_TIME NS_PER_CALL" after each, so that
 * the cost before, during and after an injected capture (and after cgbpf
 * left) can be told apart in one process.
 */
#define _GNU_SOURCE
#include <cuda.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "manifest.h"

#define K_NOOP "_Z15bench_noop__ns0v"

static const unsigned char module_image[] = "\x7f" "ELF fake cubin for cgbpf bench";

static double mono(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	unsigned long round = 100000;
	double seconds = 10, t_end;
	CUfunction fn;
	CUmodule mod;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--seconds") && i + 1 < argc)
			seconds = atof(argv[++i]);
		else if (!strcmp(argv[i], "--round") && i + 1 < argc)
			round = strtoul(argv[++i], NULL, 10);
		else
			wl_die("usage: launch_phases [--seconds S] [--round N]");
	}
	wl_context();
	CHECK(cuModuleLoadData, &mod, module_image);
	CHECK(cuModuleGetFunction, &fn, mod, K_NOOP);
	t_end = mono() + seconds;
	while (mono() < t_end) {
		double t0 = mono(), t1;
		struct timespec now;

		for (unsigned long i = 0; i < round; i++)
			if (cuLaunchKernel(fn, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL) != CUDA_SUCCESS)
				wl_die("cuLaunchKernel failed");
		t1 = mono();
		clock_gettime(CLOCK_REALTIME, &now);
		printf("round %.3f %.1f\n", (double)now.tv_sec + (double)now.tv_nsec / 1e9,
		       (t1 - t0) * 1e9 / (double)round);
		fflush(stdout);
		/* The fake stream's queue: drained now and then. */
		CHECK(cuCtxSynchronize);
	}
	return 0;
}
