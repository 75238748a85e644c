/* SPDX-License-Identifier: MIT */
/*
 * --split-per-process: one trace file per traced process. The session
 * writes to a router pftrace (pftrace__router) as to any trace; each
 * descriptor and event goes to the file of the process its track belongs
 * to, created when that process is first described, named by the -o
 * pattern for its pid (user/lib/outname.h). Each file is complete on its own:
 * clock snapshot, system info, cgbpf's own tracks, the process, its
 * threads and every track under them (counters, NCCL communicators, NVTX
 * async ranges, GPU devices and streams). Tracks of no process (cgbpf's
 * lost-records counter) are written to every file.
 */
#ifndef CGBPF_PFSPLIT_H
#define CGBPF_PFSPLIT_H

#include <stdbool.h>
#include <sys/types.h>
#include "lib/outname.h"

struct pftrace;

/* A router trace writing one file per process, named by pattern (which
 * must pass outname__check; its %q are read from each process's
 * environment, at its exec when pfsplit__remember is called); replace: existing regular files are replaced
 * (--force) rather than refused. ctx's pid and seq are set per file; its
 * missing_empty is forced on. NULL with errno set. */
struct pftrace *pfsplit__new(const char *pattern, const struct outname_ctx *ctx, bool replace);

/* Reads now the %q variables of pid (which just exec'ed) for its file's
 * name: it may be gone by the time its records are handled. A no-op on a
 * plain trace. */
void pfsplit__remember(struct pftrace *router, pid_t pid);

/* Capture windows (user/out/capwin.c), set before anything is written: a
 * process's packets are dropped outside its windows, and each window is a
 * file of its own, complete (every descriptor written so far), named by
 * pfsplit__window_open rather than at the process's first event. */
void pfsplit__windows(struct pftrace *router);
/* Opens pid's window file, named by pattern (outname: %p pid, %n seq, %q
 * its variables); 0 or -errno, said to the user already; *path: its name. */
int pfsplit__window_open(struct pftrace *router, pid_t pid, const char *pattern, unsigned seq,
			 const char **path);
/* Ends pid's window file (a last clock snapshot, flushed, closed); 0 or
 * -errno, said already. */
int pfsplit__window_close(struct pftrace *router, pid_t pid);

#endif
