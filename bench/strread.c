// SPDX-License-Identifier: MIT
/*
 * strread: what reading a string argument costs when its page is not in
 * the process's page table yet, for each way of reading it that
 * bench/strread.bpf.c implements (entry, retry, sleep, user; bare and
 * untraced as references). One process: the probes are attached to this
 * program's own strread_lookup() (pid-filtered to it), which reads the
 * string as a driver reads a kernel name, and a thread here drains the
 * ring as cgbpf does (50 ms polls, no wakeups) and, for "user", reads
 * unread strings with process_vm_readv.
 *
 * Two modes: "hot", the name's page stays resident (the common case);
 * "cold", MADV_DONTNEED drops the page from the page table before every
 * call (it stays in the page cache: each call takes a minor fault, as the
 * first use of a .rodata literal does), untraced included.
 *
 * Usage: strread [N [RUNS]]   (default 200000 calls, 5 runs)
 * Prints per mode and way: the median ns per call, the ns it adds to the
 * untraced call, that as a ratio, the strings read in full (%), and the
 * consumer's CPU per call. Ways run interleaved round by round, so that a
 * slow phase of the host hits them all alike; compare within one run.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>
#include <bpf/libbpf.h>
#include "strread.skel.h"

#define SR_STR 64
#define SR_UNREAD 1
#define MAX_RUNS 31

struct sr_rec {
	uint64_t addr;
	uint32_t len;
	uint32_t flags;
	char str[SR_STR];
};

enum way { W_UNTRACED, W_BARE, W_ENTRY, W_RETRY, W_SLEEP, W_USER, W__COUNT };
static const char *const way_names[W__COUNT] = { "untraced", "bare", "entry", "retry",
						 "sleep", "user" };

static const char name_text[] = "_Z21attention_fwd_kernelILi128EEvPKfS1_Pfi";

/* Reads the whole name (a hash), as a driver does looking it up. */
__attribute__((noinline, used)) uint64_t strread_hash(const char *name)
{
	uint64_t h = 1469598103934665603ull;

	for (; *name; name++)
		h = (h ^ (unsigned char)*name) * 1099511628211ull;
	__asm__ volatile("" : : "r"(h) : "memory");
	return h;
}

/*
 * The probed function, strread_lookup(name): a frame and a call. Its
 * first instruction is "push %rbp", which uprobes emulate, as on NVIDIA's
 * driver (tests/fake builds the same way); the compiler drops that frame
 * in a leaf function whatever its flags say.
 */
uint64_t strread_lookup(const char *name);
__asm__(".text\n"
	".globl strread_lookup\n"
	".type strread_lookup, @function\n"
	"strread_lookup:\n"
	"	push %rbp\n"
	"	mov %rsp, %rbp\n"
	"	call strread_hash\n"
	"	pop %rbp\n"
	"	ret\n"
	".size strread_lookup, .-strread_lookup\n");

struct consumer {
	struct ring_buffer *rb;
	volatile bool stop;
	bool user;		/* read SR_UNREAD records from this process */
	uint64_t records, read_ok;
	uint64_t cpu_ns;
};

static uint64_t clock_ns(clockid_t c)
{
	struct timespec ts;

	clock_gettime(c, &ts);
	return ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

/* As user/core/ustr.c: page by page, up to the NUL. */
static bool read_remote(uint64_t addr, char *buf, size_t cap)
{
	size_t want = 4096 - (addr & 4095);
	struct iovec l = { buf, want < cap ? want : cap }, r = { (void *)(uintptr_t)addr, l.iov_len };

	return process_vm_readv(getpid(), &l, 1, &r, 1, 0) > 0 && memchr(buf, 0, l.iov_len);
}

static int on_rec(void *ctx, void *data, size_t size)
{
	struct consumer *c = ctx;
	const struct sr_rec *r = data;
	char buf[SR_STR];

	c->records++;
	if (size < sizeof(*r))
		return 0;
	if (r->len)
		c->read_ok++;
	else if (c->user && (r->flags & SR_UNREAD) && read_remote(r->addr, buf, sizeof(buf)))
		c->read_ok++;
	return 0;
}

static void *consume(void *arg)
{
	struct consumer *c = arg;
	uint64_t t0 = clock_ns(CLOCK_THREAD_CPUTIME_ID);

	while (!c->stop) {
		ring_buffer__poll(c->rb, 50);
		ring_buffer__consume(c->rb);
	}
	ring_buffer__consume(c->rb);
	c->cpu_ns = clock_ns(CLOCK_THREAD_CPUTIME_ID) - t0;
	return NULL;
}

static int quiet(enum libbpf_print_level lvl, const char *fmt, va_list ap)
{
	return lvl == LIBBPF_WARN ? vfprintf(stderr, fmt, ap) : 0;
}

static struct bpf_link *attach(struct bpf_program *p, bool ret)
{
	LIBBPF_OPTS(bpf_uprobe_opts, o, .retprobe = ret, .func_name = "strread_lookup");

	return bpf_program__attach_uprobe_opts(p, getpid(), "/proc/self/exe", 0, &o);
}

struct result {
	double ns;		/* per call */
	double read_pct;	/* strings read in full */
	double cpu_ns;		/* consumer CPU per call */
};

static int run(struct strread_bpf *k, enum way w, bool cold, const char *name, size_t n,
	       struct result *res)
{
	struct bpf_program *ep[W__COUNT] = { NULL, k->progs.sr_bare_enter, k->progs.sr_entry_enter,
					     k->progs.sr_retry_enter, k->progs.sr_sleep_enter,
					     k->progs.sr_user_enter };
	struct bpf_program *xp[W__COUNT] = { NULL, k->progs.sr_bare_exit, k->progs.sr_bare_exit,
					     k->progs.sr_retry_exit, k->progs.sr_bare_exit,
					     k->progs.sr_bare_exit };
	struct consumer c = { .user = w == W_USER };
	void *page = (void *)((uintptr_t)name & ~(uintptr_t)4095);
	struct bpf_link *el = NULL, *xl = NULL;
	pthread_t th;
	uint64_t t0, t1;
	int err = 0;

	c.rb = ring_buffer__new(bpf_map__fd(k->maps.sr_ring), on_rec, &c, NULL);
	if (!c.rb || pthread_create(&th, NULL, consume, &c)) {
		fprintf(stderr, "strread: ring consumer: %s\n", strerror(errno));
		ring_buffer__free(c.rb);
		return -1;
	}
	if (w != W_UNTRACED) {
		el = attach(ep[w], false);
		xl = el ? attach(xp[w], true) : NULL;
		if (!el || !xl) {
			fprintf(stderr, "strread: attaching %s: %s\n", way_names[w], strerror(errno));
			err = -1;
			goto out;
		}
	}
	strread_lookup(name);	/* resident to begin with */
	t0 = clock_ns(CLOCK_MONOTONIC);
	for (size_t i = 0; i < n; i++) {
		if (cold)
			madvise(page, 4096, MADV_DONTNEED);
		strread_lookup(name);
	}
	t1 = clock_ns(CLOCK_MONOTONIC);
	res->ns = (double)(t1 - t0) / n;
out:
	bpf_link__destroy(el);
	bpf_link__destroy(xl);
	c.stop = true;
	pthread_join(th, NULL);
	ring_buffer__free(c.rb);
	/* The warm-up call is traced too. */
	res->read_pct = w <= W_BARE ? 100.0 : 100.0 * c.read_ok / (n + 1);
	res->cpu_ns = (double)c.cpu_ns / n;
	return err;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
	qsort(v, n, sizeof(*v), cmp_d);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* A page of a private file mapping holding the name, in a file under dir. */
static const char *name_page(const char *dir)
{
	char path[4096], buf[4096] = { 0 };
	void *m;
	int fd;

	snprintf(path, sizeof(path), "%s/strread-%d", dir, (int)getpid());
	memcpy(buf + 100, name_text, sizeof(name_text));
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0 || write(fd, buf, sizeof(buf)) != sizeof(buf)) {
		fprintf(stderr, "strread: cannot write %s: %s\n", path, strerror(errno));
		exit(1);
	}
	m = mmap(NULL, sizeof(buf), PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	unlink(path);
	if (m == MAP_FAILED) {
		fprintf(stderr, "strread: mmap: %s\n", strerror(errno));
		exit(1);
	}
	return (const char *)m + 100;
}

int main(int argc, char **argv)
{
	size_t n = argc > 1 ? strtoull(argv[1], NULL, 10) : 200000;
	int runs = argc > 2 ? atoi(argv[2]) : 5;
	const char *tmp = getenv("BENCH_TMP") ? getenv("BENCH_TMP") : "/tmp";
	double ns[2][W__COUNT][MAX_RUNS], pct[2][W__COUNT][MAX_RUNS], cpu[2][W__COUNT][MAX_RUNS];
	bool have_sleep = true;
	struct strread_bpf *k;
	const char *name;

	if (!n || runs < 1 || runs > MAX_RUNS) {
		fprintf(stderr, "usage: strread [N [RUNS]] (RUNS 1..%d)\n", MAX_RUNS);
		return 2;
	}
	libbpf_set_print(quiet);
	name = name_page(tmp);
	k = strread_bpf__open_and_load();
	if (!k) {
		/* No sleepable uprobes (Linux < 6.0): measure the others. */
		have_sleep = false;
		k = strread_bpf__open();
		if (k)
			bpf_program__set_autoload(k->progs.sr_sleep_enter, false);
		if (!k || strread_bpf__load(k)) {
			fprintf(stderr, "strread: loading BPF programs: %s (root needed)\n",
				strerror(errno));
			return 1;
		}
		fprintf(stderr, "strread: no sleepable uprobes here: \"sleep\" not measured\n");
	}
	for (int r = 0; r < runs; r++)
		for (int cold = 0; cold < 2; cold++)
			for (int w = 0; w < W__COUNT; w++) {
				struct result res = { 0 };

				if (w == W_SLEEP && !have_sleep)
					continue;
				if (run(k, w, cold, name, n, &res))
					return 1;
				ns[cold][w][r] = res.ns;
				pct[cold][w][r] = res.read_pct;
				cpu[cold][w][r] = res.cpu_ns;
			}
	printf("strread: %zu calls per run, median of %d runs, interleaved\n", n, runs);
	for (int cold = 0; cold < 2; cold++) {
		double base = median(ns[cold][W_UNTRACED], runs);

		printf("\n%s name page (%s)\n", cold ? "cold" : "hot",
		       cold ? "MADV_DONTNEED before every call: a minor fault each" :
			      "resident: the common case");
		printf("  %-9s %10s %10s %8s %8s %14s\n", "way", "ns/call", "added", "ratio",
		       "read %", "consumer ns");
		for (int w = 0; w < W__COUNT; w++) {
			double m, p, c;

			if (w == W_SLEEP && !have_sleep)
				continue;
			m = median(ns[cold][w], runs);
			p = median(pct[cold][w], runs);
			c = median(cpu[cold][w], runs);
			printf("  %-9s %10.1f %10.1f %8.2f %8.1f %14.1f\n", way_names[w], m, m - base,
			       m / base, p, c);
		}
	}
	printf("\n");
	for (int cold = 0; cold < 2; cold++)
		for (int w = 0; w < W__COUNT; w++) {
			if (w == W_SLEEP && !have_sleep)
				continue;
			printf("%s_%s_ns=%.1f %s_%s_read_pct=%.1f\n", cold ? "cold" : "hot",
			       way_names[w], median(ns[cold][w], runs), cold ? "cold" : "hot",
			       way_names[w], median(pct[cold][w], runs));
		}
	strread_bpf__destroy(k);
	return 0;
}
