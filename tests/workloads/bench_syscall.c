/* SPDX-License-Identifier: MIT */
/*
 * bench_syscall: a tight loop of one cheap syscall, for bench/syscalls.sh
 * (what an attached syscall tracepoint costs every syscall).
 *
 * Usage: bench_syscall getpid|read|mmap [N]      (default 1000000)
 *
 * getpid: syscall(SYS_getpid), the cheapest syscall there is; read: a
 * 1-byte read(2) from /dev/zero; mmap: mmap and munmap of one anonymous
 * page, two syscalls that each take the mm's lock for writing (what
 * cgbpf's mmap_lock watch costs; ns_per_call is per pair). Waits at wl_gate() first (CGBPF_WAIT_FILE)
 * so a tracer can attach with -p. Calls cuDriverGetVersion once, so that
 * libcuda is linked and mapped like in the real workloads (cgbpf's watch
 * for a late libcuda, a second syscall tracepoint, stays off). Prints
 * "calls=N ns_per_call=X".
 */
#define _GNU_SOURCE
#include <cuda.h>
#include <sys/mman.h>

#include "manifest.h"

int main(int argc, char **argv)
{
	unsigned long n = 1000000;
	struct timespec t0, t1;
	int rd, mm, fd = -1, version;
	char c, *end;
	double ns;

	if (argc < 2 || argc > 3 ||
	    (strcmp(argv[1], "getpid") && strcmp(argv[1], "read") && strcmp(argv[1], "mmap")))
		wl_die("usage: bench_syscall getpid|read|mmap [N]");
	rd = !strcmp(argv[1], "read");
	mm = !strcmp(argv[1], "mmap");
	if (argc == 3) {
		errno = 0;
		n = strtoul(argv[2], &end, 10);
		if (errno || !*argv[2] || *end)
			wl_die("bad N: %s", argv[2]);
	}
	if (rd && (fd = open("/dev/zero", O_RDONLY)) < 0)
		wl_die("/dev/zero: %s", strerror(errno));
	CHECK(cuDriverGetVersion, &version);
	wl_gate();
	clock_gettime(CLOCK_MONOTONIC, &t0);
	if (rd) {
		for (unsigned long i = 0; i < n; i++)
			if (read(fd, &c, 1) != 1)
				wl_die("read: %s", strerror(errno));
	} else if (mm) {
		for (unsigned long i = 0; i < n; i++) {
			void *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
				       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

			if (p == MAP_FAILED || munmap(p, 4096))
				wl_die("mmap: %s", strerror(errno));
		}
	} else {
		for (unsigned long i = 0; i < n; i++)
			syscall(SYS_getpid);
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	ns = (double)(t1.tv_sec - t0.tv_sec) * 1e9 + (double)(t1.tv_nsec - t0.tv_nsec);
	printf("calls=%lu ns_per_call=%.1f\n", n, n ? ns / (double)n : 0.0);
	return 0;
}
