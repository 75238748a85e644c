// SPDX-License-Identifier: MIT
/*
 * site: what calling a uprobed function costs, by its first instruction,
 * for the injection library's probe sites (inject/gpu.c): a 5-byte nop
 * (0f 1f 44 00 00, which kernels since 6.x may optimize into a jump, no
 * trap), `push %rbp` (an int3 whose instruction the kernel emulates) and
 * `mov %rdi,%rax` (an int3 whose instruction is single-stepped out of
 * line). Each site is called N times untraced and N times with an empty
 * BPF program attached (pid-filtered to this process), rounds interleaved;
 * prints the median ns per call and the ratio to the nop5 site traced.
 *
 * Usage: site [N [ROUNDS]]   (default 200000 calls, 5 rounds)
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#include <bpf/libbpf.h>
#include "site.skel.h"

#define MAX_ROUNDS 31

__asm__(".text\n"
	".globl site_nop5\n.type site_nop5, @function\n.p2align 4\nsite_nop5:\n"
	"	.byte 0x0f, 0x1f, 0x44, 0x00, 0x00\n	ret\n.size site_nop5, . - site_nop5\n"
	".globl site_push\n.type site_push, @function\n.p2align 4\nsite_push:\n"
	"	push %rbp\n	pop %rbp\n	ret\n.size site_push, . - site_push\n"
	".globl site_mov\n.type site_mov, @function\n.p2align 4\nsite_mov:\n"
	"	mov %rdi, %rax\n	ret\n.size site_mov, . - site_mov\n");

void site_nop5(void);
void site_push(void);
void site_mov(void);

static const struct {
	const char *name;
	void (*fn)(void);
} sites[] = { { "site_nop5", site_nop5 }, { "site_push", site_push }, { "site_mov", site_mov } };
#define NSITES (sizeof(sites) / sizeof(sites[0]))

static double now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static double run(void (*fn)(void), unsigned long n)
{
	void (*volatile f)(void) = fn;
	double t0 = now_ns();

	for (unsigned long i = 0; i < n; i++)
		f();
	return (now_ns() - t0) / n;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
	qsort(v, n, sizeof(*v), cmp);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int main(int argc, char **argv)
{
	unsigned long n = argc > 1 ? strtoul(argv[1], NULL, 10) : 200000;
	int rounds = argc > 2 ? atoi(argv[2]) : 5;
	double un[NSITES][MAX_ROUNDS], tr[NSITES][MAX_ROUNDS];
	struct site_bpf *skel;
	int rc = 1;

	if (rounds < 1 || rounds > MAX_ROUNDS || !n) {
		fprintf(stderr, "usage: site [N [ROUNDS]] (1 <= ROUNDS <= %d)\n", MAX_ROUNDS);
		return 2;
	}
	skel = site_bpf__open_and_load();
	if (!skel) {
		fprintf(stderr, "site: loading the BPF program failed (root?)\n");
		return 1;
	}
	for (int r = 0; r < rounds; r++) {
		for (size_t s = 0; s < NSITES; s++) {
			LIBBPF_OPTS(bpf_uprobe_opts, uo, .func_name = sites[s].name);
			struct bpf_link *l;

			un[s][r] = run(sites[s].fn, n);
			l = bpf_program__attach_uprobe_opts(skel->progs.site_hit, getpid(),
							    "/proc/self/exe", 0, &uo);
			if (!l) {
				fprintf(stderr, "site: attaching to %s failed\n", sites[s].name);
				goto out;
			}
			tr[s][r] = run(sites[s].fn, n);
			bpf_link__destroy(l);
		}
	}
	printf("%lu calls per run, median of %d interleaved rounds (ns per call):\n", n, rounds);
	printf("  %-10s %-16s %10s %10s %12s\n", "site", "first insn", "untraced", "probed",
	       "x nop5 probed");
	{
		static const char *const insn[NSITES] = { "nop5 (0f 1f 44)", "push %rbp",
							  "mov %rdi,%rax" };
		double m[NSITES], u[NSITES];

		for (size_t s = 0; s < NSITES; s++) {
			u[s] = median(un[s], rounds);
			m[s] = median(tr[s], rounds);
		}
		for (size_t s = 0; s < NSITES; s++)
			printf("  %-10s %-16s %10.1f %10.1f %12.2f\n", sites[s].name + 5, insn[s],
			       u[s], m[s], m[s] / m[0]);
	}
	rc = 0;
out:
	site_bpf__destroy(skel);
	return rc;
}
