// SPDX-License-Identifier: MIT
/*
 * ELF files as a target's root holds them (a container chooses every byte
 * of the libraries and debug files cgbpf opens as root):
 *  - elfsym (attach's symbol tables and build id), ldpath's DT_RPATH and
 *    DT_RUNPATH reader, debugfile__matches (a debug file candidate);
 *  - the symbolizer's per-file symbol reading (mod_load, file_read_syms,
 *    lookups and demangling) on the file reported to libdwfl, with its own
 *    find_debuginfo callback, which follows the file's .gnu_debuglink name
 *    into a fake root directory that holds links planted to escape it:
 *    any debug file it returns from outside that root aborts.
 * symbolize.c is compiled into this harness to reach its static functions.
 */
#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include "fuzz.h"

#include "../user/lib/elf/symbolize.c"

#include "lib/elf/debugfile.h"
#include "lib/elf/elfsym.h"
#include "lib/elf/ldpath.h"

static int memfd = -1, rootfd = -1;
static char mem_path[64], root_dir[64];
/* (dev, ino) of every file inside the fake root. */
static struct { dev_t dev; ino_t ino; } inside[64];
static int ninside;

static void plant(const char *rel, const char *target)
{
	char p[128];

	snprintf(p, sizeof(p), "%s/%s", root_dir, rel);
	if (target) {
		if (symlink(target, p))
			abort();
	} else if (mkdir(p, 0755)) {
		abort();
	}
}

static void put(const char *rel, const char *text)
{
	char p[128];
	int fd;

	snprintf(p, sizeof(p), "%s/%s", root_dir, rel);
	fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0 || write(fd, text, strlen(text)) < 0)
		abort();
	close(fd);
}

static void note_inside(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;

	while (d && (e = readdir(d))) {
		char p[256];
		struct stat st;

		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
		if (lstat(p, &st))
			continue;
		if (S_ISDIR(st.st_mode))
			note_inside(p);
		else if (S_ISREG(st.st_mode) && ninside < 64) {
			inside[ninside].dev = st.st_dev;
			inside[ninside++].ino = st.st_ino;
		}
	}
	if (d)
		closedir(d);
}

static void must_be_inside(int fd)
{
	struct stat st;

	if (fstat(fd, &st))
		abort();
	for (int i = 0; i < ninside; i++)
		if (inside[i].dev == st.st_dev && inside[i].ino == st.st_ino)
			return;
	fprintf(stderr, "debug file from outside the fake root: dev %lu ino %lu\n",
		(unsigned long)st.st_dev, (unsigned long)st.st_ino);
	abort();
}

static int rm_entry(const char *path, const struct stat *st, int type, struct FTW *f)
{
	return remove(path) && 0;
}

static void rm_root(void)
{
	nftw(root_dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	fuzz_quiet();
	sources__init();
	elf_version(EV_CURRENT);
	unsetenv("DEBUGINFOD_URLS");
	memfd = memfd_create("fuzz-elf", MFD_CLOEXEC);
	snprintf(mem_path, sizeof(mem_path), "/proc/self/fd/%d", memfd);
	snprintf(root_dir, sizeof(root_dir), "/tmp/cgbpf-fuzz-root-XXXXXX");
	if (memfd < 0 || !mkdtemp(root_dir))
		abort();
	/* The module is /usr/lib/libfuzz.so: its debug file is looked for in
	 * /usr/lib, /usr/lib/.debug and /usr/lib/debug/usr/lib, where links
	 * lead out of the root (to absolute host paths and up with ..). */
	plant("usr", NULL);
	plant("usr/lib", NULL);
	plant("usr/lib/debug", NULL);
	plant("usr/lib/debug/usr", NULL);
	plant("usr/lib/debug/usr/lib", "/usr/lib");
	plant("usr/lib/.debug", "../../../../../../tmp");
	plant("usr/lib/libfuzz.so.debug", "/etc/passwd");
	plant("usr/lib/a.debug", "/proc/self/exe");
	plant("usr/lib/b.debug", "/proc/self/fd/0");
	{
		char fifo[128];

		snprintf(fifo, sizeof(fifo), "%s/usr/lib/fifo.debug", root_dir);
		if (mkfifo(fifo, 0644))
			abort();
	}
	put("usr/lib/in.debug", "not an ELF file\n");
	note_inside(root_dir);
	atexit(rm_root);
	rootfd = open(root_dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (rootfd < 0)
		abort();
	return 0;
}

/* The symbolizer's callback, checked: what it opens is inside the root. */
static int checked_find_debuginfo(Dwfl_Module *mod, void **userdata, const char *modname,
				  Dwarf_Addr base, const char *file_name, const char *link,
				  GElf_Word crc, char **name)
{
	int fd = find_debuginfo(mod, userdata, modname, base, file_name, link, crc, name);

	if (fd >= 0)
		must_be_inside(fd);
	return fd;
}

/* The symbolizer's reading of one file, as sym_user does it for a frame,
 * with the file reported offline instead of from a live process. */
static void symbolizer_file(const uint8_t *data, size_t size)
{
	struct symbolizer *s = symbolizer__new();
	struct sproc p = { .pid = getpid(), .mem_fd = -1 };
	struct smod m = { .path = "/usr/lib/libfuzz.so", .proc = &p, .dev = 1, .ino = 1 };
	Dwfl_Callbacks cb = {
		.find_elf = dwfl_build_id_find_elf,
		.find_debuginfo = checked_find_debuginfo,
		.section_address = dwfl_offline_section_address,
	};
	uint64_t probes[4] = { 0, 0x1000, size / 2, UINT64_MAX };
	Dwfl *d;
	void **ud;
	int fd;

	if (!s)
		abort();
	/* No host root: only the fake one, whose every file is known. */
	close(s->host_root);
	s->host_root = -1;
	p.sym = s;
	p.root_fd = rootfd;
	d = dwfl_begin(&cb);
	fd = dup(memfd);
	if (!d || fd < 0)
		abort();
	dwfl_report_begin(d);
	m.mod = dwfl_report_elf(d, "libfuzz.so", mem_path, fd, 0, false);
	if (m.mod) {
		dwfl_module_info(m.mod, &ud, NULL, NULL, NULL, NULL, NULL, NULL);
		*ud = &m;
	} else {
		close(fd);
	}
	dwfl_report_end(d, NULL, NULL);
	if (m.mod && !mod_load(s, &m) && !file_read_syms(m.file, &m)) {
		for (size_t i = 0; i < 4; i++) {
			const struct fsym *y = file_find_sym(m.file, probes[i]);
			char *dm;

			if (!y)
				continue;
			dm = symbolizer__demangle(m.file->names + y->name);
			free(dm);
		}
		for (size_t i = 0; i < m.file->nsyms && i < 64; i++)
			file_find_sym(m.file, m.file->syms[i].addr);
	}
	dwfl_end(d);
	p.root_fd = -1;	/* ours, not the process's */
	symbolizer__free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct debugfile_req q = {
		.path = "/usr/lib/libfuzz.so", .link = "in.debug", .crc = 0x12345678,
		.build_id = data, .build_id_len = size < 20 ? size : 20,
	};
	struct elfsym *es;
	char *rpath, *runpath, found[256];
	int fd;

	if (ftruncate(memfd, 0) || (size && pwrite(memfd, data, size, 0) != (ssize_t)size))
		abort();
	es = elfsym__open(mem_path);
	if (es) {
		uint64_t off;

		elfsym__offset(es, "cuLaunchKernel", &off);
		elfsym__count(es);
		elfsym__build_id(es);
		elfsym__close(es);
	}
	fd = open(mem_path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		abort();
	ldpath__run_paths(fd, &rpath, &runpath);
	free(rpath);
	free(runpath);
	debugfile__matches(fd, &q);
	q.build_id = NULL;
	q.build_id_len = 0;
	debugfile__matches(fd, &q);
	close(fd);
	/* Debug file lookup with a link name from the input. */
	{
		char link[64];
		size_t n = size < sizeof(link) - 1 ? size : sizeof(link) - 1;

		memcpy(link, data, n);
		link[n] = 0;
		q.link = link;
		fd = debugfile__find(rootfd, -1, &q, found, sizeof(found));
		if (fd >= 0) {
			must_be_inside(fd);
			close(fd);
		}
	}
	symbolizer_file(data, size);
	return 0;
}
