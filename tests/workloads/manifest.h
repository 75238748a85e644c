/* SPDX-License-Identifier: MIT */
/*
 * Shared helpers for the test workloads: the start gate, command-line
 * numbers, and the JSON manifest of exactly what a workload did, which the
 * tests compare with what cgbpf traced.
 *
 * Every CUDA call goes through CU(fn, args...), which counts it under the
 * name the call resolves to after the toolkit header's remapping (cuMemAlloc
 * in source is counted as cuMemAlloc_v2, because that is the symbol the
 * program calls), whatever it returns. Counts are kept per thread, without
 * locks, and merged when the manifest is written.
 *
 * Manifest (CGBPF_MANIFEST=path, written atomically at the end):
 *   {"pid": N,
 *    "calls": {"<exported symbol>": count, ...},   every call, errors too
 *    "errors": [{"call": sym, "result": CUresult, "count": n}, ...],
 *    "kernels": {"<name>": launches, ...},          successful launches
 *    "bytes": {"HtoD": n, "DtoH": n, "DtoD": n},   successful copies
 *    "memset_bytes": n,
 *    "alloc_bytes_peak": n,        live device memory (cuMemAlloc*), peak
 *    "host_alloc_bytes_peak": n,   live page-locked host memory, peak
 *    "threads": [tid, ...],        threads that made CUDA calls
 *    "per_thread": {"<tid>": {"name": comm, "<symbol>": count, ...}, ...},
 *    "children": [pid, ...],
 *    ...workload-specific fields}
 */
#ifndef CGBPF_WL_MANIFEST_H
#define CGBPF_WL_MANIFEST_H

#ifndef _GNU_SOURCE
#error "define _GNU_SOURCE before any include (pthread_setname_np, program_invocation_short_name)"
#endif

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include "child_gate.h"
#include <unistd.h>

#define WL_STR_(x) #x
/* The name fn resolves to after macro expansion, as a string. */
#define WL_SYM(fn) WL_STR_(fn)

/* Calls fn, counts it under its resolved name, and yields its CUresult. */
#define CU(fn, ...) ({ \
	CUresult cu_r_ = fn(__VA_ARGS__); \
	wl_call(WL_SYM(fn), (int)cu_r_); \
	cu_r_; \
})

/* As CU, but exits if the call does not succeed. */
#define CHECK(fn, ...) ({ \
	CUresult ck_r_ = CU(fn, __VA_ARGS__); \
	if (ck_r_ != CUDA_SUCCESS) \
		wl_die("%s failed: %d (%s:%d)", WL_SYM(fn), (int)ck_r_, __FILE__, __LINE__); \
})

/* As CU, for a call made to fail on purpose: exits unless it fails with want. */
#define EXPECT(want, fn, ...) ({ \
	CUresult ex_r_ = CU(fn, __VA_ARGS__); \
	if (ex_r_ != (want)) \
		wl_die("%s returned %d, expected %d (%s:%d)", WL_SYM(fn), (int)ex_r_, \
		       (int)(want), __FILE__, __LINE__); \
})

struct wl_count {
	const char *name;
	int result;		/* errors only */
	unsigned long n;
};

struct wl_tab {
	struct wl_count *v;
	size_t len, cap;
};

struct wl_thread {
	long tid;
	char name[16];
	struct wl_tab calls, kernels, errors;
	struct wl_thread *next;
};

static pthread_mutex_t wl_lock = PTHREAD_MUTEX_INITIALIZER;
static struct wl_thread *wl_threads;
static __thread struct wl_thread *wl_self;
static unsigned long wl_bytes_htod, wl_bytes_dtoh, wl_bytes_dtod, wl_bytes_memset;
static unsigned long wl_dev_live, wl_dev_peak, wl_host_live, wl_host_peak;
static long *wl_children;
static size_t wl_nchildren, wl_children_cap;

__attribute__((format(printf, 1, 2), noreturn))
static inline void wl_die(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fprintf(stderr, "%s: ", program_invocation_short_name);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	exit(1);
}

static inline long wl_gettid(void)
{
	return (long)syscall(SYS_gettid);
}

static inline struct wl_thread *wl_thread_self(void)
{
	struct wl_thread *t = wl_self;

	if (t)
		return t;
	t = calloc(1, sizeof(*t));
	if (!t)
		wl_die("out of memory");
	t->tid = wl_gettid();
	if (pthread_getname_np(pthread_self(), t->name, sizeof(t->name)) != 0)
		t->name[0] = '\0';
	pthread_mutex_lock(&wl_lock);
	t->next = wl_threads;
	wl_threads = t;
	pthread_mutex_unlock(&wl_lock);
	wl_self = t;
	return t;
}

/* Names thread and records the name; call before its first CUDA call. */
static inline void wl_set_thread_name(const char *name)
{
	struct wl_thread *t;

	pthread_setname_np(pthread_self(), name);
	t = wl_thread_self();
	snprintf(t->name, sizeof(t->name), "%s", name);
}

static inline void wl_tab_add(struct wl_tab *tab, const char *name, int result, unsigned long n)
{
	for (size_t i = 0; i < tab->len; i++) {
		struct wl_count *c = &tab->v[i];

		if (c->result == result && (c->name == name || !strcmp(c->name, name))) {
			c->n += n;
			return;
		}
	}
	if (tab->len == tab->cap) {
		size_t cap = tab->cap ? tab->cap * 2 : 16;
		struct wl_count *v = realloc(tab->v, cap * sizeof(*v));

		if (!v)
			wl_die("out of memory");
		tab->v = v;
		tab->cap = cap;
	}
	tab->v[tab->len++] = (struct wl_count){ name, result, n };
}

static inline void wl_call(const char *sym, int result)
{
	struct wl_thread *t = wl_thread_self();

	wl_tab_add(&t->calls, sym, 0, 1);
	if (result != 0)
		wl_tab_add(&t->errors, sym, result, 1);
}

/* Adds n calls of sym at once, for loops too hot to count one by one. */
static inline void wl_calls(const char *sym, unsigned long n)
{
	wl_tab_add(&wl_thread_self()->calls, sym, 0, n);
}

/* name must outlive the manifest (a literal or a static table entry). */
static inline void wl_kernel(const char *name, unsigned long launches)
{
	wl_tab_add(&wl_thread_self()->kernels, name, 0, launches);
}

enum wl_dir { WL_HTOD, WL_DTOH, WL_DTOD, WL_MEMSET };

static inline void wl_bytes(enum wl_dir dir, unsigned long n)
{
	unsigned long *p = dir == WL_HTOD ? &wl_bytes_htod : dir == WL_DTOH ? &wl_bytes_dtoh :
			   dir == WL_DTOD ? &wl_bytes_dtod : &wl_bytes_memset;

	__atomic_fetch_add(p, n, __ATOMIC_RELAXED);
}

static inline void wl_peak(unsigned long *live, unsigned long *peak, long delta)
{
	unsigned long now = __atomic_add_fetch(live, (unsigned long)delta, __ATOMIC_RELAXED);
	unsigned long old = __atomic_load_n(peak, __ATOMIC_RELAXED);

	while (now > old &&
	       !__atomic_compare_exchange_n(peak, &old, now, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		;
}

static inline void wl_dev_alloc(unsigned long n) { wl_peak(&wl_dev_live, &wl_dev_peak, (long)n); }
static inline void wl_dev_free(unsigned long n) { wl_peak(&wl_dev_live, &wl_dev_peak, -(long)n); }
static inline void wl_host_alloc(unsigned long n) { wl_peak(&wl_host_live, &wl_host_peak, (long)n); }
static inline void wl_host_free(unsigned long n) { wl_peak(&wl_host_live, &wl_host_peak, -(long)n); }

static inline void wl_add_child(long pid)
{
	if (wl_nchildren == wl_children_cap) {
		size_t cap = wl_children_cap ? wl_children_cap * 2 : 8;
		long *v = realloc(wl_children, cap * sizeof(*v));

		if (!v)
			wl_die("out of memory");
		wl_children = v;
		wl_children_cap = cap;
	}
	wl_children[wl_nchildren++] = pid;
}

/* In a forked child: forget the parent's counts, keeping none of its threads. */
static inline void wl_reset_after_fork(void)
{
	struct wl_thread *t, *next;

	for (t = wl_threads; t; t = next) {
		next = t->next;
		free(t->calls.v);
		free(t->kernels.v);
		free(t->errors.v);
		free(t);
	}
	free(wl_children);
	wl_threads = NULL;
	wl_self = NULL;
	wl_bytes_htod = wl_bytes_dtoh = wl_bytes_dtod = wl_bytes_memset = 0;
	wl_dev_live = wl_dev_peak = wl_host_live = wl_host_peak = 0;
	wl_children = NULL;
	wl_nchildren = wl_children_cap = 0;
	pthread_mutex_init(&wl_lock, NULL);
}

static inline unsigned long wl_env_ul(const char *name, unsigned long def)
{
	const char *v = getenv(name);
	char *end;
	unsigned long x;

	if (!v || !*v)
		return def;
	errno = 0;
	x = strtoul(v, &end, 10);
	if (errno || *end)
		wl_die("bad %s=%s", name, v);
	return x;
}

#ifdef CUDA_VERSION
/* cuInit, device 0 and a context on it: every workload's first calls. */
static inline CUcontext wl_context(void)
{
	CUcontext ctx;
	CUdevice dev;

	CHECK(cuInit, 0);
	CHECK(cuDeviceGet, &dev, 0);
#if CUDA_VERSION >= 13000
	CHECK(cuCtxCreate, &ctx, NULL, 0, dev);
#else
	CHECK(cuCtxCreate, &ctx, 0, dev);
#endif
	return ctx;
}
#endif

/*
 * Lets a tracer attach before the first CUDA call: waits for the file
 * CGBPF_WAIT_FILE to exist (polling every 1 ms, at most 30 s), then sleeps
 * CGBPF_START_DELAY_MS.
 */
static inline void wl_gate(void)
{
	const char *file = getenv("CGBPF_WAIT_FILE");
	unsigned long delay = wl_env_ul("CGBPF_START_DELAY_MS", 0);

	wl_child_gate();
	if (file && *file) {
		struct timespec ms = { 0, 1000000 };
		int i;

		for (i = 0; i < 30000 && access(file, F_OK) != 0; i++)
			nanosleep(&ms, NULL);
		if (i == 30000)
			wl_die("%s did not appear within 30 s", file);
	}
	if (delay) {
		struct timespec ts = { (time_t)(delay / 1000), (long)(delay % 1000) * 1000000 };

		while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
			;
	}
}

/*
 * A second gate, in the middle of a run: when CGBPF_PAUSE_FILE is set,
 * creates "<it>.ready" to say the setup part is done, then waits (at most
 * 30 s) for the file itself. Lets a test attach after modules were loaded.
 */
static inline void wl_pause(void)
{
	const char *file = getenv("CGBPF_PAUSE_FILE");
	struct timespec ms = { 0, 1000000 };
	char ready[4096];
	int i, fd;

	if (!file || !*file)
		return;
	snprintf(ready, sizeof(ready), "%s.ready", file);
	fd = open(ready, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0)
		wl_die("cannot create %s: %s", ready, strerror(errno));
	close(fd);
	for (i = 0; i < 30000 && access(file, F_OK) != 0; i++)
		nanosleep(&ms, NULL);
	if (i == 30000)
		wl_die("%s did not appear within 30 s", file);
}

/*
 * Parses "--name N" or "--name=N" at argv[*i] into *val; returns 1 if it
 * matched (advancing *i past a separate value), 0 otherwise.
 */
static inline int wl_arg_ul(int argc, char **argv, int *i, const char *name, unsigned long *val)
{
	size_t len = strlen(name);
	const char *a = argv[*i], *v;
	char *end;

	if (strncmp(a, name, len) != 0)
		return 0;
	if (a[len] == '=') {
		v = a + len + 1;
	} else if (a[len] == '\0') {
		if (*i + 1 >= argc)
			wl_die("%s needs a value", name);
		v = argv[++*i];
	} else {
		return 0;
	}
	errno = 0;
	*val = strtoul(v, &end, 10);
	if (errno || !*v || *end)
		wl_die("bad value for %s: %s", name, v);
	return 1;
}

static inline void wl_json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c < 0x20)
			fprintf(f, "\\u%04x", c);
		else
			fputc(c, f);
	}
	fputc('"', f);
}

static inline int wl_count_cmp(const void *a, const void *b)
{
	const struct wl_count *x = a, *y = b;
	int r = strcmp(x->name, y->name);

	return r ? r : (x->result > y->result) - (x->result < y->result);
}

/* The sum of one table over all threads, sorted; free() the result's v. */
static inline struct wl_tab wl_merge(size_t off)
{
	struct wl_tab all = { 0 };

	for (struct wl_thread *t = wl_threads; t; t = t->next) {
		struct wl_tab *tab = (struct wl_tab *)((char *)t + off);

		for (size_t i = 0; i < tab->len; i++)
			wl_tab_add(&all, tab->v[i].name, tab->v[i].result, tab->v[i].n);
	}
	if (all.len)
		qsort(all.v, all.len, sizeof(*all.v), wl_count_cmp);
	return all;
}

static inline void wl_json_counts(FILE *f, const struct wl_tab *tab)
{
	fputc('{', f);
	for (size_t i = 0; i < tab->len; i++) {
		fputs(i ? ", " : "", f);
		wl_json_str(f, tab->v[i].name);
		fprintf(f, ": %lu", tab->v[i].n);
	}
	fputc('}', f);
}

static inline void wl_json_errors(FILE *f, const struct wl_tab *tab)
{
	fputc('[', f);
	for (size_t i = 0; i < tab->len; i++) {
		fputs(i ? ", {\"call\": " : "{\"call\": ", f);
		wl_json_str(f, tab->v[i].name);
		fprintf(f, ", \"result\": %d, \"count\": %lu}", tab->v[i].result, tab->v[i].n);
	}
	fputc(']', f);
}

/* {"calls": {...}, "errors": [...], "kernels": {...}} of this process, so far. */
static inline void wl_write_process(FILE *f)
{
	struct wl_tab calls = wl_merge(offsetof(struct wl_thread, calls));
	struct wl_tab errors = wl_merge(offsetof(struct wl_thread, errors));
	struct wl_tab kernels = wl_merge(offsetof(struct wl_thread, kernels));

	fputs("{\"calls\": ", f);
	wl_json_counts(f, &calls);
	fputs(", \"errors\": ", f);
	wl_json_errors(f, &errors);
	fputs(", \"kernels\": ", f);
	wl_json_counts(f, &kernels);
	fputc('}', f);
	free(calls.v);
	free(errors.v);
	free(kernels.v);
}

/*
 * Writes the manifest if CGBPF_MANIFEST is set. extra, if given, writes
 * more members, each starting with ", ". Call after all threads are joined.
 */
static inline void wl_manifest_write(void (*extra)(FILE *f, void *arg), void *arg)
{
	const char *path = getenv("CGBPF_MANIFEST");
	struct wl_tab calls, errors, kernels;
	char tmp[4096];
	FILE *f;
	int n, first;

	if (!path || !*path)
		return;
	n = snprintf(tmp, sizeof(tmp), "%s.tmp.%d", path, (int)getpid());
	if (n < 0 || (size_t)n >= sizeof(tmp))
		wl_die("manifest path too long");
	if (!(f = fopen(tmp, "w")))
		wl_die("cannot write %s: %s", tmp, strerror(errno));

	calls = wl_merge(offsetof(struct wl_thread, calls));
	errors = wl_merge(offsetof(struct wl_thread, errors));
	kernels = wl_merge(offsetof(struct wl_thread, kernels));

	fprintf(f, "{\n  \"pid\": %d,\n  \"calls\": ", (int)getpid());
	wl_json_counts(f, &calls);
	fputs(",\n  \"errors\": ", f);
	wl_json_errors(f, &errors);
	fputs(",\n  \"kernels\": ", f);
	wl_json_counts(f, &kernels);
	fprintf(f, ",\n  \"bytes\": {\"HtoD\": %lu, \"DtoH\": %lu, \"DtoD\": %lu},\n"
		"  \"memset_bytes\": %lu,\n  \"alloc_bytes_peak\": %lu,\n"
		"  \"host_alloc_bytes_peak\": %lu,\n  \"threads\": [",
		wl_bytes_htod, wl_bytes_dtoh, wl_bytes_dtod, wl_bytes_memset, wl_dev_peak,
		wl_host_peak);
	first = 1;
	for (struct wl_thread *t = wl_threads; t; t = t->next) {
		if (!t->calls.len)
			continue;
		fprintf(f, "%s%ld", first ? "" : ", ", t->tid);
		first = 0;
	}
	fputs("],\n  \"per_thread\": {", f);
	first = 1;
	for (struct wl_thread *t = wl_threads; t; t = t->next) {
		if (!t->calls.len)
			continue;
		fprintf(f, "%s\n    \"%ld\": {\"name\": ", first ? "" : ",", t->tid);
		wl_json_str(f, t->name);
		for (size_t i = 0; i < t->calls.len; i++) {
			fputs(", ", f);
			wl_json_str(f, t->calls.v[i].name);
			fprintf(f, ": %lu", t->calls.v[i].n);
		}
		fputc('}', f);
		first = 0;
	}
	fputs("},\n  \"children\": [", f);
	for (size_t i = 0; i < wl_nchildren; i++)
		fprintf(f, "%s%ld", i ? ", " : "", wl_children[i]);
	fputc(']', f);
	if (extra)
		extra(f, arg);
	fputs("\n}\n", f);
	free(calls.v);
	free(errors.v);
	free(kernels.v);
	if (ferror(f) | fclose(f))
		wl_die("cannot write %s", tmp);
	if (rename(tmp, path) != 0)
		wl_die("cannot rename %s to %s: %s", tmp, path, strerror(errno));
}

#endif
