// SPDX-License-Identifier: MIT
/*
 * Unit tests of user/lib/elf/ldpath.c: the ld.so.cache parser (a built image, the
 * machine's own cache, damaged images) and the resolution order of
 * LD_LIBRARY_PATH entries (absolute, relative to the process's working
 * directory), file names that only look like libraries, links after files.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "lib/elf/ldpath.h"
#include "tap.h"
#include "sources/sources.h"

/* glibc's new cache format: a 48-byte header, then 24-byte entries, then
 * the strings; offsets count from the header. Flags: ELF libc6 (3) with
 * the x86-64 ABI bits (0x0300). */
#define HDR 48
#define ENT 24

struct image {
	unsigned char b[4096];
	size_t len;
};

static void put32(unsigned char *p, uint32_t v)
{
	memcpy(p, &v, 4);
}

static void build(struct image *im, const char *const *pairs, const int32_t *flags, int n)
{
	size_t str = HDR + (size_t)n * ENT;

	memset(im, 0, sizeof(*im));
	memcpy(im->b, "glibc-ld.so.cache1.1", 20);
	put32(im->b + 20, (uint32_t)n);
	for (int i = 0; i < n; i++) {
		unsigned char *e = im->b + HDR + (size_t)i * ENT;
		size_t kl = strlen(pairs[2 * i]) + 1, vl = strlen(pairs[2 * i + 1]) + 1;

		put32(e, (uint32_t)flags[i]);
		put32(e + 4, (uint32_t)str);
		memcpy(im->b + str, pairs[2 * i], kl);
		str += kl;
		put32(e + 8, (uint32_t)str);
		memcpy(im->b + str, pairs[2 * i + 1], vl);
		str += vl;
	}
	put32(im->b + 24, (uint32_t)(str - HDR - (size_t)n * ENT));
	im->len = str;
}

struct seen {
	char names[8][64], paths[8][128];
	int n;
};

static int on_entry(const char *name, const char *path, void *ctx)
{
	struct seen *s = ctx;

	if (s->n < 8) {
		snprintf(s->names[s->n], sizeof(s->names[0]), "%s", name);
		snprintf(s->paths[s->n], sizeof(s->paths[0]), "%s", path);
	}
	s->n++;
	return 0;
}

static int find_libc(const char *name, const char *path, void *ctx)
{
	(void)path;
	if (!strcmp(name, "libc.so.6"))
		*(int *)ctx = 1;
	return 0;
}

static void test_cache(void)
{
	static const char *const pairs[] = {
		"libcuda.so.1", "/usr/lib/x86_64-linux-gnu/libcuda.so.1",
		"libcuda.so.1", "/usr/lib32/libcuda.so.1",
		"libnccl.so.2", "/opt/nccl/lib/libnccl.so.2",
	};
	static const int32_t flags[] = { 0x0303, 0x0003, 0x0303 };
	struct image im;
	struct seen s = { 0 };
	int libc = 0, fd;

	build(&im, pairs, flags, 3);
	check(ldpath__parse_cache(im.b, im.len, on_entry, &s) == 0, "cache image parses");
	check(s.n == 2, "x86-64 entries only (the 32-bit one is left out): %d", s.n);
	check(s.n >= 2 && !strcmp(s.names[0], "libcuda.so.1") &&
	      !strcmp(s.paths[0], "/usr/lib/x86_64-linux-gnu/libcuda.so.1") &&
	      !strcmp(s.paths[1], "/opt/nccl/lib/libnccl.so.2"), "names and paths in order");

	/* The old format first, the new one 8-byte aligned after it. */
	{
		unsigned char old[4096 + 64] = "ld.so-1.7.0";
		size_t off = (11 + 4 + 1 * 12 + 7) & ~(size_t)7;

		put32(old + 11, 1);
		memcpy(old + off, im.b, im.len);
		memset(&s, 0, sizeof(s));
		check(ldpath__parse_cache(old, off + im.len, on_entry, &s) == 0 && s.n == 2,
		      "new table after an old-format one");
	}

	/* Damaged images: refused or entries skipped, never read past. */
	check(ldpath__parse_cache(im.b, 30, on_entry, &s) == -EINVAL, "truncated header refused");
	check(ldpath__parse_cache("glibc-ld.so.cacheX.Y", 20, on_entry, &s) == -EINVAL,
	      "other version refused");
	put32(im.b + 20, 1000000);
	check(ldpath__parse_cache(im.b, im.len, on_entry, &s) == -EINVAL,
	      "entry count beyond the image refused");
	build(&im, pairs, flags, 3);
	im.b[im.len - 1] = 'x';	/* the last path loses its terminator */
	memset(&s, 0, sizeof(s));
	check(ldpath__parse_cache(im.b, im.len, on_entry, &s) == 0 && s.n == 1,
	      "an unterminated string's entry skipped");
	put32(im.b + HDR + 4, 100000);	/* a key offset past the end */
	memset(&s, 0, sizeof(s));
	check(ldpath__parse_cache(im.b, im.len, on_entry, &s) == 0 && s.n == 0,
	      "an out-of-range offset's entry skipped");

	/* This machine's cache has libc. */
	fd = open("/etc/ld.so.cache", O_RDONLY);
	if (fd < 0) {
		skip("no /etc/ld.so.cache here");
	} else {
		static unsigned char buf[4 << 20];
		ssize_t n = read(fd, buf, sizeof(buf));

		close(fd);
		check(n > 0 && ldpath__parse_cache(buf, (size_t)n, find_libc, &libc) == 0 && libc,
		      "/etc/ld.so.cache lists libc.so.6");
	}
}

struct found {
	char paths[16][256];
	int n;
};

static int on_file(int fd, const char *path, void *ctx)
{
	struct found *f = ctx;

	(void)fd;
	if (f->n < 16)
		snprintf(f->paths[f->n++], sizeof(f->paths[0]), "%s", path);
	return 0;
}

static void write_file(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);

	if (fd >= 0) {
		if (write(fd, text, strlen(text)) < 0)
			perror("write");
		close(fd);
	}
}

static bool has(const struct found *f, const char *path)
{
	for (int i = 0; i < f->n; i++)
		if (!strcmp(f->paths[i], path))
			return true;
	return false;
}

static void test_resolve(void)
{
	static const char *const prefixes[] = { "libcuda.so", NULL };
	char dir[] = "/tmp/cgbpf-ldpath-XXXXXX", a[256], b[256], p[512], env0[600], old[4096];
	char *env[2] = { env0, NULL };
	struct ldpath_req q = { .pid = getpid(), .exe = "/bin/true", .env = env,
				.prefixes = prefixes, .skip_system = true };
	struct found f = { 0 };
	int rc;

	if (!mkdtemp(dir)) {
		check(false, "mkdtemp: %s", strerror(errno));
		return;
	}
	snprintf(a, sizeof(a), "%s/a", dir);
	snprintf(b, sizeof(b), "%s/b", dir);
	mkdir(a, 0755);
	mkdir(b, 0755);
	snprintf(p, sizeof(p), "%s/libcuda.so.1", a);
	write_file(p, "\x7f" "ELF fake");
	snprintf(p, sizeof(p), "%s/libcuda.so.d", a);	/* looks like one, is not */
	write_file(p, "\x7f" "ELF fake");
	snprintf(p, sizeof(p), "%s/libcuda.so.1", b);	/* shadowed by a's */
	write_file(p, "\x7f" "ELF fake");
	snprintf(p, sizeof(p), "%s/libcuda.so.2", b);
	write_file(p, "not an ELF file");

	snprintf(env0, sizeof(env0), "LD_LIBRARY_PATH=%s:%s", a, b);
	check(ldpath__resolve(&q, on_file, &f) >= 0, "resolves");
	snprintf(p, sizeof(p), "%s/libcuda.so.1", a);
	check(has(&f, p), "the first directory's libcuda.so.1 is found");
	snprintf(p, sizeof(p), "%s/libcuda.so.1", b);
	check(!has(&f, p), "a later directory's file of the same name is not");
	snprintf(p, sizeof(p), "%s/libcuda.so.d", a);
	check(!has(&f, p), "libcuda.so.d is not a library name");
	snprintf(p, sizeof(p), "%s/libcuda.so.2", b);
	check(!has(&f, p), "a file without the ELF magic is left out");

	/* A relative entry is relative to the process's working directory. */
	if (!getcwd(old, sizeof(old)) || chdir(dir)) {
		check(false, "chdir: %s", strerror(errno));
	} else {
		memset(&f, 0, sizeof(f));
		snprintf(env0, sizeof(env0), "LD_LIBRARY_PATH=a");
		check(ldpath__resolve(&q, on_file, &f) >= 0, "resolves a relative entry");
		snprintf(p, sizeof(p), "%s/a/libcuda.so.1", dir);
		check(has(&f, p), "relative entry found under the cwd (%d found)", f.n);
		if (chdir(old))
			perror("chdir");
	}

	/* Directory listings are kept across calls (one unchanged for 2 s,
	 * not b yet): a file added to, then removed from, a directory read
	 * before is seen each time. */
	sleep(3);
	snprintf(env0, sizeof(env0), "LD_LIBRARY_PATH=%s", b);
	memset(&f, 0, sizeof(f));
	rc = ldpath__resolve(&q, on_file, &f);
	check(rc >= 0 && f.n == 1, "b alone: its libcuda.so.1 (%d found)", f.n);
	snprintf(p, sizeof(p), "%s/libcuda.so.3", b);
	write_file(p, "\x7f" "ELF fake");
	memset(&f, 0, sizeof(f));
	rc = ldpath__resolve(&q, on_file, &f);
	check(rc >= 0 && has(&f, p) && f.n == 2,
	      "a file added to a directory listed before is found (%d found)", f.n);
	unlink(p);
	memset(&f, 0, sizeof(f));
	rc = ldpath__resolve(&q, on_file, &f);
	check(rc >= 0 && !has(&f, p) && f.n == 1, "and a file removed from it is gone (%d found)",
	      f.n);
	snprintf(p, sizeof(p), "rm -rf %s", dir);
	if (system(p))
		fprintf(stderr, "could not remove %s\n", dir);
}

int main(void)
{
	sources__init();
	test_cache();
	test_resolve();
	printf("%d passed, %d failed\n", n_pass, n_fail);
	return n_fail != 0;
}
