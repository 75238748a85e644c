/* SPDX-License-Identifier: MIT */
/*
 * The Python maps that both BPF Python files use: the frame reader
 * (bpf/python.bpf.c, bpf/python.bpf.h) and the code describer
 * (bpf/pycode.bpf.c) each include this header, not each other's. The
 * maps are __weak, as in bpf/common.bpf.h: `bpftool gen object` links
 * them into one object with one copy of each.
 */
#ifndef CGBPF_PYMAPS_BPF_H
#define CGBPF_PYMAPS_BPF_H

#include "common.bpf.h"
#include "py_rec.h"
#include "pyframes_rec.h"

/* tgid -> its interpreter, filled by user space (user/sources/python/pysrc.c). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, struct py_proc);
} py_procs SEC(".maps") __weak;

/*
 * Code objects user space has resolved, per process: PY_CODE_USER for the
 * user's own code (user/sources/python/pycode.c's rule), PY_CODE_OTHER for the rest
 * (PY_CODE_SENT: described, not classified yet). The
 * leaf walk stops at the first PY_CODE_USER frame; until user space has
 * seen a code object, walks go up to PY_LEAF_MAX frames and user space
 * picks the user frame itself. A record with a code object user space has
 * not seen wakes it up at once, so that it reads the object while the
 * process still lives (a program that exits within the consumer's 50 ms
 * poll would otherwise take its code objects with it). A code object the
 * process frees loses its entry (py_code_free, on the interpreter's
 * code_dealloc), so a code object that takes the address later is
 * described again, never named after the one before. User space only
 * updates entries that exist (BPF_EXIST): a class it learned from a record
 * made before the free cannot come back after it.
 */
struct py_code_key {
	__u32 tgid;
	__u32 pad;
	__u64 code;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, struct py_code_key);
	__type(value, __u8);
} py_codes SEC(".maps") __weak;

/* Counts per enum py_stat, per CPU. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, PYS__COUNT);
	__type(key, __u32);
	__type(value, __u64);
} py_stat SEC(".maps") __weak;

/* Counts one event of enum py_stat on this CPU. */
static __always_inline void py_count(__u32 what)
{
	__u64 *n = bpf_map_lookup_elem(&py_stat, &what);

	if (n)
		__sync_fetch_and_add(n, 1);
}

/*
 * Counts one frame reader about to read user memory (PYS_READERS): on
 * every call of a Python process, so a plain increment, not an atomic
 * one; a preempted program may lose one, which the count's one use (is it
 * 0 in a process without an interpreter?) does not mind.
 */
static __always_inline void py_count_read(void)
{
	__u32 what = PYS_READERS;
	__u64 *n = bpf_map_lookup_elem(&py_stat, &what);

	if (n)
		*n += 1;
}

#endif
