// SPDX-License-Identifier: MIT
/*
 * Cost of CPython discovery and code-object symbolization in user space
 * (user/sources/python/pyfind.c, user/sources/python/pycode.c), no BPF:
 *
 *   make build/bench/pycode && build/bench/pycode [ROUNDS [PYTHON]]
 *
 * On a live Python (PYTHON, default /usr/bin/python3, running
 * tests/workloads/py/park.py --kinds: five threads parked, 3 to 12 frames
 * each), the frames' (code object, lasti) pairs are collected once, then:
 *   1. pyfind__probe: maps, the interpreter's ELF symbols, version, row,
 *      the run-time checks (what record pays once per Python process);
 *      and on a process without Python (this bench itself, a static
 *      executable: what every other traced process pays);
 *   2. per code object, pycode__resolve with an empty cache (reads the code
 *      object, its strings and line table from the process, validates,
 *      decodes the table: what the first record of a code object pays);
 *   3. per frame, pycode__resolve cached (a hash lookup and a binary
 *      search in the decoded table: every later record of it);
 *   4. per frame, pycode__resolve_checked cached (the same plus nothing
 *      read: the caller's co_name pointer is compared).
 * Medians of ROUNDS rounds (default 7); ratios are within one run.
 */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "sources/python/pycode.h"
#include "sources/python/pyfind.h"

#define MAX_FRAMES 256
#define HOT_LOOPS 2000

struct site {
	uint64_t code, lasti, name_ptr;
};

static double now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static double median(double *v, int n)
{
	qsort(v, n, sizeof(*v), cmp_d);
	return v[n / 2];
}

static pid_t start_park(const char *python, const char *ready)
{
	char man[4096];
	pid_t pid;

	snprintf(man, sizeof(man), "CGBPF_MANIFEST=%.*s", (int)(strlen(ready) - 6), ready);
	pid = fork();
	if (pid == 0) {
		putenv(man);
		execl(python, python, "tests/workloads/py/park.py", "--kinds", (char *)NULL);
		_exit(127);
	}
	for (int i = 0; i < 3000 && access(ready, F_OK); i++)
		usleep(10000);
	return access(ready, F_OK) ? -1 : pid;
}

static size_t collect(int pid, const struct py_proc *pp, struct site *s)
{
	const struct py_offsets *o = &pp->off;
	uint64_t interp = 0, ts = 0;
	size_t n = 0;

	if (pyfind__read(pid, pp->runtime + o->runtime_interp_head, &interp, 8) ||
	    pyfind__read(pid, interp + o->interp_threads_head, &ts, 8))
		return 0;
	for (; ts && n < MAX_FRAMES;) {
		uint64_t f = 0;
		struct py_frame fr;

		pyfind__first_frame(pid, o, ts, &f);
		for (; f && n < MAX_FRAMES && !pyfind__frame(pid, o, f, &fr); f = fr.back) {
			if (fr.skip)
				continue;
			s[n].code = fr.code;
			s[n].lasti = fr.lasti;
			if (pyfind__read(pid, fr.code + o->code_name, &s[n].name_ptr, 8))
				continue;
			n++;
		}
		if (pyfind__read(pid, ts + o->ts_next, &ts, 8))
			break;
	}
	return n;
}

int main(int argc, char **argv)
{
	int rounds = argc > 1 ? atoi(argv[1]) : 7;
	const char *python = argc > 2 ? argv[2] : "/usr/bin/python3";
	char dir[] = "/tmp/cgbpf-bench-pycode-XXXXXX", ready[4096], why[256];
	struct site sites[MAX_FRAMES], uniq[MAX_FRAMES];
	size_t nu = 0;
	double *probe, *none, *cold, *hot, *checked;
	struct py_proc pp;
	struct py_info info;
	struct py_sym sym;
	size_t n;
	pid_t pid;
	int ret = 1;

	if (rounds < 1 || rounds > 1000 || !mkdtemp(dir)) {
		fprintf(stderr, "usage: pycode [ROUNDS (1-1000) [PYTHON]]\n");
		return 2;
	}
	snprintf(ready, sizeof(ready), "%s/m.json.ready", dir);
	probe = calloc(rounds, sizeof(double));
	none = calloc(rounds, sizeof(double));
	cold = calloc(rounds, sizeof(double));
	hot = calloc(rounds, sizeof(double));
	checked = calloc(rounds, sizeof(double));
	if ((pid = start_park(python, ready)) < 0) {
		fprintf(stderr, "pycode: %s tests/workloads/py/park.py did not park\n", python);
		goto out;
	}
	if (pyfind__probe(pid, &pp, &info, why, sizeof(why))) {
		fprintf(stderr, "pycode: %s\n", why);
		goto out;
	}
	n = collect(pid, &pp, sites);
	if (!n) {
		fprintf(stderr, "pycode: no frames read\n");
		goto out;
	}
	/* Frames of one code object repeat (park_here): the cold figure is per code object. */
	for (size_t i = 0; i < n; i++) {
		size_t j = 0;

		while (j < nu && uniq[j].code != sites[i].code)
			j++;
		if (j == nu)
			uniq[nu++] = sites[i];
	}
	for (int r = 0; r < rounds; r++) {
		struct pycode *pc = pycode__new();
		double t0 = now_ns();

		pyfind__probe(pid, &pp, &info, why, sizeof(why));
		probe[r] = now_ns() - t0;
		/* This bench itself: a static executable with no Python. */
		t0 = now_ns();
		pyfind__probe(getpid(), NULL, NULL, why, sizeof(why));
		none[r] = now_ns() - t0;
		/* Each code object once: the first resolve of a code object. */
		t0 = now_ns();
		for (size_t i = 0; i < nu; i++)
			if (pycode__resolve(pc, pid, &pp, uniq[i].code, uniq[i].lasti, &sym))
				fprintf(stderr, "pycode: code object %zu did not resolve\n", i);
		cold[r] = (now_ns() - t0) / nu;
		t0 = now_ns();
		for (int k = 0; k < HOT_LOOPS; k++)
			for (size_t i = 0; i < n; i++)
				pycode__resolve(pc, pid, &pp, sites[i].code, sites[i].lasti, &sym);
		hot[r] = (now_ns() - t0) / ((double)n * HOT_LOOPS);
		t0 = now_ns();
		for (int k = 0; k < HOT_LOOPS; k++)
			for (size_t i = 0; i < n; i++)
				pycode__resolve_checked(pc, pid, &pp, sites[i].code, sites[i].name_ptr,
							sites[i].lasti, &sym);
		checked[r] = (now_ns() - t0) / ((double)n * HOT_LOOPS);
		pycode__free(pc);
	}
	printf("python: %s (%s), %zu frames, %zu code objects, %d rounds\n", info.version,
	       info.path, n, nu, rounds);
	{
		double p = median(probe, rounds), c = median(cold, rounds);
		double h = median(hot, rounds), ck = median(checked, rounds);

		printf("pyfind__probe (once per process)        %10.1f us\n", p / 1e3);
		printf("pyfind__probe, a process without Python %10.1f us\n",
		       median(none, rounds) / 1e3);
		printf("resolve, empty cache (per code object)  %10.1f ns\n", c);
		printf("resolve, cached (per frame)             %10.1f ns\n", h);
		printf("resolve_checked, cached (per frame)     %10.1f ns\n", ck);
		printf("ratios: cold/cached = %.1fx, checked/cached = %.2fx, probe/cached = %.0fx\n",
		       c / h, ck / h, p / h);
		printf("probe_none_us=%.1f ", median(none, rounds) / 1e3);
		printf("probe_us=%.1f cold_ns=%.1f cached_ns=%.1f checked_ns=%.1f\n", p / 1e3, c, h,
		       ck);
	}
	ret = 0;
out:
	if (pid > 0) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
	}
	snprintf(ready, sizeof(ready), "%s/m.json", dir);
	unlink(ready);
	snprintf(ready, sizeof(ready), "%s/m.json.ready", dir);
	unlink(ready);
	rmdir(dir);
	free(probe);
	free(none);
	free(cold);
	free(hot);
	free(checked);
	return ret;
}
