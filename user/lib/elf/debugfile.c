// SPDX-License-Identifier: MIT
#include <elfutils/libdwelf.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>
#include "lib/elf/debugfile.h"
#include "lib/elf/ldpath.h"

bool debugfile__link_name(const char *name)
{
	size_t n = name ? strnlen(name, NAME_MAX + 1) : 0;

	return n && n <= NAME_MAX && !memchr(name, '/', n) && strcmp(name, ".") &&
	       strcmp(name, "..");
}

static bool crc_matches(int fd, uint32_t want)
{
	unsigned char buf[65536];
	uLong crc = crc32(0, Z_NULL, 0);
	struct stat st;
	off_t off = 0;

	if (fstat(fd, &st) || (uint64_t)st.st_size > DEBUGFILE_CRC_MAX)
		return false;
	for (;;) {
		ssize_t n = pread(fd, buf, sizeof(buf), off);

		if (n < 0)
			return false;
		if (!n)
			break;
		crc = crc32(crc, buf, (uInt)n);
		off += n;
	}
	return (uint32_t)crc == want;
}

bool debugfile__matches(int fd, const struct debugfile_req *q)
{
	const void *id = NULL;
	ssize_t n = -1;
	Elf *elf;

	if (!q->build_id || !q->build_id_len)
		return q->link && crc_matches(fd, q->crc);
	elf_version(EV_CURRENT);
	elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (!elf)
		return false;
	if (elf_kind(elf) == ELF_K_ELF)
		n = dwelf_elf_gnu_build_id(elf, &id);
	/* Compared before elf_end: id points into the mapping. */
	n = n > 0 && (size_t)n == q->build_id_len && !memcmp(id, q->build_id, (size_t)n);
	elf_end(elf);
	return n;
}

/* Opens path in the root if it is a matching debug file; fd or -1. */
static int try(int root, const char *path, const struct debugfile_req *q, char *found,
	       size_t found_len)
{
	int fd;

	if (root < 0)
		return -1;
	fd = ldpath__open_at(root, path, O_RDONLY);
	if (fd < 0)
		return -1;
	if (!debugfile__matches(fd, q)) {
		close(fd);
		return -1;
	}
	snprintf(found, found_len, "%s", path);
	return fd;
}

int debugfile__find(int rootfd, int hostfd, const struct debugfile_req *q, char *found,
		    size_t found_len)
{
	char path[PATH_MAX], dir[PATH_MAX];
	const char *slash;
	int fd = -1;

	if (found_len)
		found[0] = 0;
	if (q->build_id && q->build_id_len >= 2 && q->build_id_len <= 64) {
		size_t o = snprintf(path, sizeof(path), "/usr/lib/debug/.build-id/%02x/",
				    q->build_id[0]);

		for (size_t i = 1; i < q->build_id_len; i++)
			o += snprintf(path + o, sizeof(path) - o, "%02x", q->build_id[i]);
		snprintf(path + o, sizeof(path) - o, ".debug");
		fd = try(rootfd, path, q, found, found_len);
		if (fd < 0)
			fd = try(hostfd, path, q, found, found_len);
		if (fd >= 0)
			return fd;
	}
	if (!q->path || q->path[0] != '/' || !debugfile__link_name(q->link))
		return -ENOENT;
	slash = strrchr(q->path, '/');
	if ((size_t)(slash - q->path) >= sizeof(dir))
		return -ENOENT;
	memcpy(dir, q->path, slash - q->path);
	dir[slash - q->path] = 0;
	/* Next to the file, unless that is the file itself. */
	if (strcmp(slash + 1, q->link) &&
	    (size_t)snprintf(path, sizeof(path), "%s/%s", dir, q->link) < sizeof(path))
		fd = try(rootfd, path, q, found, found_len);
	if (fd < 0 && (size_t)snprintf(path, sizeof(path), "%s/.debug/%s", dir, q->link) <
	    sizeof(path))
		fd = try(rootfd, path, q, found, found_len);
	if (fd < 0 && (size_t)snprintf(path, sizeof(path), "/usr/lib/debug%s/%s", dir, q->link) <
	    sizeof(path))
		fd = try(rootfd, path, q, found, found_len);
	return fd < 0 ? -ENOENT : fd;
}
