/* SPDX-License-Identifier: MIT */
/*
 * cap_overlap: two processes whose profiler-API windows overlap in a
 * known order (--split-per-process --capture-range cudaProfilerApi): one
 * process's cuProfilerStop comes while the other's window is open, and
 * the launches that follow in the open window must still be recorded.
 *
 * Usage: cap_overlap a|b DIR   (DIR: files the two use to wait for each other)
 *   Both: context, module, cuModuleGetFunction "k_in" and "k_out", 2
 *   launches of k_out. Then
 *   a: cuProfilerStart; creates DIR/a_started; waits for DIR/b_stopped;
 *      4 launches of k_in; cuStreamSynchronize; cuProfilerStop; 1 k_out.
 *   b: waits for DIR/a_started; cuProfilerStart; 2 launches of k_in;
 *      cuProfilerStop; creates DIR/b_stopped; 1 k_out; cuProfilerStart;
 *      3 launches of k_in; cuProfilerStop; cuProfilerStart again inside
 *      (a repeated start: no new window); 1 k_out after the stop.
 * CAP_GAP_MS in the environment: sleep that long after the first k_out
 * launches (the injection library starts collecting meanwhile) and after
 * each window's stop (its GPU activity reaches cgbpf before the process
 * goes on or exits).
 * Manifest extra: "windows": [k_in launches per window], "outside": n.
 */
#define _GNU_SOURCE
#include <cuda.h>
#if __has_include(<cudaProfiler.h>)
#include <cudaProfiler.h>
#else
CUresult cuProfilerStart(void);
CUresult cuProfilerStop(void);
#endif
#include <fcntl.h>
#include <stdbool.h>

#include "manifest.h"

static const unsigned char module_image[] = "\x7f" "ELF fake cubin for cgbpf cap_overlap";
static unsigned long win[4], nwin, outside;
static CUfunction k_in, k_out;

static void extra(FILE *f, void *arg)
{
	(void)arg;
	fprintf(f, ", \"windows\": [");
	for (unsigned long w = 0; w < nwin; w++)
		fprintf(f, "%s%lu", w ? ", " : "", win[w]);
	fprintf(f, "], \"outside\": %lu", outside);
}

static void launch(CUfunction fn, const char *name)
{
	CHECK(cuLaunchKernel, fn, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL);
	wl_kernel(name, 1);
}

static void window(unsigned long n, bool restart)
{
	CHECK(cuProfilerStart);
	if (restart)
		CHECK(cuProfilerStart);
	for (unsigned long i = 0; i < n; i++)
		launch(k_in, "k_in");
	win[nwin++] = n;
	CHECK(cuProfilerStop);
}

static void gap(void)
{
	const char *v = getenv("CAP_GAP_MS");
	unsigned long ms = v ? strtoul(v, NULL, 10) : 0;
	struct timespec ts = { (time_t)(ms / 1000), (long)(ms % 1000) * 1000000L };

	while (ms && nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

static void mark(const char *dir, const char *name)
{
	char path[4096];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	fd = open(path, O_WRONLY | O_CREAT, 0644);
	if (fd < 0)
		wl_die("cannot create %s", path);
	close(fd);
}

static void await(const char *dir, const char *name)
{
	struct timespec ms = { 0, 1000000 };
	char path[4096];
	int i;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	for (i = 0; i < 60000 && access(path, F_OK); i++)
		nanosleep(&ms, NULL);
	if (i == 60000)
		wl_die("%s did not appear within 60 s", path);
}

int main(int argc, char **argv)
{
	CUcontext ctx;
	CUmodule mod;

	if (argc != 3 || (strcmp(argv[1], "a") && strcmp(argv[1], "b")))
		wl_die("usage: cap_overlap a|b DIR");
	wl_gate();
	ctx = wl_context();
	CHECK(cuModuleLoadData, &mod, module_image);
	CHECK(cuModuleGetFunction, &k_in, mod, "k_in");
	CHECK(cuModuleGetFunction, &k_out, mod, "k_out");
	for (int i = 0; i < 2; i++, outside++)
		launch(k_out, "k_out");
	gap();
	if (!strcmp(argv[1], "a")) {
		CHECK(cuProfilerStart);
		mark(argv[2], "a_started");
		await(argv[2], "b_stopped");
		for (int i = 0; i < 4; i++)
			launch(k_in, "k_in");
		win[nwin++] = 4;
		CHECK(cuStreamSynchronize, NULL);
		CHECK(cuProfilerStop);
		gap();
		launch(k_out, "k_out");
		outside++;
	} else {
		await(argv[2], "a_started");
		window(2, false);
		mark(argv[2], "b_stopped");
		gap();
		launch(k_out, "k_out");
		outside++;
		window(3, true);
		gap();
		launch(k_out, "k_out");
		outside++;
	}
	CHECK(cuModuleUnload, mod);
	CHECK(cuCtxDestroy, ctx);
	wl_manifest_write(extra, NULL);
	return 0;
}
