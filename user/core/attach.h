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
#include <stdint.h>
#include <sys/types.h>

struct cgbpf_bpf;
struct attach;

#define ATTACH_WATCH_LEN 24	/* as bpf/proc.bpf.c WATCH_LEN */

/* The file name prefixes of the libraries in mask ("libcuda.so", ...),
 * for the BPF mmap watch; returns how many were written (at most max). */
size_t attach__watch_names(uint32_t mask, char names[][ATTACH_WATCH_LEN], size_t max);

/* Between skeleton open and load: picks uprobe_multi links when the
 * kernel has them (one link per library file and direction) or classic
 * per-function perf-event uprobes otherwise. Returns true for multi. */
bool attach__prepare(struct cgbpf_bpf *skel);
/* A manager attaching the skeleton's call programs, as prepared, to the
 * libraries in mask (TRACE_BIT of enum rec_lib). per_process: each
 * target gets probes of its own, filtered by pid in the kernel, so no
 * other process has a breakpoint in its memory (record -p, record --);
 * otherwise probes are for every process mapping a file (record -a,
 * monitor), and BPF picks the targets. */
struct attach *attach__new(struct cgbpf_bpf *skel, bool multi, uint32_t mask, bool per_process);
/* Detaches every probe and frees; accepts NULL. */
void attach__free(struct attach *a);
/* Scans pid's maps (and its main executable, for a static CUDA runtime)
 * and probes the traced libraries it maps for pid; *mapped (if not NULL)
 * says whether pid maps the driver (any watched library when the driver
 * is not traced): until then its mmaps are watched. Returns the number of
 * probe sets newly attached, or -errno (-ENOENT: the process is gone). */
int attach__scan(struct attach *a, pid_t pid, bool *mapped);
/* Probes for pid the traced library files its dynamic loader would load
 * (user/lib/elf/ldpath.h), before it maps them: the kernel installs the
 * breakpoints at the mapping. exe and env describe a program about to be
 * exec'ed by pid (NULL: pid's own); skip_system leaves out the cache and
 * default directories of pid's root (probed already). The number of probe
 * sets attached, or -errno. */
int attach__resolve(struct attach *a, pid_t pid, const char *exe, char *const *env,
		    bool skip_system);
/* A forked child gets probes on every file its parent has them on: the
 * number of probe sets attached, or -ESRCH when the child is gone. */
int attach__inherit(struct attach *a, pid_t parent, pid_t child);
/* Detaches the probes of an exited process (per_process only). */
void attach__forget(struct attach *a, pid_t pid);
/* Releases the probes and descriptor of every deleted library file that
 * no process maps any more (reads every process's maps, only when a
 * probed file is deleted); the number of files released. */
size_t attach__release_unmapped(struct attach *a);
/* Whether the file (kernel dev encoding, inode) has probes for any scope. */
bool attach__probed_file(struct attach *a, uint32_t kdev, uint64_t ino);
/* Since when the file (kernel dev encoding, inode) is probed for pid, by
 * its own probes or by probes for every process (CLOCK_BOOTTIME); 0: not. */
uint64_t attach__live_since(struct attach *a, pid_t pid, uint32_t kdev, uint64_t ino);
/* Attaches entry and return probes at file offsets with attach cookies;
 * 0 or -errno. */
int attach__offsets(struct attach *a, const char *path, const uint64_t *offs,
		    const uint64_t *cookies, size_t n);
/* Probes the CUDA runtime linked into the executable at path, if it has
 * one, for pid (before `record -- CMD` lets CMD exec); 1, 0 or -errno. */
int attach__exe(struct attach *a, const char *path, pid_t pid);
/* Attaches to one library file by path for every process (tests,
 * benchmarks); the library is told by display's file name (-ENOENT: no
 * traced library). */
int attach__file(struct attach *a, const char *path, const char *display);
/* Attaches a USDT program to provider:name in the file at path, for the
 * scope of the file being attached (api_lib.attach_file hooks). */
struct bpf_program;
int attach__usdt(struct attach *a, struct bpf_program *prog, const char *path,
		 const char *provider, const char *name);
/* Attaches a program of its own (not the generic call pair) at a file
 * offset, for the scope of the file being attached. */
int attach__uprobe(struct attach *a, struct bpf_program *prog, const char *path, uint64_t off,
		   bool ret);
/*
 * One probe outside the libraries' probe sets (the injection library's
 * sites): a uprobe_multi link where attach__prepare made prog one, else a
 * perf-event uprobe; in process pid only (<= 0: every process). NULL with
 * errno set on failure. uprobe__release hands it to the reaper (its
 * breakpoint may stay a few ms); uprobe__destroy removes it before
 * returning (tens of ms). Both accept NULL.
 */
struct uprobe;
struct uprobe *uprobe__attach(struct bpf_program *prog, pid_t pid, const char *path,
			      uint64_t off, bool ret);
void uprobe__release(struct uprobe *u);
void uprobe__destroy(struct uprobe *u);
/* The skeleton whose programs the manager attaches. */
struct cgbpf_bpf *attach__skel(const struct attach *a);
/* Library files probed and probes attached so far (detached ones too). */
size_t attach__files(const struct attach *a);
size_t attach__probes(const struct attach *a);
/* Whether a scan found a traced library in a process's memory map (files
 * are probed before any process maps them: attach__files says nothing of
 * that). */
bool attach__seen_mapped(const struct attach *a);

#endif
