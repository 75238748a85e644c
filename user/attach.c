// SPDX-License-Identifier: MIT
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include "apilib.h"
#include "attach.h"
#include "cgbpf.skel.h"
#include "elfsym.h"
#include "hmap.h"
#include "log.h"
#include "procfs.h"
#include "uprobe_multi.h"

struct lib_file {
	dev_t dev;
	ino_t ino;
	uint8_t lib;		/* enum rec_lib */
	char *path;		/* as seen by the first process that mapped it */
};

struct attach {
	struct cgbpf_bpf *skel;
	bool multi;
	uint32_t mask;		/* libraries traced (TRACE_BIT) */
	int *link_fds;		/* uprobe_multi links */
	size_t nfds, capfds;
	size_t nmulti_probes;
	struct lib_file *files;
	size_t nfiles, capfiles;
	struct bpf_link **links;
	size_t nlinks, caplinks;
	struct hmap exes;	/* hash of main executables' (dev, inode) looked at */
};

bool attach__prepare(struct cgbpf_bpf *skel)
{
	bool multi = uprobe_multi__supported() && !getenv("CGBPF_NO_UPROBE_MULTI");

	if (multi) {
		bpf_program__set_expected_attach_type(skel->progs.call_enter_multi,
						      ATTACH_TRACE_UPROBE_MULTI);
		bpf_program__set_expected_attach_type(skel->progs.call_exit_multi,
						      ATTACH_TRACE_UPROBE_MULTI);
	} else {
		bpf_program__set_autoload(skel->progs.call_enter_multi, false);
		bpf_program__set_autoload(skel->progs.call_exit_multi, false);
	}
	return multi;
}

struct attach *attach__new(struct cgbpf_bpf *skel, bool multi, uint32_t mask)
{
	struct attach *a = calloc(1, sizeof(*a));

	if (a) {
		a->skel = skel;
		a->multi = multi;
		a->mask = mask;
	}
	return a;
}

static int multi_link(struct attach *a, struct bpf_program *prog, const char *path,
		      const uint64_t *offs, const uint64_t *cookies, size_t n, bool ret)
{
	int fd = uprobe_multi__link(bpf_program__fd(prog), path, offs, cookies, n, ret);

	if (fd < 0)
		return -errno;
	if (a->nfds == a->capfds) {
		size_t nc = a->capfds ? a->capfds * 2 : 16;
		int *nf = realloc(a->link_fds, nc * sizeof(*nf));

		if (!nf) {
			close(fd);
			return -ENOMEM;
		}
		a->link_fds = nf;
		a->capfds = nc;
	}
	a->link_fds[a->nfds++] = fd;
	a->nmulti_probes += n;
	return 0;
}

void attach__free(struct attach *a)
{
	if (!a)
		return;
	for (size_t i = 0; i < a->nfds; i++)
		close(a->link_fds[i]);
	free(a->link_fds);
	for (size_t i = 0; i < a->nlinks; i++)
		bpf_link__destroy(a->links[i]);
	for (size_t i = 0; i < a->nfiles; i++)
		free(a->files[i].path);
	free(a->links);
	free(a->files);
	hmap__free(&a->exes);
	free(a);
}

size_t attach__files(const struct attach *a)
{
	return a->nfiles;
}

size_t attach__probes(const struct attach *a)
{
	return a->nlinks + a->nmulti_probes;
}

static int add_link(struct attach *a, struct bpf_link *l)
{
	if (a->nlinks == a->caplinks) {
		size_t nc = a->caplinks ? a->caplinks * 2 : 256;
		struct bpf_link **n = realloc(a->links, nc * sizeof(*n));

		if (!n)
			return -ENOMEM;
		a->links = n;
		a->caplinks = nc;
	}
	a->links[a->nlinks++] = l;
	return 0;
}

size_t attach__watch_names(uint32_t mask, char names[][ATTACH_WATCH_LEN], size_t max)
{
	size_t n = 0;

	for (unsigned l = 0; l < LIB__COUNT; l++) {
		const struct api_lib *lib = apilib__get(l);

		if (!lib || !(mask & TRACE_BIT(l)))
			continue;
		for (const char *const *w = lib->watch; w && *w && n < max; w++)
			snprintf(names[n++], ATTACH_WATCH_LEN, "%s", *w);
	}
	return n;
}

static int attach_probe(struct attach *a, const char *path, uint64_t off, uint64_t cookie,
			bool ret)
{
	LIBBPF_OPTS(bpf_uprobe_opts, opts, .bpf_cookie = cookie, .retprobe = ret);
	struct bpf_program *prog = ret ? a->skel->progs.call_exit : a->skel->progs.call_enter;
	struct bpf_link *l;
	int err;

	l = bpf_program__attach_uprobe_opts(prog, -1, path, off, &opts);
	if (!l)
		return -errno;
	err = add_link(a, l);
	if (err)
		bpf_link__destroy(l);
	return err;
}

/* Marks the file probed in BPF so mapping it no longer stops a process. */
static void mark_probed(struct attach *a, dev_t dev, ino_t ino)
{
	struct { uint64_t ino; uint32_t dev; uint32_t pad; } k = {
		.ino = ino, .dev = (major(dev) << 20) | minor(dev) };
	uint8_t one = 1;

	bpf_map__update_elem(a->skel->maps.probed_files, &k, sizeof(k), &one, sizeof(one),
			     BPF_ANY);
}

int attach__offsets(struct attach *a, const char *path, const uint64_t *offs,
		    const uint64_t *cookies, size_t n)
{
	int err = 0;

	if (a->multi) {
		err = multi_link(a, a->skel->progs.call_enter_multi, path, offs, cookies, n, false);
		if (!err)
			err = multi_link(a, a->skel->progs.call_exit_multi, path, offs, cookies, n,
					 true);
		return err;
	}
	for (size_t i = 0; i < n && !err; i++) {
		err = attach_probe(a, path, offs[i], cookies[i], false);
		if (!err)
			err = attach_probe(a, path, offs[i], cookies[i], true);
	}
	return err;
}

/* True when the library file (device + inode) has its probes already. */
static bool probed(const struct attach *a, const struct stat *st)
{
	for (size_t i = 0; i < a->nfiles; i++)
		if (a->files[i].dev == st->st_dev && a->files[i].ino == st->st_ino)
			return true;
	return false;
}

/* Remembers a probed file (and tells BPF, which stops pausing mappers). */
static int add_file(struct attach *a, const struct api_lib *lib, const char *display,
		    const struct stat *st)
{
	struct lib_file *lf;

	if (a->nfiles == a->capfiles) {
		size_t nc = a->capfiles ? a->capfiles * 2 : 8;
		struct lib_file *n = realloc(a->files, nc * sizeof(*n));

		if (!n)
			return -ENOMEM;
		a->files = n;
		a->capfiles = nc;
	}
	lf = &a->files[a->nfiles++];
	lf->dev = st->st_dev;
	lf->ino = st->st_ino;
	lf->lib = lib->id;
	lf->path = strdup(display);
	mark_probed(a, st->st_dev, st->st_ino);
	return 0;
}

int attach__usdt(struct attach *a, struct bpf_program *prog, const char *path,
		 const char *provider, const char *name)
{
	struct bpf_link *l = bpf_program__attach_usdt(prog, -1, path, provider, name, NULL);
	int err;

	if (!l)
		return -errno;
	err = add_link(a, l);
	if (err)
		bpf_link__destroy(l);
	return err;
}

int attach__uprobe(struct attach *a, struct bpf_program *prog, const char *path, uint64_t off,
		   bool ret)
{
	LIBBPF_OPTS(bpf_uprobe_opts, opts, .retprobe = ret);
	struct bpf_link *l = bpf_program__attach_uprobe_opts(prog, -1, path, off, &opts);
	int err;

	if (!l)
		return -errno;
	err = add_link(a, l);
	if (err)
		bpf_link__destroy(l);
	return err;
}

struct cgbpf_bpf *attach__skel(const struct attach *a)
{
	return a->skel;
}

/* Attaches lib's table to the file whose symbols es holds (and frees es). */
static int attach_symbols(struct attach *a, const struct api_lib *lib, const char *path,
			  const char *display, const struct stat *st, struct elfsym *es)
{
	struct hmap offs = { 0 };
	uint64_t *offv = NULL, *cookiev = NULL;
	int funcs = 0, err = 0;

	offv = calloc(lib->nfuncs + 1, sizeof(*offv));
	cookiev = calloc(lib->nfuncs + 1, sizeof(*cookiev));
	if (!offv || !cookiev)
		err = -ENOMEM;
	for (uint16_t f = 0; f < lib->nfuncs && !err; f++) {
		const char *sym = lib->symbol(f);
		uint64_t off;

		if (elfsym__offset(es, sym, &off)) {
			dbg("%s: no %s", display, sym);
			continue;
		}
		/* Aliases share an address: one probe, or a call counts twice. */
		if (hmap__get(&offs, off))
			continue;
		err = hmap__put(&offs, off, f);
		offv[funcs] = off;
		cookiev[funcs] = lib->cookie(f);
		funcs++;
	}
	if (!err && funcs) {
		err = attach__offsets(a, path, offv, cookiev, funcs);
		if (err)
			warn("%s: attaching %d uprobes: %s", display, funcs, strerror(-err));
	}
	free(offv);
	free(cookiev);
	hmap__free(&offs);
	elfsym__close(es);
	if (!err)
		err = add_file(a, lib, display, st);
	if (err)
		return err;
	if (!funcs)
		warn("%s: none of the %d %s functions cgbpf knows is exported", display,
		     lib->nfuncs, lib->title);
	else
		info("probing %d %s functions in %s", funcs, lib->title, display);
	return 1;
}

static int attach_resolved(struct attach *a, const struct api_lib *lib, const char *path,
			   const char *display, const struct stat *st)
{
	struct elfsym *es;
	int err;

	if (probed(a, st))
		return 0;
	/* A library probed its own way (USDT) for some of its files. */
	if (lib->attach_file) {
		int n = lib->attach_file(a, path, display);

		if (n != -ENOSYS) {
			if (n < 0) {
				warn("%s: attaching %s probes: %s", display, lib->title, strerror(-n));
				return n;
			}
			err = add_file(a, lib, display, st);
			if (err)
				return err;
			info("probing %d %s probes in %s", n, lib->title, display);
			return 1;
		}
	}
	es = elfsym__open(path);
	if (!es) {
		err = -errno;
		warn("%s: cannot read ELF symbols: %s", display, strerror(errno));
		return err;
	}
	return attach_symbols(a, lib, path, display, st, es);
}

/*
 * Attaches through an open descriptor: /proc/PID/root/... stops resolving
 * the moment a short-lived process exits, /proc/self/fd/N does not.
 */
static int attach_path(struct attach *a, const struct api_lib *lib, const char *path,
		       const char *display)
{
	char fdpath[64];
	struct stat st;
	int fd, ret;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st)) {
		ret = -errno;
		close(fd);
		return ret;
	}
	snprintf(fdpath, sizeof(fdpath), "/proc/self/fd/%d", fd);
	ret = attach_resolved(a, lib, fdpath, display, &st);
	close(fd);
	return ret;
}

int attach__file(struct attach *a, const char *path, const char *display)
{
	const struct api_lib *lib;

	display = display ? display : path;
	lib = apilib__for_path(display, a->mask);
	if (!lib)
		return -ENOENT;
	return attach_path(a, lib, path, display);
}

struct scan_ctx {
	struct attach *a;
	pid_t pid;
	bool mapped;
	int attached;
	int err;
};

static int scan_map(const struct map_entry *e, void *ctx)
{
	struct scan_ctx *s = ctx;
	const struct api_lib *lib;
	char path[4096];
	struct stat st;
	int n;

	if (e->perms[2] != 'x' || e->path[0] != '/')
		return 0;
	lib = apilib__for_path(e->path, s->a->mask);
	if (!lib)
		return 0;
	/* Every CUDA process loads the driver, often after the runtime or
	 * NCCL (PyTorch loads libcuda lazily): keep watching its mmaps until
	 * then, or its driver calls go unseen until the next rescan. */
	if (lib->id == LIB_CUDA || !(s->a->mask & TRACE_BIT(LIB_CUDA)))
		s->mapped = true;
	/* The path is the target's view: resolve it in its mount namespace. */
	n = snprintf(path, sizeof(path), "/proc/%d/root%s", s->pid, e->path);
	if (n < 0 || (size_t)n >= sizeof(path))
		return 0;
	if (stat(path, &st)) {
		/* Deleted or replaced since: map_files still reaches it. */
		n = snprintf(path, sizeof(path), "/proc/%d/map_files/%" PRIx64 "-%" PRIx64,
			     s->pid, e->start, e->end);
		if (n < 0 || (size_t)n >= sizeof(path) || stat(path, &st)) {
			dbg("pid %d: %s: %s", s->pid, e->path, strerror(errno));
			return 0;
		}
	}
	/* Probed already (most scans): no need to open it again. */
	if (probed(s->a, &st))
		return 0;
	n = attach_path(s->a, lib, path, e->path);
	if (n > 0)
		s->attached += n;
	else if (n < 0 && !s->err)
		s->err = n;
	return 0;
}

/*
 * A statically linked CUDA runtime (nvcc's default) lives in the main
 * executable, its functions local symbols of .symtab: attach the runtime
 * table there when the executable defines cudaLaunchKernel. Each distinct
 * executable file (dev, inode) is read once, whatever it holds.
 */
/* The static CUDA runtime in the executable open at fd, if it has one
 * and was not looked at before (each distinct file once). */
static int exe_runtime(struct attach *a, int fd, const char *display)
{
	const struct api_lib *lib = apilib__get(LIB_CUDART);
	char path[64];
	struct elfsym *es;
	struct stat st;
	struct { uint64_t dev, ino; } key;
	uint64_t off;

	if (fstat(fd, &st))
		return 0;
	key.dev = st.st_dev;
	key.ino = st.st_ino;
	if (hmap__get(&a->exes, hash__bytes(&key, sizeof(key))) || probed(a, &st))
		return 0;
	hmap__put(&a->exes, hash__bytes(&key, sizeof(key)), 1);
	if (apilib__for_path(display, a->mask))
		return 0;	/* a library run as a program: scan_map has it */
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	es = elfsym__open(path);
	if (!es || elfsym__offset(es, "cudaLaunchKernel", &off)) {
		elfsym__close(es);
		return 0;
	}
	dbg("%s has a static CUDA runtime", display);
	return attach_symbols(a, lib, path, display, &st, es);
}

static int scan_exe(struct attach *a, pid_t pid)
{
	const struct api_lib *lib = apilib__get(LIB_CUDART);
	char path[64], display[4096];
	ssize_t n;
	int fd, ret;

	if (!lib || !lib->nfuncs || !(a->mask & TRACE_BIT(LIB_CUDART)))
		return 0;
	/* The magic link reaches the file in the target's mount namespace,
	 * even when it was deleted or replaced since the exec. */
	snprintf(path, sizeof(path), "/proc/%d/exe", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;	/* a kernel thread, or gone */
	n = readlink(path, display, sizeof(display) - 1);
	display[n > 0 ? n : 0] = 0;
	if (n <= 0)
		snprintf(display, sizeof(display), "%s", path);
	ret = exe_runtime(a, fd, display);
	close(fd);
	return ret;
}

int attach__exe(struct attach *a, const char *path)
{
	const struct api_lib *lib = apilib__get(LIB_CUDART);
	int fd, ret;

	if (!lib || !lib->nfuncs || !(a->mask & TRACE_BIT(LIB_CUDART)))
		return 0;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ret = exe_runtime(a, fd, path);
	close(fd);
	return ret;
}

int attach__scan(struct attach *a, pid_t pid, bool *mapped)
{
	struct scan_ctx s = { .a = a, .pid = pid };
	int err = procfs__for_each_map(pid, scan_map, &s);
	int exe = err ? 0 : scan_exe(a, pid);

	/* Not "mapped": a static runtime still loads libcuda.so.1 later,
	 * and that mapping is worth waiting for. */
	if (exe > 0)
		s.attached += exe;
	else if (exe < 0 && !s.err) {
		s.err = exe;
	}

	if (mapped)
		*mapped = s.mapped;
	if (err)
		return err;
	return s.attached ? s.attached : s.err;
}
