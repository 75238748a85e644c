/* SPDX-License-Identifier: MIT */
/*
 * fork: a CUDA process that forks CUDA-using children (fork without exec).
 *
 * Usage: fork [--children C] [--iters N] [--gap-ms G] [--serial] [--linger-ms L] [--idle]
 *             (defaults 2, 20, 0, 0)
 * --gap-ms: the parent waits G ms between forks (bench/attach_latency.sh:
 * later forks then come while the earlier children fill cgbpf's ring).
 * --serial: each child is forked as soon as the one before exited, so
 * that cgbpf lets go of one child's probes while the next one is forked.
 * --linger-ms: each child sleeps L ms after its calls and its report, then
 * exits (a child that called only inside its window and lived on past it).
 * --idle: children make no CUDA call at all (a worker that never calls the
 * API); their reports hold no calls.
 *
 * The parent initializes, creates a context, loads a module, allocates a
 * buffer and launches _Z12parent_setupPfi twice, then forks C children.
 * Each child starts from scratch as a CUDA program must after fork (cuInit,
 * cuDeviceGet, its own context, module and stream), launches
 * _Z10child_stepPfi N times with grid (k+1, 1, 1) for child k, copies a
 * buffer HtoD and back DtoH, synchronizes, destroys its context and exits.
 * After all children exit the parent launches _Z13parent_finishPfi once
 * and cleans up.
 *
 * Each child sends its own {"calls", "errors", "kernels"} to the parent
 * through a pipe (children write no manifest file); the parent writes the
 * only manifest: the common fields describe the parent alone, plus
 * "processes": {"<pid>": {"calls": {...}, "errors": [...],
 * "kernels": {...}}} for the parent and every child, "children": [pids]
 * in fork order, and "iters".
 */
#define _GNU_SOURCE
#include <stdbool.h>
#include <cuda.h>
#include <sys/wait.h>

#include "manifest.h"

#define K_SETUP "_Z12parent_setupPfi"
#define K_STEP "_Z10child_stepPfi"
#define K_FINISH "_Z13parent_finishPfi"

static const unsigned char module_image[] = "\x7f" "ELF fake cubin for cgbpf fork";

struct child {
	long pid;
	int fd;		/* read end of its report pipe */
	char *report;	/* its wl_write_process() output */
};

struct children {
	struct child *v;
	unsigned long n;
	unsigned long iters;
};

static void create_context(CUcontext *ctx, CUdevice dev)
{
#if CUDA_VERSION >= 13000
	CHECK(cuCtxCreate, ctx, NULL, 0, dev);
#else
	CHECK(cuCtxCreate, ctx, 0, dev);
#endif
}

static void child_main(unsigned long k, unsigned long iters)
{
	unsigned char host[4096], back[4096];
	CUfunction fn;
	CUdeviceptr d;
	CUcontext ctx;
	CUmodule mod;
	CUstream s;
	CUdevice dev;
	int n = (int)sizeof(host);
	void *args[] = { &d, &n };

	memset(host, (int)k + 1, sizeof(host));
	CHECK(cuInit, 0);
	CHECK(cuDeviceGet, &dev, 0);
	create_context(&ctx, dev);
	CHECK(cuModuleLoadData, &mod, module_image);
	CHECK(cuModuleGetFunction, &fn, mod, K_STEP);
	CHECK(cuStreamCreate, &s, CU_STREAM_NON_BLOCKING);
	CHECK(cuMemAlloc, &d, sizeof(host));
	wl_dev_alloc(sizeof(host));
	CHECK(cuMemcpyHtoD, d, host, sizeof(host));
	wl_bytes(WL_HTOD, sizeof(host));
	for (unsigned long i = 0; i < iters; i++) {
		CHECK(cuLaunchKernel, fn, (unsigned int)k + 1, 1, 1, 128, 1, 1, 0, s, args, NULL);
		wl_kernel(K_STEP, 1);
	}
	CHECK(cuStreamSynchronize, s);
	CHECK(cuMemcpyDtoH, back, d, sizeof(back));
	wl_bytes(WL_DTOH, sizeof(back));
	if (memcmp(host, back, sizeof(host)) != 0)
		wl_die("child %lu: device memory did not round-trip", k);
	CHECK(cuMemFree, d);
	wl_dev_free(sizeof(host));
	CHECK(cuStreamDestroy, s);
	CHECK(cuModuleUnload, mod);
	CHECK(cuCtxDestroy, ctx);
}

static char *read_all(int fd)
{
	size_t len = 0, cap = 4096;
	char *buf = malloc(cap);
	ssize_t r;

	if (!buf)
		wl_die("out of memory");
	for (;;) {
		if (len + 1 == cap) {
			char *p = realloc(buf, cap *= 2);

			if (!p)
				wl_die("out of memory");
			buf = p;
		}
		r = read(fd, buf + len, cap - len - 1);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			wl_die("read: %s", strerror(errno));
		if (r == 0)
			break;
		len += (size_t)r;
	}
	buf[len] = '\0';
	return buf;
}

static void write_extra(FILE *f, void *arg)
{
	struct children *cs = arg;

	fprintf(f, ",\n  \"iters\": %lu,\n  \"processes\": {\n    \"%d\": ", cs->iters,
		(int)getpid());
	wl_write_process(f);
	for (unsigned long i = 0; i < cs->n; i++)
		fprintf(f, ",\n    \"%ld\": %s", cs->v[i].pid, cs->v[i].report);
	fputs("\n  }", f);
}

/* Reads a child's report and waits for its exit; 1 if it failed. */
static int reap(struct child *c)
{
	int status;

	c->report = read_all(c->fd);
	close(c->fd);
	while (waitpid((pid_t)c->pid, &status, 0) < 0) {
		if (errno != EINTR)
			wl_die("waitpid: %s", strerror(errno));
	}
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || !*c->report) {
		fprintf(stderr, "fork: child %ld failed (status 0x%x)\n", c->pid, status);
		return 1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct children cs = { .n = 2, .iters = 20 };
	CUfunction setup, finish;
	CUdeviceptr d;
	CUcontext ctx;
	CUmodule mod;
	CUdevice dev;
	int n = 1024, failed = 0;
	unsigned long gap_ms = 0, linger_ms = 0;
	bool serial = false, idle = false;
	void *args[] = { &d, &n };

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--serial"))
			serial = true;
		else if (!strcmp(argv[i], "--idle"))
			idle = true;
		else if (!wl_arg_ul(argc, argv, &i, "--children", &cs.n) &&
			 !wl_arg_ul(argc, argv, &i, "--iters", &cs.iters) &&
			 !wl_arg_ul(argc, argv, &i, "--gap-ms", &gap_ms) &&
			 !wl_arg_ul(argc, argv, &i, "--linger-ms", &linger_ms))
			wl_die("usage: fork [--children C] [--iters N] [--gap-ms G] [--serial] "
			       "[--linger-ms L] [--idle]");
	}
	if (!(cs.v = calloc(cs.n ? cs.n : 1, sizeof(*cs.v))))
		wl_die("out of memory");

	wl_gate();

	CHECK(cuInit, 0);
	CHECK(cuDeviceGet, &dev, 0);
	create_context(&ctx, dev);
	CHECK(cuModuleLoadData, &mod, module_image);
	CHECK(cuModuleGetFunction, &setup, mod, K_SETUP);
	CHECK(cuModuleGetFunction, &finish, mod, K_FINISH);
	CHECK(cuMemAlloc, &d, 4096);
	wl_dev_alloc(4096);
	for (int i = 0; i < 2; i++) {
		CHECK(cuLaunchKernel, setup, 4, 1, 1, 256, 1, 1, 0, NULL, args, NULL);
		wl_kernel(K_SETUP, 1);
	}
	CHECK(cuCtxSynchronize);

	/* Flushed now, or each child would flush the parent's buffered output again. */
	fflush(NULL);
	for (unsigned long k = 0; k < cs.n; k++) {
		int fds[2];
		pid_t pid;

		if (pipe(fds) != 0)
			wl_die("pipe: %s", strerror(errno));
		pid = fork();
		if (pid < 0)
			wl_die("fork: %s", strerror(errno));
		if (pid == 0) {
			FILE *f;

			close(fds[0]);
			wl_reset_after_fork();
			wl_child_gate();
			if (!idle)
				child_main(k, cs.iters);
			if (!(f = fdopen(fds[1], "w")))
				wl_die("fdopen: %s", strerror(errno));
			wl_write_process(f);
			if (fclose(f) != 0)
				wl_die("cannot report to the parent");
			if (linger_ms)
				usleep(linger_ms * 1000);
			exit(0);
		}
		close(fds[1]);
		if (gap_ms)
			usleep(gap_ms * 1000);
		cs.v[k].pid = pid;
		cs.v[k].fd = fds[0];
		wl_add_child(pid);
		if (serial)
			failed |= reap(&cs.v[k]);
	}
	/* Children run concurrently; each report ends when its child exits. */
	for (unsigned long k = 0; k < cs.n && !serial; k++)
		failed |= reap(&cs.v[k]);

	CHECK(cuLaunchKernel, finish, 2, 1, 1, 64, 1, 1, 0, NULL, args, NULL);
	wl_kernel(K_FINISH, 1);
	CHECK(cuCtxSynchronize);
	CHECK(cuMemFree, d);
	wl_dev_free(4096);
	CHECK(cuModuleUnload, mod);
	CHECK(cuCtxDestroy, ctx);

	if (!failed)
		wl_manifest_write(write_extra, &cs);
	for (unsigned long k = 0; k < cs.n; k++)
		free(cs.v[k].report);
	free(cs.v);
	return failed;
}
