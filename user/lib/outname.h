/* SPDX-License-Identifier: MIT */
/*
 * Output names: `-o` patterns expanded per file, as Nsight Systems does.
 *
 *   %p      pid of the process the file is for (the first target, or each
 *           process with --split-per-process)
 *   %h      host name (cgbpf's: the machine's name)
 *   %n      sequence number of the file in this run: 1, 2, ...
 *   %q{VAR} environment variable VAR of that process, from
 *           /proc/PID/environ (as it was at exec); cgbpf's own environment
 *           when pid is 0 (record -- CMD: what the command inherits)
 *   %%      a percent sign
 *
 * Values from a process or the host cannot leave the directory the
 * pattern names: '/' and control characters become '_', and a value of
 * only dots ("..") becomes underscores. Any other %-code, or %q without a
 * closed {NAME}, is an error.
 */
#ifndef CGBPF_OUTNAME_H
#define CGBPF_OUTNAME_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* Reads variable name of pid (0: cgbpf's own) into buf; 0, -ENOENT when
 * the process has no such variable, or another -errno. */
typedef int (*outname_env_fn)(void *ctx, pid_t pid, const char *name, char *buf, size_t n);

struct outname_ctx {
	pid_t pid;		/* %p and whose %q; 0: cgbpf itself (%p: cgbpf's pid) */
	unsigned seq;		/* %n (1 for the first file) */
	const char *host;	/* %h; NULL: gethostname() */
	outname_env_fn env;	/* %q; NULL: outname__proc_env */
	void *env_ctx;
	bool missing_empty;	/* a missing %q variable expands to "" instead of failing */
};

/* Expands pattern for ctx into out (n bytes); 0, or -EINVAL (a bad
 * %-code), -ENOENT (a missing variable), -ENAMETOOLONG, or the env
 * reader's -errno, with a message for the user in err (errn bytes). */
int outname__expand(const char *pattern, const struct outname_ctx *ctx, char *out, size_t n,
		    char *err, size_t errn);

/* Checks pattern's syntax only (no process is read); 0 or -EINVAL with
 * the message in err. */
int outname__check(const char *pattern, char *err, size_t errn);

/* True when pattern uses %code (one of 'p', 'h', 'n', 'q'). pattern must
 * pass outname__check. */
bool outname__uses(const char *pattern, char code);

/* pattern with ".%p" put before the extension of its last component
 * ("run.perfetto-trace" -> "run.%p.perfetto-trace", "run" -> "run.%p"),
 * in out; 0 or -ENAMETOOLONG. */
int outname__add_pid(const char *pattern, char *out, size_t n);

/* The default reader: variable name of /proc/PID/environ (bounded: at
 * most OUTNAME_ENV_MAX bytes are read), or getenv() for pid 0. */
#define OUTNAME_ENV_MAX (16u << 20)
int outname__proc_env(void *ctx, pid_t pid, const char *name, char *buf, size_t n);

#endif
