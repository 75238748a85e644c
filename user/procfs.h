/* SPDX-License-Identifier: MIT */
/* Reading /proc: memory maps, names and command lines of processes. */
#ifndef CGBPF_PROCFS_H
#define CGBPF_PROCFS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* One line of /proc/PID/maps. */
struct map_entry {
	uint64_t start, end, offset;
	uint32_t dev_major, dev_minor;
	uint64_t inode;
	char perms[5];
	const char *path;	/* points into the parser's line buffer; may be "" */
};

/* Parses one maps line; returns 0 or -EINVAL. path points into line. */
int procfs__parse_maps_line(char *line, struct map_entry *e);

/* Calls cb for every line of /proc/PID/maps; stops early when cb returns
 * non-zero and returns that value; -errno when the file can't be read. */
int procfs__for_each_map(pid_t pid, int (*cb)(const struct map_entry *e, void *ctx),
			 void *ctx);

/* Reads /proc/PID/comm (or task/TID/comm when tid > 0) into buf. */
int procfs__comm(pid_t pid, pid_t tid, char *buf, size_t len);

/* Reads /proc/PID/cmdline with NULs turned into spaces; malloc'ed string
 * or NULL (errno set). An empty command line (kernel thread, zombie)
 * gives "". */
char *procfs__cmdline(pid_t pid);

/* True when the process exists (a zombie counts as gone). */
bool procfs__alive(pid_t pid);

/* Collects the tgids of pid's live children (recursively, through
 * /proc/PID/task/ * /children) into *out (malloc'ed, *n entries). */
int procfs__descendants(pid_t pid, pid_t **out, size_t *n);

#endif
