// SPDX-License-Identifier: MIT
/*
 * lmbench lat_ctx-like context-switch cost: two processes pinned to one
 * CPU pass a byte back and forth over two pipes; every round trip is two
 * context switches (and two wakeups).
 *
 *   ctxsw [ROUND_TRIPS] [CPU]     prints "ns_per_roundtrip N" and "switches N"
 */
#define _GNU_SOURCE
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? strtol(argv[1], NULL, 10) : 100000;
	int cpu = argc > 2 ? atoi(argv[2]) : 0;
	int ab[2], ba[2];
	cpu_set_t set;
	double t0, t1;
	char c = 0;
	pid_t pid;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (n <= 0 || sched_setaffinity(0, sizeof(set), &set) || pipe(ab) || pipe(ba)) {
		perror("ctxsw: setup");
		return 1;
	}
	pid = fork();
	if (pid < 0)
		return 1;
	if (pid == 0) {
		close(ab[1]);	/* else the last read never sees EOF */
		close(ba[0]);
		for (;;) {
			if (read(ab[0], &c, 1) != 1)
				_exit(0);
			if (write(ba[1], &c, 1) != 1)
				_exit(1);
		}
	}
	close(ab[0]);
	close(ba[1]);
	/* Warm up, then measure. */
	for (int i = 0; i < 1000; i++)
		if (write(ab[1], &c, 1) != 1 || read(ba[0], &c, 1) != 1)
			return 1;
	t0 = now_ns();
	for (long i = 0; i < n; i++)
		if (write(ab[1], &c, 1) != 1 || read(ba[0], &c, 1) != 1)
			return 1;
	t1 = now_ns();
	close(ab[1]);
	waitpid(pid, NULL, 0);
	printf("ns_per_roundtrip %.0f\nswitches %ld\n", (t1 - t0) / n, 2 * n);
	return 0;
}
