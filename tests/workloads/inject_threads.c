// SPDX-License-Identifier: MIT
/*
 * The threads record --inject may hold (tests/integration/test_inject.py):
 * each does one thing for --seconds and then says whether it saw what it
 * would have without cgbpf. Prints "tid KIND TID" for each, then "ready";
 * at the end "result KIND ok|bad DETAIL" for each and "sigusr1 N" (the
 * SIGUSR1 deliveries counted by a handler), and exits 0 when every
 * result is ok.
 *
 *   read    blocked in read(2) on a pipe; main writes 5 bytes at the end
 *   cond    in pthread_cond_wait (futex) until main signals at the end
 *   sleep   one clock_nanosleep of the whole time: slept at least that
 *   epoll   epoll_wait on nothing with the whole time as timeout: the
 *           timeout, or EINTR (what signal(7) says a ptrace stop gives)
 *   spin    known values in xmm8-xmm15 (ymm8-ymm15 with AVX) and r12-r15
 *           through a busy loop, compared after every round
 *   malloc  malloc and free in a tight loop
 *
 * --seccomp: first installs a seccomp filter that allows everything;
 * --seccomp-kill-exec: after cuInit, one that kills the process on an
 * mmap with PROT_EXEC (what a dlopen does); --nodump: makes itself
 * non-dumpable.
 */
#define _GNU_SOURCE
#include <cuda.h>
#include <errno.h>
#include <stddef.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "manifest.h"

static double seconds = 4;
static int pipefd[2];
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static volatile int done_flag;
static volatile sig_atomic_t usr1;
static char results[8][160];

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void say_tid(const char *kind)
{
	printf("tid %s %ld\n", kind, (long)syscall(SYS_gettid));
	fflush(stdout);
}

static void *t_read(void *a)
{
	char buf[16] = { 0 };
	ssize_t n;

	say_tid("read");
	n = read(pipefd[0], buf, sizeof(buf));
	snprintf(results[(long)a], sizeof(results[0]), "read %s n=%zd errno=%d data=%.5s",
		 n == 5 && !memcmp(buf, "hello", 5) ? "ok" : "bad", n, n < 0 ? errno : 0, buf);
	return NULL;
}

static void *t_cond(void *a)
{
	int rc = 0;

	say_tid("cond");
	pthread_mutex_lock(&mu);
	while (!done_flag && !rc)
		rc = pthread_cond_wait(&cv, &mu);
	pthread_mutex_unlock(&mu);
	snprintf(results[(long)a], sizeof(results[0]), "cond %s rc=%d", rc ? "bad" : "ok", rc);
	return NULL;
}

static void *t_sleep(void *a)
{
	double want = seconds - 1.5, t0 = now(), took;
	struct timespec ts = { (time_t)want, (long)((want - (time_t)want) * 1e9) };
	int rc;

	say_tid("sleep");
	rc = clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, NULL);
	took = now() - t0;
	snprintf(results[(long)a], sizeof(results[0]), "sleep %s rc=%d took=%.3f want=%.3f",
		 !rc && took >= want - 0.001 ? "ok" : "bad", rc, took, want);
	return NULL;
}

static void *t_epoll(void *a)
{
	int ep = epoll_create1(EPOLL_CLOEXEC), ms = (int)((seconds - 1.5) * 1000), n, e;
	struct epoll_event ev;
	double t0 = now(), took;

	say_tid("epoll");
	n = epoll_wait(ep, &ev, 1, ms);
	e = errno;
	took = now() - t0;
	snprintf(results[(long)a], sizeof(results[0]), "epoll %s n=%d errno=%d took=%.3f",
		 (n == 0 && took >= ms / 1000.0 - 0.001) || (n < 0 && e == EINTR) ? "ok" : "bad",
		 n, n < 0 ? e : 0, took);
	close(ep);
	return NULL;
}

static const uint64_t pat[16] __attribute__((aligned(32))) = {
	0x0101010101010101, 0x0202020202020202, 0x0303030303030303, 0x0404040404040404,
	0x0505050505050505, 0x0606060606060606, 0x0707070707070707, 0x0808080808080808,
	0x1111111111111111, 0x2222222222222222, 0x3333333333333333, 0x4444444444444444,
	0x5555555555555555, 0x6666666666666666, 0x7777777777777777, 0x8888888888888888,
};

/* One round: the values in, a busy loop, the values out. */
static int spin_round(int avx)
{
	uint64_t out[16 * 2] __attribute__((aligned(32))) = { 0 }, g[4] = { 0 };
	int bad = 0;

	if (avx) {
		__asm__ volatile(
			"vbroadcasti128 0(%[p]), %%ymm8\n vbroadcasti128 16(%[p]), %%ymm9\n"
			"vbroadcasti128 32(%[p]), %%ymm10\n vbroadcasti128 48(%[p]), %%ymm11\n"
			"vbroadcasti128 64(%[p]), %%ymm12\n vbroadcasti128 80(%[p]), %%ymm13\n"
			"vbroadcasti128 96(%[p]), %%ymm14\n vbroadcasti128 112(%[p]), %%ymm15\n"
			"movq 0(%[p]), %%r12\n movq 8(%[p]), %%r13\n movq 16(%[p]), %%r14\n"
			"movq 24(%[p]), %%r15\n"
			"movl $2000000, %%ecx\n1: pause\n decl %%ecx\n jnz 1b\n"
			"vmovdqu %%ymm8, 0(%[o])\n vmovdqu %%ymm9, 32(%[o])\n"
			"vmovdqu %%ymm10, 64(%[o])\n vmovdqu %%ymm11, 96(%[o])\n"
			"vmovdqu %%ymm12, 128(%[o])\n vmovdqu %%ymm13, 160(%[o])\n"
			"vmovdqu %%ymm14, 192(%[o])\n vmovdqu %%ymm15, 224(%[o])\n"
			"movq %%r12, 0(%[g])\n movq %%r13, 8(%[g])\n movq %%r14, 16(%[g])\n"
			"movq %%r15, 24(%[g])\n vzeroupper\n"
			: : [p] "r"(pat), [o] "r"(out), [g] "r"(g)
			: "ecx", "r12", "r13", "r14", "r15", "xmm8", "xmm9", "xmm10", "xmm11",
			  "xmm12", "xmm13", "xmm14", "xmm15", "memory", "cc");
		for (int i = 0; i < 8; i++)
			for (int h = 0; h < 2; h++)
				bad += memcmp(&out[i * 4 + h * 2], &pat[i * 2], 16) != 0;
	} else {
		__asm__ volatile(
			"movdqu 0(%[p]), %%xmm8\n movdqu 16(%[p]), %%xmm9\n"
			"movdqu 32(%[p]), %%xmm10\n movdqu 48(%[p]), %%xmm11\n"
			"movdqu 64(%[p]), %%xmm12\n movdqu 80(%[p]), %%xmm13\n"
			"movdqu 96(%[p]), %%xmm14\n movdqu 112(%[p]), %%xmm15\n"
			"movq 0(%[p]), %%r12\n movq 8(%[p]), %%r13\n movq 16(%[p]), %%r14\n"
			"movq 24(%[p]), %%r15\n"
			"movl $2000000, %%ecx\n1: pause\n decl %%ecx\n jnz 1b\n"
			"movdqu %%xmm8, 0(%[o])\n movdqu %%xmm9, 16(%[o])\n"
			"movdqu %%xmm10, 32(%[o])\n movdqu %%xmm11, 48(%[o])\n"
			"movdqu %%xmm12, 64(%[o])\n movdqu %%xmm13, 80(%[o])\n"
			"movdqu %%xmm14, 96(%[o])\n movdqu %%xmm15, 112(%[o])\n"
			"movq %%r12, 0(%[g])\n movq %%r13, 8(%[g])\n movq %%r14, 16(%[g])\n"
			"movq %%r15, 24(%[g])\n"
			: : [p] "r"(pat), [o] "r"(out), [g] "r"(g)
			: "ecx", "r12", "r13", "r14", "r15", "xmm8", "xmm9", "xmm10", "xmm11",
			  "xmm12", "xmm13", "xmm14", "xmm15", "memory", "cc");
		bad += memcmp(out, pat, 128) != 0;
	}
	bad += memcmp(g, pat, 32) != 0;
	return bad;
}

static void *t_spin(void *a)
{
	int avx = !!__builtin_cpu_supports("avx2");
	unsigned long rounds = 0, bad = 0;
	double end;

	say_tid("spin");
	end = now() + seconds - 1;
	while (now() < end) {
		bad += spin_round(avx);
		rounds++;
	}
	snprintf(results[(long)a], sizeof(results[0]), "spin %s rounds=%lu bad=%lu avx2=%d",
		 !bad && rounds ? "ok" : "bad", rounds, bad, avx);
	return NULL;
}

static void *t_malloc(void *a)
{
	unsigned long n = 0;
	double end;

	say_tid("malloc");
	end = now() + seconds - 1;
	while (now() < end) {
		for (int i = 0; i < 1000; i++) {
			void *p = malloc(16 + (size_t)(i * 37) % 4000);

			if (!p)
				break;
			*(volatile char *)p = 1;
			free(p);
			n++;
		}
	}
	snprintf(results[(long)a], sizeof(results[0]), "malloc %s n=%lu", n ? "ok" : "bad", n);
	return NULL;
}

static void on_usr1(int sig)
{
	(void)sig;
	usr1++;
}

int main(int argc, char **argv)
{
	void *(*fns[])(void *) = { t_read, t_cond, t_sleep, t_epoll, t_spin, t_malloc };
	pthread_t th[6];
	int bad = 0, kill_exec = 0;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--seconds") && i + 1 < argc) {
			seconds = atof(argv[++i]);
		} else if (!strcmp(argv[i], "--seccomp")) {
			struct sock_filter allow = BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
			struct sock_fprog prog = { .len = 1, .filter = &allow };

			if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) ||
			    prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog))
				wl_die("seccomp: %s", strerror(errno));
		} else if (!strcmp(argv[i], "--seccomp-kill-exec")) {
			kill_exec = 1;
		} else if (!strcmp(argv[i], "--nodump")) {
			if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0))
				wl_die("PR_SET_DUMPABLE: %s", strerror(errno));
		} else {
			wl_die("usage: inject_threads [--seconds S] [--seccomp] [--nodump]");
		}
	}
	if (seconds < 2)
		wl_die("--seconds: at least 2");
	signal(SIGUSR1, on_usr1);
	if (pipe(pipefd))
		wl_die("pipe: %s", strerror(errno));
	CHECK(cuInit, 0);
	if (kill_exec) {
		struct sock_filter f[] = {
			BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
			BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 9 /* mmap */, 0, 3),
			BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[2])),
			BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, 4 /* PROT_EXEC */, 0, 1),
			BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
			BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		};
		struct sock_fprog prog = { .len = sizeof(f) / sizeof(f[0]), .filter = f };

		if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) ||
		    prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog))
			wl_die("seccomp: %s", strerror(errno));
	}
	for (long i = 0; i < 6; i++)
		if (pthread_create(&th[i], NULL, fns[i], (void *)i))
			wl_die("pthread_create");
	usleep(100000);
	printf("ready\n");
	fflush(stdout);
	usleep((useconds_t)((seconds - 1) * 1e6));
	if (write(pipefd[1], "hello", 5) != 5)
		wl_die("write: %s", strerror(errno));
	pthread_mutex_lock(&mu);
	done_flag = 1;
	pthread_cond_broadcast(&cv);
	pthread_mutex_unlock(&mu);
	for (int i = 0; i < 6; i++)
		pthread_join(th[i], NULL);
	for (int i = 0; i < 6; i++) {
		printf("result %s\n", results[i]);
		bad += strstr(results[i], " bad ") != NULL;
	}
	printf("sigusr1 %d\n", (int)usr1);
	return bad ? 1 : 0;
}
