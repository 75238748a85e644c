// SPDX-License-Identifier: MIT
/* record's trace file(s): -o patterns, --force, --split-per-process. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "capture/traceout.h"
#include "core/opts.h"
#include "lib/log.h"
#include "lib/outfile.h"
#include "lib/outname.h"
#include "out/perfetto.h"
#include "out/pfsplit.h"

static pid_t first_target(const struct record_opts *o)
{
	/* -p: the first pid given; -a alone: cgbpf itself (0). */
	return o->npids ? o->pids[0] : 0;
}

/* Creates path for the trace; 0 or the exit code. */
static int create(struct traceout *to, const char *path, struct pftrace **pt)
{
	int fd = to->force ? outfile__create(AT_FDCWD, path, OUTFILE_MODE) :
			     outfile__create_new(AT_FDCWD, path, OUTFILE_MODE);

	if (fd == -EEXIST && !to->force) {
		err("%s exists: cgbpf does not overwrite it without --force", path);
		return 2;
	}
	if (fd < 0) {
		err("cannot write %s: %s", path, outfile__strerror(fd));
		return 1;
	}
	*pt = pftrace__fdopen(fd);
	if (!*pt) {
		err("cannot write %s: %s", path, strerror(errno));
		outfile__discard(fd, path);
		close(fd);
		return 1;
	}
	return 0;
}

int traceout__open(struct traceout *to, const struct record_opts *o, struct pftrace **pt)
{
	struct outname_ctx c = { .pid = first_target(o), .seq = 1 };
	char msg[PATH_MAX + 256];
	const char *slash;
	int e;

	to->force = o->force;
	to->split = o->split;
	to->pattern = o->output;
	*pt = NULL;
	if (o->split) {
		snprintf(to->path, sizeof(to->path), "%s", o->output);
		*pt = pfsplit__new(o->output, &c, o->force);
		if (!*pt) {
			err("out of memory");
			return 1;
		}
		return 0;
	}
	/* -- COMMAND: %p and %q are the command's, known once it is forked
	 * (%q: the environment it inherits, cgbpf's). */
	to->deferred = o->cmd && outname__uses(o->output, 'p');
	e = outname__expand(o->output, &c, to->path, sizeof(to->path), msg, sizeof(msg));
	if (e) {
		err("%s", msg);
		return 2;
	}
	if (!to->deferred)
		return create(to, to->path, pt);
	/* A name in the directory the final one will be in (the pattern
	 * expanded for cgbpf's pid says which, unless %p is in it). */
	slash = strrchr(to->path, '/');
	if ((size_t)snprintf(to->tmp, sizeof(to->tmp), "%.*s.cgbpf-%d.partial",
			     slash ? (int)(slash - to->path + 1) : 0, to->path,
			     (int)getpid()) >= sizeof(to->tmp)) {
		err("-o '%s': the name is too long", o->output);
		return 2;
	}
	to->path[0] = '\0';
	e = outfile__create_new(AT_FDCWD, to->tmp, OUTFILE_MODE);
	if (e == -EEXIST) {
		err("cannot write %s: it exists (left by a cgbpf that had this pid? remove it)",
		    to->tmp);
		return 1;
	}
	if (e < 0) {
		err("cannot write %s: %s", to->tmp, outfile__strerror(e));
		return 1;
	}
	*pt = pftrace__fdopen(e);
	if (!*pt) {
		outfile__discard(e, to->tmp);
		close(e);
		err("out of memory");
		return 1;
	}
	return 0;
}

/* -- COMMAND's %q: the environment it inherits, which is cgbpf's. */
static int own_env(void *ctx, pid_t pid, const char *name, char *buf, size_t n)
{
	(void)pid;
	return outname__proc_env(ctx, 0, name, buf, n);
}

int traceout__named(struct traceout *to, pid_t child)
{
	struct outname_ctx c = { .pid = child, .seq = 1, .env = own_env };
	char msg[PATH_MAX + 256];
	struct stat st;
	int e;

	if (!to->deferred)
		return 0;
	e = outname__expand(to->pattern, &c, to->path, sizeof(to->path), msg, sizeof(msg));
	if (e) {
		err("%s", msg);
		return 2;
	}
	if (to->force) {
		/* As outfile__create: only a regular file is replaced. */
		if (!lstat(to->path, &st) && !S_ISREG(st.st_mode)) {
			e = S_ISLNK(st.st_mode) ? -ELOOP : S_ISDIR(st.st_mode) ? -EISDIR : -EINVAL;
			err("cannot write %s: %s", to->path, outfile__strerror(e));
			return 1;
		}
		e = rename(to->tmp, to->path) ? -errno : 0;
	} else {
		e = renameat2(AT_FDCWD, to->tmp, AT_FDCWD, to->path, RENAME_NOREPLACE) ? -errno : 0;
		if (e == -EINVAL) {
			/* A file system without RENAME_NOREPLACE: link() refuses
			 * an existing name just as well. */
			e = link(to->tmp, to->path) ? -errno : 0;
			if (!e)
				unlink(to->tmp);
		}
		if (e == -EEXIST) {
			err("%s exists: cgbpf does not overwrite it without --force", to->path);
			return 2;
		}
	}
	if (e) {
		err("cannot name the trace %s: %s", to->path, strerror(-e));
		return 1;
	}
	to->deferred = false;
	return 0;
}

void traceout__abandon(struct traceout *to)
{
	if (to->deferred && to->tmp[0])
		unlink(to->tmp);
}

const char *traceout__current(const struct traceout *to)
{
	return to->deferred ? to->tmp : to->path;
}
