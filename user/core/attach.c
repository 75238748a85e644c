// SPDX-License-Identifier: MIT
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include "cgbpf.skel.h"
#include "core/apilib.h"
#include "core/attach.h"
#include "core/reaper.h"
#include "core/uprobe_multi.h"
#include "lib/elf/elfsym.h"
#include "lib/elf/ldpath.h"
#include "lib/hmap.h"
#include "lib/log.h"
#include "lib/procfs.h"

/*
 * A library file cgbpf probes, whatever number of processes it is probed
 * for: kept open (attaching for one more process needs no path lookup, and
 * works after every process that mapped it is gone) with its function
 * table's offsets read once.
 */
struct lib_file {
	dev_t dev;
	ino_t ino;
	uint8_t lib;		/* enum rec_lib */
	int fd;
	char *path;		/* as the first process that led to it sees it */
	bool syms_read;
	size_t n;		/* functions found */
	uint64_t *offs, *cookies;
	uint64_t last_off;	/* the api_lib's probed_last, when has_last */
	bool has_last;
	bool probed;		/* attached at least once */
	bool mapped;		/* attach__release_unmapped: seen in a process's maps */
};

/* The probes of one file for one scope: a process, or every process (-1). */
struct probe_set {
	size_t file;		/* index in files */
	pid_t pid;
	int *fds;		/* uprobe_multi links */
	size_t nfds;
	struct bpf_link **links;
	size_t nlinks;
	size_t nprobes;
	uint64_t live_ns;	/* CLOCK_BOOTTIME when its probes were all in */
};

struct attach {
	struct cgbpf_bpf *skel;
	bool multi;
	bool per_process;	/* probes filtered by pid in the kernel */
	bool gated;		/* capture windows: the gate's own programs */
	uint32_t mask;		/* libraries traced (TRACE_BIT) */
	struct lib_file *files;
	size_t nfiles, capfiles;
	struct probe_set *sets;
	size_t nsets, capsets;
	struct probe_set loose;	/* attach__offsets outside a file (check, bench) */
	struct probe_set *cur;	/* the set being attached */
	size_t probes;		/* probes attached, all sets, detached ones included */
	size_t nprobed;		/* files probed, released ones included */
	struct hmap exes;	/* main executables looked at, per scope */
	bool seen_mapped;	/* a scan found a traced library mapped */
};

/* The kernel's mmap_lock_released tracepoint has the prototype
 * bpf/proc.bpf.c's mmap_lock_mmap reads, (void *, struct mm_struct *,
 * bool): Linux 5.12 to 6.x had a memcg path before the bool. */
static bool mmap_lock_tp_usable(const struct btf *btf)
{
	const struct btf_type *t, *b;
	const struct btf_param *p;
	int id;

	if (!btf)
		return false;
	id = btf__find_by_name_kind(btf, "btf_trace_mmap_lock_released", BTF_KIND_TYPEDEF);
	t = id > 0 ? btf__type_by_id(btf, btf__type_by_id(btf, id)->type) : NULL;
	t = t && btf_is_ptr(t) ? btf__type_by_id(btf, t->type) : NULL;
	if (!t || !btf_is_func_proto(t) || btf_vlen(t) != 3)
		return false;
	p = btf_params(t);
	b = btf__type_by_id(btf, p[1].type);
	if (!b || !btf_is_ptr(b))
		return false;
	b = btf__type_by_id(btf, b->type);
	if (!b || !btf_is_struct(b) || strcmp(btf__name_by_offset(btf, b->name_off), "mm_struct"))
		return false;
	id = btf__resolve_type(btf, p[2].type);	/* bool is a typedef of _Bool */
	b = id > 0 ? btf__type_by_id(btf, id) : NULL;
	return b && btf_is_int(b) && (btf_int_encoding(b) & BTF_INT_BOOL);
}

bool attach__prepare(struct cgbpf_bpf *skel)
{
	struct btf *vmlinux = btf__load_vmlinux_btf();
	bool multi = uprobe_multi__in(vmlinux) && !getenv("CGBPF_NO_UPROBE_MULTI");
	bool gated = skel->rodata->capture_gated;
	bool lock_watch = mmap_lock_tp_usable(vmlinux) && !getenv("CGBPF_MMAP_WATCH_SYSCALL");
	struct bpf_program *prog;

	btf__free(vmlinux);
	/* One of the mmap watch's two programs (bpf/proc.bpf.c): the
	 * mmap_lock tracepoint where the kernel's matches, which costs traced
	 * calls nothing. */
	bpf_program__set_autoload(skel->progs.mmap_lock_mmap, lock_watch);
	bpf_program__set_autoload(skel->progs.sys_exit_mmap, !lock_watch);

	if (multi) {
		bpf_program__set_expected_attach_type(skel->progs.call_enter_multi,
						      ATTACH_TRACE_UPROBE_MULTI);
		bpf_program__set_expected_attach_type(skel->progs.call_exit_multi,
						      ATTACH_TRACE_UPROBE_MULTI);
		bpf_program__set_expected_attach_type(skel->progs.call_enter_gated_multi,
						      ATTACH_TRACE_UPROBE_MULTI);
		bpf_program__set_expected_attach_type(skel->progs.call_exit_gated_multi,
						      ATTACH_TRACE_UPROBE_MULTI);
		/*
		 * The programs attached one probe at a time (NVTX v2, the
		 * injection library's sites) too: a perf-event uprobe holds
		 * the kernel's event_mutex while it waits for RCU grace periods
		 * at its release, which stalls every other perf-event uprobe
		 * being attached meanwhile, for ~110 ms per probe; a process
		 * forked then ran unprobed.
		 */
		bpf_object__for_each_program(prog, skel->obj) {
			const char *sec = bpf_program__section_name(prog);

			if ((!strcmp(sec, "uprobe") || !strcmp(sec, "uretprobe")) &&
			    strncmp(bpf_program__name(prog), "call_", 5))
				bpf_program__set_expected_attach_type(prog,
								      ATTACH_TRACE_UPROBE_MULTI);
		}
	} else {
		bpf_program__set_autoload(skel->progs.call_enter_multi, false);
		bpf_program__set_autoload(skel->progs.call_exit_multi, false);
	}
	/* The gate's own pair, for the functions that wait for it: only
	 * with capture windows (bpf/calls.bpf.c, enter_gated). */
	bpf_program__set_autoload(skel->progs.call_enter_gated_multi, gated && multi);
	bpf_program__set_autoload(skel->progs.call_exit_gated_multi, gated && multi);
	bpf_program__set_autoload(skel->progs.call_enter_gated, gated && !multi);
	bpf_program__set_autoload(skel->progs.call_exit_gated, gated && !multi);
	return multi;
}

struct attach *attach__new(struct cgbpf_bpf *skel, bool multi, uint32_t mask, bool per_process)
{
	struct attach *a = calloc(1, sizeof(*a));

	if (a) {
		a->skel = skel;
		a->multi = multi;
		a->mask = mask;
		a->per_process = per_process;
		a->gated = skel->rodata->capture_gated;
		a->loose.pid = -1;
	}
	return a;
}

/* The reaper's threads release the links: it takes the kernel ~45 ms per
 * uprobe_multi link and ~110 ms per perf-event uprobe (reaper.h). */
static void set_release(struct probe_set *s)
{
	for (size_t i = 0; i < s->nfds; i++)
		reaper__fd(s->fds[i]);
	for (size_t i = 0; i < s->nlinks; i++)
		reaper__link(s->links[i]);
	free(s->fds);
	free(s->links);
	s->fds = NULL;
	s->links = NULL;
	s->nfds = s->nlinks = 0;
}

void attach__free(struct attach *a)
{
	if (!a)
		return;
	for (size_t i = 0; i < a->nsets; i++)
		set_release(&a->sets[i]);
	set_release(&a->loose);
	reaper__wait();
	for (size_t i = 0; i < a->nfiles; i++) {
		if (a->files[i].fd >= 0)
			close(a->files[i].fd);
		free(a->files[i].path);
		free(a->files[i].offs);
		free(a->files[i].cookies);
	}
	free(a->sets);
	free(a->files);
	hmap__free(&a->exes);
	free(a);
}

size_t attach__files(const struct attach *a)
{
	return a->nprobed;
}

bool attach__seen_mapped(const struct attach *a)
{
	return a->seen_mapped;
}

size_t attach__probes(const struct attach *a)
{
	return a->probes;
}

/* The scope of probes attached for pid. */
static uint64_t boot_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_BOOTTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static pid_t scope_of(const struct attach *a, pid_t pid)
{
	return a->per_process && pid > 0 ? pid : -1;
}

static struct probe_set *cur_set(struct attach *a)
{
	return a->cur ? a->cur : &a->loose;
}

static int add_fd(struct probe_set *s, int fd)
{
	int *n = realloc(s->fds, (s->nfds + 1) * sizeof(*n));

	if (!n)
		return -ENOMEM;
	s->fds = n;
	s->fds[s->nfds++] = fd;
	return 0;
}

static int add_link(struct probe_set *s, struct bpf_link *l)
{
	struct bpf_link **n = realloc(s->links, (s->nlinks + 1) * sizeof(*n));

	if (!n)
		return -ENOMEM;
	s->links = n;
	s->links[s->nlinks++] = l;
	return 0;
}

static bool is_multi(const struct bpf_program *prog)
{
	return bpf_program__expected_attach_type(prog) ==
	       (enum bpf_attach_type)ATTACH_TRACE_UPROBE_MULTI;
}

static int multi_link(struct attach *a, struct bpf_program *prog, const char *path,
		      const uint64_t *offs, const uint64_t *cookies, size_t n, bool ret)
{
	struct probe_set *s = cur_set(a);
	int fd = uprobe_multi__link(bpf_program__fd(prog), path, offs, cookies, n, ret,
				    s->pid > 0 ? s->pid : 0);

	if (fd < 0)
		return -errno;
	if (add_fd(s, fd)) {
		close(fd);
		return -ENOMEM;
	}
	s->nprobes += n;
	a->probes += n;
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

/* Keeps a link made for the set being attached. */
static int keep_link(struct attach *a, struct bpf_link *l)
{
	struct probe_set *s = cur_set(a);
	int err = add_link(s, l);

	if (err) {
		bpf_link__destroy(l);
		return err;
	}
	s->nprobes++;
	a->probes++;
	return 0;
}

/* A function that waits for the capture gate (bpf/capture.bpf.h). */
static bool waits_for_gate(const struct attach *a, uint64_t cookie)
{
	return a->gated && !(cookie & (CK_PASS | CK_TRIG_ON | CK_TRIG_OFF));
}

static int attach_probe(struct attach *a, const char *path, uint64_t off, uint64_t cookie,
			bool ret)
{
	LIBBPF_OPTS(bpf_uprobe_opts, opts, .bpf_cookie = cookie, .retprobe = ret);
	bool g = waits_for_gate(a, cookie);
	struct bpf_program *prog = ret ? (g ? a->skel->progs.call_exit_gated :
					      a->skel->progs.call_exit) :
				   (g ? a->skel->progs.call_enter_gated :
					a->skel->progs.call_enter);
	struct bpf_link *l;

	l = bpf_program__attach_uprobe_opts(prog, cur_set(a)->pid, path, off, &opts);
	if (!l)
		return -errno;
	return keep_link(a, l);
}

/* The uprobe_multi links of one direction: with capture windows, the
 * functions that wait for the gate in a link to the gate's own program,
 * the others (state, triggers) in one to the usual program. offs and
 * cookies are the caller's, reordered in place (gated ones last). */
static int multi_links(struct attach *a, const char *path, uint64_t *offs, uint64_t *cookies,
		       size_t n, size_t npass, bool ret)
{
	int err = 0;

	if (npass)
		err = multi_link(a, ret ? a->skel->progs.call_exit_multi :
				 a->skel->progs.call_enter_multi, path, offs, cookies, npass, ret);
	if (!err && n > npass)
		err = multi_link(a, ret ? a->skel->progs.call_exit_gated_multi :
				 a->skel->progs.call_enter_gated_multi, path, offs + npass,
				 cookies + npass, n - npass, ret);
	return err;
}

int attach__offsets(struct attach *a, const char *path, const uint64_t *offs,
		    const uint64_t *cookies, size_t n)
{
	int err = 0;

	/* Return probes first: a call whose entry is seen then has its
	 * return seen too, even while the probes are going in. */
	if (a->multi) {
		uint64_t t0 = boot_ns(), t1, *o, *c;
		size_t npass = 0;

		o = malloc(n * sizeof(*o));
		c = malloc(n * sizeof(*c));
		if (!o || !c) {
			free(o);
			free(c);
			return -ENOMEM;
		}
		/* Those that pass first, in their order, then the gated. */
		for (int pass = 1, k = 0; pass >= 0; pass--)
			for (size_t i = 0; i < n; i++)
				if (waits_for_gate(a, cookies[i]) != pass) {
					o[k] = offs[i];
					c[k++] = cookies[i];
					npass += pass;
				}
		err = multi_links(a, path, o, c, n, npass, true);
		t1 = boot_ns();
		if (!err)
			err = multi_links(a, path, o, c, n, npass, false);
		dbg("%s: %zu return probes in %.3f ms, entry probes in %.3f ms%s", path, n,
		    (t1 - t0) / 1e6, (boot_ns() - t1) / 1e6,
		    a->gated ? " (gated and passing apart)" : "");
		free(o);
		free(c);
		return err;
	}
	for (size_t i = 0; i < n && !err; i++) {
		err = attach_probe(a, path, offs[i], cookies[i], true);
		if (!err)
			err = attach_probe(a, path, offs[i], cookies[i], false);
	}
	return err;
}

int attach__usdt(struct attach *a, struct bpf_program *prog, const char *path,
		 const char *provider, const char *name)
{
	struct bpf_link *l = bpf_program__attach_usdt(prog, cur_set(a)->pid, path, provider, name,
						      NULL);

	if (!l)
		return -errno;
	return keep_link(a, l);
}

int attach__uprobe(struct attach *a, struct bpf_program *prog, const char *path, uint64_t off,
		   bool ret)
{
	LIBBPF_OPTS(bpf_uprobe_opts, opts, .retprobe = ret);
	uint64_t cookie = 0;
	struct bpf_link *l;

	if (is_multi(prog))
		return multi_link(a, prog, path, &off, &cookie, 1, ret);
	l = bpf_program__attach_uprobe_opts(prog, cur_set(a)->pid, path, off, &opts);
	if (!l)
		return -errno;
	return keep_link(a, l);
}

/* ------------------------------------------------------ single probes */

struct uprobe {
	struct bpf_link *link;	/* or */
	int fd;			/* a uprobe_multi link */
};

struct uprobe *uprobe__attach(struct bpf_program *prog, pid_t pid, const char *path,
			      uint64_t off, bool ret)
{
	LIBBPF_OPTS(bpf_uprobe_opts, opts, .retprobe = ret);
	struct uprobe *u = calloc(1, sizeof(*u));
	uint64_t cookie = 0;
	int e;

	if (!u)
		return NULL;
	u->fd = -1;
	if (is_multi(prog))
		u->fd = uprobe_multi__link(bpf_program__fd(prog), path, &off, &cookie, 1, ret,
					   pid > 0 ? pid : 0);
	else
		u->link = bpf_program__attach_uprobe_opts(prog, pid > 0 ? pid : -1, path, off,
							  &opts);
	if (u->fd >= 0 || u->link)
		return u;
	e = errno;
	free(u);
	errno = e;
	return NULL;
}

void uprobe__release(struct uprobe *u)
{
	if (!u)
		return;
	reaper__fd(u->fd);
	reaper__link(u->link);
	free(u);
}

void uprobe__destroy(struct uprobe *u)
{
	if (!u)
		return;
	if (u->fd >= 0)
		close(u->fd);
	bpf_link__destroy(u->link);
	free(u);
}

struct cgbpf_bpf *attach__skel(const struct attach *a)
{
	return a->skel;
}

/* ---------------------------------------------------------------- files */

/* A slot of files whose descriptor is closed is free (released). */
static struct lib_file *find_file(struct attach *a, const struct stat *st)
{
	for (size_t i = 0; i < a->nfiles; i++)
		if (a->files[i].fd >= 0 && a->files[i].dev == st->st_dev &&
		    a->files[i].ino == st->st_ino)
			return &a->files[i];
	return NULL;
}

static struct lib_file *free_slot(struct attach *a)
{
	for (size_t i = 0; i < a->nfiles; i++)
		if (a->files[i].fd < 0)
			return &a->files[i];
	if (a->nfiles == a->capfiles) {
		size_t nc = a->capfiles ? a->capfiles * 2 : 8;
		struct lib_file *n = realloc(a->files, nc * sizeof(*n));

		if (!n)
			return NULL;
		a->files = n;
		a->capfiles = nc;
	}
	a->files[a->nfiles].fd = -1;
	return &a->files[a->nfiles++];
}

static struct probe_set *find_set(struct attach *a, size_t file, pid_t scope)
{
	for (size_t i = 0; i < a->nsets; i++)
		if (a->sets[i].file == file && a->sets[i].pid == scope)
			return &a->sets[i];
	return NULL;
}

/* The file open at fd, remembered (with its own descriptor) if new. */
static struct lib_file *file_of(struct attach *a, const struct api_lib *lib, int fd,
				const char *display, const struct stat *st)
{
	struct lib_file *f = find_file(a, st);

	if (f)
		return f;
	f = free_slot(a);
	if (!f)
		return NULL;
	memset(f, 0, sizeof(*f));
	f->fd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
	f->path = strdup(display);
	if (f->fd < 0 || !f->path) {
		if (f->fd >= 0)
			close(f->fd);
		free(f->path);
		f->path = NULL;
		f->fd = -1;
		return NULL;
	}
	f->dev = st->st_dev;
	f->ino = st->st_ino;
	f->lib = lib->id;
	return f;
}

/* Reads lib's function table in the file once: offsets and cookies. */
static int read_syms(const struct api_lib *lib, struct lib_file *f, const char *path,
		     struct elfsym *es)
{
	struct hmap offs = { 0 };
	int err = 0;

	f->syms_read = true;
	f->offs = calloc(lib->nfuncs + 1, sizeof(*f->offs));
	f->cookies = calloc(lib->nfuncs + 1, sizeof(*f->cookies));
	if (!f->offs || !f->cookies)
		err = -ENOMEM;
	for (uint16_t fn = 0; fn < lib->nfuncs && !err; fn++) {
		const char *sym = lib->symbol(fn);
		uint64_t off;

		if (elfsym__offset(es, sym, &off)) {
			dbg("%s: no %s", f->path, sym);
			continue;
		}
		/* Aliases share an address: one probe, or a call counts twice. */
		if (hmap__get(&offs, off))
			continue;
		err = hmap__put(&offs, off, fn);
		f->offs[f->n] = off;
		f->cookies[f->n] = lib->cookie(fn) | apilib__capture_cookie(lib->id, fn);
		f->n++;
	}
	hmap__free(&offs);
	if (lib->probed_last && !elfsym__offset(es, lib->probed_last, &f->last_off))
		f->has_last = true;
	if (!f->n)
		warn("%s: none of the %d %s functions cgbpf knows is exported", f->path,
		     lib->nfuncs, lib->title);
	return err;
}

static struct probe_set *new_set(struct attach *a, size_t file, pid_t scope)
{
	struct probe_set *s;

	if (a->nsets == a->capsets) {
		size_t nc = a->capsets ? a->capsets * 2 : 16;
		struct probe_set *n = realloc(a->sets, nc * sizeof(*n));

		if (!n)
			return NULL;
		a->sets = n;
		a->capsets = nc;
	}
	s = &a->sets[a->nsets++];
	memset(s, 0, sizeof(*s));
	s->file = file;
	s->pid = scope;
	return s;
}

static void drop_set(struct attach *a, struct probe_set *s)
{
	set_release(s);
	*s = a->sets[--a->nsets];
}

/*
 * Probes the library file open at fd for pid's scope (es: its symbols,
 * when the caller has read them; consumed). Returns 1 when it attached,
 * 0 when the file was probed for that scope already, -errno on failure.
 */
static int attach_fd(struct attach *a, const struct api_lib *lib, int fd, const char *display,
		     pid_t pid, struct elfsym *es)
{
	pid_t scope = lib->shared_file && lib->shared_file(display) ? -1 : scope_of(a, pid);
	struct lib_file *f;
	struct probe_set *s;
	struct stat st;
	char path[64];
	size_t fi, si;
	int n = 0, err = 0;

	if (fstat(fd, &st)) {
		elfsym__close(es);
		return -errno;
	}
	f = file_of(a, lib, fd, display, &st);
	if (!f) {
		elfsym__close(es);
		return -ENOMEM;
	}
	fi = f - a->files;
	if (find_set(a, fi, scope)) {
		elfsym__close(es);
		return 0;
	}
	/* The kept descriptor: it reaches the file after the process that
	 * led to it exited or left its mount namespace. */
	snprintf(path, sizeof(path), "/proc/self/fd/%d", f->fd);
	s = new_set(a, fi, scope);
	if (!s) {
		elfsym__close(es);
		return -ENOMEM;
	}
	si = s - a->sets;
	a->cur = s;
	/* A library probed its own way (USDT) for some of its files. */
	if (lib->attach_file)
		n = lib->attach_file(a, path, display);
	if (!lib->attach_file || n == -ENOSYS) {
		n = 0;
		if (!f->syms_read) {
			if (!es)
				es = elfsym__open(path);
			if (!es) {
				err = -errno;
				warn("%s: cannot read ELF symbols: %s", display, strerror(errno));
			} else {
				err = read_syms(lib, f, display, es);
			}
		}
		if (!err && f->n) {
			err = attach__offsets(a, path, f->offs, f->cookies, f->n);
			n = f->n;
		}
		/* Last: once its byte is int3 in a process, the links above
		 * are all in (the injection library's wait in cuInit). A
		 * failure costs that wait its certainty only. */
		if (!err && f->n && f->has_last) {
			int e = attach__uprobe(a, a->skel->progs.probes_live, path, f->last_off,
					       false);

			if (e)
				dbg("%s: %s not probed: %s", display, lib->probed_last,
				    strerror(-e));
		}
	} else if (n < 0) {
		err = n;
	}
	elfsym__close(es);
	a->cur = NULL;
	/* s may have moved: sets grow by realloc only in new_set. */
	if (err) {
		/* -ESRCH: the process is gone (a short-lived fork): the
		 * caller counts those. */
		if (err == -ESRCH)
			dbg("%s: pid %d exited before its probes", display, scope);
		else
			warn("%s: attaching %s probes: %s", display, lib->title, strerror(-err));
		drop_set(a, s);
		return err;
	}
	a->sets[si].live_ns = boot_ns();
	if (!f->probed || scope < 0)
		info("probing %d %s %s in %s%s", n, lib->title,
		     lib->attach_file && !f->syms_read ? "probes" : "functions", display,
		     scope > 0 ? "" : " (every process)");
	else
		dbg("probing %d %s functions in %s for pid %d", n, lib->title, display, scope);
	if (!f->probed)
		a->nprobed++;
	f->probed = true;
	return 1;
}

int attach__file(struct attach *a, const char *path, const char *display)
{
	const struct api_lib *lib;
	int fd, ret;

	display = display ? display : path;
	lib = apilib__for_path(display, a->mask);
	if (!lib)
		return -ENOENT;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ret = attach_fd(a, lib, fd, display, -1, NULL);
	close(fd);
	return ret;
}

/* ---------------------------------------------------------------- maps */

struct scan_ctx {
	struct attach *a;
	pid_t pid;
	bool mapped;
	int attached;
	int err;
};

/* The file a maps line names, opened inside the process's root when that
 * is the very file mapped, through map_files otherwise (deleted, replaced,
 * or another file under that path in the root). */
static int open_mapped(pid_t pid, const struct map_entry *e)
{
	struct stat st;
	char path[96];
	int fd = ldpath__open_in_root(pid, e->path, O_RDONLY);

	if (fd >= 0 && !fstat(fd, &st) && st.st_ino == e->inode &&
	    major(st.st_dev) == e->dev_major && minor(st.st_dev) == e->dev_minor)
		return fd;
	if (fd >= 0)
		close(fd);
	snprintf(path, sizeof(path), "/proc/%d/map_files/%" PRIx64 "-%" PRIx64, pid, e->start,
		 e->end);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

static int scan_map(const struct map_entry *e, void *ctx)
{
	struct scan_ctx *s = ctx;
	const struct api_lib *lib;
	struct lib_file *f;
	struct stat st;
	int fd, n;

	if (e->perms[2] != 'x' || e->path[0] != '/')
		return 0;
	lib = apilib__for_path(e->path, s->a->mask);
	if (!lib)
		return 0;
	s->a->seen_mapped = true;
	/* Every CUDA process loads the driver, often after the runtime or
	 * NCCL (PyTorch loads libcuda lazily): keep watching its mmaps until
	 * then, or its driver calls go unseen until the next rescan. */
	if (lib->id == LIB_CUDA || !(s->a->mask & TRACE_BIT(LIB_CUDA)))
		s->mapped = true;
	/* Probed for this process already (most scans): nothing to open. */
	st.st_dev = makedev(e->dev_major, e->dev_minor);
	st.st_ino = e->inode;
	f = find_file(s->a, &st);
	if (f && find_set(s->a, f - s->a->files, scope_of(s->a, s->pid)))
		return 0;
	fd = open_mapped(s->pid, e);
	if (fd < 0) {
		dbg("pid %d: %s: %s", s->pid, e->path, strerror(-fd));
		return 0;
	}
	n = attach_fd(s->a, lib, fd, e->path, s->pid, NULL);
	close(fd);
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
 * executable file (dev, inode) is read once per scope, whatever it holds.
 */
static int exe_runtime(struct attach *a, int fd, const char *display, pid_t pid)
{
	const struct api_lib *lib = apilib__get(LIB_CUDART);
	char path[64];
	struct elfsym *es;
	struct stat st;
	struct { uint64_t dev, ino; int64_t scope; } key;
	uint64_t off;

	if (fstat(fd, &st))
		return 0;
	memset(&key, 0, sizeof(key));
	key.dev = st.st_dev;
	key.ino = st.st_ino;
	key.scope = scope_of(a, pid);
	if (hmap__get(&a->exes, hash__bytes(&key, sizeof(key))))
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
	return attach_fd(a, lib, fd, display, pid, es);
}

static bool runtime_traced(const struct attach *a)
{
	const struct api_lib *lib = apilib__get(LIB_CUDART);

	return lib && lib->nfuncs && (a->mask & TRACE_BIT(LIB_CUDART));
}

static int scan_exe(struct attach *a, pid_t pid)
{
	char path[64], display[4096];
	ssize_t n;
	int fd, ret;

	if (!runtime_traced(a))
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
	ret = exe_runtime(a, fd, display, pid);
	close(fd);
	return ret;
}

int attach__exe(struct attach *a, const char *path, pid_t pid)
{
	int fd, ret;

	if (!runtime_traced(a))
		return 0;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ret = exe_runtime(a, fd, path, pid);
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
	else if (exe < 0 && !s.err)
		s.err = exe;

	if (mapped)
		*mapped = s.mapped;
	if (err)
		return err;
	return s.attached ? s.attached : s.err;
}

/* ---------------------------------------------------------------- resolve */

struct resolve_ctx {
	struct attach *a;
	pid_t pid;
	int attached;
};

static int resolved(int fd, const char *path, void *ctx)
{
	struct resolve_ctx *r = ctx;
	const struct api_lib *lib = apilib__for_path(path, r->a->mask);

	if (lib && attach_fd(r->a, lib, fd, path, r->pid, NULL) > 0)
		r->attached++;
	return 0;
}

int attach__resolve(struct attach *a, pid_t pid, const char *exe, char *const *env,
		    bool skip_system)
{
	char names[8][ATTACH_WATCH_LEN];
	const char *prefixes[9];
	static const char *const path_vars[] = { "NVTX_INJECTION64_PATH", NULL };
	size_t n = attach__watch_names(a->mask, names, 8);
	struct ldpath_req q = { .pid = pid, .exe = exe, .env = env, .prefixes = prefixes,
				.path_vars = path_vars, .skip_system = skip_system };
	struct resolve_ctx r = { .a = a, .pid = pid };
	int err;

	for (size_t i = 0; i < n; i++)
		prefixes[i] = names[i];
	prefixes[n] = NULL;
	err = ldpath__resolve(&q, resolved, &r);
	if (err < 0)
		return err;
	return r.attached;
}

int attach__inherit(struct attach *a, pid_t parent, pid_t child)
{
	int attached = 0, err;

	if (!a->per_process)
		return 0;
	/* Indexes, not pointers: attaching grows the set array. */
	for (size_t i = 0, n = a->nsets; i < n; i++) {
		struct lib_file *f;

		if (a->sets[i].pid != parent)
			continue;
		f = &a->files[a->sets[i].file];
		err = attach_fd(a, apilib__get(f->lib), f->fd, f->path, child, NULL);
		if (err == -ESRCH)
			return err;
		if (err > 0)
			attached++;
	}
	return attached;
}

void attach__forget(struct attach *a, pid_t pid)
{
	/* Released by the reaper, off the consumer's thread. */
	if (!a->per_process || pid <= 0)
		return;
	for (size_t i = 0; i < a->nsets;) {
		if (a->sets[i].pid == pid)
			drop_set(a, &a->sets[i]);
		else
			i++;
	}
}

/* ---------------------------------------------------------------- release */

struct unmapped_ctx {
	struct attach *a;
	size_t left;		/* candidates not seen mapped yet */
	size_t unreadable;	/* processes whose maps could not be read */
	bool unsure;		/* the process list could not be read */
};

static int mark_mapped(const struct map_entry *e, void *ctx)
{
	struct unmapped_ctx *u = ctx;

	for (size_t i = 0; i < u->a->nfiles; i++) {
		struct lib_file *f = &u->a->files[i];

		if (f->fd >= 0 && !f->mapped && f->ino == e->inode &&
		    major(f->dev) == e->dev_major && minor(f->dev) == e->dev_minor) {
			f->mapped = true;
			u->left--;
		}
	}
	return !u->left;
}

static int maps_of(pid_t pid, void *ctx)
{
	struct unmapped_ctx *u = ctx;
	int err = procfs__for_each_map(pid, mark_mapped, u);

	/* Gone meanwhile: maps nothing. Unreadable (a process in a sandbox
	 * of its own): cgbpf found no file through it either, so a private
	 * copy probed for a process it could read is not shared with it. */
	if (err < 0 && err != -ENOENT && err != -ESRCH)
		u->unreadable++;
	return !u->left;
}

static void release_file(struct attach *a, size_t fi)
{
	struct lib_file *f = &a->files[fi];

	for (size_t i = 0; i < a->nsets;) {
		if (a->sets[i].file == fi)
			drop_set(a, &a->sets[i]);
		else
			i++;
	}
	dbg("%s: deleted and mapped by no process: probes released", f->path);
	close(f->fd);
	free(f->path);
	free(f->offs);
	free(f->cookies);
	memset(f, 0, sizeof(*f));
	f->fd = -1;
}

/*
 * A deleted library file (st_nlink 0) that no process maps can never be
 * mapped again by a new process: its probes and descriptor go (hours of
 * churn through private copies of a library must not grow cgbpf's
 * descriptors). Looks at every process's maps, only when such a file has
 * probes. Returns the number of files released.
 */
size_t attach__release_unmapped(struct attach *a)
{
	struct unmapped_ctx u = { .a = a };
	size_t released = 0, cand;
	uint64_t t0 = boot_ns();

	for (size_t i = 0; i < a->nfiles; i++) {
		struct lib_file *f = &a->files[i];
		struct stat st;

		f->mapped = true;
		if (f->fd < 0 || fstat(f->fd, &st) || st.st_nlink)
			continue;
		f->mapped = false;
		u.left++;
	}
	cand = u.left;
	if (u.left && procfs__for_each_pid(maps_of, &u) < 0)
		u.unsure = true;
	for (size_t i = 0; i < a->nfiles && !u.unsure; i++) {
		if (a->files[i].fd >= 0 && !a->files[i].mapped) {
			release_file(a, i);
			released++;
		}
	}
	if (cand)
		dbg("%zu deleted library file(s), %zu released; every process's maps read in "
		    "%.2f ms (%zu unreadable)", cand, released, (double)(boot_ns() - t0) / 1e6,
		    u.unreadable);
	return released;
}

bool attach__probed_file(struct attach *a, uint32_t kdev, uint64_t ino)
{
	struct stat st = { .st_dev = makedev(kdev >> 20, kdev & 0xfffff), .st_ino = ino };
	struct lib_file *f = find_file(a, &st);

	if (!f)
		return false;
	for (size_t i = 0; i < a->nsets; i++)
		if (a->sets[i].file == (size_t)(f - a->files))
			return true;
	return false;
}

uint64_t attach__live_since(struct attach *a, pid_t pid, uint32_t kdev, uint64_t ino)
{
	/* The kernel's encoding: major << 20 | minor. */
	struct stat st = { .st_dev = makedev(kdev >> 20, kdev & 0xfffff), .st_ino = ino };
	struct lib_file *f = find_file(a, &st);
	struct probe_set *s = f ? find_set(a, f - a->files, scope_of(a, pid)) : NULL;

	/* A file probed for every process (a shared_file library: the
	 * injection library's NVTX sites) is live in this one too. */
	if (f && !s)
		s = find_set(a, f - a->files, -1);
	return s ? s->live_ns : 0;
}
