// SPDX-License-Identifier: MIT
/* --split-per-process: a router trace, one file per process (pfsplit.h). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "hmap.h"
#include "log.h"
#include "outfile.h"
#include "perfetto.h"
#include "pfsink.h"
#include "pfsplit.h"

#define OWNER_ALL UINT64_MAX

struct file {
	pid_t pid;
	char *path;
	struct pftrace *pt;	/* NULL: could not be created */
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
	struct hmap owner;	/* track uuid -> pid, or OWNER_ALL */
	struct hmap by_pid;	/* pid -> index in files + 1 */
	struct file *files;
	size_t nfiles, capfiles;
	struct gdesc *g;	/* descriptors of no process, for later files */
	size_t ng, capg;
	int err;		/* first file that could not be created */
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
	pt = pftrace__router(sp);
	if (!pt) {
		free(sp->pattern);
		free(sp);
		errno = ENOMEM;
	}
	return pt;
}

static uint64_t owner_of(struct pfsplit *sp, uint64_t uuid)
{
	uint64_t *v;

	if (!uuid)
		return OWNER_ALL;
	v = hmap__get(&sp->owner, uuid);
	if (v)
		return *v;
	/* A process's track names its pid, described or not. */
	if (uuid >> 56 == 1)
		return uuid & ((1ull << 56) - 1);
	return OWNER_ALL;
}

static void write_global(struct pftrace *pt, const struct gdesc *g)
{
	if (g->counter)
		pftrace__counter_track(pt, g->uuid, g->parent, g->name, g->unit);
	else
		pftrace__track_desc(pt, g->uuid, g->parent, g->name, g->desc);
}

/* pid's file, created on first use; NULL when it could not be. */
static struct pftrace *file_for(struct pfsplit *sp, pid_t pid)
{
	uint64_t *idx = hmap__get(&sp->by_pid, (uint32_t)pid);
	struct outname_ctx c = sp->ctx;
	char path[PATH_MAX], msg[PATH_MAX + 256];
	struct file *f;
	int fd, e;

	if (idx)
		return sp->files[*idx - 1].pt;
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
	c.pid = pid;
	c.seq = sp->nfiles;
	e = outname__expand(sp->pattern, &c, path, sizeof(path), msg, sizeof(msg));
	if (e) {
		err("the trace of pid %d is not written: %s", (int)pid, msg);
		goto fail;
	}
	f->path = strdup(path);
	if (!f->path) {
		e = -ENOMEM;
		goto fail;
	}
	fd = sp->replace ? outfile__create(AT_FDCWD, path, OUTFILE_MODE) :
			   outfile__create_new(AT_FDCWD, path, OUTFILE_MODE);
	if (fd == -EEXIST && !sp->replace) {
		e = fd;
		err("the trace of pid %d is not written: %s exists (--force replaces it)",
		    (int)pid, path);
		goto fail;
	}
	if (fd < 0) {
		e = fd;
		err("the trace of pid %d is not written: cannot write %s: %s", (int)pid, path,
		    outfile__strerror(fd));
		goto fail;
	}
	f->pt = pftrace__fdopen(fd);
	if (!f->pt) {
		e = -errno;
		outfile__discard(fd, path);
		close(fd);
		goto fail;
	}
	dbg("pid %d: trace %s", (int)pid, path);
	pftrace__clock_snapshot(f->pt);
	pftrace__system_info(f->pt);
	for (size_t i = 0; i < sp->ng; i++)
		write_global(f->pt, &sp->g[i]);
	return f->pt;
fail:
	if (!sp->err)
		sp->err = e;
	return NULL;
}

bool pfsplit__route_desc(struct pfsplit *sp, uint64_t uuid, uint64_t parent, int pid,
			 size_t i, struct pftrace **pt)
{
	uint64_t owner = pid ? (uint64_t)(uint32_t)pid : owner_of(sp, parent);

	if (!i)
		hmap__put(&sp->owner, uuid, owner);
	if (owner == OWNER_ALL) {
		*pt = pfsplit__file(sp, i);
		return *pt != NULL || i < sp->nfiles;
	}
	if (i)
		return false;
	*pt = file_for(sp, owner);
	return true;	/* *pt NULL: that process's file failed; nothing written */
}

void pfsplit__global_desc(struct pfsplit *sp, bool counter, uint64_t uuid, uint64_t parent,
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

bool pfsplit__route_event(struct pfsplit *sp, const struct pfseq *s, uint64_t seq_track,
			  uint64_t track, uint64_t ts, size_t i, struct pftrace **pt,
			  struct pfseq **cs)
{
	uint64_t owner = owner_of(sp, track ? track : seq_track);
	struct file *f;

	if (owner == OWNER_ALL) {
		/* Skip the files that could not be created. */
		for (; i < sp->nfiles && !sp->files[i].pt; i++)
			;
		if (i >= sp->nfiles)
			return false;
		f = &sp->files[i];
	} else {
		if (i || !file_for(sp, owner))
			return false;
		f = &sp->files[*hmap__get(&sp->by_pid, (uint32_t)owner) - 1];
	}
	*pt = f->pt;
	*cs = seq_in(f, s, seq_track, ts);
	if (!*cs)
		return owner == OWNER_ALL ? pfsplit__route_event(sp, s, seq_track, track, ts,
								   i + 1, pt, cs) : false;
	return true;
}

struct pftrace *pfsplit__file(struct pfsplit *sp, size_t i)
{
	return i < sp->nfiles ? sp->files[i].pt : NULL;
}

size_t pfsplit__nfiles(const struct pfsplit *sp)
{
	return sp->nfiles;
}

int pfsplit__error(const struct pfsplit *sp)
{
	for (size_t i = 0; i < sp->nfiles; i++)
		if (sp->files[i].pt && pftrace__error(sp->files[i].pt))
			return pftrace__error(sp->files[i].pt);
	return 0;
}

int pfsplit__close(struct pfsplit *sp, bool discard)
{
	int err = 0;

	if (!sp)
		return 0;
	for (size_t i = 0; i < sp->nfiles; i++) {
		struct file *f = &sp->files[i];

		if (discard) {
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
	free(sp->pattern);
	free(sp);
	return err;
}
