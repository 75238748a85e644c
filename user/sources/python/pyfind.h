/* SPDX-License-Identifier: MIT */
/*
 * Finding the CPython interpreter in a process (issue 12): which file holds
 * it (a mapped libpython3.X.so, or an executable that exports _PyRuntime),
 * its version and build, where _PyRuntime and PyCode_Type are, and the row
 * of user/sources/python/pyoffsets.h that describes its memory layout -- or why there is
 * none. Fails closed: a version, build or layout cgbpf cannot vouch for
 * gets no struct py_proc, only a reason. See docs/python.md.
 */
#ifndef CGBPF_PYFIND_H
#define CGBPF_PYFIND_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "py_rec.h"

/* What pyfind__probe learnt about the interpreter, found or refused. */
struct py_info {
	char version[32];	/* "3.11.7"; "" when not even the version is known */
	uint32_t hexversion;	/* PY_VERSION_HEX (0x030b07f0); the release level of a
				 * version read from a string is taken as final */
	bool patch_known;	/* the patch level was found (always 3.11+) */
	bool shared;		/* a libpython3.X.so; false: an executable */
	bool free_threaded;	/* a 3.13t build (soname 't' or the debug offsets) */
	bool initialized;	/* _PyRuntime has an interpreter already */
	bool debug_offsets;	/* 3.13+: checked against _Py_DebugOffsets */
	char path[PATH_MAX];	/* the file as the process's maps name it */
	uint64_t bias;		/* load bias of that file in the process */
	uint64_t runtime;	/* address of _PyRuntime, 0 when not found */
	uint64_t code_type;	/* address of PyCode_Type, 0 when not found */
};

/*
 * Looks for a CPython interpreter in process pid (its files read through
 * /proc/PID/root, its memory with process_vm_readv). Returns 0 when the
 * interpreter is supported: *out is ready for the BPF map. Otherwise no
 * *out, and why says in one line what was found and why no frames will be
 * read ("Python 3.14.0: no offsets for this version; no Python frames"):
 * -ENOENT when the process has no Python, -ENOTSUP for a Python cgbpf does
 * not support or whose layout does not match its row, other -errno when
 * the process could not be read (-ESRCH gone, -EPERM). info (optional) is
 * filled as far as discovery got, in every case. why may be NULL.
 */
int pyfind__probe(int pid, struct py_proc *out, struct py_info *info, char *why, size_t whylen);

/* The offsets row for minor version 3.minor, or NULL when there is none. */
const struct py_offsets *pyfind__row(int minor);

/* Reads len bytes at addr of process pid; 0, or -errno (-EFAULT: not all
 * of it is readable, -ESRCH: the process is gone). */
int pyfind__read(int pid, uint64_t addr, void *buf, size_t len);

/*
 * Counts the interpreters on pp's runtime list now (the main one and its
 * subinterpreters; 0 before initialization), at most max (a list that
 * goes on gives max): 0 and *n, or -errno.
 */
int pyfind__interpreters(int pid, const struct py_proc *pp, unsigned max, unsigned *n);

/* What the BPF frame readers (bpf/python.bpf.c) do in a process with
 * subinterpreters, as the summary and `check --python` say it. */
#define PYFIND_SUBINTERP_NOTE \
	"frames are read from the thread state found first for each thread (newest " \
	"interpreter first, at most 4 interpreters) and kept for the thread: its calls " \
	"made while it runs in another interpreter carry that thread state's frames (the " \
	"line that entered the subinterpreter) or none"

/* One frame as read from the process (struct py_offsets' fields). */
struct py_frame {
	uint64_t code;		/* f_code / f_executable: a code object unless skip */
	uint64_t lasti;		/* the raw lasti field, per lasti_kind (ints zero-extended) */
	uint64_t back;		/* the next outer frame, 0 at the bottom */
	bool skip;		/* 3.12+: owned by the C stack (an entry shim), not Python */
};

/* The innermost frame of thread state ts (0 when it runs no Python);
 * 0 or -errno. */
int pyfind__first_frame(int pid, const struct py_offsets *o, uint64_t ts, uint64_t *frame);

/* Reads the frame at address frame; 0 or -errno. */
int pyfind__frame(int pid, const struct py_offsets *o, uint64_t frame, struct py_frame *out);

/*
 * Where glibc keeps a thread's kernel tid in its struct pthread (whose
 * address is pthread_self(), what PyThreadState.thread_id holds), from the
 * _thread_db_pthread_tid descriptor of the libc the process maps: 0 and
 * *off, or -ENOENT (no glibc, or one without the descriptor).
 */
int pyfind__pthread_tid_offset(int pid, uint32_t *off);

#endif
