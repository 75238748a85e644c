/* SPDX-License-Identifier: MIT */
/*
 * cold_names: string arguments on pages the process has never touched, as
 * a kernel name literal in a large program's .rodata is when it is first
 * passed to cuModuleGetFunction. A probe cannot fault such a page in, so a
 * tracer that reads strings only at a call's entry sees nothing there.
 *
 * Usage: cold_names [--nvtx] [--hold] DIR
 *
 * Prints {"ready": PID} and waits for a line on stdin (for a tracer to
 * attach with -p), then the driver part: cuInit, cuDeviceGet, cuCtxCreate,
 * cuModuleLoadData, then, each name on a page checked to be absent from
 * the page table just before the call (/proc/self/pagemap, "present" bit):
 *   1. cuModuleGetFunction("cold_file_kernel"): the name in a fresh
 *      MAP_PRIVATE mapping of a file written to DIR (never touched: no
 *      page table entry, whatever the page cache holds); one launch.
 *   2. cuModuleGetFunction("cold_rodata_kernel"): the name at the start
 *      of a 64 KiB-aligned, 64 KiB .rodata object nothing else reads (the
 *      kernel maps file pages around a fault in 64 KiB windows, and a
 *      large page-cache folio whole, so its page is also dropped from the
 *      page table with MADV_DONTNEED just before); one launch.
 *   3. cuModuleLoad(PATH) with PATH on a PROT_NONE page: the driver gets
 *      EFAULT from the kernel and returns CUDA_ERROR_FILE_NOT_FOUND; no
 *      one can read that string, a tracer included.
 * It then prints one JSON line:
 *   {"pid": N, "present": [p1, p2, p4], "unreadable": "0x...",
 *    "nvtx": bool}
 * and, without --hold, makes its last call:
 *   4. cuModuleGetFunction("cold_exit_kernel") from a second such .rodata
 *      object, one launch, and _exit(0) at once: nothing is left to read
 *      the name from afterwards.
 * (p4 is the page of step 4, checked before the JSON line is printed.)
 *
 * --nvtx (built with the toolkit's NVTX v3 headers only): before the
 * ready line, nvtxMarkA("cold-nvtx-init") (which loads the injection
 * library); after the driver part, nvtxRangePushA("cold-nvtx-range")
 * with the message in a fresh file mapping, nvtxRangePop, and
 * nvtxMarkA(PROT_NONE page). The JSON line adds "nvtx_unreadable".
 * --hold: instead of step 4, waits for stdin to close, then exits 0.
 */
#define _GNU_SOURCE
#include <cuda.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#if __has_include(<nvtx3/nvToolsExt.h>)
#include <nvtx3/nvToolsExt.h>
#define HAVE_NVTX 1
#else
#define HAVE_NVTX 0
#endif

#define WINDOW 65536	/* the kernel's fault-around window (fault_around_bytes) */

struct cold {
	char name[64];
	char pad[WINDOW - 64];
};

/* Each alone in its 64 KiB window of .rodata; only the driver reads them. */
static const struct cold cold_rodata __attribute__((aligned(WINDOW), used)) = {
	"cold_rodata_kernel"
};
static const struct cold cold_exit __attribute__((aligned(WINDOW), used)) = {
	"cold_exit_kernel"
};

static const unsigned char image[] = "\x7f" "ELF fake cubin for cgbpf cold_names";

static void die(const char *what, int v)
{
	fprintf(stderr, "cold_names: %s (%d)\n", what, v);
	exit(1);
}

#define CHECK(call) do { CUresult r_ = (call); if (r_ != CUDA_SUCCESS) die(#call, r_); } while (0)

/*
 * Drops addr's page from this process's page table (a private file
 * mapping's page stays in the page cache): whatever the kernel mapped
 * along with an earlier fault nearby (fault-around, a large folio mapped
 * whole), the call that follows finds no entry.
 */
static void evict(const void *addr)
{
	long pg = sysconf(_SC_PAGESIZE);

	if (madvise((void *)((uintptr_t)addr & ~(uintptr_t)(pg - 1)), pg, MADV_DONTNEED))
		die("madvise MADV_DONTNEED", 0);
}

/* 1 when addr's page is in this process's page table, 0 when not. */
static int present(const void *addr)
{
	uint64_t e = 0;
	int fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
	off_t at = (uintptr_t)addr / (uintptr_t)sysconf(_SC_PAGESIZE) * sizeof(e);

	if (fd < 0 || pread(fd, &e, sizeof(e), at) != sizeof(e))
		die("cannot read /proc/self/pagemap", fd);
	close(fd);
	return (int)(e >> 63);
}

/* A fresh private read-only mapping of a file in dir holding text at
 * offset 100 of its second page; nothing touches it here. */
static const char *file_string(const char *dir, const char *tag, const char *text)
{
	long pg = sysconf(_SC_PAGESIZE);
	char path[4096], *buf;
	void *map;
	int fd;

	snprintf(path, sizeof(path), "%s/cold-%s-%d", dir, tag, (int)getpid());
	buf = calloc(3, pg);
	if (!buf)
		die("out of memory", 0);
	strcpy(buf + pg + 100, text);
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0 || write(fd, buf, 3 * pg) != 3 * pg)
		die("cannot write the name file", fd);
	map = mmap(NULL, 3 * pg, PROT_READ, MAP_PRIVATE, fd, 0);
	if (map == MAP_FAILED)
		die("mmap", 0);
	close(fd);
	unlink(path);
	free(buf);
	return (const char *)map + pg + 100;
}

/* An address no one can read: the middle of a PROT_NONE page. */
static const char *unreadable(void)
{
	char *p = mmap(NULL, sysconf(_SC_PAGESIZE), PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		die("mmap PROT_NONE", 0);
	return p + 64;
}

static void launch(CUfunction f)
{
	CHECK(cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL));
}

int main(int argc, char **argv)
{
	bool nvtx = false, hold = false;
	const char *dir = NULL, *name, *bad, *nvtx_bad = NULL;
	int p[3], ai;
	CUcontext ctx;
	CUmodule mod, mod2;
	CUfunction f;
	CUdevice dev;
	char go[16];
	CUresult r;

	for (ai = 1; ai < argc; ai++) {
		if (!strcmp(argv[ai], "--nvtx"))
			nvtx = true;
		else if (!strcmp(argv[ai], "--hold"))
			hold = true;
		else
			dir = argv[ai];
	}
	if (!dir)
		die("usage: cold_names [--nvtx] [--hold] DIR", 0);
	if (nvtx && !HAVE_NVTX)
		die("--nvtx: built without the toolkit's NVTX v3 headers", 0);
#if HAVE_NVTX
	if (nvtx)
		nvtxMarkA("cold-nvtx-init");
#endif
	printf("{\"ready\": %d}\n", (int)getpid());
	fflush(stdout);
	if (!fgets(go, sizeof(go), stdin))
		die("stdin closed before the go line", 0);
	CHECK(cuInit(0));
	CHECK(cuDeviceGet(&dev, 0));
#if CUDA_VERSION >= 13000
	CHECK(cuCtxCreate(&ctx, NULL, 0, dev));
#else
	CHECK(cuCtxCreate(&ctx, 0, dev));
#endif
	CHECK(cuModuleLoadData(&mod, image));

	name = file_string(dir, "kernel", "cold_file_kernel");
	p[0] = present(name);
	CHECK(cuModuleGetFunction(&f, mod, name));
	launch(f);

	evict(cold_rodata.name);
	p[1] = present(cold_rodata.name);
	CHECK(cuModuleGetFunction(&f, mod, cold_rodata.name));
	launch(f);

	bad = unreadable();
	r = cuModuleLoad(&mod2, bad);
	if (r != CUDA_ERROR_FILE_NOT_FOUND)
		die("cuModuleLoad of an unreadable path did not fail as expected", r);
	CHECK(cuCtxSynchronize());

#if HAVE_NVTX
	if (nvtx) {
		const char *msg = file_string(dir, "nvtx", "cold-nvtx-range");

		if (present(msg))
			die("the NVTX message's page is already present", 1);
		nvtxRangePushA(msg);
		nvtxRangePop();
		nvtx_bad = unreadable();
		nvtxMarkA(nvtx_bad);
	}
#endif
	evict(cold_exit.name);
	p[2] = present(cold_exit.name);
	printf("{\"pid\": %d, \"present\": [%d, %d, %d], \"unreadable\": \"%p\", \"nvtx\": %s",
	       (int)getpid(), p[0], p[1], p[2], (const void *)bad, nvtx ? "true" : "false");
	if (nvtx_bad)
		printf(", \"nvtx_unreadable\": \"%p\"", (const void *)nvtx_bad);
	printf("}\n");
	fflush(stdout);
	if (hold) {
		char line[64];

		while (fgets(line, sizeof(line), stdin))
			;
		return 0;
	}
	CHECK(cuModuleGetFunction(&f, mod, cold_exit.name));
	launch(f);
	_exit(0);
}
