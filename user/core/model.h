/* SPDX-License-Identifier: MIT */
/*
 * The model: processes, threads and API calls built from validated
 * records. Domain modules (user/sources/cuda/cuda.c) interpret each library's calls;
 * sinks (the Perfetto writer, the summary) see only the model's events,
 * never records or BPF maps.
 */
#ifndef CGBPF_MODEL_H
#define CGBPF_MODEL_H

#include <stdbool.h>
#include <stdint.h>
#include "events.h"
#include "lib/annot.h"
#include "lib/elf/symbolize.h"
#include "lib/hmap.h"

#define CALL_DEPTH 16		/* open calls per thread (runtime -> driver nests) */
#define CALL_ANNOTS 12	/* a grouped ncclReduce: 9, and 3 of Python */

/*
 * A symbolized stack (user/sources/stacks/stacks.c): kernel frames first, then user
 * frames, each group innermost first. Frame strings belong to the
 * symbolizer and outlive the capture's sinks.
 */
struct stack {
	uint64_t ts;
	uint32_t cpu;
	int n, nkernel;
	bool truncated;		/* the unwind stopped before the outermost frame */
	bool kernel_mode;	/* the sample interrupted kernel code */
	uint8_t lib;		/* backtrace: the call it belongs to */
	uint16_t func;
	struct sym_frame *frames;
};

/* A resolved Python frame of a stack, mixed in by
 * user/sources/stacks/stacks.c: "function (file:line)", living as long as
 * the capture; entry: the outermost frame of one run of the eval loop
 * (_PyEval_EvalFrameDefault), where it joins the native stack. */
struct py_stack_frame {
	const char *name;
	bool entry;
};

/* What a CUDA call does to the GPU's queues, set by the library decoders
 * (user/sources/cuda/cuda.c, user/sources/cuda/cudart.c) at its entry:
 * user/sources/gpu/gpu.c links the calls that queue work to the GPU
 * activity they caused, and estimates that activity from them when it is
 * not measured. */
enum gpu_call {
	GC_NONE = 0,
	GC_LAUNCH,		/* a kernel launch on c->stream */
	GC_COPY,		/* a copy (queued on c->stream when gpu_async) */
	GC_MEMSET,		/* a memset (likewise) */
	GC_GRAPH,		/* a graph launch on c->stream */
	GC_SYNC_STREAM,		/* the host waits for c->stream */
	GC_SYNC_DEVICE,		/* the host waits for every stream of the context */
	GC_SYNC_EVENT,		/* the host waits for c->event */
	GC_EVENT_RECORD,	/* c->event recorded on c->stream */
};

/* The stream handle of a call on the per-thread default stream (CUDA's
 * CU_STREAM_PER_THREAD), which a _ptsz / _ptds entry point's NULL means. */
#define GPU_STREAM_PER_THREAD 2

enum copy_dir { DIR_NONE, DIR_HTOD, DIR_DTOH, DIR_DTOD, DIR_ANY, DIR_HTOH, DIR__COUNT };
enum counter_kind { CTR_GPU_MEM, CTR_HOST_PINNED, CTR__COUNT };

struct call {
	uint8_t lib;
	uint16_t func;
	const char *name;	/* "cuLaunchKernel" */
	uint64_t ts, end_ts;
	uint64_t args[CALL_NARGS];
	int64_t ret;
	uint64_t out;
	bool has_out;
	bool ended;		/* its return was seen */
	char *str;		/* copied string argument, or NULL */
	bool begun;		/* call_begin was emitted */
	bool written;		/* call_begin reached the sinks (inside a capture window) */
	bool str_pending;	/* the entry could not read the string: it comes at the return */
	bool str_late;		/* str came after call_begin: the module shows it at call_end */
	uint64_t str_addr;	/* str_pending: where the string is in the process */
	/* Filled by the domain module. */
	bool is_launch;
	const char *kernel;	/* launch: kernel name, NULL if never seen */
	uint64_t handle;	/* launch: function handle */
	uint64_t bytes;		/* copy/set/alloc/free bytes */
	enum copy_dir dir;
	uint8_t gpu;		/* enum gpu_call */
	bool gpu_async;		/* GC_COPY / GC_MEMSET: queued, the call does not wait */
	uint64_t stream;	/* the stream handle it queues on or waits for */
	uint64_t event;		/* GC_SYNC_EVENT / GC_EVENT_RECORD: the event handle */
	uint64_t flow;		/* a flow from this call's slice to the GPU work it queued; 0: none */
	int nbegin, nend;
	struct pf_annot begin[CALL_ANNOTS];
	struct pf_annot end[CALL_ANNOTS];
	/* Python call site (user/sources/python/pysrc.c): "file:line function" of the
	 * innermost frame and of the innermost user frame when it is another;
	 * strings live as long as the capture. NULL: none. */
	const char *py_site, *py_user;
	/* A CK_OUT_ARRAY call's out array (model__out_array), owned: nouts
	 * words of out_len (bpf/events.h), or NULL. */
	uint64_t *outs;
	uint16_t nouts, out_len;
	char scratch[3][160];	/* storage for formatted annotation strings */
	const struct stack *bt;	/* at call_end: backtrace of a slow call, or NULL */
};

struct proc;
struct pfseq;		/* the Perfetto writer's, opaque here */

struct thread {
	uint32_t tid;
	struct proc *proc;
	char name[16];
	bool app_named;		/* named by the application (nvtxNameOsThread) */
	/* Open calls, CALL_DEPTH of them: allocated at the thread's first
	 * call, freed when it exits with none open (threads are kept). */
	struct call *stack;
	int depth;
	struct pfseq *seq;	/* the Perfetto sink's sequence */
	struct stack *bt;	/* backtrace for the call returning next (owned) */
};

struct proc {
	uint32_t pid;
	char comm[16];
	bool comm_guessed;	/* "pid N": /proc could not name it (model__proc_hint may) */
	char *cmdline;
	char container[13];	/* container id (12 hex digits) or "" */
	bool exited;
	struct hmap names;	/* CUfunction / CUkernel -> char * name */
	struct hmap allocs;	/* pointer -> size << 1 | host */
	struct hmap streams;	/* CUstream -> ordinal */
	uint32_t next_stream;
	int64_t mem[CTR__COUNT];
	int64_t mem_peak[CTR__COUNT];
	/* user/sources/cuda/cuda.c's cache of formatted launch configs (one block) */
	void *launch_fmt;
	bool counter_described[CTR__COUNT];
	void *lib_state[LIB__COUNT];	/* a library decoder's own (lib_ops.proc_free frees it) */
	/* host stub address -> char * kernel name ("" = none;
	 * user/sources/cuda/cudart.c) */
	struct hmap stubs;
	/* Capture windows per process (model.proc_mute): its own. */
	bool muted;
	uint32_t window;
	/* record --inject loaded cgbpf's injection library into it at this
	 * time (session clock); 0: it was not injected by this capture. */
	uint64_t injected_ns;
};

struct model;

#define SYS_ANNOTS 6

/* One recorded syscall as sinks see it (decoded by
 * user/sources/syscalls/syscalls.c). */
struct syscall_ev {
	uint32_t nr;
	const char *name;	/* "ioctl"; "syscall_NNN" when unknown */
	uint64_t ts, end_ts;	/* entry, exit (BOOTTIME ns) */
	int64_t ret;
	uint64_t args[3];
	const char *target;	/* ioctl: the fd's file ("/dev/nvidiactl"), else NULL */
	const char *op;		/* futex: "FUTEX_WAIT_PRIVATE", else NULL */
	/* Annotations for trace writers: arguments at the begin, results at the end. */
	int nbegin, nend;
	struct pf_annot begin[SYS_ANNOTS];
	struct pf_annot end[SYS_ANNOTS];
	char namebuf[24], targetbuf[96], opbuf[64];
};

/* Model events; each sink implements what it needs (NULL = ignore). */
struct sink {
	void *ctx;
	void (*process)(void *ctx, struct proc *p);
	void (*thread)(void *ctx, struct thread *t);
	void (*call_begin)(void *ctx, struct thread *t, struct call *c);
	void (*call_end)(void *ctx, struct thread *t, struct call *c);
	void (*counter)(void *ctx, struct thread *t, enum counter_kind k, uint64_t ts,
			int64_t value);
	void (*sample)(void *ctx, struct thread *t, const struct stack *st);
	/* A syscall of t that lasted at least the threshold
	 * (user/sources/syscalls/syscalls.c). */
	void (*syscall)(void *ctx, struct thread *t, const struct syscall_ev *e);
};

/* Per-library decoding (user/sources/cuda/cuda.c for LIB_CUDA). */
struct lib_ops {
	const char *name;
	const char *(*func_name)(uint16_t func);
	bool (*has_string)(uint16_t func);	/* a string record follows the entry */
	void (*enter)(struct model *m, struct thread *t, struct call *c);
	void (*exit)(struct model *m, struct thread *t, struct call *c);
	void (*proc_free)(struct proc *p);	/* frees p->lib_state[lib]; may be NULL */
};

#define MAX_SINKS 12

struct model {
	struct hmap procs;	/* pid -> struct proc * */
	struct hmap threads;	/* tid -> struct thread * */
	/* pid -> char * (malloc'ed): a followed child's name from its fork
	 * record, for a child gone before /proc could name it */
	struct hmap name_hints;
	struct sink sinks[MAX_SINKS];
	int nsinks;
	const struct lib_ops *libs[LIB__COUNT];
	/* What could not be matched, reported in the summary. */
	uint64_t unmatched_exits;
	uint64_t lost_exits;	/* calls closed because a caller returned first */
	uint64_t strings_orphaned;
	uint64_t strings_unreadable;	/* string arguments neither BPF nor process_vm_readv could read */
	uint64_t strings_late;		/* read at the return probe or from user space */
	/* for host stub names (user/sources/cuda/cudart.c); NULL = none */
	struct symbolizer *sym;
	/* The flow id of a call, asked at its begin (user/sources/gpu/gpu.c: the calls
	 * that queue GPU work in a process whose GPU activity is measured);
	 * NULL: no flows. */
	uint64_t (*call_flow)(void *ctx, const struct thread *t, const struct call *c);
	void *call_flow_ctx;
	/* Capture windows (user/out/capwin.c): outside one the model keeps its
	 * state but calls, counters, samples and syscalls reach no sink;
	 * window counts the windows opened. The range hook hears of NVTX
	 * ranges (user/sources/nvtx/nvtx.c): begin before the range is written, end
	 * after; NULL: none. */
	bool muted;
	uint32_t window;
	/* --split-per-process: each process has its own windows (proc.muted,
	 * proc.window; model__mute_pid); processes start muted. */
	bool proc_mute;
	void (*range)(void *ctx, bool begin, uint32_t pid, uint32_t tid, uint64_t ts,
		      const char *domain, const char *name);
	void *range_ctx;
	/* Capture windows: whether a CPU sample of pid taken at ts is written
	 * (by its time, not by when it is read: the samples' ring is read
	 * after the records that open and close windows); NULL: unless muted. */
	bool (*sample_at)(void *ctx, uint32_t pid, uint64_t ts);
	void *sample_at_ctx;
	/* Sets a call's Python call site (c->py_site, its annotations) at its
	 * begin (user/sources/python/pysrc.c); NULL: none. */
	void (*call_py)(void *ctx, const struct thread *t, struct call *c);
	void *call_py_ctx;
	/* The Python frames of tid's stack record being decoded now
	 * (user/sources/stacks/stacks.c: a sample, or the backtrace of call
	 * lib/func), innermost first, taken once: their count (0: none) and
	 * *frames (user/sources/python/pysrc.c); NULL: none. */
	int (*stack_py)(void *ctx, uint32_t tid, bool sample, uint8_t lib, uint16_t func,
			const struct py_stack_frame **frames);
	void *stack_py_ctx;
	/* nccl_sum's GPU-side times (user/lib/ncclbw.h): the channel 0 span
	 * of each operation NCCL's profiler plugin reported, added by the GPU
	 * source (user/sources/gpu/gpunccl.c) as it draws it, read by the
	 * NCCL summary; NULL until the first. */
	struct ncclbw_gpu *nccl_gpu;
};

/* Initializes an empty model with the built-in library decoders. */
void model__init(struct model *m);
/* Frees every process and thread. */
void model__free(struct model *m);
/* Adds a sink; events are delivered in the order sinks were added. */
int model__add_sink(struct model *m, const struct sink *s);
/* Adds a sink ahead of those added so far: for a trace writer whose
 * slices must enclose the ones the sinks after it write
 * (user/sources/nccl/ncclpf.c's group slice around the thread's). */
int model__add_sink_first(struct model *m, const struct sink *s);

/* The process / thread for a pid / tid, created (and announced to sinks)
 * on first use from /proc. NULL only on ENOMEM. */
struct proc *model__proc(struct model *m, uint32_t pid);
/* The same; a process created now that /proc cannot name any more (it
 * exited) takes comm (a record's) instead of "pid N"; so does a known
 * one that was named so. */
struct proc *model__proc_as(struct model *m, uint32_t pid, const char *comm);
/* A followed child's name from its fork record: names it now if it is
 * known as "pid N", or when it is first seen if /proc cannot by then
 * (kept until its exit). */
void model__proc_hint(struct model *m, uint32_t pid, const char *comm);
struct thread *model__thread(struct model *m, uint32_t pid, uint32_t tid);
/* Names a process known from elsewhere (an exit record) when /proc can
 * no longer say. */
void model__proc_name(struct model *m, uint32_t pid, const char *comm);
/* Renames a thread (nvtxNameOsThread); its track follows. */
void model__thread_name(struct model *m, uint32_t pid, uint32_t tid, const char *name);
/* Frees a process and its threads (a monitor running for days forgets
 * the processes that exited). */
void model__forget(struct model *m, uint32_t pid);
/* Re-reads a process's name and command line from /proc (after exec, or
 * while it is known alive: a zombie has no command line left). */
void model__proc_refresh(struct model *m, uint32_t pid);
/* A known process ran exec: it takes the record's comm (the new program's,
 * right whatever /proc says by now) for itself and its main thread, and
 * the command line /proc has, else none (not the old program's). */
void model__proc_exec(struct model *m, const struct rec_proc *r);

/* Record handlers; records are already validated. */
void model__call_enter(struct model *m, const struct rec_call_enter *r);
void model__call_exit(struct model *m, const struct rec_call_exit *r);
/* r is as ustr__resolve() returns it: a string BPF could not read is read
 * from the process or named "(unreadable at 0x...)" already. */
void model__string(struct model *m, const struct rec_string *r);
void model__out_array(struct model *m, const struct rec_out_array *r);
void model__proc_exit(struct model *m, const struct rec_proc *r);
void model__thread_exit(struct model *m, const struct rec_proc *r);
/* A CPU sample of thread tid (user/sources/stacks/stacks.c). */
void model__sample(struct model *m, uint32_t pid, uint32_t tid, const struct stack *st);
/* The backtrace of the call of tid returning next; takes ownership of st
 * (malloc'ed together with its frames). */
void model__backtrace(struct model *m, uint32_t pid, uint32_t tid, struct stack *st);

/* Changes a process's counter by delta at ts on behalf of thread t. */
void model__mem(struct model *m, struct thread *t, enum counter_kind k, uint64_t ts,
		int64_t delta);

/* True when c (a call of t, at call_begin or call_end) was made inside an
 * open CUDA runtime or driver API call of the same thread: a driver call
 * the runtime made, or cudaLaunchKernel reached from __cudaLaunchKernel. */
bool model__inside_cuda_api(const struct thread *t, const struct call *c);

/* Opens (muted false) or closes a capture window at ts. Closing ends the
 * calls written and still open at ts, and forgets those keep() says will
 * not return to the model (the gate drops their returns); opening
 * restates the memory counters. */
void model__mute(struct model *m, bool muted, uint64_t ts,
		 bool (*keep)(uint8_t lib, uint16_t func));

/* model__mute for one process's window (model.proc_mute): its calls,
 * counters, samples, syscalls and NVTX ranges only. */
void model__mute_pid(struct model *m, uint32_t pid, bool muted, uint64_t ts,
		     bool (*keep)(uint8_t lib, uint16_t func));
/* Whether what pid does reaches no sink now (outside its window). */
bool model__muted_pid(const struct model *m, uint32_t pid);
/* Changes whenever a window opens for pid (NVTX: begun in this window). */
uint32_t model__window_pid(const struct model *m, uint32_t pid);
/* Whether what thread t does reaches no sink now. */
static inline bool model__muted(const struct model *m, const struct thread *t)
{
	return m->muted || (m->proc_mute && t->proc->muted);
}

/* "stream N" (per-process ordinal of stream handle h), "default", ...;
 * may format into buf. ptsz: a per-thread-default-stream entry point.
 * The API slices' arguments and the estimated GPU tracks name streams
 * alike. */
const char *model__stream_name(struct proc *p, uint64_t h, bool ptsz, char *buf, size_t len);
/* Name of a function of a library ("cuLaunchKernel"). */
const char *model__func_name(const struct model *m, uint8_t lib, uint16_t func);

#endif
