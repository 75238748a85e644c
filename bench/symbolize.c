// SPDX-License-Identifier: MIT
/*
 * Cost of the user-space unwinder and symbolizer (user/lib/elf/symbolize.c), no BPF:
 *
 *   make stacks build/bench/symbolize && build/bench/symbolize [ROUNDS]
 *
 * On live processes of the tests/stacks chain binaries stopped in level_c
 * (main -> level_a -> level_b -> level_c, then libc and _start):
 *   1. a whole stack for a process seen for the first time: new symbolizer,
 *      maps read, Dwfl built, ELF files and CFI loaded, every frame
 *      symbolized;
 *   2. per frame, symbolizing distinct addresses of libc once (cache misses:
 *      a binary search in the file's sorted symbols, demangling, caching)
 *      and again (cache hits), against the baseline of libdwfl's own
 *      dwfl_module_addrinfo on the same addresses (a scan of every symbol
 *      per call);
 *   3. per stack, unwinding the copied stack with libdwfl's CFI unwinder
 *      (module data warm) against a plain frame-pointer walk of the same
 *      copy (chain_fp), the floor any unwinder pays.
 * Medians of ROUNDS rounds (default 7); ratios are within one run.
 */
#include <elfutils/libdwfl.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "capture.h"
#include "lib/procfs.h"
#include "lib/elf/symbolize.h"

#define MAX_FRAMES 64

struct child {
	pid_t pid;
	int in_fd;
	struct capture_hdr h;
	void *stack;
};

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int read_all(int fd, void *p, size_t n)
{
	char *c = p;

	while (n) {
		ssize_t r = read(fd, c, n);

		if (r <= 0)
			return -1;
		c += r;
		n -= (size_t)r;
	}
	return 0;
}

static int child_start(const char *path, struct child *c)
{
	int in[2], out[2];

	memset(c, 0, sizeof(*c));
	if (pipe2(in, O_CLOEXEC) || pipe2(out, O_CLOEXEC))
		return -1;
	c->pid = fork();
	if (c->pid < 0)
		return -1;
	if (c->pid == 0) {
		dup2(in[0], 0);
		dup2(out[1], 1);
		close(in[1]);
		close(out[0]);
		execl(path, path, (char *)NULL);
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	c->in_fd = in[1];
	if (read_all(out[0], &c->h, sizeof(c->h)) || c->h.magic != CAPTURE_MAGIC)
		return -1;
	c->stack = malloc(c->h.len);
	if (!c->stack || read_all(out[0], c->stack, c->h.len))
		return -1;
	close(out[0]);
	return 0;
}

static void child_finish(struct child *c)
{
	int st;

	close(c->in_fd);
	waitpid(c->pid, &st, 0);
	free(c->stack);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_double);
	return v[n / 2];
}

/* Unwinds and symbolizes c's stack once; returns the frame count. */
static int stack_once(struct symbolizer *s, const struct child *c)
{
	struct sym_regs r = { c->h.ip, c->h.sp, c->h.bp };
	uint64_t ips[MAX_FRAMES];
	struct sym_frame fr;
	bool truncated;
	int n, i;

	n = symbolizer__unwind(s, c->pid, c->pid, &r, c->stack, c->h.len, ips, MAX_FRAMES,
			       &truncated);
	for (i = 0; i < n; i++) {
		if (i)
			symbolizer__user_ret(s, c->pid, ips[i], &fr);
		else
			symbolizer__user(s, c->pid, ips[i], &fr);
	}
	return n;
}

static int fp_walk(const struct child *c, uint64_t *ips, int max)
{
	uint64_t bp = c->h.bp, sp = c->h.sp;
	const uint8_t *st = c->stack;
	int n = 0;

	ips[n++] = c->h.ip;
	while (n < max && bp >= sp && bp - sp + 16 <= c->h.len) {
		uint64_t f[2];

		memcpy(f, st + (bp - sp), sizeof(f));
		if (!f[1])
			break;
		ips[n++] = f[1];
		if (f[0] <= bp)
			break;
		bp = f[0];
	}
	return n;
}

struct range {
	uint64_t start, end;
};

/* libdwfl's own lookup on n of the addresses: seconds per address. */
static double dwfl_baseline(pid_t pid, const struct range *libc, int naddr, int n)
{
	static char *path;
	Dwfl_Callbacks cb = {
		.find_elf = dwfl_linux_proc_find_elf,
		.find_debuginfo = dwfl_standard_find_debuginfo,
		.debuginfo_path = &path,
	};
	Dwfl *d = dwfl_begin(&cb);
	uint64_t step = (libc->end - libc->start) / naddr;
	volatile const char *name = NULL;
	Dwfl_Module *mod;
	double t0, t;
	int i;

	if (!d || dwfl_linux_proc_report(d, pid) || dwfl_report_end(d, NULL, NULL))
		return -1;
	mod = dwfl_addrmodule(d, libc->start);
	name = dwfl_module_addrname(mod, libc->start + 1);	/* loads it */
	t0 = now();
	for (i = 0; i < n; i++) {
		GElf_Off off;
		GElf_Sym sym;

		name = dwfl_module_addrinfo(mod, libc->start + (uint64_t)i * step + 1, &off, &sym,
					    NULL, NULL, NULL);
	}
	t = (now() - t0) / n;
	(void)name;
	dwfl_end(d);
	return t;
}

static int find_libc(const struct map_entry *e, void *ctx)
{
	struct range *r = ctx;

	if (e->perms[2] == 'x' && strstr(e->path, "/libc.so")) {
		r->start = e->start;
		r->end = e->end;
		return 1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	int rounds = argc > 1 ? atoi(argv[1]) : 7, i, k, n = 0, nfp = 0;
	char self[PATH_MAX], dir[PATH_MAX], path[PATH_MAX + 32];
	double *cold, *miss, *hit, *dw, *fp, *base;
	ssize_t len = readlink("/proc/self/exe", self, sizeof(self) - 1);
	const int naddr = 2000, reps = 2000;
	uint64_t ips[MAX_FRAMES];
	struct child c, cfp;
	struct range libc = { 0, 0 };
	struct sym_frame fr;
	volatile int sink = 0;

	if (len <= 0 || rounds < 1)
		return 1;
	self[len] = 0;
	snprintf(dir, sizeof(dir), "%s/../stacks", dirname(self));
	signal(SIGPIPE, SIG_IGN);
	cold = calloc((size_t)rounds, sizeof(double));
	miss = calloc((size_t)rounds, sizeof(double));
	hit = calloc((size_t)rounds, sizeof(double));
	dw = calloc((size_t)rounds, sizeof(double));
	fp = calloc((size_t)rounds, sizeof(double));
	base = calloc((size_t)rounds, sizeof(double));
	snprintf(path, sizeof(path), "%s/chain_nofp", dir);
	if (child_start(path, &c)) {
		fprintf(stderr, "bench/symbolize: cannot start %s: run 'make stacks'\n", path);
		return 1;
	}
	snprintf(path, sizeof(path), "%s/chain_fp", dir);
	if (child_start(path, &cfp)) {
		fprintf(stderr, "bench/symbolize: cannot start %s: run 'make stacks'\n", path);
		return 1;
	}
	procfs__for_each_map(c.pid, find_libc, &libc);
	if (!libc.start) {
		fprintf(stderr, "bench/symbolize: no libc mapping in the child\n");
		return 1;
	}

	for (k = 0; k < rounds; k++) {
		struct symbolizer *s = symbolizer__new();
		uint64_t step = (libc.end - libc.start) / naddr;
		double t0;

		/* 1. everything cold */
		t0 = now();
		n = stack_once(s, &c);
		cold[k] = now() - t0;

		/* 2. per frame: libc is loaded now; first and second lookups */
		t0 = now();
		for (i = 0; i < naddr; i++)
			symbolizer__user(s, c.pid, libc.start + (uint64_t)i * step + 1, &fr);
		miss[k] = (now() - t0) / naddr;
		t0 = now();
		for (i = 0; i < naddr; i++)
			symbolizer__user(s, c.pid, libc.start + (uint64_t)i * step + 1, &fr);
		hit[k] = (now() - t0) / naddr;
		base[k] = dwfl_baseline(c.pid, &libc, naddr, 100);

		/* 3. per stack: libdwfl CFI unwind (warm) vs frame-pointer walk */
		t0 = now();
		for (i = 0; i < reps; i++) {
			struct sym_regs r = { c.h.ip, c.h.sp, c.h.bp };
			bool tr;

			sink += symbolizer__unwind(s, c.pid, c.pid, &r, c.stack, c.h.len, ips,
						   MAX_FRAMES, &tr);
		}
		dw[k] = (now() - t0) / reps;
		t0 = now();
		for (i = 0; i < reps * 10; i++)
			sink += nfp = fp_walk(&cfp, ips, MAX_FRAMES);
		fp[k] = (now() - t0) / (reps * 10);
		symbolizer__free(s);
	}
	/* What was measured, for the eye. */
	{
		struct symbolizer *s = symbolizer__new();
		struct sym_regs r = { c.h.ip, c.h.sp, c.h.bp };
		bool tr;
		int nn = symbolizer__unwind(s, c.pid, c.pid, &r, c.stack, c.h.len, ips,
					    MAX_FRAMES, &tr);

		printf("stack measured (%s):\n", tr ? "truncated" : "complete");
		for (i = 0; i < nn; i++) {
			if (i)
				symbolizer__user_ret(s, c.pid, ips[i], &fr);
			else
				symbolizer__user(s, c.pid, ips[i], &fr);
			printf("  #%d %s+%#" PRIx64 " (%s)\n", i, fr.function ? fr.function : "?",
			       fr.function_off, fr.module ? fr.module : "?");
		}
		symbolizer__free(s);
	}
	child_finish(&c);
	child_finish(&cfp);

	printf("symbolizer bench, %d rounds, medians (chain_nofp: %d frames; chain_fp: %d by frame pointers)\n",
	       rounds, n, nfp);
	printf("  first stack of a new process (maps, Dwfl, ELF+CFI load, %d frames): %10.1f us\n", n,
	       median(cold, rounds) * 1e6);
	printf("  symbolize one libc address, libdwfl's addrinfo (baseline): %10.0f ns\n",
	       median(base, rounds) * 1e9);
	printf("  symbolize one libc address, first time (sorted table):   %10.0f ns\n",
	       median(miss, rounds) * 1e9);
	printf("  symbolize one libc address, cached:                      %10.0f ns\n",
	       median(hit, rounds) * 1e9);
	printf("  unwind one copied stack, libdwfl CFI (%d frames):          %10.0f ns\n", n,
	       median(dw, rounds) * 1e9);
	printf("  walk one copied stack by frame pointers (%d frames):       %10.0f ns\n", nfp,
	       median(fp, rounds) * 1e9);
	printf("ratio_dwfl_addrinfo_over_first=%.0f\n", median(base, rounds) / median(miss, rounds));
	printf("ratio_first_over_cached=%.1f\n", median(miss, rounds) / median(hit, rounds));
	printf("ratio_cfi_unwind_over_fp_walk=%.1f\n", median(dw, rounds) / median(fp, rounds));
	return sink == -1;
}
