/* SPDX-License-Identifier: MIT */
/*
 * The attach manager: finds the libraries cgbpf probes in a process's
 * memory map, resolved inside its mount namespace through /proc/PID/root,
 * and attaches the entry and return probes once per library file
 * (device + inode), whatever number of processes map it.
 */
#ifndef CGBPF_ATTACH_H
#define CGBPF_ATTACH_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct cgbpf_bpf;
struct attach;

/* Library file name prefixes that are watched ("libcuda.so"), NULL ended. */
extern const char *const attach_watch_names[];

/* A manager attaching the skeleton's call_enter / call_exit programs. */
struct attach *attach__new(struct cgbpf_bpf *skel);
/* Detaches every probe and frees; accepts NULL. */
void attach__free(struct attach *a);
/* Scans pid's maps and attaches to libraries not probed yet. Returns the
 * number of library files newly attached, or -errno (-ENOENT: the process
 * is gone). */
int attach__scan(struct attach *a, pid_t pid);
/* Attaches to one library file by path (for tests and benchmarks). */
int attach__file(struct attach *a, const char *path, const char *display);
/* Library files probed and probes attached so far. */
size_t attach__files(const struct attach *a);
size_t attach__probes(const struct attach *a);
/* Calls cb for each probed file: display path and number of functions. */
void attach__for_each(const struct attach *a, void (*cb)(const char *path, int funcs, void *ctx),
		      void *ctx);

#endif
