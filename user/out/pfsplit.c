// SPDX-License-Identifier: MIT
/* --split-per-process: a router trace, one file per process (pfsplit.h). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "lib/hmap.h"
#include "lib/log.h"
#include "lib/outfile.h"
#include "out/perfetto.h"
#include "out/pfsplit.h"
#include "out/tracks.h"

#define OWNER_ALL UINT64_MAX

struct file {
	pid_t pid;
	char *path;
	struct pftrace *pt;	/* NULL: could not be created */
	bool named;		/* has its file; else pending: packets kept in memory */
	bool in_window;		/* windows: its window file is open */
	unsigned seq;		/* its %n */
	struct hmap seqs;	/* router's pfseq * -> this file's pfseq * */
};

struct gdesc {
	bool counter;
	uint64_t uuid, parent;
	char *name, *desc;
	int unit;
};

struct pfsplit {
	char *pattern;
	struct outname_ctx ctx;
	bool replace;
	bool uses_q;		/* names can change at exec */
	struct hmap owner;	/* track uuid -> pid, or OWNER_ALL */
	struct hmap by_pid;	/* pid -> index in files + 1 */
	struct hmap env;	/* pid -> its %q values read at its exec (char **) */
	struct file *files;
	size_t nfiles, capfiles;
	struct gdesc *g;	/* descriptors of no process, for later files */
	size_t ng, capg;
	int err;		/* first file that could not be created */
	unsigned named;		/* files named so far (%n) */
	bool windows;		/* capture windows name and open the files */
};

static uint64_t owner_of(struct pfsplit *sp, uint64_t uuid)
{
	uint64_t *v;

	if (!uuid)
		return OWNER_ALL;
	v = hmap__get(&sp->owner, uuid);
	if (v)
		return *v;
	/* A process's track names its pid, described or not. */
	if (UUID_IS_PROCESS(uuid))
		return UUID_PID(uuid);
	return OWNER_ALL;
}

static void write_global(struct pftrace *pt, const struct gdesc *g)
{
	if (g->counter)
		pftrace__counter_track(pt, g->uuid, g->parent, g->name, g->unit);
	else
		pftrace__track_desc(pt, g->uuid, g->parent, g->name, g->desc);
}

/* Variables of the processes pfsplit__remember saw: "NAME\0=value\0",
 * or "NAME\0!\0" for one the process did not have. */
struct remembered {
	size_t len;
	char data[];
};

static int remembered_env(void *ctx, pid_t pid, const char *name, char *buf, size_t n)
{
	struct pfsplit *sp = ctx;
	uint64_t *v;
	int e = outname__proc_env(NULL, pid, name, buf, n);

	/* The process as it is now, while it lives; else as it was at its
	 * exec (read then, though records may be handled late under load
	 * and catch it mid-exec); else the variable is missing. */
	if (!e || e == -ENAMETOOLONG)
		return e;
	v = hmap__get(&sp->env, (uint32_t)pid);
	if (v) {
		const struct remembered *m = (const struct remembered *)(uintptr_t)*v;

		for (size_t off = 0; off < m->len;) {
			const char *k = m->data + off, *val = k + strlen(k) + 1;

			off = val - m->data + strlen(val) + 1;
			if (strcmp(k, name))
				continue;
			if (*val == '!')
				return -ENOENT;
			if (strlen(val + 1) >= n)
				return -ENAMETOOLONG;
			strcpy(buf, val + 1);
			return 0;
		}
	}
	return -ENOENT;
}

/* Reads pid's variables named in the pattern now (ctx -> struct pfsplit). */
static void remember(struct pfsplit *sp, pid_t pid)
{
	struct remembered *m;
	size_t cap = 0, len = 0;
	char val[4096];
	uint64_t *old;

	/* Room: each variable's name and value (bounded by val). */
	for (const char *p = sp->pattern; (p = strstr(p, "%q{")); p += 3)
		cap += strcspn(p + 3, "}") + 1 + 1 + sizeof(val) + 1;
	m = malloc(sizeof(*m) + cap + 1);
	if (!m)
		return;
	for (const char *p = sp->pattern; *p; p++) {
		size_t nl;
		char name[256];
		int e;

		if (*p != '%' || !p[1])
			continue;
		if (p[1] != 'q') {
			p++;
			continue;
		}
		nl = strcspn(p + 3, "}");
		if (nl >= sizeof(name))
			break;
		memcpy(name, p + 3, nl);
		name[nl] = '\0';
		p += 3 + nl;
		e = outname__proc_env(NULL, pid, name, val, sizeof(val));
		if (e && e != -ENOENT) {
			/* Gone, or unreadable: what was read before stays. */
			free(m);
			return;
		}
		memcpy(m->data + len, name, nl + 1);
		len += nl + 1;
		m->data[len++] = e ? '!' : '=';
		if (e) {
			m->data[len++] = '\0';
			continue;
		}
		memcpy(m->data + len, val, strlen(val) + 1);
		len += strlen(val) + 1;
	}
	m->len = len;
	dbg("pid %d: its %%q variables read at its exec", (int)pid);
	old = hmap__get(&sp->env, (uint32_t)pid);
	if (old) {
		free((void *)(uintptr_t)*old);
		*old = (uintptr_t)m;
	} else if (hmap__put(&sp->env, (uint32_t)pid, (uintptr_t)m)) {
		free(m);
	}
}

void pfsplit__remember(struct pftrace *router, pid_t pid)
{
	struct pfsplit *sp = pftrace__split(router);

	if (sp && sp->uses_q)
		remember(sp, pid);
}

/* Gives pending file f its name and file: at its process's first event,
 * not at its first descriptor, because a child is described at its fork
 * and its %q variables are those of the program it then execs. */
static int name_file(struct pfsplit *sp, struct file *f)
{
	struct outname_ctx c = sp->ctx;
	char path[PATH_MAX], msg[PATH_MAX + 256];
	int fd, e;

	c.pid = f->pid;
	c.seq = f->seq = ++sp->named;
	e = outname__expand(sp->pattern, &c, path, sizeof(path), msg, sizeof(msg));
	if (e) {
		err("the trace of pid %d is not written: %s", (int)f->pid, msg);
		return e;
	}
	f->path = strdup(path);
	if (!f->path)
		return -ENOMEM;
	fd = sp->replace ? outfile__create(AT_FDCWD, path, OUTFILE_MODE) :
			   outfile__create_new(AT_FDCWD, path, OUTFILE_MODE);
	if (fd == -EEXIST && !sp->replace) {
		err("the trace of pid %d is not written: %s exists (--force replaces it)",
		    (int)f->pid, path);
		return fd;
	}
	if (fd < 0) {
		err("the trace of pid %d is not written: cannot write %s: %s", (int)f->pid, path,
		    outfile__strerror(fd));
		return fd;
	}
	dbg("pid %d: trace %s", (int)f->pid, path);
	{
		uint64_t v;

		/* Used: the rename at a later exec reads it again. */
		if (hmap__del(&sp->env, (uint32_t)f->pid, &v))
			free((void *)(uintptr_t)v);
	}
	pftrace__set_fd(f->pt, fd);
	f->named = true;
	return 0;
}

/* pid's file, created pending on first use, named when named is asked;
 * NULL when it could not be. */
static struct pftrace *file_for(struct pfsplit *sp, pid_t pid, bool named)
{
	uint64_t *idx = hmap__get(&sp->by_pid, (uint32_t)pid);
	struct file *f;
	int e;

	if (idx) {
		f = &sp->files[*idx - 1];
	} else {
		if (sp->nfiles == sp->capfiles) {
			size_t nc = sp->capfiles ? sp->capfiles * 2 : 16;
			struct file *n = realloc(sp->files, nc * sizeof(*n));

			if (!n)
				return NULL;
			sp->files = n;
			sp->capfiles = nc;
		}
		if (hmap__put(&sp->by_pid, (uint32_t)pid, sp->nfiles + 1))
			return NULL;
		f = &sp->files[sp->nfiles++];
		memset(f, 0, sizeof(*f));
		f->pid = pid;
		f->pt = pftrace__pending();
		if (!f->pt)
			return NULL;
		/* Windows: every descriptor kept for the window files. */
		if (sp->windows)
			pftrace__keep_descriptors(f->pt);
		pftrace__clock_snapshot(f->pt);
		pftrace__system_info(f->pt);
		for (size_t i = 0; i < sp->ng; i++)
			write_global(f->pt, &sp->g[i]);
		/* Its variables now, while it surely lives (-p targets); its
		 * exec, if it comes, reads them again. */
		if (sp->uses_q)
			remember(sp, pid);
		/* Its process track first, whatever comes next: an event cgbpf
		 * puts on it before the model describes the process. */
		pftrace__process(f->pt, UUID_PROCESS((uint64_t)(uint32_t)pid), pid, NULL, NULL);
		/* Windows: nothing is written until its first window. */
		if (sp->windows)
			pftrace__pause(f->pt, NULL);
	}
	if (!f->pt || !named || f->named || sp->windows)
		return f->pt;
	e = name_file(sp, f);
	if (e) {
		pftrace__close(f->pt);	/* pending: writes nothing */
		f->pt = NULL;
		if (!sp->err)
			sp->err = e;
	}
	return f->pt;
}

/* A process named before it exec'ed (an event of the forked child came
 * first) is described again at its exec: its %q variables are the new
 * program's now, and the file follows them. */
static void rename_file(struct pfsplit *sp, struct file *f)
{
	struct outname_ctx c = sp->ctx;
	char path[PATH_MAX], msg[PATH_MAX + 256];
	char *np;
	int e;

	/* Only after an exec pfsplit__remember saw: a process described
	 * again later (its fork record handled late) may be gone, its
	 * environment unreadable. */
	if (!hmap__get(&sp->env, (uint32_t)f->pid))
		return;
	c.pid = f->pid;
	c.seq = f->seq;
	e = outname__expand(sp->pattern, &c, path, sizeof(path), msg, sizeof(msg));
	{
		uint64_t v;

		if (hmap__del(&sp->env, (uint32_t)f->pid, &v))
			free((void *)(uintptr_t)v);
	}
	if (e || !strcmp(path, f->path))
		return;
	if (sp->replace)
		e = rename(f->path, path) ? -errno : 0;
	else
		e = renameat2(AT_FDCWD, f->path, AT_FDCWD, path, RENAME_NOREPLACE) ? -errno : 0;
	if (e) {
		warn("pid %d exec'ed: its trace keeps the name %s (as %s: %s)", (int)f->pid,
		     f->path, path, e == -EEXIST ? "that file exists" : strerror(-e));
		return;
	}
	np = strdup(path);
	if (!np)
		return;
	dbg("pid %d exec'ed: trace %s renamed %s", (int)f->pid, f->path, path);
	free(f->path);
	f->path = np;
}

/* The router's side (struct pf_router_ops, user/out/perfetto.h): the
 * writer calls these through router_ops, set by pfsplit__new. */
static struct pftrace *file_at(struct pfsplit *sp, size_t i)
{
	return i < sp->nfiles ? sp->files[i].pt : NULL;
}

static size_t file_count(const struct pfsplit *sp)
{
	return sp->nfiles;
}

static bool route_desc(struct pfsplit *sp, uint64_t uuid, uint64_t parent, int pid, size_t i,
		       struct pftrace **pt)
{
	uint64_t owner = pid ? (uint64_t)(uint32_t)pid : owner_of(sp, parent);

	if (!i)
		hmap__put(&sp->owner, uuid, owner);
	if (owner == OWNER_ALL) {
		*pt = file_at(sp, i);
		return *pt != NULL || i < sp->nfiles;
	}
	if (i)
		return false;
	*pt = file_for(sp, owner, false);
	if (*pt && pid && UUID_IS_PROCESS(uuid) && sp->uses_q) {
		struct file *f = &sp->files[*hmap__get(&sp->by_pid, owner) - 1];

		if (f->named)
			rename_file(sp, f);
	}
	return true;	/* *pt NULL: that process's file failed; nothing written */
}

static void global_desc(struct pfsplit *sp, bool counter, uint64_t uuid, uint64_t parent,
			const char *name, const char *desc, int unit)
{
	struct gdesc *g;

	if (owner_of(sp, parent) != OWNER_ALL)
		return;
	for (size_t i = 0; i < sp->ng; i++) {
		if (sp->g[i].uuid == uuid) {	/* renamed: later files get the new name */
			g = &sp->g[i];
			free(g->name);
			free(g->desc);
			goto set;
		}
	}
	if (sp->ng == sp->capg) {
		size_t nc = sp->capg ? sp->capg * 2 : 8;
		struct gdesc *n = realloc(sp->g, nc * sizeof(*n));

		if (!n)
			return;
		sp->g = n;
		sp->capg = nc;
	}
	g = &sp->g[sp->ng++];
set:
	g->counter = counter;
	g->uuid = uuid;
	g->parent = parent;
	g->name = name ? strdup(name) : NULL;
	g->desc = desc ? strdup(desc) : NULL;
	g->unit = unit;
}

static struct pfseq *seq_in(struct file *f, const struct pfseq *s, uint64_t track,
			    uint64_t ts)
{
	uint64_t *v = hmap__get(&f->seqs, (uintptr_t)s);
	struct pfseq *cs;

	if (v)
		return (struct pfseq *)(uintptr_t)*v;
	cs = pftrace__seq(f->pt, track, ts);
	if (cs && hmap__put(&f->seqs, (uintptr_t)s, (uintptr_t)cs))
		return NULL;
	return cs;
}

static bool route_event(struct pfsplit *sp, const struct pfseq *s, uint64_t seq_track,
			uint64_t track, uint64_t ts, size_t i, struct pftrace **pt,
			struct pfseq **cs)
{
	uint64_t owner = owner_of(sp, track ? track : seq_track);
	/* cgbpf's own notes about a process (its sequence is no process's)
	 * do not name its file: only what the process did does. */
	bool own = owner_of(sp, seq_track) != OWNER_ALL;
	struct file *f;

	if (owner == OWNER_ALL) {
		/* Skip the files that could not be created. */
		for (; i < sp->nfiles && !sp->files[i].pt; i++)
			;
		if (i >= sp->nfiles)
			return false;
		f = &sp->files[i];
	} else {
		if (i || !file_for(sp, owner, own))
			return false;
		f = &sp->files[*hmap__get(&sp->by_pid, (uint32_t)owner) - 1];
	}
	*pt = f->pt;
	*cs = seq_in(f, s, seq_track, ts);
	if (!*cs)
		return owner == OWNER_ALL ? route_event(sp, s, seq_track, track, ts, i + 1, pt,
							 cs) : false;
	return true;
}

static int split_error(const struct pfsplit *sp)
{
	for (size_t i = 0; i < sp->nfiles; i++)
		if (sp->files[i].pt && pftrace__error(sp->files[i].pt))
			return pftrace__error(sp->files[i].pt);
	return 0;
}

static int split_close(struct pfsplit *sp, bool discard)
{
	int err = 0;

	if (!sp)
		return 0;
	for (size_t i = 0; i < sp->nfiles; i++) {
		struct file *f = &sp->files[i];

		if (sp->windows) {
			/* A window still open ends with the capture (capwin says
			 * which files it wrote). */
			int e = f->in_window && discard ? (pftrace__discard(f->pt, f->path), 0) :
				pftrace__close(f->pt);

			if (e && !err) {
				err("writing %s failed: %s", f->path, strerror(-e));
				err = e;
			}
		} else if (!f->named) {
			/* No event: no file (a launcher that only forked). */
			if (f->pt)
				dbg("pid %d: nothing traced, no trace file", (int)f->pid);
			pftrace__close(f->pt);
		} else if (discard) {
			pftrace__discard(f->pt, f->path);
		} else {
			int e = pftrace__close(f->pt);

			if (e && !err) {
				err("writing %s failed: %s", f->path, strerror(-e));
				err = e;
			} else if (!e && f->pt) {
				info("wrote %s (pid %d)", f->path, (int)f->pid);
			}
		}
		hmap__free(&f->seqs);
		free(f->path);
	}
	if (!err && !discard)
		err = sp->err;
	for (size_t i = 0; i < sp->ng; i++) {
		free(sp->g[i].name);
		free(sp->g[i].desc);
	}
	free(sp->g);
	free(sp->files);
	hmap__free(&sp->owner);
	hmap__free(&sp->by_pid);
	{
		uint64_t k, v;

		for (size_t it = 0; hmap__next(&sp->env, &it, &k, &v);)
			free((void *)(uintptr_t)v);
		hmap__free(&sp->env);
	}
	free(sp->pattern);
	free(sp);
	return err;
}

static const struct pf_router_ops router_ops = {
	.route_desc = route_desc,
	.global_desc = global_desc,
	.route_event = route_event,
	.file = file_at,
	.nfiles = file_count,
	.close = split_close,
	.error = split_error,
};

struct pftrace *pfsplit__new(const char *pattern, const struct outname_ctx *ctx, bool replace)
{
	struct pfsplit *sp = calloc(1, sizeof(*sp));
	struct pftrace *pt;

	if (!sp || !(sp->pattern = strdup(pattern))) {
		free(sp);
		errno = ENOMEM;
		return NULL;
	}
	sp->ctx = *ctx;
	sp->ctx.missing_empty = true;
	sp->replace = replace;
	sp->uses_q = outname__uses(pattern, 'q');
	sp->ctx.env = remembered_env;
	sp->ctx.env_ctx = sp;
	pt = pftrace__router(&router_ops, sp);
	if (!pt) {
		free(sp->pattern);
		free(sp);
		errno = ENOMEM;
	}
	return pt;
}

void pfsplit__windows(struct pftrace *router)
{
	struct pfsplit *sp = pftrace__split(router);

	if (sp)
		sp->windows = true;
}

int pfsplit__window_open(struct pftrace *router, pid_t pid, const char *pattern, unsigned seq,
			 const char **path)
{
	struct pfsplit *sp = pftrace__split(router);
	struct outname_ctx c;
	char buf[PATH_MAX], msg[PATH_MAX + 256];
	struct file *f;
	uint64_t *idx;
	int e;

	*path = NULL;
	if (!sp || !file_for(sp, pid, false) || !(idx = hmap__get(&sp->by_pid, (uint32_t)pid)))
		return -ENOMEM;
	f = &sp->files[*idx - 1];
	if (f->in_window)
		return 0;
	c = sp->ctx;
	c.pid = pid;
	c.seq = seq;
	e = outname__expand(pattern, &c, buf, sizeof(buf), msg, sizeof(msg));
	if (e) {
		err("the window of pid %d is not written: %s", (int)pid, msg);
		return -EINVAL;
	}
	free(f->path);
	if (!(f->path = strdup(buf)))
		return -ENOMEM;
	e = pftrace__resume(f->pt, buf, sp->replace);
	if (e == -EEXIST) {
		err("the window of pid %d is not written: %s exists (--force replaces it)",
		    (int)pid, buf);
		return e;
	}
	if (e) {
		err("the window of pid %d is not written: cannot write %s: %s", (int)pid, buf,
		    strerror(-e));
		return e;
	}
	f->in_window = true;
	*path = f->path;
	dbg("pid %d: window file %s", (int)pid, buf);
	return 0;
}

int pfsplit__window_close(struct pftrace *router, pid_t pid)
{
	struct pfsplit *sp = pftrace__split(router);
	uint64_t *idx = sp ? hmap__get(&sp->by_pid, (uint32_t)pid) : NULL;
	struct file *f;
	int e;

	if (!idx)
		return 0;
	f = &sp->files[*idx - 1];
	if (!f->in_window)
		return 0;
	f->in_window = false;
	e = pftrace__pause(f->pt, NULL);
	if (e)
		err("writing %s failed: %s", f->path, strerror(-e));
	return e;
}
