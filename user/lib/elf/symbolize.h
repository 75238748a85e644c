/* SPDX-License-Identifier: MIT */
/*
 * User and kernel stacks: unwinding of copied user stacks and symbolization
 * of addresses, on elfutils' libdwfl. One symbolizer serves a whole
 * capture; it keeps a Dwfl per traced process (modules reported from
 * /proc/PID/maps, files opened inside the target's mount namespace through
 * /proc/PID/root or /proc/PID/map_files) and caches symbols per module file
 * (build-id, else device + inode), so a process that exits later, or a file
 * that is replaced or deleted, still symbolizes what was seen before.
 *
 * Strings returned (function, module path, build id) are owned by the
 * symbolizer and live until symbolizer__free().
 */
#ifndef CGBPF_SYMBOLIZE_H
#define CGBPF_SYMBOLIZE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* User registers at the sampled instruction (x86-64 names). */
struct sym_regs {
	uint64_t ip, sp, bp;
};

/* One symbolized frame. */
struct sym_frame {
	uint64_t ip;
	const char *function;	/* demangled; NULL when unknown */
	uint64_t function_off;	/* ip - symbol start */
	const char *module;	/* path of the mapped file as the target sees it; NULL if unmapped */
	uint64_t module_off;	/* relative pc within the module (ip - load bias) */
	uint64_t module_start, module_end;	/* the mapping's address range in the process */
	const char *build_id;	/* lowercase hex, NULL if the file has none */
	bool kernel;
};

struct symbolizer;

struct symbolizer *symbolizer__new(void);
void symbolizer__free(struct symbolizer *s);

/*
 * Unwinds a user stack of thread tid in process pid from a copy: regs at
 * the sampled instruction and len bytes of stack memory copied from regs.sp
 * upward. DWARF CFI (.eh_frame / .debug_frame) first, frame pointers where
 * a module has no CFI for the pc. Writes at most max return addresses
 * (ips[0] = regs.ip, then return addresses: symbolize those with
 * symbolizer__user_ret) and returns how many; *truncated is set when the
 * unwind did not reach the outermost frame: the copy ended, no CFI and no
 * frame pointer for some frame, or max reached. Negative errno when the
 * process is unknown and gone.
 */
int symbolizer__unwind(struct symbolizer *s, pid_t pid, pid_t tid, const struct sym_regs *regs,
		       const void *stack, size_t len, uint64_t *ips, int max, bool *truncated);

/* Symbolizes one user address of pid: an exact instruction address, as
 * ips[0] of a stack (the sampled ip, a uprobe's function entry). 0, or
 * negative errno (frame still filled with what is known: at least ip;
 * module fields too when the address is in a mapped file). */
int symbolizer__user(struct symbolizer *s, pid_t pid, uint64_t ip, struct sym_frame *out);

/* Same for a return address (ips[1..] of a stack, from this unwinder or
 * from frame-pointer stacks captured by BPF): looks up ret - 1, the call
 * instruction, since a call to a noreturn function can end its caller.
 * The frame reports ret as ip and function_off relative to ret. */
int symbolizer__user_ret(struct symbolizer *s, pid_t pid, uint64_t ret, struct sym_frame *out);

/* Reads the kernel's symbols (/proc/kallsyms, ~50 ms of kernel time for
 * 120k lines) on a thread of its own, so that the first kernel frame to
 * symbolize, often a target's first sample, does not stall the caller's
 * thread (cgbpf's consumer: mappings and forks wait behind it). That
 * frame waits for the thread if it is not done. */
void symbolizer__kernel_prefetch(struct symbolizer *s);

/* Symbolizes one kernel address from /proc/kallsyms (root only: addresses
 * read as zero otherwise, and then function stays NULL). */
int symbolizer__kernel(struct symbolizer *s, uint64_t ip, struct sym_frame *out);

/* The process exec'ed or mapped executable code (dlopen): its maps are
 * re-read on next use. Needed for exec (a new image may lie where the old
 * one was); a dlopen is also found without it, on the first miss, within
 * 100 ms. Data mmaps need no call. */
void symbolizer__invalidate(struct symbolizer *s, pid_t pid);
/* The process exited: its Dwfl may go, cached module symbols stay. */
void symbolizer__proc_exit(struct symbolizer *s, pid_t pid);

/* The demangled form (malloc'ed) of a mangled C++ name ("_Z..."); NULL
 * when name is not one, cannot be demangled, or on ENOMEM. */
char *symbolizer__demangle(const char *name);
/* The same, else a copy of name: malloc'ed either way (kernel names
 * CUDA and CUPTI hand over); NULL on ENOMEM. */
char *symbolizer__demangle_dup(const char *name);

#endif
