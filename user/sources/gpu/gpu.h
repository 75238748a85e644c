/* SPDX-License-Identifier: MIT */
/*
 * GPU activity of the traced processes: the batches their injection
 * library hands cgbpf (bpf/gpu_rec.h, one REC_GPU_BATCH record each)
 * become devices, streams, kernels, copies, memsets and synchronizations
 * per process; each is linked to the API call that queued it by a flow;
 * the trace gets a track group per GPU with a track per stream, and the
 * summary nsys's cuda_gpu_kern_sum / cuda_gpu_mem_time_sum /
 * cuda_gpu_mem_size_sum tables, a utilization line per device and HTA's
 * analyses (idle time, launch delay, short kernels, communication
 * overlap, launch-bound stretches). Processes whose activity is not
 * measured get an estimate from their API calls on tracks of their own.
 * docs/gpu-activity.md ("Trace and summary") says how.
 *
 * Calls, in capture order:
 *   gpu__new            after the model and the trace writer exist; it
 *                       installs the model's call_flow hook;
 *   model__add_sink     with gpu__sink() (any position among the sinks);
 *   gpu__record         every REC_GPU_BATCH record;
 *   gpu__tick           after each drain of the rings (writes what is
 *                       older than the reorder window);
 *   gpu__proc_exit      a target exited;
 *   gpu__flush_asked    when cgbpf probes the flush site, then
 *   gpu__settled        while draining: every collecting process answered;
 *   gpu__finish         at the end, before the trace is closed;
 *   gpu__print          the summary section;
 *   gpu__free.
 */
#ifndef CGBPF_GPU_H
#define CGBPF_GPU_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "events.h"
#include "core/model.h"
#include "out/perfetto.h"

struct gpu;
struct straggle_row;

/* The GPU state of a capture over model m, writing into pt (NULL:
 * --summary-only); sets m->call_flow. NULL on ENOMEM. */
struct gpu *gpu__new(struct model *m, struct pftrace *pt);
/* Frees; accepts NULL. Clears m->call_flow. */
void gpu__free(struct gpu *g);
/* The sink that watches API calls: what they queued (the flows' other
 * end, the launch delays) and, where nothing is measured, the estimate. */
struct sink gpu__sink(struct gpu *g);
/* One REC_GPU_BATCH record, size bytes as the ring gave it: a rec_hdr
 * (the library's call: pid, tid, ts) and the batch. 0, or -EINVAL for a
 * record unusable as a whole (count it malformed); bad entries inside are
 * counted and skipped. */
int gpu__record(struct gpu *g, const void *data, size_t size);
/* Writes the GPU work older than now minus the reorder window (2 s). */
void gpu__tick(struct gpu *g, uint64_t now);
/* A target exited at ts: its pending GPU work is written, its estimate
 * closed, its bulky state freed (what the summary needs stays). */
void gpu__proc_exit(struct gpu *g, uint32_t pid, uint64_t ts);
/* cgbpf probed pid's injection library: if it never reports, the summary
 * says it was loaded but silent, not that there was none. */
void gpu__lib_probed(struct gpu *g, uint32_t pid);
/* Frees all that is kept of a process (the monitor forgets the dead). */
void gpu__forget(struct gpu *g, uint32_t pid);
/* cgbpf asked the libraries to flush (probed GPU_FLUSH_SITE). */
void gpu__flush_asked(struct gpu *g);
/* The same for one process (a capture window's end). */
void gpu__flush_asked_pid(struct gpu *g, uint32_t pid);
/* Writes every operation still waiting for its turn, of pid (0: all). */
void gpu__release(struct gpu *g, uint32_t pid);
/* Capture windows: keep(ctx, pid, launch_ts) says whether an operation
 * launched at launch_ts is written (and counted in the summary); NULL:
 * all are. arrived(ctx, pid, launch_ts, kernel) hears of each operation
 * as it comes in, before it waits for its turn (NULL: nobody). */
void gpu__set_keep(struct gpu *g, int (*keep)(void *ctx, uint32_t pid, uint64_t launch_ts),
		   void (*arrived)(void *ctx, uint32_t pid, uint64_t launch_ts, bool kernel),
		   void *ctx);
/* Every process collecting GPU activity said GPU_ST_FLUSHED (or stopped,
 * or exited) since gpu__flush_asked. */
bool gpu__settled(const struct gpu *g);
/* The capture ended at ts: everything pending is written, estimates end,
 * processes that made CUDA calls but never said anything about GPU
 * activity are named as such in the trace. */
void gpu__finish(struct gpu *g, uint64_t ts);
/* For a flight recorder's dump, whose ring may have lost what a
 * process's library said: only what was measured is written (no
 * estimated spans where nothing is), and at the end everything pending
 * goes out with nothing said of processes that never reported. */
void gpu__measured_only(struct gpu *g);
void gpu__end_quiet(struct gpu *g);
/* The summary section; ctx is the struct gpu (a capture_info section). */
void gpu__print(const void *ctx, const uint64_t *drops, FILE *f);
/*
 * cgbpf stats (user/trace/tstats.c): the summary's GPU timeline from a saved
 * trace, by the same code: each GPU operation read back, in the order the
 * trace has them (start order per process, as record wrote them).
 */
enum gpu_replay_kind { GPU_RE_KERNEL, GPU_RE_COPY, GPU_RE_MEMSET, GPU_RE_SYNC };
struct gpu_replay_op {
	uint32_t pid;
	uint8_t kind;		/* enum gpu_replay_kind */
	uint8_t device;
	bool first;		/* the first operation of its launch call */
	uint32_t tid;		/* the launch call's thread */
	uint64_t start, end;
	uint64_t call_ts;	/* the launch call's begin; 0: not in the trace */
	const char *kernel;	/* a kernel's name */
	bool clamped;		/* its lane moved its start (clamped_by_ns) */
};
/* The GPU index of pid is named name ("" : not described). */
void gpu__replay_device(struct gpu *g, uint32_t pid, uint8_t index, const char *name);
void gpu__replay_op(struct gpu *g, const struct gpu_replay_op *r);
/* The end of every timeline (before printing). */
void gpu__replay_end(struct gpu *g);
/* pid's name; a status instant of its "GPU activity (CUPTI)" track
 * (its name and "detail" arg); an estimated span (stream: its track's
 * key); what record counted that the events do not show (the value of a
 * cgbpf.gpu_process / cgbpf.gpu_batches attribute). */
void gpu__replay_comm(struct gpu *g, uint32_t pid, const char *comm);
void gpu__replay_status(struct gpu *g, uint32_t pid, const char *what, const char *detail,
			const char *library);
void gpu__replay_est(struct gpu *g, uint32_t pid, uint64_t stream, uint64_t ns, uint64_t launches);
void gpu__replay_attr(struct gpu *g, const char *key, const char *value);
/* The "GPU activity per process" section alone: text (nothing when no
 * process used CUDA), or fmt CSV / JSON rows, one per process. */
void gpu__print_procs(const struct gpu *g, int fmt, FILE *f);
/* Processes known (that used CUDA). */
size_t gpu__procs(const struct gpu *g);
/* The "GPU utilization and idle time" section alone: text as the summary
 * prints it (nothing without GPU activity), or fmt (enum sumtab_fmt) CSV
 * or JSON rows, one per GPU of a process. */
void gpu__print_timeline(const struct gpu *g, int fmt, FILE *f);

/* Each (process, GPU) with measured work so far: the union of its
 * operations' spans (kernels, copies, memsets) and how many there were,
 * as written (the reorder window behind the newest). */
void gpu__each_busy(const struct gpu *g,
		    void (*fn)(void *ctx, uint32_t pid, unsigned device, uint64_t busy_ns,
			       uint64_t ops, uint64_t kernels),
		    void *ctx);

/* The GPU-side straggler rows (NCCL's profiler plugin: channel 0's
 * kernel start per rank, matched by commHash and NCCL's numbers) of live
 * processes; nothing before the first. */
void gpu__each_nccl_strag(const struct gpu *g,
			  void (*fn)(void *ctx, const struct straggle_row *r), void *ctx);

/* gpunccl__each_comm over every process. */
void gpu__each_nccl(const struct gpu *g,
		    void (*fn)(void *ctx, uint32_t pid, uint64_t hash, int rank, int nranks,
			       uint64_t entered),
		    void *ctx);

/* The NCCL hang watcher NCCL's profiler plugin's task entries feed
 * (core/hangwatch.h); NULL: none. */
struct hangwatch;
void gpu__set_hang(struct gpu *g, struct hangwatch *h);

/* Activity records the traced processes' libraries lost (GPU_DROPPED). */
uint64_t gpu__lost(const struct gpu *g);
/* Whether pid's GPU activity is measured (GPU_ST_COLLECTING came). */
bool gpu__measured(const struct gpu *g, uint32_t pid);
/* Whether pid's library collects now (COLLECTING came, STOPPED did not). */
bool gpu__collecting(const struct gpu *g, uint32_t pid);
/* Whether pid answered the last gpu__flush_asked (FLUSHED or STOPPED). */
bool gpu__flush_answered(const struct gpu *g, uint32_t pid);

#endif
