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

/* The state letter (R, S, D, Z, ...) of pid's thread-group leader and its
 * thread count, from /proc/PID/stat. */
int procfs__state(pid_t pid, char *state, long *threads);

/* True when the process exists (a zombie counts as gone). */
bool procfs__alive(pid_t pid);

/* Collects the tgids of pid's live children (recursively, through
 * /proc/PID/task/ * /children) into *out (malloc'ed, *n entries). */
int procfs__descendants(pid_t pid, pid_t **out, size_t *n);

/* The process's cgroup v2 path ("/system.slice/x.scope", from the "0::"
 * line of /proc/PID/cgroup) into buf; 0 or -errno (-ENOENT: no v2 line). */
int procfs__cgroup(pid_t pid, char *buf, size_t len);

/* The container id of a process: the first 12 characters of a 64-hex-digit
 * id in its cgroup paths (docker, containerd, CRI-O, podman, kubepods
 * name containers so), into buf (>= 13 bytes); 0, or -ENOENT when it is
 * not in a container that names itself so. */
int procfs__container_id(pid_t pid, char *buf, size_t len);

/* Where the cgroup v2 hierarchy is mounted (from /proc/self/mountinfo:
 * /sys/fs/cgroup, or /sys/fs/cgroup/unified on hybrid systems); 0 or
 * -ENOENT. */
int procfs__cgroup2_mount(char *buf, size_t len);

/* Calls cb for every process (tgid) in /proc; stops early when cb returns
 * non-zero and returns that value. */
int procfs__for_each_pid(int (*cb)(pid_t pid, void *ctx), void *ctx);

#endif
