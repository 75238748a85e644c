/* SPDX-License-Identifier: MIT */
/*
 * Binary records written by the BPF programs into the ring buffer and read
 * by user/core/ingest.c. Fixed-width types, explicit padding, no pointers: the
 * layout is the same for the BPF target and x86_64 user space.
 */
#ifndef CGBPF_EVENTS_H
#define CGBPF_EVENTS_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

enum rec_type {
	REC_CALL_ENTER = 1,	/* struct rec_call_enter */
	REC_CALL_EXIT,		/* struct rec_call_exit */
	REC_STRING,		/* struct rec_string: string argument of the call just entered */
	REC_PROC_FORK,		/* struct rec_proc */
	REC_PROC_EXEC,		/* struct rec_exec (a rec_proc first) */
	REC_PROC_EXIT,		/* struct rec_proc */
	REC_THREAD_EXIT,	/* struct rec_proc */
	REC_MMAP,		/* struct rec_mmap */
	REC_STACK_SAMPLE,	/* struct rec_stack (bpf/stack_rec.h): a CPU sample */
	REC_STACK_BT,		/* struct rec_stack: backtrace of a slow call, before its exit */
	REC_SYSCALL,		/* struct rec_syscall (bpf/syscalls.h) */
	/* Scheduler records (bpf/sched_rec.h), in their own ring buffer. */
	REC_SCHED_SWITCH,	/* struct rec_switch */
	REC_SCHED_WAKING,	/* struct rec_waking (sched_waking, sched_wakeup_new) */
	REC_SCHED_NEWTASK,	/* struct rec_task (task_newtask: fork or new thread) */
	REC_SCHED_RENAME,	/* struct rec_task (task_rename, exec included) */
	REC_SCHED_EXIT,		/* struct rec_task (sched_process_exit of a thread) */
	REC_TRIGGER,		/* struct rec_trigger (bpf/agg.h): monitor dump trigger */
	REC_NVTX,		/* struct rec_nvtx (bpf/nvtx_rec.h): an NVTX probe fired */
	REC_GPU_BATCH,		/* struct rec_gpu_batch: GPU activity (bpf/gpu_rec.h) */
	REC_PY_FRAMES,		/* struct rec_py_frames (bpf/pyframes_rec.h): Python frames */
	REC_PY_CODE,		/* struct rec_py_code (bpf/pycode_rec.h): a code object described */
	REC_PY_SITE,		/* struct rec_py_site (bpf/pysites_rec.h): monitor call-site sample */
	REC_OUT_ARRAY,		/* struct rec_out_array: an out array, before its call's exit */
	REC__COUNT,
};

/* Libraries whose API calls are probed; a call is (lib, func). */
enum rec_lib {
	LIB_CUDA = 0,		/* libcuda.so.1, the driver API */
	LIB_CUDART,		/* libcudart.so.*, the runtime API (or a static copy) */
	LIB_NCCL,		/* libnccl.so.2 */
	LIB_NVTX,		/* NVTX: libnvToolsExt (v2) and cgbpf's injection library */
	LIB__COUNT,
};

/* Common header of every record. ts is CLOCK_BOOTTIME in ns. */
struct rec_hdr {
	__u16 type;
	__u16 size;		/* whole record, header included */
	__u32 cpu;
	__u32 pid;		/* tgid */
	__u32 tid;
	__u64 ts;
};

/*
 * Attach cookie of a call probe, set by user/core/attach.c:
 *   bits  0..15 function id within its library
 *   bits 16..19 library (enum rec_lib)
 *   bits 20..23 how the entry probe reads arguments (enum probe_kind)
 *   bit  24     stash argument 0 (an out pointer) for the return probe
 *   bits 25..27 index + 1 of a C-string argument to copy (0 = none)
 *   bits 28..29 with bit 24: index of the stashed out-pointer argument
 *               (0 = a0; ncclCommSplit's newcomm is a3)
 *   bit  30     with bit 24: the out value is 32 bits wide (an int *)
 *   bit  35     with bit 24: the out pointer is an array of a1 words
 *               (ncclCommInitAll's comms): the return sends them all
 *               (CK_OUT_ARRAY, struct rec_out_array)
 */
enum probe_kind {
	PK_REGS = 0,		/* the six register arguments */
	PK_STACK3,		/* plus three 8-byte stack arguments (x86-64 args 7..9) */
	PK_DEREF_A0,		/* plus 40 bytes read from the pointer in argument 0 */
	PK_NCCL_UID,		/* a 128-byte ncclUniqueId by value at sp + 8: its NCCL
				 * commHash in args[6] (0: unreadable), its first two
				 * words in args[7..8] (bpf/nccl_hash.h) */
};

#define CK_FUNC(c)	((__u32)(c) & 0xffff)
#define CK_LIB(c)	(((__u32)(c) >> 16) & 0xf)
#define CK_KIND(c)	(((__u32)(c) >> 20) & 0xf)
#define CK_STASH	(1u << 24)
#define CK_STR(c)	(((__u32)(c) >> 25) & 0x7)
#define CK_MAKE(lib, func, kind, stash, str) \
	((__u64)(func) | ((__u64)(lib) << 16) | ((__u64)(kind) << 20) | \
	 ((stash) ? (__u64)CK_STASH : 0) | ((__u64)(str) << 25))
#define CK_OUT_ARG(c)	(((__u32)(c) >> 28) & 0x3)
#define CK_OUT32	(1u << 30)
/* A stash of the out pointer in argument arg (0..3), 32 bits wide if is32. */
#define CK_MAKE_OUT(lib, func, kind, arg, is32) \
	(CK_MAKE(lib, func, kind, 1, 0) | ((__u64)(arg) << 28) | ((is32) ? (__u64)CK_OUT32 : 0))

/* Capture windows (bpf/capture.bpf.h), bits 32..34: recorded outside a
 * window too (state: allocations, names, streams, communicators); opens
 * the gate at its entry; closes it at its return. */
#define CK_PASS		(1ull << 32)
#define CK_TRIG_ON	(1ull << 33)
#define CK_TRIG_OFF	(1ull << 34)
#define CK_OUT_ARRAY	(1ull << 35)
/* The stash of a CK_OUT_ARRAY call: the pointer in the low 48 bits (an
 * x86-64 user address), the length (a1, clamped) above. */
#define OUT_ARRAY_PTR(v)	((v) & 0xffffffffffffull)
#define OUT_ARRAY_LEN(v)	((__u32)((v) >> 48))
#define OUT_ARRAY_MAX	64

#define CALL_NARGS 11

/*
 * The words of a CK_OUT_ARRAY call's out array, read at its return and
 * sent right before its exit record: v[0 .. n - 1] of len (the call's
 * length argument; n < len: the array was longer than OUT_ARRAY_MAX, or
 * unreadable past n). Once per call of a rare function: fixed size.
 */
struct rec_out_array {
	struct rec_hdr hdr;
	__u16 func;
	__u8 lib;
	__u8 pad;
	__u16 n;
	__u16 len;
	__u64 v[OUT_ARRAY_MAX];
};

/* Entry of a probed function: a0..a5 registers, a6..a10 per probe_kind. */
struct rec_call_enter {
	struct rec_hdr hdr;
	__u16 func;
	__u8 lib;
	__u8 kind;
	__u32 pad;
	__u64 args[CALL_NARGS];
};

/* Return of a probed function. out is the stashed out pointer's target
 * (*a0 unless the cookie names another argument) read at return. */
struct rec_call_exit {
	struct rec_hdr hdr;
	__u16 func;
	__u8 lib;
	__u8 has_out;
	__u32 pad;
	__s64 ret;
	__u64 out;
};

#define REC_STRING_MAX 1024

/*
 * rec_string.flags. A probe cannot fault a page in: a string whose page the
 * process has not touched yet (a literal in .rodata, a fresh file mapping)
 * cannot be read at the call's entry. The entry then sends STR_PENDING and
 * the return probe, after the library has read the string, sends it again
 * (STR_LATE); if even that fails, STR_UNREAD with its address, and user
 * space reads it from the process (user/core/ustr.c). STR_UNREADABLE is set by
 * user space only, never by BPF: str is then "(unreadable at 0x...)".
 */
#define STR_PENDING	0x01	/* entry: not read yet, the return probe sends it (str empty) */
#define STR_LATE	0x02	/* sent by the return probe */
#define STR_UNREAD	0x04	/* BPF could not read it: addr says where it is (str empty) */
#define STR_UNREADABLE	0x08	/* user space could not read it either */

/* A C-string argument of the call entered just before on this thread
 * (STR_LATE: of the call returning next). */
struct rec_string {
	struct rec_hdr hdr;
	__u16 func;
	__u8 lib;
	__u8 arg;		/* argument index */
	__u16 len;		/* bytes in str, without the NUL */
	__u8 truncated;
	__u8 flags;		/* STR_* */
	__u64 addr;		/* the string's address in the process */
	char str[REC_STRING_MAX];	/* only hdr.size - offsetof(str) bytes are sent */
};

/* Process and thread life. */
struct rec_proc {
	struct rec_hdr hdr;
	__u32 other;		/* FORK: child tgid; EXIT: exit code */
	__u32 flags;		/* EXIT: REC_EXIT_*; else 0 */
	char comm[16];
};

/* rec_proc.flags of a process's exit, read from its mm at the exit
 * tracepoint (which runs before exit_mm since 6.x; older kernels give
 * neither bit). A process's uprobe XOL area is made the first time one of
 * its threads hits a uprobe that needs it: every return probe does (the
 * return trampoline lives there), and a forked child starts without one
 * (the mapping is VM_DONTCOPY). So a forked child that exits with one
 * entered a probed function at some point, probes of its own or not. */
#define REC_EXIT_MM_READ 1	/* its mm was there to read */
#define REC_EXIT_UPROBE_HIT 2	/* it has an XOL area: it hit a uprobe */

/* A batch of GPU activity entries (bpf/gpu_rec.h) the injection library
 * passed to its probe site, copied as it was. */
struct rec_gpu_batch {
	struct rec_hdr hdr;
	__u8 data[];		/* hdr.size - sizeof(hdr) bytes of entries */
};

#define REC_EXEC_ARGS 512

/* An exec, with the new program's arguments read in the exec itself (the
 * kernel has just written them: resident). /proc/PID/cmdline is gone once
 * the process exits, often before user space reads the record. */
struct rec_exec {
	struct rec_proc p;
	__u32 args_len;		/* bytes of args used, NUL separated; 0: unread */
	__u32 args_cut;		/* 1: the arguments were longer */
	char args[REC_EXEC_ARGS];
};

#define REC_MMAP_NAME 64

/* An executable file mapping made by a target (mmap with PROT_EXEC). */
struct rec_mmap {
	struct rec_hdr hdr;
	__u64 addr;
	__u64 ino;
	__u32 dev;		/* kernel encoding: major << 20 | minor */
	__u8 watched;		/* the name matched a library cgbpf probes */
	__u8 pad2;
	__u8 new_target;	/* record -a: this mapping made the process a target */
	__u8 pad;
	char name[REC_MMAP_NAME];
};

#endif
