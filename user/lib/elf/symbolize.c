// SPDX-License-Identifier: MIT
/*
 * lib/elf/: the ELF files of targets: symbol tables (elfsym.c), the
 * unwinder and symbolizer (symbolize.c), separate debug files
 * (debugfile.c), the loader's search path (ldpath.c). On lib/ only.
 *
 * Unwinder and symbolizer on elfutils' libdwfl.
 *
 * Per process: a table of the executable file mappings (from
 * /proc/PID/maps) and a Dwfl whose modules are those mappings, reported by
 * us rather than by dwfl_linux_proc_report so that every file is opened
 * inside the target's mount namespace and as the very file it mapped:
 * /proc/PID/map_files/<range> first (the mapped inode even if deleted or
 * replaced; root only), <path> resolved inside /proc/PID/root when its
 * device and inode still match the mapping. Separate debug files
 * (.gnu_debuglink, build id) are found by our own callback inside the
 * target's root too (user/lib/elf/debugfile.c), never through a path whose
 * symbolic links could lead out of a container's root into the host's
 * files; only regular files are ever opened.
 *
 * Copied stacks are unwound through dwfl_attach_state with our own thread
 * callbacks: registers from the sample, memory from the copied slice (the
 * rest of the target's memory from /proc/PID/mem, except the stack mapping
 * itself, whose live contents no longer match the sample). libdwfl uses
 * .eh_frame/.debug_frame and falls back to frame pointers (its x86-64
 * backend) where a pc has no CFI; we walk frame pointers ourselves when
 * libdwfl cannot even start (a pc outside every module: JIT code).
 *
 * Symbols are cached per module file (build id, else device + inode) and
 * relative pc, so other processes of the same binary and frames of a process
 * that since exited resolve without libdwfl. Every returned string is
 * interned and lives as long as the symbolizer.
 */
#include <elfutils/libdwfl.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>
#include "lib/elf/debugfile.h"
#include "lib/elf/ldpath.h"
#include "lib/elf/symbolize.h"
#include "lib/hmap.h"
#include "lib/procfs.h"

char *__cxa_demangle(const char *mangled, char *buf, size_t *len, int *status);

/* Bounds on what a long capture keeps. */
#define SYM_CACHE_MAX	(1u << 20)	/* cached (file, pc) symbols, then flushed */
#define EXITED_MAX	256		/* exited processes whose tables are kept */
#define REFRESH_NS	100000000ull	/* re-read maps on a miss at most this often */
#define RELPC_BITS	40
#define KSYM_MAX_SIZE	(1u << 20)	/* no kernel function is larger */

/* A function symbol of a module file, at its ELF address. */
struct fsym {
	uint64_t addr, size;
	uint32_t name;		/* offset in the file's names */
	uint8_t rank;		/* among aliases the highest wins */
};

/* One module file, shared by every process that maps it. Its function
 * symbols are read once (libdwfl's own lookup scans every symbol on every
 * call), sorted, and kept with their names, so lookups are a binary search
 * and need no Dwfl: frames of an exited process still resolve. */
struct sfile {
	uint32_t id;
	const char *build_id;	/* interned hex or NULL */
	bool syms_read;
	struct fsym *syms;
	size_t nsyms;
	char *names;
};

/* One executable file mapping group of a process. Individually allocated:
 * libdwfl's module userdata points at it. */
struct smod {
	uint64_t start, end;	/* the file's whole mapped range */
	uint64_t map_start, map_end;	/* its first mapping (for map_files) */
	uint64_t dev, ino;
	const char *path;	/* interned, as the target sees it */
	bool deleted, vdso;
	bool exec;		/* some mapping of the group is executable */
	bool loaded;		/* bias and file known */
	bool no_elf;		/* libdwfl found no ELF for it */
	bool here;		/* its file was found in our root (the process gone) */
	bool debug_tried;	/* its debug file was looked for */
	uint64_t bias;
	struct sfile *file;
	Dwfl_Module *mod;
	struct sproc *proc;
	struct smod *next_all;	/* every smod of the process, for freeing */
};

/* A mapping of any kind, for deciding where unwinder reads go. */
struct smap {
	uint64_t start, end;
};

/* The copied stack an unwind works on. */
struct unwind_ctx {
	pid_t tid;
	bool thread_given;
	const struct sym_regs *regs;
	const uint8_t *stack;
	size_t len;
	uint64_t stack_lo, stack_hi;	/* the stack mapping holding regs->sp */
	bool out_of_slice;
};

struct sproc {
	struct symbolizer *sym;
	pid_t pid;
	bool exited, stale, attached;
	uint64_t read_ns;	/* when maps were last read */
	Dwfl *dwfl;
	struct smod **mods;	/* sorted by start */
	size_t nmods;
	struct smap *maps;	/* every mapping, sorted by start */
	size_t nmaps;
	struct smod *all;
	int mem_fd;		/* /proc/PID/mem, -1 until needed */
	int root_fd;		/* /proc/PID/root (O_PATH), -1 until needed */
	struct unwind_ctx *uw;
	struct sproc *next_exited;
};

struct ksym {
	uint64_t addr;
	const char *name;
	const char *module;
};

struct cached_sym {
	const char *function;
	uint64_t off;
};

struct symbolizer {
	struct hmap procs;	/* pid -> struct sproc * */
	struct sproc *exited_head, *exited_tail;
	size_t nexited;
	struct hmap files;	/* hash(build id) or dev:ino -> struct sfile * */
	uint32_t nfiles;
	struct hmap syms;	/* file id << 40 | relpc -> index into cache */
	struct cached_sym *cache;
	size_t ncache, cache_cap;
	struct hmap strings;	/* hash -> char * (linear probing on collision) */
	int host_root;		/* our "/" (O_PATH), for debug files by build id */
	Dwfl_Callbacks cb;
	struct ksym *ksyms;
	size_t nksyms;
	bool ksyms_read, ksyms_ok;
	/* symbolizer__kernel_prefetch()'s thread, joined at the first kernel
	 * frame: its table points into kbuf (the file's text). */
	pthread_t kthread;
	bool kthread_on;
	char *kbuf;
	void *vdso;
	size_t vdso_len;
	/* Our own executable, for libdwfl's unwinder to take the machine
	 * from (dwfl_attach_state): see attach_unwinder(). */
	int self_fd;		/* -1: not open */
	Elf *self_elf;
	bool self_tried;
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Interns s; NULL on allocation failure. */
static const char *intern(struct symbolizer *s, const char *str)
{
	uint64_t h = hash__bytes(str, strlen(str)), *v;
	char *copy;

	for (;; h++) {
		v = hmap__get(&s->strings, h);
		if (!v)
			break;
		if (!strcmp((const char *)(uintptr_t)*v, str))
			return (const char *)(uintptr_t)*v;
	}
	copy = strdup(str);
	if (!copy)
		return NULL;
	if (hmap__put(&s->strings, h, (uintptr_t)copy)) {
		free(copy);
		return NULL;
	}
	return copy;
}

/* ---------------------------------------------------------------- libdwfl glue */

/* The debuginfod client is a dlopen of libdebuginfod: never in a static
 * binary, never to the network. The Makefile wraps libdw's calls to it
 * into these (static link only; the dynamic unit tests keep libdw's own,
 * which does nothing without DEBUGINFOD_URLS). */
int __wrap___libdwfl_debuginfod_find_debuginfo(Dwfl *dwfl, const unsigned char *id, size_t n);
int __wrap___libdwfl_debuginfod_find_executable(Dwfl *dwfl, const unsigned char *id, size_t n);
void __wrap___libdwfl_debuginfod_end(void *client);

int __wrap___libdwfl_debuginfod_find_debuginfo(Dwfl *dwfl, const unsigned char *id, size_t n)
{
	return -1;
}

int __wrap___libdwfl_debuginfod_find_executable(Dwfl *dwfl, const unsigned char *id, size_t n)
{
	return -1;
}

void __wrap___libdwfl_debuginfod_end(void *client)
{
}

/* Opens path if it is the regular file dev:ino, resolved inside the root
 * rootfd (-1: as open() resolves it: magic links, our own root); -1
 * otherwise. Nothing but a regular file is ever opened (a device or a
 * FIFO a process happens to map). */
static int open_checked(int rootfd, const char *path, uint64_t dev, uint64_t ino)
{
	struct stat st;
	int fd = rootfd >= 0 ? ldpath__open_at(rootfd, path, O_RDONLY) : ldpath__open_file(path);

	if (fd < 0)
		return -1;
	if (fstat(fd, &st) || st.st_ino != ino || (uint64_t)st.st_dev != dev) {
		close(fd);
		return -1;
	}
	return fd;
}

/* The target's root directory, opened once; -1 when it is gone. */
static int proc_root(struct sproc *p)
{
	char path[32];

	if (p->root_fd < 0 && !p->exited) {
		snprintf(path, sizeof(path), "/proc/%d/root", p->pid);
		p->root_fd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	}
	return p->root_fd;
}

static int vdso_find(const struct map_entry *e, void *ctx)
{
	struct symbolizer *s = ctx;
	uint64_t at = getauxval(AT_SYSINFO_EHDR);

	if (!at || strcmp(e->path, "[vdso]") || at != e->start)
		return 0;
	s->vdso = malloc(e->end - e->start);
	if (s->vdso) {
		memcpy(s->vdso, (const void *)(uintptr_t)e->start, e->end - e->start);
		s->vdso_len = e->end - e->start;
	}
	return 1;
}

/* Copies our own vDSO, once. */
static void vdso_copy(struct symbolizer *s)
{
	procfs__for_each_map(getpid(), vdso_find, s);
}

static int find_elf(Dwfl_Module *mod, void **userdata, const char *name, Dwarf_Addr base,
		    char **file_name, Elf **elfp)
{
	struct smod *m = *userdata;
	struct symbolizer *s;
	char root_path[PATH_MAX + 32], mf_path[96];
	int fd, rootfd;

	*file_name = NULL;
	*elfp = NULL;
	if (!m)
		return -1;
	if (m->vdso) {
		/* Every 64-bit process of this kernel maps the vDSO image we do. */
		s = m->proc->sym;
		if (!s->vdso)
			vdso_copy(s);
		if (s->vdso)
			*elfp = elf_memory(s->vdso, s->vdso_len);
		return -1;
	}
	/* The name libdwfl shows: the file as we reach it. */
	snprintf(root_path, sizeof(root_path), "/proc/%d/root%s", m->proc->pid, m->path);
	snprintf(mf_path, sizeof(mf_path), "/proc/%d/map_files/%" PRIx64 "-%" PRIx64, m->proc->pid,
		 m->map_start, m->map_end);
	fd = open_checked(-1, mf_path, m->dev, m->ino);
	rootfd = proc_root(m->proc);
	if (fd < 0 && !m->deleted && rootfd >= 0)
		fd = open_checked(rootfd, m->path, m->dev, m->ino);
	/* The process is gone (its /proc entries with it) but the very file
	 * may still be at the same path in our namespace. */
	if (fd < 0 && !m->deleted && (fd = open_checked(-1, m->path, m->dev, m->ino)) >= 0) {
		m->here = true;
		*file_name = strdup(m->path);
		return fd;
	}
	if (fd < 0)
		return -1;
	*file_name = strdup(m->deleted ? mf_path : root_path);
	return fd;
}

/* libdwfl's standard lookup would follow the file's name through
 * /proc/PID/root, whose absolute symbolic links lead to our root: this one
 * resolves every candidate inside the target's root and checks it. */
static int find_debuginfo(Dwfl_Module *mod, void **userdata, const char *modname,
			  Dwarf_Addr base, const char *file_name, const char *debuglink_file,
			  GElf_Word debuglink_crc, char **debuginfo_file_name)
{
	struct smod *m = *userdata;
	struct debugfile_req q = { .link = debuglink_file, .crc = debuglink_crc };
	const unsigned char *bits;
	char found[PATH_MAX];
	GElf_Addr vaddr;
	int n, fd, rootfd;

	*debuginfo_file_name = NULL;
	/* Once per module: a second call is for the debug file's own
	 * .gnu_debugaltlink (DWARF shared by dwz), which symbols and CFI do
	 * not need. */
	if (!m || m->vdso || m->debug_tried)
		return -1;
	m->debug_tried = true;
	q.path = m->path;
	n = dwfl_module_build_id(mod, &bits, &vaddr);
	if (n > 0) {
		q.build_id = bits;
		q.build_id_len = n;
	}
	rootfd = m->here ? m->proc->sym->host_root : proc_root(m->proc);
	fd = debugfile__find(rootfd, m->proc->sym->host_root, &q, found, sizeof(found));
	if (fd >= 0)
		*debuginfo_file_name = strdup(found);
	return fd;
}

static pid_t next_thread(Dwfl *dwfl, void *arg, void **thread_argp)
{
	struct sproc *p = arg;

	if (!p->uw || p->uw->thread_given)
		return 0;
	p->uw->thread_given = true;
	*thread_argp = p;
	return p->uw->tid;
}

/* The mapping holding addr, or NULL. */
static const struct smap *find_map(const struct sproc *p, uint64_t addr)
{
	size_t lo = 0, hi = p->nmaps;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (addr < p->maps[mid].start)
			hi = mid;
		else if (addr >= p->maps[mid].end)
			lo = mid + 1;
		else
			return &p->maps[mid];
	}
	return NULL;
}

static bool memory_read(Dwfl *dwfl, Dwarf_Addr addr, Dwarf_Word *result, void *arg)
{
	struct sproc *p = arg;
	struct unwind_ctx *u = p->uw;
	char path[64];

	if (!u)
		return false;
	if (addr >= u->regs->sp && addr - u->regs->sp <= u->len &&
	    u->len - (addr - u->regs->sp) >= sizeof(*result)) {
		memcpy(result, u->stack + (addr - u->regs->sp), sizeof(*result));
		return true;
	}
	/* The stack now holds other frames than at the sample. */
	if (addr >= u->stack_lo && addr < u->stack_hi) {
		if (addr >= u->regs->sp)
			u->out_of_slice = true;
		return false;
	}
	if (p->exited || !find_map(p, addr))
		return false;
	/* Text and read-only data: the live process still has them. */
	if (p->mem_fd < 0) {
		snprintf(path, sizeof(path), "/proc/%d/mem", p->pid);
		p->mem_fd = open(path, O_RDONLY | O_CLOEXEC);
		if (p->mem_fd < 0)
			return false;
	}
	return pread(p->mem_fd, result, sizeof(*result), (off_t)addr) == sizeof(*result);
}

static bool set_initial_registers(Dwfl_Thread *thread, void *arg)
{
	struct sproc *p = arg;
	Dwarf_Word bp_sp[2] = { p->uw->regs->bp, p->uw->regs->sp };

	/* x86-64 DWARF numbers: rbp 6, rsp 7; the pc is kept apart. */
	if (!dwfl_thread_state_registers(thread, 6, 2, bp_sp))
		return false;
	dwfl_thread_state_register_pc(thread, p->uw->regs->ip);
	return true;
}

static const Dwfl_Thread_Callbacks thread_cbs = {
	.next_thread = next_thread,
	.memory_read = memory_read,
	.set_initial_registers = set_initial_registers,
};

/* ---------------------------------------------------------------- processes */

struct maps_build {
	struct sproc *p;
	struct smod **mods;
	size_t nmods, cap;
	struct smap *maps;
	size_t nmaps, mcap;
	struct smod *cur;	/* group being extended */
	struct symbolizer *s;
	int err;
};

static struct smod *reuse_or_new(struct maps_build *b, const struct map_entry *e, uint64_t dev,
				 const char *path, bool deleted, bool vdso)
{
	struct smod *m;

	for (m = b->p->all; m; m = m->next_all)
		if (m->map_start == e->start && m->dev == dev && m->ino == e->inode &&
		    m->path == path && m->vdso == vdso)
			break;
	if (!m) {
		m = calloc(1, sizeof(*m));
		if (!m)
			return NULL;
		m->map_start = e->start;
		m->map_end = e->end;
		m->dev = dev;
		m->ino = e->inode;
		m->path = path;
		m->deleted = deleted;
		m->vdso = vdso;
		m->proc = b->p;
		m->next_all = b->p->all;
		b->p->all = m;
	}
	m->start = e->start;
	m->end = e->end;
	return m;
}

static int add_map(const struct map_entry *e, void *ctx)
{
	struct maps_build *b = ctx;
	const char *path = e->path, *del;
	char buf[PATH_MAX];
	uint64_t dev = makedev(e->dev_major, e->dev_minor);
	bool deleted = false, vdso = !strcmp(path, "[vdso]");
	struct smod *m;
	void *n;

	if (b->nmaps == b->mcap) {
		b->mcap = b->mcap ? 2 * b->mcap : 64;
		n = realloc(b->maps, b->mcap * sizeof(*b->maps));
		if (!n)
			return b->err = -ENOMEM;
		b->maps = n;
	}
	b->maps[b->nmaps++] = (struct smap){ e->start, e->end };

	if (!vdso && (path[0] != '/' || !e->inode || !strncmp(path, "/dev/", 5))) {
		b->cur = NULL;
		return 0;
	}
	/* A file mapping continuing the current group. */
	if (b->cur && !vdso && b->cur->ino == e->inode && b->cur->dev == dev &&
	    b->cur->end == e->start) {
		b->cur->end = e->end;
		b->cur->exec |= e->perms[2] == 'x';
		return 0;
	}
	/* Groups start at the file's first page: libdwfl takes the bias from
	 * the lowest address. Other mappings of files (data) are no frames'. */
	if (e->offset != 0 && !vdso) {
		b->cur = NULL;
		return 0;
	}
	del = strstr(path, " (deleted)");
	if (del && del[10] == 0) {
		size_t n = (size_t)(del - path);

		if (n >= sizeof(buf))
			n = sizeof(buf) - 1;
		memcpy(buf, path, n);
		buf[n] = 0;
		path = buf;
		deleted = true;
	}
	path = intern(b->s, path);
	if (!path)
		return b->err = -ENOMEM;
	m = reuse_or_new(b, e, dev, path, deleted, vdso);
	if (!m)
		return b->err = -ENOMEM;
	m->exec = e->perms[2] == 'x';
	if (b->nmods == b->cap) {
		b->cap = b->cap ? 2 * b->cap : 32;
		n = realloc(b->mods, b->cap * sizeof(*b->mods));
		if (!n)
			return b->err = -ENOMEM;
		b->mods = n;
	}
	b->mods[b->nmods++] = m;
	b->cur = vdso ? NULL : m;
	return 0;
}

/* Reads /proc/PID/maps into p's tables and reports the modules to its
 * Dwfl (re-reporting keeps modules already loaded). */
static int proc_read_maps(struct symbolizer *s, struct sproc *p)
{
	struct maps_build b = { .p = p, .s = s };
	size_t i, j;
	int err;

	err = procfs__for_each_map(p->pid, add_map, &b);
	if (!err)
		err = b.err;
	/* Only code makes frames: data files (fonts, locale archives, model
	 * weights) are never reported, nor opened. */
	for (i = j = 0; i < b.nmods; i++)
		if (b.mods[i]->exec)
			b.mods[j++] = b.mods[i];
	b.nmods = j;
	p->read_ns = now_ns();
	if (err || !b.nmods) {
		free(b.mods);
		free(b.maps);
		return err ? err : -ESRCH;	/* no file mapping at all: gone (zombie) */
	}
	free(p->mods);
	free(p->maps);
	p->mods = b.mods;
	p->nmods = b.nmods;
	p->maps = b.maps;
	p->nmaps = b.nmaps;
	p->stale = false;

	if (!p->dwfl) {
		p->dwfl = dwfl_begin(&s->cb);
		if (!p->dwfl)
			return -ENOMEM;
	}
	dwfl_report_begin(p->dwfl);
	for (i = 0; i < p->nmods; i++) {
		struct smod *m = p->mods[i];
		void **ud;

		m->mod = dwfl_report_module(p->dwfl, m->path, m->start, m->end);
		if (!m->mod)
			continue;
		dwfl_module_info(m->mod, &ud, NULL, NULL, NULL, NULL, NULL, NULL);
		*ud = m;
	}
	dwfl_report_end(p->dwfl, NULL, NULL);
	return 0;
}

static void proc_release_dwfl(struct sproc *p)
{
	struct smod *m;

	dwfl_end(p->dwfl);
	p->dwfl = NULL;
	p->attached = false;
	for (m = p->all; m; m = m->next_all)
		m->mod = NULL;
	if (p->mem_fd >= 0)
		close(p->mem_fd);
	p->mem_fd = -1;
	if (p->root_fd >= 0)
		close(p->root_fd);
	p->root_fd = -1;
}

static void proc_free(struct sproc *p)
{
	struct smod *m, *n;

	if (!p)
		return;
	proc_release_dwfl(p);
	for (m = p->all; m; m = n) {
		n = m->next_all;
		free(m);
	}
	free(p->mods);
	free(p->maps);
	free(p);
}

/* The process record of pid, created (maps read) if new; NULL with -errno
 * in *err when it is unknown and cannot be read. */
static struct sproc *proc_get(struct symbolizer *s, pid_t pid, int *err)
{
	uint64_t *v = hmap__get(&s->procs, (uint64_t)pid);
	struct sproc *p;

	if (v) {
		p = (struct sproc *)(uintptr_t)*v;
		/* Invalidated (exec, a new executable mapping): old modules may
		 * sit where the new ones are. On failure the old tables stay. */
		if (p->stale && !p->exited)
			proc_read_maps(s, p);
		return p;
	}
	p = calloc(1, sizeof(*p));
	if (!p) {
		*err = -ENOMEM;
		return NULL;
	}
	p->sym = s;
	p->pid = pid;
	p->mem_fd = -1;
	p->root_fd = -1;
	*err = proc_read_maps(s, p);
	if (*err == -ENOENT)
		*err = -ESRCH;
	if (*err || hmap__put(&s->procs, (uint64_t)pid, (uintptr_t)p)) {
		if (!*err)
			*err = -ENOMEM;
		proc_free(p);
		return NULL;
	}
	return p;
}

/* The module of p holding ip, or NULL. */
static struct smod *find_mod(const struct sproc *p, uint64_t ip)
{
	size_t lo = 0, hi = p->nmods;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (ip < p->mods[mid]->start)
			hi = mid;
		else if (ip >= p->mods[mid]->end)
			lo = mid + 1;
		else
			return p->mods[mid];
	}
	return NULL;
}

/* find_mod, re-reading the maps of a live process on a miss when they may
 * have changed (invalidated, or not read for a while: dlopen). */
static struct smod *find_mod_fresh(struct symbolizer *s, struct sproc *p, uint64_t ip)
{
	struct smod *m = find_mod(p, ip);

	if (m || p->exited)
		return m;
	if (!p->stale && now_ns() - p->read_ns < REFRESH_NS)
		return NULL;
	/* On failure (the process is dying) the old tables stay. */
	proc_read_maps(s, p);
	return find_mod(p, ip);
}

/* ---------------------------------------------------------------- symbols */

static const char *hex_build_id(struct symbolizer *s, const unsigned char *bits, int n)
{
	char hex[2 * 64 + 1];
	int i;

	if (n <= 0)
		return NULL;
	if (n > 64)
		n = 64;
	for (i = 0; i < n; i++)
		snprintf(hex + 2 * i, 3, "%02x", bits[i]);
	return intern(s, hex);
}

/* The shared file record of key; created with the next id if new. */
static struct sfile *file_get(struct symbolizer *s, uint64_t key, const char *build_id)
{
	uint64_t *v = hmap__get(&s->files, key);
	struct sfile *f;

	if (v)
		return (struct sfile *)(uintptr_t)*v;
	f = calloc(1, sizeof(*f));
	if (!f)
		return NULL;
	f->id = ++s->nfiles;
	f->build_id = build_id;
	if (hmap__put(&s->files, key, (uintptr_t)f)) {
		free(f);
		return NULL;
	}
	return f;
}

/* Loads m's ELF through libdwfl: bias, build id, file identity. */
static int mod_load(struct symbolizer *s, struct smod *m)
{
	const unsigned char *bits;
	GElf_Addr vaddr;
	Dwarf_Addr bias;
	uint64_t key;
	int n;

	if (m->loaded)
		return 0;
	if (m->no_elf || !m->mod)
		return -ENOENT;
	if (!dwfl_module_getelf(m->mod, &bias)) {
		m->no_elf = true;
		return -ENOENT;
	}
	n = dwfl_module_build_id(m->mod, &bits, &vaddr);
	if (n > 0) {
		key = hash__bytes(bits, (size_t)n) | 1ull << 63;
		m->file = file_get(s, key, hex_build_id(s, bits, n));
	} else {
		key = hash__u64(m->dev) ^ m->ino;
		key &= ~(1ull << 63);
		m->file = file_get(s, key, NULL);
	}
	if (!m->file)
		return -ENOMEM;
	m->bias = bias;
	m->loaded = true;
	return 0;
}

static int fsym_cmp(const void *a, const void *b)
{
	const struct fsym *x = a, *y = b;

	if (x->addr != y->addr)
		return x->addr < y->addr ? -1 : 1;
	return (int)x->rank - (int)y->rank;
}

/* Reads the function symbols of m's file (.symtab of the file or of its
 * debug file, else .dynsym: libdwfl's choice) into f. */
static int file_read_syms(struct sfile *f, struct smod *m)
{
	size_t cap = 0, names_len = 0, names_cap = 0;
	int n, i;
	void *p;

	f->syms_read = true;
	n = dwfl_module_getsymtab(m->mod);
	for (i = 1; i < n; i++) {
		GElf_Sym sym;
		GElf_Addr addr;
		GElf_Word shndx;
		Elf *elf;
		Dwarf_Addr bias;
		const char *name = dwfl_module_getsym_info(m->mod, i, &sym, &addr, &shndx, &elf,
							   &bias);
		int type = GELF_ST_TYPE(sym.st_info), bind = GELF_ST_BIND(sym.st_info);
		size_t len;

		if (!name || !*name || shndx == SHN_UNDEF ||
		    (type != STT_FUNC && type != STT_GNU_IFUNC))
			continue;
		/* .symver names of glibc's own .symtab: "memcpy@GLIBC_2.2.5"
		 * reads as memcpy, like its .dynsym entry. */
		len = strcspn(name, "@");
		if (!len)
			len = strlen(name);
		len++;
		if (names_len + len > names_cap || names_len + len > UINT32_MAX) {
			if (names_len + len > UINT32_MAX)
				break;
			names_cap = (names_cap ? 2 * names_cap : 65536) + len;
			p = realloc(f->names, names_cap);
			if (!p)
				return -ENOMEM;
			f->names = p;
		}
		if (f->nsyms == cap) {
			cap = cap ? 2 * cap : 1024;
			p = realloc(f->syms, cap * sizeof(*f->syms));
			if (!p)
				return -ENOMEM;
			f->syms = p;
		}
		memcpy(f->names + names_len, name, len - 1);
		f->names[names_len + len - 1] = 0;
		/* Aliases: global over weak over local, sized over sizeless,
		 * plain over a .symver name. */
		f->syms[f->nsyms++] = (struct fsym){
			.addr = addr - m->bias,
			.size = sym.st_size,
			.name = (uint32_t)names_len,
			.rank = (uint8_t)((bind == STB_GLOBAL ? 8 : bind == STB_WEAK ? 4 : 0) +
					  (sym.st_size != 0) * 2 + !strchr(name, '@')),
		};
		names_len += len;
	}
	if (f->nsyms)
		qsort(f->syms, f->nsyms, sizeof(*f->syms), fsym_cmp);
	return 0;
}

/* The function symbol of f holding rel: the highest at or below it, if
 * sizeless or rel is within its size. */
static const struct fsym *file_find_sym(const struct sfile *f, uint64_t rel)
{
	size_t lo = 0, hi = f->nsyms;
	const struct fsym *y;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (f->syms[mid].addr <= rel)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (!lo)
		return NULL;
	y = &f->syms[lo - 1];
	return !y->size || rel - y->addr < y->size ? y : NULL;
}

char *symbolizer__demangle(const char *name)
{
	int status = -1;
	char *d;

	if (name[0] == '_' && name[1] == 'Z') {
		d = __cxa_demangle(name, NULL, NULL, &status);
		if (d && status == 0)
			return d;
		free(d);
	}
	return NULL;
}

char *symbolizer__demangle_dup(const char *name)
{
	char *d = symbolizer__demangle(name);

	return d ? d : strdup(name);
}

static void cache_flush(struct symbolizer *s)
{
	hmap__free(&s->syms);
	memset(&s->syms, 0, sizeof(s->syms));
	s->ncache = 0;
}

static int cache_put(struct symbolizer *s, uint64_t key, const char *function, uint64_t off)
{
	void *n;

	if (s->ncache >= SYM_CACHE_MAX)
		cache_flush(s);
	if (s->ncache == s->cache_cap) {
		s->cache_cap = s->cache_cap ? 2 * s->cache_cap : 1024;
		n = realloc(s->cache, s->cache_cap * sizeof(*s->cache));
		if (!n)
			return -ENOMEM;
		s->cache = n;
	}
	s->cache[s->ncache] = (struct cached_sym){ function, off };
	if (hmap__put(&s->syms, key, s->ncache))
		return -ENOMEM;
	s->ncache++;
	return 0;
}

static int sym_user(struct symbolizer *s, pid_t pid, uint64_t ip, uint64_t lookup,
		    struct sym_frame *out)
{
	struct sproc *p;
	struct smod *m;
	uint64_t key, relpc, *v, off = 0;
	const char *name, *function = NULL;
	const struct fsym *y;
	char *d;
	int err;

	memset(out, 0, sizeof(*out));
	out->ip = ip;
	p = proc_get(s, pid, &err);
	if (!p)
		return err;
	m = find_mod_fresh(s, p, lookup);
	if (!m)
		return p->exited ? -ESRCH : -ENOENT;
	out->module = m->path;
	out->module_start = m->start;
	out->module_end = m->end;
	if (!m->loaded) {
		if (p->exited || !p->dwfl)
			return -ESRCH;
		err = mod_load(s, m);
		if (err)
			return err;
	}
	relpc = lookup - m->bias;
	out->module_off = ip - m->bias;
	out->build_id = m->file->build_id;
	key = (uint64_t)m->file->id << RELPC_BITS | relpc;
	if (relpc < 1ull << RELPC_BITS && (v = hmap__get(&s->syms, key))) {
		out->function = s->cache[*v].function;
		out->function_off = s->cache[*v].off + (ip - lookup);
		return out->function ? 0 : -ENOENT;
	}
	if (!m->file->syms_read) {
		if (!m->mod)
			return -ESRCH;
		err = file_read_syms(m->file, m);
		if (err)
			return err;
	}
	y = file_find_sym(m->file, relpc);
	if (y) {
		name = m->file->names + y->name;
		off = relpc - y->addr;
		d = symbolizer__demangle(name);
		function = intern(s, d ? d : name);
		free(d);
		if (!function)
			return -ENOMEM;
	}
	if (relpc < 1ull << RELPC_BITS)
		cache_put(s, key, function, off);
	out->function = function;
	out->function_off = off + (ip - lookup);
	return function ? 0 : -ENOENT;
}

int symbolizer__user(struct symbolizer *s, pid_t pid, uint64_t ip, struct sym_frame *out)
{
	return sym_user(s, pid, ip, ip, out);
}

int symbolizer__user_ret(struct symbolizer *s, pid_t pid, uint64_t ret, struct sym_frame *out)
{
	/* The call instruction ends just before the return address; a
	 * noreturn call can be the last instruction of its function. */
	return sym_user(s, pid, ret, ret ? ret - 1 : 0, out);
}

/* ---------------------------------------------------------------- unwinding */

struct frames_ctx {
	uint64_t *ips;
	int n, max;
};

static int frame_cb(Dwfl_Frame *state, void *arg)
{
	struct frames_ctx *f = arg;
	Dwarf_Addr pc;

	/* pc 0: a bogus unwind (no CFI, no frame pointer), not a frame. */
	if (!dwfl_frame_pc(state, &pc, NULL) || !pc)
		return DWARF_CB_ABORT;
	/* Frame 0 is the sampled instruction: libdwfl reports it as given. */
	f->ips[f->n++] = pc;
	return f->n >= f->max ? DWARF_CB_ABORT : DWARF_CB_OK;
}

/* Frame-pointer walk on the copy alone: [bp] = caller's bp, [bp+8] =
 * return address. */
static int fp_walk(const struct unwind_ctx *u, uint64_t *ips, int n, int max, uint64_t bp,
		   bool *truncated)
{
	uint64_t sp = u->regs->sp, prev = 0;

	while (n < max) {
		uint64_t frame[2];

		if (!bp) {
			*truncated = false;	/* outermost: _start clears rbp */
			return n;
		}
		if (bp < sp || bp - sp > u->len || u->len - (bp - sp) < sizeof(frame) || bp <= prev) {
			*truncated = true;
			return n;
		}
		memcpy(frame, u->stack + (bp - sp), sizeof(frame));
		if (!frame[1]) {
			*truncated = false;
			return n;
		}
		ips[n++] = frame[1];
		prev = bp;
		bp = frame[0];
	}
	*truncated = true;
	return n;
}

/*
 * Attaches libdwfl's unwinder to p's Dwfl. It is given our own executable
 * for the machine (the targets are ours): with none, libdwfl borrows the
 * first module's backend, and a module list reported again after an exec
 * frees that module, backend and all, under the attached state (seen:
 * cgbpf aborted in libdwfl's state_alloc on a garbage register count
 * while a pyenv shim's processes exec'ed).
 */
static bool attach_unwinder(struct symbolizer *s, struct sproc *p, pid_t pid)
{
	if (!s->self_tried) {
		s->self_tried = true;
		if (elf_version(EV_CURRENT) != EV_NONE)
			s->self_fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
		if (s->self_fd >= 0)
			s->self_elf = elf_begin(s->self_fd, ELF_C_READ_MMAP, NULL);
	}
	if (!s->self_elf)
		return false;
	return dwfl_attach_state(p->dwfl, s->self_elf, pid, &thread_cbs, p);
}

int symbolizer__unwind(struct symbolizer *s, pid_t pid, pid_t tid, const struct sym_regs *regs,
		       const void *stack, size_t len, uint64_t *ips, int max, bool *truncated)
{
	struct unwind_ctx u = { .tid = tid, .regs = regs, .stack = stack, .len = len };
	struct frames_ctx f = { .ips = ips, .max = max };
	const struct smap *sm;
	struct sproc *p;
	int err, rc;

	*truncated = false;
	if (max <= 0)
		return 0;
	if (u.tid <= 0)
		u.tid = pid;	/* next_thread's 0 means "no thread" */
	p = proc_get(s, pid, &err);
	if (!p)
		return err;
	if (!find_mod(p, regs->ip))
		find_mod_fresh(s, p, regs->ip);
	sm = find_map(p, regs->sp);
	if (sm) {
		u.stack_lo = sm->start;
		u.stack_hi = sm->end;
	} else {
		/* Unknown stack mapping: treat what lies above the copy as stack. */
		u.stack_lo = regs->sp;
		u.stack_hi = regs->sp + (64u << 20);
	}

	if (p->dwfl && !p->exited && !p->attached && attach_unwinder(s, p, pid))
		p->attached = true;
	if (p->attached && find_mod(p, regs->ip)) {
		p->uw = &u;
		rc = dwfl_getthread_frames(p->dwfl, tid, frame_cb, &f);
		p->uw = NULL;
		if (f.n > 0) {
			/* 0: reached the outermost frame; otherwise stopped early
			 * (no CFI and no frame pointer, max). A return address
			 * beyond the copy reads as "undefined", which libdwfl
			 * takes for the outermost frame: hence out_of_slice. */
			*truncated = rc != 0 || u.out_of_slice;
			return f.n;
		}
	}
	/* libdwfl could not start (pc outside every module: JIT code, or a
	 * process already gone): frame pointers on the copy. */
	ips[0] = regs->ip;
	return fp_walk(&u, ips, 1, max, regs->bp, truncated);
}

/* ---------------------------------------------------------------- kernel */

static int ksym_cmp(const void *a, const void *b)
{
	const struct ksym *x = a, *y = b;

	return x->addr < y->addr ? -1 : x->addr > y->addr;
}

/* kallsyms, parsed: text symbols, names and modules pointing into buf
 * (the whole file, NUL-terminated in place), sorted by address. Touches
 * nothing of the symbolizer: it runs on symbolizer__kernel_prefetch()'s
 * thread too. */
struct ktable {
	char *buf;
	struct ksym *v;
	size_t n;
};

static char *read_all(const char *path, size_t *lenp)
{
	size_t len = 0, cap = 8 << 20;
	char *buf = malloc(cap + 1);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t r;

	if (!buf || fd < 0) {
		free(buf);
		if (fd >= 0)
			close(fd);
		return NULL;
	}
	while ((r = read(fd, buf + len, cap - len)) > 0) {
		len += (size_t)r;
		if (len == cap) {
			char *n = realloc(buf, 2 * cap + 1);

			if (!n)
				break;
			buf = n;
			cap *= 2;
		}
	}
	close(fd);
	buf[len] = 0;
	*lenp = len;
	return buf;
}

/* The module text of a line, one pointer per module name (a table's
 * users may compare them): the last few seen are remembered. */
static const char *kmodule(const char **seen, size_t *nseen, const char *mod)
{
	for (size_t i = 0; i < *nseen; i++)
		if (!strcmp(seen[i], mod))
			return seen[i];
	if (*nseen < 512)
		seen[(*nseen)++] = mod;
	return mod;
}

static void ktable_read(struct ktable *t)
{
	static const char core[] = "[kernel.kallsyms]";
	const char **mods = calloc(512, sizeof(*mods));
	size_t cap = 0, nmods = 0, len = 0;
	char *line, *next, *stop;

	memset(t, 0, sizeof(*t));
	t->buf = read_all("/proc/kallsyms", &len);
	if (!t->buf || !mods) {
		free(mods);
		return;
	}
	stop = t->buf + len;
	for (line = t->buf; line < stop; line = next) {
		unsigned long long addr;
		char type, *end, *name, *mod;

		/* memchr with the length: strchr on the rest of a 5 MB
		 * buffer per line is quadratic under ASan's interceptor. */
		next = memchr(line, '\n', (size_t)(stop - line));
		if (next)
			*next++ = 0;
		else
			next = stop;
		addr = strtoull(line, &end, 16);
		if (end == line || end[0] != ' ' || !end[1] || end[2] != ' ')
			continue;
		type = end[1];
		if (type != 't' && type != 'T' && type != 'w' && type != 'W')
			continue;
		if (!addr)
			continue;	/* hidden from non-root: all zero */
		name = end + 3;
		mod = strchr(name, '\t');
		if (mod) {
			*mod++ = 0;
			mod[strcspn(mod, " ")] = 0;
		}
		if (t->n == cap) {
			void *n;

			cap = cap ? 2 * cap : 65536;
			n = realloc(t->v, cap * sizeof(*t->v));
			if (!n)
				break;
			t->v = n;
		}
		t->v[t->n].addr = addr;
		t->v[t->n].name = name;
		t->v[t->n].module = mod ? kmodule(mods, &nmods, mod) : core;
		t->n++;
	}
	free(mods);
	if (t->n)
		qsort(t->v, t->n, sizeof(*t->v), ksym_cmp);
}

static void *ktable_thread(void *arg)
{
	ktable_read(arg);
	return arg;
}

void symbolizer__kernel_prefetch(struct symbolizer *s)
{
	struct ktable *t;
	sigset_t all, old;

	if (s->ksyms_read || s->kthread_on || !(t = malloc(sizeof(*t))))
		return;
	/* The thread takes no signals: they are cgbpf's main thread's. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	s->kthread_on = !pthread_create(&s->kthread, NULL, ktable_thread, t);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (!s->kthread_on)
		free(t);
}

static void ksyms_read(struct symbolizer *s)
{
	struct ktable local, *t = &local;
	void *ret = NULL;

	s->ksyms_read = true;
	if (s->kthread_on) {
		s->kthread_on = false;
		if (pthread_join(s->kthread, &ret) || !ret)
			return;
		t = ret;
	} else {
		ktable_read(t);
	}
	s->kbuf = t->buf;
	s->ksyms = t->v;
	s->nksyms = t->n;
	s->ksyms_ok = t->n > 0;
	if (t != &local)
		free(t);
}

int symbolizer__kernel(struct symbolizer *s, uint64_t ip, struct sym_frame *out)
{
	size_t lo = 0, hi;

	memset(out, 0, sizeof(*out));
	out->ip = ip;
	out->kernel = true;
	if (!s->ksyms_read)
		ksyms_read(s);
	if (!s->ksyms_ok)
		return -EACCES;
	hi = s->nksyms;
	/* The last symbol at or below ip. */
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (s->ksyms[mid].addr <= ip)
			lo = mid + 1;
		else
			hi = mid;
	}
	/* kallsyms has no sizes: past the last symbol of a region (module
	 * gaps, the end of text) nothing is known. */
	if (!lo || ip - s->ksyms[lo - 1].addr >= KSYM_MAX_SIZE)
		return -ENOENT;
	out->function = s->ksyms[lo - 1].name;
	out->function_off = ip - s->ksyms[lo - 1].addr;
	out->module = s->ksyms[lo - 1].module;
	return 0;
}

/* ---------------------------------------------------------------- lifetime */

struct symbolizer *symbolizer__new(void)
{
	struct symbolizer *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	s->host_root = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	s->self_fd = -1;
	s->cb.find_elf = find_elf;
	s->cb.find_debuginfo = find_debuginfo;
	return s;
}

void symbolizer__invalidate(struct symbolizer *s, pid_t pid)
{
	uint64_t *v = hmap__get(&s->procs, (uint64_t)pid);

	if (v)
		((struct sproc *)(uintptr_t)*v)->stale = true;
}

void symbolizer__proc_exit(struct symbolizer *s, pid_t pid)
{
	uint64_t *v = hmap__get(&s->procs, (uint64_t)pid);
	struct sproc *p, *old;

	if (!v)
		return;
	p = (struct sproc *)(uintptr_t)*v;
	if (p->exited)
		return;
	p->exited = true;
	proc_release_dwfl(p);
	/* Keep the module tables of the last EXITED_MAX exited processes. */
	if (s->exited_tail)
		s->exited_tail->next_exited = p;
	else
		s->exited_head = p;
	s->exited_tail = p;
	if (++s->nexited > EXITED_MAX) {
		old = s->exited_head;
		s->exited_head = old->next_exited;
		if (!s->exited_head)
			s->exited_tail = NULL;
		s->nexited--;
		hmap__del(&s->procs, (uint64_t)old->pid, NULL);
		proc_free(old);
	}
}

void symbolizer__free(struct symbolizer *s)
{
	size_t i;
	uint64_t k, v;

	if (!s)
		return;
	for (i = 0; hmap__next(&s->procs, &i, &k, &v);)
		proc_free((struct sproc *)(uintptr_t)v);
	hmap__free(&s->procs);
	for (i = 0; hmap__next(&s->files, &i, &k, &v);) {
		struct sfile *f = (struct sfile *)(uintptr_t)v;

		free(f->syms);
		free(f->names);
		free(f);
	}
	hmap__free(&s->files);
	hmap__free(&s->syms);
	free(s->cache);
	for (i = 0; hmap__next(&s->strings, &i, &k, &v);)
		free((void *)(uintptr_t)v);
	hmap__free(&s->strings);
	if (s->kthread_on)
		ksyms_read(s);	/* joins the thread */
	free(s->ksyms);
	free(s->kbuf);
	free(s->vdso);
	if (s->host_root >= 0)
		close(s->host_root);
	if (s->self_elf)
		elf_end(s->self_elf);
	if (s->self_fd >= 0)
		close(s->self_fd);
	free(s);
}
