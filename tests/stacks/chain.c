// SPDX-License-Identifier: MIT
/*
 * A known call chain for the symbolizer tests: main -> level_a -> level_b
 * -> level_c. level_c reads its own registers, copies its stack from sp to
 * the top of the stack mapping, writes both to stdout and blocks until
 * stdin closes, so the test can unwind and symbolize a live process (and
 * then one that exited). Built in several flavours by the Makefile (frame
 * pointers or not, PIE or not, as C++, the levels in a shared library
 * linked or dlopened, stripped with a .gnu_debuglink file).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "capture.h"

#ifdef CHAIN_LIB
#define LEVEL_API __attribute__((visibility("default")))
#else
#define LEVEL_API static
#endif

#if !defined(CHAIN_MAIN_ONLY)
/* The end of the mapping holding addr, from /proc/self/maps; 0 if none. */
static unsigned long mapping_end(unsigned long addr)
{
	unsigned long start, end, found = 0;
	char line[512];
	FILE *f = fopen("/proc/self/maps", "r");

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%lx-%lx", &start, &end) == 2 && addr >= start && addr < end) {
			found = end;
			break;
		}
	}
	fclose(f);
	return found;
}

static void write_all(const void *p, size_t n)
{
	const char *c = (const char *)p;

	while (n) {
		ssize_t w = write(1, c, n);

		if (w <= 0)
			exit(3);
		c += w;
		n -= (size_t)w;
	}
}

LEVEL_API __attribute__((noinline)) int level_c(int x)
{
	struct capture_hdr h;
	unsigned long ip, sp, bp, end;
	char buf[1];

	/* ip and sp of the same instruction boundary: nothing between the
	 * lea and the movs changes rsp. */
	__asm__ volatile("lea 0(%%rip), %0\n\tmov %%rsp, %1\n\tmov %%rbp, %2"
			 : "=r"(ip), "=r"(sp), "=r"(bp));
	end = mapping_end(sp);
	if (!end)
		exit(2);
	memset(&h, 0, sizeof(h));
	h.magic = CAPTURE_MAGIC;
	h.pid = (uint32_t)getpid();
	h.ip = ip;
	h.sp = sp;
	h.bp = bp;
	h.len = end - sp;
	write_all(&h, sizeof(h));
	write_all((const void *)sp, h.len);
	/* Stay in level_c until the parent is done with us; 'e' execs
	 * $CHAIN_EXEC (a new image in the same process). */
	while (read(0, buf, 1) > 0)
		if (buf[0] == 'e' && getenv("CHAIN_EXEC"))
			execl(getenv("CHAIN_EXEC"), getenv("CHAIN_EXEC"), (char *)NULL);
	return x + 1;
}

LEVEL_API __attribute__((noinline)) int level_b(int x)
{
	int r = level_c(x * 3);

	__asm__ volatile("" ::: "memory");
	return r + 2;
}

LEVEL_API __attribute__((noinline)) int level_a(int x)
{
	int r = level_b(x + 5);

	__asm__ volatile("" ::: "memory");
	return r * 7;
}
#else
int level_a(int x);
#endif

#if defined(CHAIN_DL)
#include <dlfcn.h>

/* The levels come from libchain.so, dlopened once a byte arrives on stdin:
 * a library mapped after the profiler first read the maps. */
int main(int argc, char **argv)
{
	char path[4096], go;
	ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 16);
	int (*fa)(int);
	void *h;
	int r;

	if (n <= 0 || read(0, &go, 1) != 1)
		return 2;
	path[n] = 0;
	strcpy(strrchr(path, '/') + 1, "libchain.so");
	h = dlopen(path, RTLD_NOW);
	if (!h)
		return 3;
	fa = (int (*)(int))dlsym(h, "level_a");
	if (!fa)
		return 4;
	r = fa(argc);
	__asm__ volatile("" ::: "memory");
	return r == -1 ? 1 : 0;
}
#elif !defined(CHAIN_LIB)
int main(int argc, char **argv)
{
	int r = level_a(argc);

	__asm__ volatile("" ::: "memory");
	return r == -1 ? 1 : 0;
}
#endif
