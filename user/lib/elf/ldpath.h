/* SPDX-License-Identifier: MIT */
/*
 * Where the dynamic loader of a process would find a library, found the
 * way ld.so looks, inside the process's root: the executable's DT_RPATH
 * (when it has no DT_RUNPATH), LD_LIBRARY_PATH from its environment, the
 * executable's DT_RUNPATH, the run paths of the objects it has mapped
 * (for their dlopen calls), its /etc/ld.so.cache and the default
 * directories. cgbpf probes those files before the process maps them and
 * the kernel installs the breakpoints at the mapping: nothing is stopped
 * and no call is missed.
 */
#ifndef CGBPF_LDPATH_H
#define CGBPF_LDPATH_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct ldpath_req {
	/* Whose root (/proc/PID/root) and, unless given below, whose
	 * executable, environment and mappings; 0: cgbpf's own root with no
	 * executable, environment or mappings (the host's defaults). */
	pid_t pid;
	/* The program about to run, as a path in cgbpf's root (record --
	 * CMD before the exec); NULL: /proc/PID/exe. */
	const char *exe;
	/* Its environment ("K=V" strings, NULL-ended); NULL: /proc/PID/environ. */
	char *const *env;
	/* File name prefixes to find ("libcuda.so"), NULL-ended. */
	const char *const *prefixes;
	/* Environment variables naming a library file by path
	 * (NVTX_INJECTION64_PATH), NULL-ended; may be NULL. */
	const char *const *path_vars;
	/* Skip the cache and the default directories (the caller has the
	 * files of this root from them already). */
	bool skip_system;
};

/*
 * Calls cb once per library file name the loader would pick (the first
 * match in search order, as ld.so does for each name), with a read-only
 * descriptor opened inside the process's root (symbolic links cannot
 * leave it) and the path as the process sees it. cb's non-zero return
 * stops the walk and is returned. Returns 0, or -errno when the process's
 * root cannot be opened.
 */
int ldpath__resolve(const struct ldpath_req *q,
		    int (*cb)(int fd, const char *path, void *ctx), void *ctx);

/*
 * Opens path (absolute, as the process sees it) inside the root of pid
 * (0: cgbpf's own root) as ldpath__open_at does; a descriptor or -errno.
 */
int ldpath__open_in_root(pid_t pid, const char *path, int flags);

/*
 * Opens path inside the root directory rootfd (an O_PATH descriptor of
 * "/proc/PID/root" or of any directory standing for a root): absolute
 * links and ".." stay inside it, /proc magic links are refused. Without
 * O_DIRECTORY in flags only a regular file is opened (read-only): -EINVAL
 * for anything else, which is never opened (a FIFO would block, a device
 * open has effects). A descriptor or -errno.
 */
int ldpath__open_at(int rootfd, const char *path, int flags);

/* Opens path, resolved as open() would (magic links included: the
 * /proc/PID/map_files/ entries), read-only if it is a regular file; as
 * ldpath__open_at otherwise. */
int ldpath__open_file(const char *path);

/* The DT_RPATH and DT_RUNPATH strings (malloc'ed, NULL if absent) of the
 * ELF object open at fd. */
void ldpath__run_paths(int fd, char **rpath, char **runpath);

/* Whether a file name is a shared object's: "....so" with any ".N"
 * version suffixes ("libcuda.so.580.65.06"), not a neighbour such as
 * "libcuda.so.d". */
bool ldpath__library_name(const char *name);

/* Library names in an ld.so.cache image (the new "glibc-ld.so.cache1.1"
 * format, alone or after the old one) for this machine's ABI: calls
 * cb(name, path) per entry; -EINVAL when the image is not one. */
int ldpath__parse_cache(const void *data, size_t len,
			int (*cb)(const char *name, const char *path, void *ctx), void *ctx);

#endif
