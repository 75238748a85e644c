// SPDX-License-Identifier: MIT
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/openat2.h>
#include "lib/elf/ldpath.h"
#include "lib/log.h"
#include "lib/procfs.h"

#define ENV_MAX (1u << 20)
#define CACHE_MAX (64u << 20)
#define MAX_DIRS 256

#if defined(__x86_64__)
#define MULTIARCH "x86_64-linux-gnu"
#define CACHE_ARCH 0x0300	/* ldconfig's FLAG_X8664_LIB64 */
#elif defined(__aarch64__)
#define MULTIARCH "aarch64-linux-gnu"
#define CACHE_ARCH 0x0a00	/* FLAG_AARCH64_LIB64 */
#else
#define MULTIARCH ""
#define CACHE_ARCH 0
#endif
#define CACHE_ELF_LIBC6 0x0003	/* FLAG_ELF_LIBC6 */

/*
 * Opens path from dirfd with the resolve flags of openat2 if it is a
 * regular file, and nothing else: it is looked at through an O_PATH
 * descriptor first, then opened again through that descriptor. A FIFO
 * planted where a library was (a container chooses its files) would
 * block an open for reading forever, and opening a device runs its
 * driver.
 */
static int open_regular(int dirfd, const char *path, uint64_t resolve)
{
	struct open_how how = { .flags = O_PATH | O_CLOEXEC, .resolve = resolve };
	char self[32];
	struct stat st;
	int pfd = syscall(SYS_openat2, dirfd, path, &how, sizeof(how)), fd, err;

	if (pfd < 0)
		return -errno;
	err = fstat(pfd, &st) ? -errno : !S_ISREG(st.st_mode) ? -EINVAL : 0;
	if (err) {
		close(pfd);
		return err;
	}
	snprintf(self, sizeof(self), "/proc/self/fd/%d", pfd);
	fd = open(self, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	err = -errno;
	close(pfd);
	return fd < 0 ? err : fd;
}

int ldpath__open_at(int rootfd, const char *path, int flags)
{
	/* Absolute links and ".." stay inside the root; /proc magic links
	 * would leave it. */
	const uint64_t resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS;
	struct open_how how = { .flags = (uint64_t)(flags | O_CLOEXEC), .resolve = resolve };
	int fd;

	if (!(flags & O_DIRECTORY))
		return open_regular(rootfd, path, resolve);
	fd = syscall(SYS_openat2, rootfd, path, &how, sizeof(how));
	return fd < 0 ? -errno : fd;
}

int ldpath__open_file(const char *path)
{
	return open_regular(AT_FDCWD, path, 0);
}

static int open_at_root(int rootfd, const char *path, int flags)
{
	return ldpath__open_at(rootfd, path, flags);
}

static int open_root(pid_t pid)
{
	char path[32];
	int fd;

	snprintf(path, sizeof(path), pid ? "/proc/%d/root" : "/", pid);
	fd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

int ldpath__open_in_root(pid_t pid, const char *path, int flags)
{
	int rootfd = open_root(pid), fd;

	if (rootfd < 0)
		return rootfd;
	fd = open_at_root(rootfd, path, flags);
	close(rootfd);
	return fd;
}

/* ---------------------------------------------------------------- walk */

struct walk {
	const struct ldpath_req *q;
	int rootfd;
	int (*cb)(int fd, const char *path, void *ctx);
	void *ctx;
	int stop;
	char **names;		/* file names already picked */
	size_t nnames, capnames;
	char **dirs;		/* directories already searched */
	size_t ndirs;
	char cwd[PATH_MAX];	/* the process's working directory ("" unknown) */
};

/* dir made absolute against the process's working directory, as its
 * loader resolves a relative LD_LIBRARY_PATH entry; NULL when unknown. */
static const char *absolute(const struct walk *w, const char *dir, char *buf, size_t len)
{
	if (dir[0] == '/')
		return dir;
	if (!w->cwd[0] || (size_t)snprintf(buf, len, "%s/%s", w->cwd, dir) >= len)
		return NULL;
	return buf;
}

bool ldpath__library_name(const char *name)
{
	const char *so = NULL, *p;

	for (p = strstr(name, ".so"); p; p = strstr(p + 1, ".so"))
		so = p;
	if (!so)
		return false;
	for (p = so + 3; *p; p++)
		if (*p != '.' && (*p < '0' || *p > '9'))
			return false;
	return p == so + 3 || (so[3] == '.' && p[-1] != '.');
}

static bool wanted(const struct walk *w, const char *name)
{
	if (!ldpath__library_name(name))
		return false;
	for (const char *const *p = w->q->prefixes; p && *p; p++)
		if (!strncmp(name, *p, strlen(*p)))
			return true;
	return false;
}

static bool taken(const struct walk *w, const char *name)
{
	for (size_t i = 0; i < w->nnames; i++)
		if (!strcmp(w->names[i], name))
			return true;
	return false;
}

static void take(struct walk *w, const char *name)
{
	char *d;

	if (w->nnames == w->capnames) {
		size_t nc = w->capnames ? w->capnames * 2 : 16;
		char **n = realloc(w->names, nc * sizeof(*n));

		if (!n)
			return;
		w->names = n;
		w->capnames = nc;
	}
	d = strdup(name);
	if (d)
		w->names[w->nnames++] = d;
}

/* Opens path inside the root and hands a regular file to the callback. */
static void offer(struct walk *w, const char *path)
{
	char magic[4];
	struct stat st;
	int fd;

	if (w->stop)
		return;
	fd = open_at_root(w->rootfd, path, O_RDONLY);
	if (fd < 0)
		return;
	if (!fstat(fd, &st) && S_ISREG(st.st_mode) && pread(fd, magic, 4, 0) == 4 &&
	    !memcmp(magic, "\x7f" "ELF", 4))
		w->stop = w->cb(fd, path, w->ctx);
	close(fd);
}

/*
 * Directory listings kept across calls. The loader's default directories
 * hold thousands of entries: reading them was ~2.2 ms of the ~2.5 ms each
 * exec's resolve took on the consumer's thread, while a launcher's forks
 * and execs queued behind it (a pyenv shim: about 40). A listing is used
 * again while its directory has the same inode, mtime and ctime (adding,
 * removing or renaming an entry changes the mtime).
 */
struct dir_list {
	dev_t dev;
	ino_t ino;
	struct timespec mtime, ctime;
	char *names;		/* per entry: its d_type byte, its name, a NUL */
	size_t len;
	uint64_t used;		/* dir_clock at its last use: the oldest goes */
};

#define DIR_LISTS 32
static struct dir_list dir_lists[DIR_LISTS];
static uint64_t dir_clock;
static pthread_mutex_t dir_lock = PTHREAD_MUTEX_INITIALIZER;

static bool same_time(const struct timespec *a, const struct timespec *b)
{
	return a->tv_sec == b->tv_sec && a->tv_nsec == b->tv_nsec;
}

/* A copy of the kept listing of st's directory, if it is still good. */
static char *kept_listing(const struct stat *st, size_t *len)
{
	char *out = NULL;

	pthread_mutex_lock(&dir_lock);
	for (size_t i = 0; i < DIR_LISTS; i++) {
		struct dir_list *l = &dir_lists[i];

		if (!l->names || l->dev != st->st_dev || l->ino != st->st_ino ||
		    !same_time(&l->mtime, &st->st_mtim) || !same_time(&l->ctime, &st->st_ctim))
			continue;
		out = malloc(l->len ? l->len : 1);
		if (out) {
			memcpy(out, l->names, l->len);
			*len = l->len;
			l->used = ++dir_clock;
		}
		break;
	}
	pthread_mutex_unlock(&dir_lock);
	return out;
}

/*
 * Keeps a copy of names as st's directory's listing; not for a directory
 * changed in the last LISTING_SETTLE_S seconds: where timestamps are
 * coarse (a clock tick), a change in the same tick as the listing would
 * leave its mtime as it was, and the listing stale.
 */
#define LISTING_SETTLE_S 2

static void keep_listing(const struct stat *st, const char *names, size_t len)
{
	struct dir_list *slot = &dir_lists[0];
	struct timespec now;
	char *copy;

	if (clock_gettime(CLOCK_REALTIME, &now) ||
	    now.tv_sec - st->st_mtim.tv_sec <= LISTING_SETTLE_S ||
	    now.tv_sec - st->st_ctim.tv_sec <= LISTING_SETTLE_S)
		return;
	copy = malloc(len ? len : 1);
	if (!copy)
		return;
	memcpy(copy, names, len);
	pthread_mutex_lock(&dir_lock);
	for (size_t i = 0; i < DIR_LISTS; i++) {
		struct dir_list *l = &dir_lists[i];

		if (l->names && l->dev == st->st_dev && l->ino == st->st_ino) {
			slot = l;
			break;
		}
		if (!l->names || l->used < slot->used)
			slot = l;
	}
	free(slot->names);
	*slot = (struct dir_list){ .dev = st->st_dev, .ino = st->st_ino, .mtime = st->st_mtim,
				   .ctime = st->st_ctim, .names = copy, .len = len,
				   .used = ++dir_clock };
	pthread_mutex_unlock(&dir_lock);
}

/* The entries of the directory open at fd (see struct dir_list), kept or
 * read; malloc'ed, NULL on failure. */
static char *dir_listing(int fd, size_t *len)
{
	struct stat st;
	struct dirent *e;
	char *buf = NULL;
	size_t cap = 0, n = 0;
	int dfd;
	DIR *d;

	if (fstat(fd, &st))
		return NULL;
	if ((buf = kept_listing(&st, len)))
		return buf;
	dfd = dup(fd);
	if (dfd < 0)
		return NULL;
	d = fdopendir(dfd);
	if (!d) {
		close(dfd);
		return NULL;
	}
	while ((e = readdir(d))) {
		size_t need = strlen(e->d_name) + 2;

		if (n + need > cap) {
			size_t nc = cap ? cap * 2 : 4096;
			char *nb;

			while (nc < n + need)
				nc *= 2;
			nb = realloc(buf, nc);
			if (!nb) {
				free(buf);
				closedir(d);
				return NULL;
			}
			buf = nb;
			cap = nc;
		}
		buf[n] = (char)e->d_type;
		memcpy(buf + n + 1, e->d_name, need - 1);
		n += need;
	}
	closedir(d);
	if (!buf && !(buf = malloc(1)))
		return NULL;
	keep_listing(&st, buf, n);
	*len = n;
	return buf;
}

static void search_dir(struct walk *w, const char *dir)
{
	char *list;
	size_t len = 0;
	int fd;

	if (w->stop || dir[0] != '/' || w->ndirs >= MAX_DIRS)
		return;
	for (size_t i = 0; i < w->ndirs; i++)
		if (!strcmp(w->dirs[i], dir))
			return;
	w->dirs[w->ndirs] = strdup(dir);
	if (!w->dirs[w->ndirs])
		return;
	w->ndirs++;
	fd = open_at_root(w->rootfd, dir, O_RDONLY | O_DIRECTORY);
	if (fd < 0)
		return;
	list = dir_listing(fd, &len);
	close(fd);
	if (!list)
		return;
	/* Files first, then links to them ("libcuda.so.1", not the
	 * "libcuda.so" link): the first name a file is found by names it. */
	for (int links = 0; links < 2; links++) {
		for (size_t at = 0; !w->stop && at < len; at += strlen(list + at + 1) + 2) {
			const char *name = list + at + 1;
			char path[PATH_MAX];

			if (((unsigned char)list[at] == DT_LNK) != links || !wanted(w, name) ||
			    taken(w, name))
				continue;
			if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir, name) >=
			    sizeof(path))
				continue;
			take(w, name);
			offer(w, path);
		}
	}
	free(list);
}

/* A run path list ("a:$ORIGIN/../lib") searched in order; origin is the
 * directory of the object that carries it. Entries with other dynamic
 * string tokens ($LIB, $PLATFORM) are skipped. */
static void search_list(struct walk *w, const char *list, const char *origin)
{
	char *copy = strdup(list), *save = NULL;

	for (char *s = copy ? strtok_r(copy, ":;", &save) : NULL; s && !w->stop;
	     s = strtok_r(NULL, ":;", &save)) {
		char dir[PATH_MAX];
		const char *rest = NULL;

		if (!strncmp(s, "$ORIGIN", 7))
			rest = s + 7;
		else if (!strncmp(s, "${ORIGIN}", 9))
			rest = s + 9;
		if (rest) {
			if (!origin || strchr(rest, '$') ||
			    (size_t)snprintf(dir, sizeof(dir), "%s%s", origin, rest) >= sizeof(dir))
				continue;
			search_dir(w, dir);
		} else if (!strchr(s, '$')) {
			const char *abs = absolute(w, s, dir, sizeof(dir));

			if (abs)
				search_dir(w, abs);
		}
	}
	free(copy);
}

void ldpath__run_paths(int fd, char **rpath, char **runpath)
{
	Elf_Scn *scn = NULL;
	Elf *e;

	*rpath = *runpath = NULL;
	elf_version(EV_CURRENT);
	e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (!e)
		return;
	while ((scn = elf_nextscn(e, scn))) {
		GElf_Shdr sh;
		Elf_Data *data;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_DYNAMIC || !sh.sh_entsize)
			continue;
		data = elf_getdata(scn, NULL);
		for (size_t i = 0; data && i < sh.sh_size / sh.sh_entsize; i++) {
			GElf_Dyn dyn;
			const char *s;

			if (!gelf_getdyn(data, i, &dyn))
				break;
			if (dyn.d_tag != DT_RPATH && dyn.d_tag != DT_RUNPATH)
				continue;
			s = elf_strptr(e, sh.sh_link, dyn.d_un.d_val);
			if (!s)
				continue;
			if (dyn.d_tag == DT_RPATH && !*rpath)
				*rpath = strdup(s);
			else if (dyn.d_tag == DT_RUNPATH && !*runpath)
				*runpath = strdup(s);
		}
		break;
	}
	elf_end(e);
}

static void dirname_of(const char *path, char *out, size_t len)
{
	const char *slash = strrchr(path, '/');
	size_t n = slash ? (size_t)(slash - path) : 0;

	if (n >= len)
		n = len - 1;
	memcpy(out, path, n);
	out[n] = 0;
	if (!n && len > 1)
		snprintf(out, len, "/");
}

/* ---------------------------------------------------------------- env */

/* The environment of pid as a NULL-ended vector over one buffer (*buf). */
static char **read_environ(pid_t pid, char **buf)
{
	char path[32];
	size_t len = 0, n = 0, cap = 64 * 1024;
	char **v;
	int fd;

	*buf = NULL;
	snprintf(path, sizeof(path), "/proc/%d/environ", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	*buf = malloc(cap + 1);
	while (*buf) {
		ssize_t got = read(fd, *buf + len, cap - len);

		if (got <= 0)
			break;
		len += got;
		if (len == cap) {
			char *nb;

			if (cap >= ENV_MAX)
				break;
			cap *= 2;
			nb = realloc(*buf, cap + 1);
			if (!nb)
				break;
			*buf = nb;
		}
	}
	close(fd);
	if (!*buf)
		return NULL;
	(*buf)[len] = 0;
	for (size_t i = 0; i < len; i++)
		n += !(*buf)[i];
	v = calloc(n + 2, sizeof(*v));
	if (!v)
		return NULL;
	n = 0;
	for (size_t i = 0; i < len; i += strlen(*buf + i) + 1)
		v[n++] = *buf + i;
	return v;
}

static const char *env_get(char *const *env, const char *key)
{
	size_t kl = strlen(key);

	for (; env && *env; env++)
		if (!strncmp(*env, key, kl) && (*env)[kl] == '=')
			return *env + kl + 1;
	return NULL;
}

/* ---------------------------------------------------------------- cache */

struct cache_hdr {
	char magic[20];		/* "glibc-ld.so.cache" "1.1" */
	uint32_t nlibs;
	uint32_t len_strings;
	uint32_t unused[5];
};

struct cache_entry {
	int32_t flags;
	uint32_t key, value;	/* string offsets from the start of the header */
	uint32_t osversion;
	uint64_t hwcap;
};

int ldpath__parse_cache(const void *data, size_t len,
			int (*cb)(const char *name, const char *path, void *ctx), void *ctx)
{
	const char *base = data;
	struct cache_hdr h;
	size_t off = 0, avail;

	/* The old format (libc5, glibc < 2.32 default) may come first; the
	 * new table follows it, 8-byte aligned. */
	if (len >= 15 && !memcmp(base, "ld.so-1.7.0", 11)) {
		uint32_t n;

		memcpy(&n, base + 11, sizeof(n));
		if (n > len / 12)
			return -EINVAL;
		off = (11 + 4 + (size_t)n * 12 + 7) & ~(size_t)7;
	}
	if (off > len || len - off < sizeof(h) || memcmp(base + off, "glibc-ld.so.cache1.1", 20))
		return -EINVAL;
	/* Copied: the image need not be aligned for the header's fields. */
	memcpy(&h, base + off, sizeof(h));
	avail = len - off;
	if (h.nlibs > (avail - sizeof(h)) / sizeof(struct cache_entry))
		return -EINVAL;
	for (uint32_t i = 0; i < h.nlibs; i++) {
		struct cache_entry ce;
		const char *k, *v;

		memcpy(&ce, base + off + sizeof(h) + i * sizeof(ce), sizeof(ce));
		if ((ce.flags & 0xff) != CACHE_ELF_LIBC6 || (ce.flags & 0xff00) != CACHE_ARCH)
			continue;
		if (ce.key >= avail || ce.value >= avail)
			continue;
		k = base + off + ce.key;
		v = base + off + ce.value;
		/* Both strings must end inside the image. */
		if (!memchr(k, 0, avail - ce.key) || !memchr(v, 0, avail - ce.value))
			continue;
		if (cb(k, v, ctx))
			break;
	}
	return 0;
}

static int cache_entry(const char *name, const char *path, void *ctx)
{
	struct walk *w = ctx;

	if (w->stop)
		return 1;
	if (wanted(w, name) && !taken(w, name) && path[0] == '/') {
		take(w, name);
		offer(w, path);
	}
	return 0;
}

static void search_cache(struct walk *w)
{
	struct stat st;
	void *buf = NULL;
	size_t len = 0;
	int fd = open_at_root(w->rootfd, "/etc/ld.so.cache", O_RDONLY);

	if (fd < 0)
		return;
	if (!fstat(fd, &st) && st.st_size > 0 && (uint64_t)st.st_size <= CACHE_MAX)
		buf = malloc(st.st_size);
	while (buf && len < (size_t)st.st_size) {
		ssize_t got = read(fd, (char *)buf + len, st.st_size - len);

		if (got <= 0)
			break;
		len += got;
	}
	close(fd);
	if (buf && ldpath__parse_cache(buf, len, cache_entry, w))
		dbg("ld.so.cache: not in a format cgbpf reads");
	free(buf);
}

/* ---------------------------------------------------------------- objects */

/* The run paths of every object pid has mapped: dlopen() from a library
 * searches the library's own (PyTorch's libraries find pip's CUDA copies
 * through $ORIGIN run paths). */
struct maps_walk {
	struct walk *w;
	char last[PATH_MAX];
};

static int mapped_object(const struct map_entry *e, void *ctx)
{
	struct maps_walk *m = ctx;
	char *rpath, *runpath, origin[PATH_MAX];
	int fd;

	if (m->w->stop)
		return 1;
	if (e->path[0] != '/' || !strstr(e->path, ".so") || !strcmp(e->path, m->last))
		return 0;
	snprintf(m->last, sizeof(m->last), "%s", e->path);
	fd = open_at_root(m->w->rootfd, e->path, O_RDONLY);
	if (fd < 0)
		return 0;
	ldpath__run_paths(fd, &rpath, &runpath);
	close(fd);
	dirname_of(e->path, origin, sizeof(origin));
	if (runpath)
		search_list(m->w, runpath, origin);
	else if (rpath)
		search_list(m->w, rpath, origin);
	free(rpath);
	free(runpath);
	return 0;
}

/* ---------------------------------------------------------------- resolve */

int ldpath__resolve(const struct ldpath_req *q,
		    int (*cb)(int fd, const char *path, void *ctx), void *ctx)
{
	static const char *const defaults[] = {
		"/lib/" MULTIARCH, "/usr/lib/" MULTIARCH, "/lib64", "/usr/lib64", "/lib", "/usr/lib",
	};
	struct walk w = { .q = q, .cb = cb, .ctx = ctx };
	char *envbuf = NULL, **envv = NULL, *rpath = NULL, *runpath = NULL;
	char *const *env = q->env;
	char exe_path[PATH_MAX] = "", origin[PATH_MAX] = "";
	const char *llp;
	int fd;

	w.rootfd = open_root(q->pid);
	if (w.rootfd < 0)
		return w.rootfd;
	w.dirs = calloc(MAX_DIRS, sizeof(*w.dirs));
	if (!w.dirs) {
		close(w.rootfd);
		return -ENOMEM;
	}
	if (!env && q->pid)
		env = envv = read_environ(q->pid, &envbuf);
	/* Its working directory, for relative entries: only when it shares
	 * our root (a container's cwd reads as a host path here). */
	if (q->pid) {
		struct stat ours, theirs;
		char link[32];
		ssize_t n;

		snprintf(link, sizeof(link), "/proc/%d/root", q->pid);
		if (!stat("/", &ours) && !stat(link, &theirs) && ours.st_dev == theirs.st_dev &&
		    ours.st_ino == theirs.st_ino) {
			snprintf(link, sizeof(link), "/proc/%d/cwd", q->pid);
			n = readlink(link, w.cwd, sizeof(w.cwd) - 1);
			w.cwd[n > 0 ? n : 0] = 0;
		}
	}
	/* The executable: its run paths, and $ORIGIN for them. */
	if (q->exe) {
		snprintf(exe_path, sizeof(exe_path), "%s", q->exe);
		fd = open(q->exe, O_RDONLY | O_CLOEXEC);
	} else if (q->pid) {
		char link[32];
		ssize_t n;

		snprintf(link, sizeof(link), "/proc/%d/exe", q->pid);
		n = readlink(link, exe_path, sizeof(exe_path) - 1);
		exe_path[n > 0 ? n : 0] = 0;
		fd = open(link, O_RDONLY | O_CLOEXEC);
	} else {
		fd = -1;
	}
	if (fd >= 0) {
		ldpath__run_paths(fd, &rpath, &runpath);
		close(fd);
	}
	if (exe_path[0] && exe_path[0] != '/') {
		char abs[PATH_MAX];

		if (w.cwd[0] && (size_t)snprintf(abs, sizeof(abs), "%s/%s", w.cwd, exe_path) <
		    sizeof(abs))
			snprintf(exe_path, sizeof(exe_path), "%s", abs);
		else
			exe_path[0] = 0;
	}
	dirname_of(exe_path, origin, sizeof(origin));

	/* Libraries named by path in the environment come first: they are
	 * loaded by path, whatever the search order. */
	for (const char *const *v = q->path_vars; v && *v && !w.stop; v++) {
		const char *p = env_get(env, *v), *base;

		if (!p || p[0] != '/')
			continue;
		base = strrchr(p, '/') + 1;
		if (wanted(&w, base))
			offer(&w, p);
	}
	/* ld.so's order (dl-load.c): DT_RPATH unless DT_RUNPATH exists,
	 * LD_LIBRARY_PATH, DT_RUNPATH, then the cache and the defaults. */
	if (rpath && !runpath)
		search_list(&w, rpath, exe_path[0] ? origin : NULL);
	llp = env_get(env, "LD_LIBRARY_PATH");
	if (llp)
		search_list(&w, llp, NULL);
	if (runpath)
		search_list(&w, runpath, exe_path[0] ? origin : NULL);
	if (q->pid && !q->exe) {
		struct maps_walk m = { .w = &w };

		procfs__for_each_map(q->pid, mapped_object, &m);
	}
	if (!q->skip_system) {
		search_cache(&w);
		for (size_t i = 0; i < sizeof(defaults) / sizeof(defaults[0]); i++)
			search_dir(&w, defaults[i]);
	}

	for (size_t i = 0; i < w.nnames; i++)
		free(w.names[i]);
	for (size_t i = 0; i < w.ndirs; i++)
		free(w.dirs[i]);
	free(w.names);
	free(w.dirs);
	free(envv);
	free(envbuf);
	free(rpath);
	free(runpath);
	close(w.rootfd);
	return w.stop;
}
