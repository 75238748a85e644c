/* SPDX-License-Identifier: MIT */
/*
 * CPython code objects of a traced process, symbolized from user space
 * (issue 12): a code object's address and a frame's position in it
 * (struct py_offsets' lasti, see bpf/py_rec.h) -> file, function (the
 * qualified name where the version has one, 3.11+) and line. Everything is
 * read with process_vm_readv and validated (the object's type, each
 * string's and bytes' type, bounded lengths): a failed check is an error,
 * never a wrong name. Decoded code objects are cached per (pid, address),
 * so a record costs a lookup.
 */
#ifndef CGBPF_PYCODE_H
#define CGBPF_PYCODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "py_rec.h"

/* Longest file or function name read, in characters. */
#define PYCODE_MAX_STR 4096
/* Largest line table read, in bytes. */
#define PYCODE_MAX_TABLE (1u << 20)

struct pycode;

/* A resolved frame. The strings belong to the cache: valid until
 * pycode__forget() of that pid or pycode__free(). */
struct py_sym {
	const char *file;	/* co_filename */
	const char *func;	/* co_qualname (3.11+), else co_name */
	int line;		/* 0 when the position has no line */
	bool user;		/* pycode__is_user(file) */
};

/* A new, empty cache; NULL with errno set. */
struct pycode *pycode__new(void);
/* Frees the cache and every string it handed out; accepts NULL. */
void pycode__free(struct pycode *pc);

/*
 * Resolves the code object at address code of process pid, whose
 * interpreter pp describes (pyfind__probe), at position lasti (the raw
 * value of the frame's lasti field, per pp->off.lasti_kind: an int for
 * 3.8-3.10, a pointer into co_code_adaptive for 3.11+). 0 and *out, or
 * -errno: -EINVAL the object is not a code object or fails a check,
 * -EFAULT unreadable memory, -ESRCH the process is gone and the code
 * object was not cached, -ERANGE lasti is outside the code object.
 */
int pycode__resolve(struct pycode *pc, int pid, const struct py_proc *pp, uint64_t code,
		    uint64_t lasti, struct py_sym *out);
/*
 * As pycode__resolve, for a frame read at time ts (a record's): of the code
 * objects seeded for that address (pycode__seed keeps each with its
 * record's time), the one there at ts: the newest seeded at or before ts,
 * else the oldest. pycode__resolve takes the newest.
 */
int pycode__resolve_at(struct pycode *pc, int pid, const struct py_proc *pp, uint64_t code,
		       uint64_t lasti, uint64_t ts, struct py_sym *out);

/*
 * As pycode__resolve, for a caller that also read the code object's co_name
 * pointer (at pp->off.code_name) when it read the frame: a cached entry
 * whose co_name pointer differs belongs to a code object that was freed
 * and its address reused, and is read again (an error if the process is
 * gone: never the old name); -ESTALE when what is read now has another
 * co_name pointer still.
 */
int pycode__resolve_checked(struct pycode *pc, int pid, const struct py_proc *pp, uint64_t code,
			    uint64_t name_ptr, uint64_t lasti, struct py_sym *out);

struct rec_py_code;

/*
 * Caches the code object BPF described in r (a REC_PY_CODE record of
 * size bytes that passed ingest__check, bpf/pycode_rec.h) for pid, whose
 * interpreter pp describes, so that pycode__resolve() names its frames
 * without reading the process. Everything is checked as when read from
 * the process (its type, the str and bytes types, string kinds and
 * lengths, the table's format for the version). A string or table BPF
 * cut at its bound is completed from the process while it lives; else a
 * cut string ends in "..." and positions past a cut table have no line.
 * 0: cached, or the same object was cached for that time already; 1:
 * cached beside another object cached at that address (freed, its address
 * reused: the caller's own caches of the address are stale), each for its
 * own time (r's hdr.ts; pycode__resolve_at); -errno (-EINVAL a failed
 * check, -ENOMEM).
 */
int pycode__seed(struct pycode *pc, int pid, const struct py_proc *pp,
		 const struct rec_py_code *r, size_t size);

/* Drops what is cached for pid (it exited or exec'ed). */
void pycode__forget(struct pycode *pc, int pid);

/*
 * The user-code rule (docs/python.md): file is user code unless it starts
 * with '<' ("<frozen importlib._bootstrap>", "<string>"), has a path
 * component "site-packages" or "dist-packages", or lies under a
 * "lib/pythonX.Y" or "lib64/pythonX.Y" directory of the interpreter's own
 * version 3.minor (its standard library, in any prefix or venv).
 */
bool pycode__is_user(const char *file, int minor);

/* A decoded line table: sorted [start, end) byte ranges of the bytecode. */
struct py_range {
	uint32_t start, end;
	int32_t line;		/* -1: no line */
};

struct py_lines {
	struct py_range *v;
	size_t n;
	int firstlineno;
};

/*
 * Decodes a line table of version hexversion (co_lnotab for 3.8 and 3.9,
 * co_linetable for 3.10 and the location table of 3.11+), whose code
 * object starts at firstlineno. 0, or -EINVAL for a malformed table,
 * -ENOTSUP for a version it does not know, -ENOMEM.
 */
int pycode__decode_lines(uint32_t hexversion, const uint8_t *table, size_t len,
			 int firstlineno, struct py_lines *out);
/* The line of the instruction at byte offset off (< 0: the first line,
 * as CPython has it); -1 when it has none. */
int pycode__addr2line(const struct py_lines *l, int64_t off);
/* Frees the ranges; accepts a zeroed struct. */
void pycode__lines_free(struct py_lines *l);

#endif
