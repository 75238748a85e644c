/* SPDX-License-Identifier: MIT */
/*
 * record's trace file(s): the -o pattern expanded (user/lib/outname.h), an
 * existing file refused without --force, one file per process with
 * --split-per-process (user/out/pfsplit.h). With -- COMMAND and %p the name
 * needs the command's pid: the trace is created under a temporary name
 * next to it and renamed once the command is forked, before it runs.
 */
#ifndef CGBPF_TRACEOUT_H
#define CGBPF_TRACEOUT_H

#include <limits.h>
#include <stdbool.h>
#include <sys/types.h>

struct record_opts;
struct pftrace;

struct traceout {
	char path[PATH_MAX];	/* the trace's name; the pattern with split */
	char tmp[PATH_MAX];	/* deferred: the name it has until traceout__named */
	const char *pattern;	/* -o */
	bool deferred;
	bool split;
	bool force;
};

/* Opens o's trace (o->output, a pattern that passed outname__check) into
 * *pt; 0, or the exit code after saying why: 2 for a name that cannot be
 * expanded or a file that exists (without --force), 1 otherwise. */
int traceout__open(struct traceout *to, const struct record_opts *o, struct pftrace **pt);
/* The command is forked as child, not yet running: a deferred trace takes
 * its name. 0, or the exit code (2, 1) after saying why. */
int traceout__named(struct traceout *to, pid_t child);
/* The path a failed capture discards: the temporary one while deferred. */
const char *traceout__current(const struct traceout *to);
/* Removes a deferred trace's temporary file if it is still there. */
void traceout__abandon(struct traceout *to);

#endif
