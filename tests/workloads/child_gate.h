/* SPDX-License-Identifier: MIT */
/*
 * child_gate: a forked child (fork without exec) that calls CUDA at once
 * would race cgbpf, which gives each child probes of its own a few ms
 * after the fork (a pid-filtered probe is not inherited); so would a
 * program exec'ed under record -a whose libraries only its environment
 * names (probed at its exec). Tests that count every call of such
 * processes set CGBPF_CHILD_GATE to a directory; the harness creates
 * DIR/<pid> when cgbpf -v says "pid <pid>: probes in place", and the
 * process waits for it (at most 30 s; wl_gate() calls this first).
 */
#ifndef CGBPF_CHILD_GATE_H
#define CGBPF_CHILD_GATE_H

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static inline void wl_child_gate(void)
{
	const char *dir = getenv("CGBPF_CHILD_GATE");
	struct timespec ms = { 0, 1000000 };
	char path[PATH_MAX];
	int i;

	if (!dir || !*dir)
		return;
	snprintf(path, sizeof(path), "%s/%ld", dir, (long)getpid());
	for (i = 0; i < 30000 && access(path, F_OK) != 0; i++)
		nanosleep(&ms, NULL);
	if (i == 30000)
		fprintf(stderr, "child %ld: %s did not appear within 30 s\n", (long)getpid(), path);
}

#endif
