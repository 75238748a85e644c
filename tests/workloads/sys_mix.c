/* SPDX-License-Identifier: MIT */
/*
 * sys_mix: syscalls with known numbers, arguments and results, for the
 * syscall slices (cgbpf --syscall-threshold).
 *
 * Usage: sys_mix [--sleeps N] [--getpids N]      (defaults 3 and 1000)
 *
 * In order, on the main thread unless said otherwise:
 *   - N nanosleep(2) of 20 ms (the raw syscall: glibc's nanosleep() is
 *     clock_nanosleep) and N clock_nanosleep(CLOCK_REALTIME, 0, 10 ms);
 *   - a 64 KiB file, /tmp/cgbpf-sys_mix-XXXXXX/a/data, written with 8
 *     write(2) of 8192 bytes, fsync, lseek, one ioctl(FIONREAD) on it (a
 *     path deeper than cgbpf's three components), then read back with 8
 *     read(2) of 8192 bytes, closed and removed;
 *   - 3 ioctl(FIONREAD) on /dev/null (ENOTTY) and 2 ioctl(FIONREAD) on the
 *     read end of a pipe holding 5 bytes (returns 0);
 *   - one poll(2) on the empty read end of another pipe with a 50 ms
 *     timeout (returns 0);
 *   - N getpid(2) (a syscall shorter than the default threshold);
 *   - futex contention: thread "holder" locks a mutex, lets thread
 *     "waiter" try to lock it, sleeps 30 ms and unlocks; 3 rounds; the
 *     waiter blocks in FUTEX_WAIT_PRIVATE and the holder's unlock makes a
 *     FUTEX_WAKE_PRIVATE;
 *   - CUDA: cuInit, a context, a module, a 20 ms kernel launched and
 *     cuStreamSynchronize'd (the fake driver sleeps in clock_nanosleep
 *     inside the synchronize).
 *
 * Manifest: the common fields plus "sys": {"main_tid", "holder_tid",
 * "waiter_tid", "file_fd", "file_path", "null_fd", "pipe_fd", "poll_fd", "sleeps",
 * "getpids", "writes", "reads", "io_bytes", "null_ioctls", "pipe_ioctls",
 * "rounds"}.
 */
#define _GNU_SOURCE
#include <cuda.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/stat.h>

#include "manifest.h"

#define K_SYNC "_Z12sys_mix_wait__ns20000000Pf"
#define IO_CHUNK 8192
#define IO_CHUNKS 8
#define NULL_IOCTLS 3
#define PIPE_IOCTLS 2
#define ROUNDS 3

static const unsigned char module_image[] = "\x7f" "ELF fake cubin for cgbpf sys_mix";

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_barrier_t g_bar;
static long g_holder_tid, g_waiter_tid;

struct info {
	long main_tid;
	int file_fd, null_fd, pipe_fd, poll_fd;
	char file_path[64];
	unsigned long sleeps, getpids;
};

static void sleep_ns(long ns)
{
	struct timespec ts = { ns / 1000000000, ns % 1000000000 };

	syscall(SYS_nanosleep, &ts, NULL);
}

static void *holder(void *arg)
{
	wl_set_thread_name("holder");
	g_holder_tid = wl_gettid();
	for (int i = 0; i < ROUNDS; i++) {
		pthread_mutex_lock(&g_mu);
		pthread_barrier_wait(&g_bar);	/* the waiter may try now */
		sleep_ns(30000000);
		pthread_mutex_unlock(&g_mu);
		pthread_barrier_wait(&g_bar);	/* round done */
	}
	return NULL;
}

static void *waiter(void *arg)
{
	wl_set_thread_name("waiter");
	g_waiter_tid = wl_gettid();
	for (int i = 0; i < ROUNDS; i++) {
		pthread_barrier_wait(&g_bar);
		pthread_mutex_lock(&g_mu);	/* held for 30 ms: blocks in futex */
		pthread_mutex_unlock(&g_mu);
		pthread_barrier_wait(&g_bar);
	}
	return NULL;
}

static void file_io(struct info *in)
{
	char dir[] = "/tmp/cgbpf-sys_mix-XXXXXX", sub[64];
	static char buf[IO_CHUNK];
	int fd, n;

	if (!mkdtemp(dir))
		wl_die("mkdtemp: %s", strerror(errno));
	snprintf(sub, sizeof(sub), "%s/a", dir);
	snprintf(in->file_path, sizeof(in->file_path), "%s/a/data", dir);
	if (mkdir(sub, 0700) || (fd = open(in->file_path, O_RDWR | O_CREAT | O_EXCL, 0600)) < 0)
		wl_die("%s: %s", in->file_path, strerror(errno));
	in->file_fd = fd;
	memset(buf, 'x', sizeof(buf));
	for (int i = 0; i < IO_CHUNKS; i++)
		if (write(fd, buf, sizeof(buf)) != sizeof(buf))
			wl_die("write: %s", strerror(errno));
	fsync(fd);
	lseek(fd, 0, SEEK_SET);
	if (ioctl(fd, FIONREAD, &n) || n != IO_CHUNK * IO_CHUNKS)
		wl_die("FIONREAD on the file: %d", n);
	for (int i = 0; i < IO_CHUNKS; i++)
		if (read(fd, buf, sizeof(buf)) != sizeof(buf))
			wl_die("read: %s", strerror(errno));
	close(fd);
	unlink(in->file_path);
	rmdir(sub);
	rmdir(dir);
}

static void ioctls(struct info *in)
{
	int p[2], q[2], n;
	struct pollfd pf;

	in->null_fd = open("/dev/null", O_RDWR);
	if (in->null_fd < 0 || pipe(p) || pipe(q))
		wl_die("open /dev/null or pipe: %s", strerror(errno));
	in->pipe_fd = p[0];
	in->poll_fd = q[0];
	if (write(p[1], "hello", 5) != 5)
		wl_die("write pipe: %s", strerror(errno));
	for (int i = 0; i < NULL_IOCTLS; i++)
		if (ioctl(in->null_fd, FIONREAD, &n) != -1 || errno != ENOTTY)
			wl_die("ioctl /dev/null: expected ENOTTY");
	for (int i = 0; i < PIPE_IOCTLS; i++)
		if (ioctl(p[0], FIONREAD, &n) || n != 5)
			wl_die("ioctl FIONREAD on a pipe: %d", n);
	pf.fd = q[0];
	pf.events = POLLIN;
	if (poll(&pf, 1, 50) != 0)
		wl_die("poll on an empty pipe returned early");
}

static void cuda(void)
{
	CUdevice dev;
	CUcontext ctx;
	CUmodule mod;
	CUfunction f;
	CUdeviceptr d;
	int n = 1;
	void *args[] = { &d, &n };

	CHECK(cuInit, 0);
	CHECK(cuDeviceGet, &dev, 0);
#if CUDA_VERSION >= 13000
	CHECK(cuCtxCreate, &ctx, NULL, 0, dev);
#else
	CHECK(cuCtxCreate, &ctx, 0, dev);
#endif
	CHECK(cuModuleLoadData, &mod, module_image);
	CHECK(cuModuleGetFunction, &f, mod, K_SYNC);
	CHECK(cuMemAlloc, &d, 4096);
	wl_dev_alloc(4096);
	CHECK(cuLaunchKernel, f, 1, 1, 1, 32, 1, 1, 0, NULL, args, NULL);
	wl_kernel(K_SYNC, 1);
	CHECK(cuStreamSynchronize, NULL);
	CHECK(cuMemFree, d);
	wl_dev_free(4096);
	CHECK(cuCtxDestroy, ctx);
}

static void write_extra(FILE *f, void *arg)
{
	struct info *in = arg;

	fprintf(f, ",\n  \"sys\": {\"main_tid\": %ld, \"holder_tid\": %ld, \"waiter_tid\": %ld, "
		"\"file_fd\": %d, \"file_path\": \"%s\", \"null_fd\": %d, \"pipe_fd\": %d, \"poll_fd\": %d, "
		"\"sleeps\": %lu, \"getpids\": %lu, \"writes\": %d, \"reads\": %d, "
		"\"io_bytes\": %d, \"null_ioctls\": %d, \"pipe_ioctls\": %d, \"rounds\": %d}",
		in->main_tid, g_holder_tid, g_waiter_tid, in->file_fd, in->file_path, in->null_fd, in->pipe_fd,
		in->poll_fd, in->sleeps, in->getpids, IO_CHUNKS, IO_CHUNKS, IO_CHUNK, NULL_IOCTLS,
		PIPE_IOCTLS, ROUNDS);
}

int main(int argc, char **argv)
{
	struct info in = { .sleeps = 3, .getpids = 1000 };
	pthread_t th, tw;

	for (int i = 1; i < argc; i++) {
		if (!wl_arg_ul(argc, argv, &i, "--sleeps", &in.sleeps) &&
		    !wl_arg_ul(argc, argv, &i, "--getpids", &in.getpids))
			wl_die("usage: sys_mix [--sleeps N] [--getpids N]");
	}
	wl_gate();
	in.main_tid = wl_gettid();

	for (unsigned long i = 0; i < in.sleeps; i++)
		sleep_ns(20000000);
	for (unsigned long i = 0; i < in.sleeps; i++) {
		struct timespec ts = { 0, 10000000 };

		clock_nanosleep(CLOCK_REALTIME, 0, &ts, NULL);
	}
	file_io(&in);
	ioctls(&in);
	for (unsigned long i = 0; i < in.getpids; i++)
		syscall(SYS_getpid);

	pthread_barrier_init(&g_bar, NULL, 2);
	if (pthread_create(&th, NULL, holder, NULL) || pthread_create(&tw, NULL, waiter, NULL))
		wl_die("pthread_create failed");
	pthread_join(th, NULL);
	pthread_join(tw, NULL);

	cuda();
	wl_manifest_write(write_extra, &in);
	return 0;
}
