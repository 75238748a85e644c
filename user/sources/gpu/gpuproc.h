/* SPDX-License-Identifier: MIT */
/*
 * GPU activity, inside: the per-process tables that user/sources/gpu/gpu.c
 * fills from the injection library's batches and hands to its writer
 * (gpupf.c), its summary (gpusum.c) and its estimate (gpuest.c). Not for
 * other modules: they use user/sources/gpu/gpu.h.
 */
#ifndef CGBPF_GPUPROC_H
#define CGBPF_GPUPROC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "gpu_rec.h"
#include "core/model.h"
#include "lib/hmap.h"
#include "out/perfetto.h"

/* Devices are a byte in every activity entry. */
#define GPU_DEVS 256
/* Lanes of one stream's track: records that overlap on a stream (or
 * arrive after later ones were written) go to the next lane. */
#define GPU_LANES 4

/* One activity record, validated, waiting to be written in time order. */
/* How a process's injection library came, as the summary says (and the
 * "collecting" instant's "library" arg keeps for stats). */
enum gpu_how {
	GPU_HOW_BEFORE = 0,	/* before this capture: an earlier --inject, the program */
	GPU_HOW_AT_START,	/* CUDA_INJECTION64_PATH named it at exec */
	GPU_HOW_INJECTED,	/* this capture's --inject */
	GPU_HOW__COUNT
};

/* The "library" arg's values, by enum gpu_how (gpu.c). */
extern const char *const gpu_how_text[GPU_HOW__COUNT];

struct gpu_op {
	uint64_t start, end;
	uint64_t seq;		/* arrival order: ties keep it */
	uint32_t corr, stream, context, graph_id;
	uint8_t kind;		/* GPU_KERNEL, GPU_MEMCPY, GPU_MEMSET, GPU_SYNC */
	uint8_t device;
	uint8_t copy_kind, src_kind, dst_kind, flags, peer, mem_kind;
	union {
		struct {
			uint32_t name_id;
			uint32_t grid[3];
			uint16_t block[3];
			uint16_t regs;
			uint32_t smem_static, smem_dynamic;
		} k;
		struct {
			uint64_t bytes;
			uint32_t value;	/* memset */
		} m;
		struct {
			uint32_t type;	/* CUpti_ActivitySynchronizationType */
		} s;
	};
};

/* The CPU call a correlation id belongs to (a GPU_API entry matched with
 * the uprobe slice that contains it). */
struct gpu_corr {
	uint32_t corr;		/* 0: a free slot of the table */
	uint32_t tid;
	uint32_t gen;		/* which put of corr this is (gpu.c's FIFO) */
	uint32_t pad;
	uint64_t call_ts;	/* the enclosing API slice's begin; 0: no slice found */
	uint64_t api_ts;	/* the call's begin by CUPTI's API record */
	uint64_t flow;		/* that slice's flow id; 0: none */
	uint32_t ops;		/* operations of this call written so far (a graph
				 * launch runs several) */
};

/* A call that queued GPU work, remembered per thread for the GPU_API
 * entries that will name it. */
struct gcall {
	uint64_t ts, end;
	uint64_t flow;
};

struct gpu_thread {
	uint32_t tid;
	struct gcall *calls;	/* a ring, oldest first from head */
	uint32_t head, n, cap;
};

struct gpu_lane {
	uint64_t last_end;
	struct pfseq *seq;
	uint32_t idx;		/* GT_LANE / GT_SYNC index */
	bool described;
};

struct gstream {
	uint32_t id, context;
	uint8_t device;
	bool has_priority;
	int32_t priority;
	struct gpu_lane lanes[GPU_LANES];
	uint64_t ops;
};

/* Per device of a process: its description and the timeline analyses,
 * fed in start order. */
struct gpu_dev {
	uint8_t index;
	bool known;		/* a GPU_DEVICE entry came */
	bool described;		/* its track went out with the current name */
	char name[48];
	uint8_t uuid[16];
	uint64_t global_memory;
	uint32_t sm_count, cc_major, cc_minor;
	/* Timeline (gpusum.c). */
	uint64_t ops, kernels;
	uint64_t first, last_start, busy_end;
	uint64_t busy;			/* union of all work */
	uint64_t idle_host, idle_other;	/* gaps: waiting for the host / other */
	uint64_t late;			/* left out: came after later work */
	uint64_t comm_s, comm_e, comm;	/* union of NCCL kernels */
	uint64_t comp_s, comp_e, comp;	/* union of other kernels */
	uint64_t all_s, all_e, all;	/* union of kernels of both kinds */
	/* The launch-bound run in progress. */
	uint64_t run_start, run_end, run_busy, run_wait;
	uint32_t run_ops;
	uint32_t run_tid;
};

enum { GPU_DROP_OTHER, GPU_DROP_CUPTI, GPU_DROP_QUEUE, GPU_DROP__COUNT };

/* Status codes 1 .. GPU_ST_TAKEN. */
#define GPU_ST__COUNT (GPU_ST_WAITED + 1)
#define GPU_STATUS_TEXT 256

struct gpu_proc {
	uint32_t pid;
	bool exited;
	/* What the library said (GPU_STATUS). */
	bool collecting;	/* since GPU_ST_COLLECTING, until GPU_ST_STOPPED */
	bool measured;		/* GPU_ST_COLLECTING came at some point */
	bool flush_answered;	/* GPU_ST_FLUSHED / STOPPED since the flush was asked */
	uint64_t status_n[GPU_ST__COUNT];
	int32_t status_err[GPU_ST__COUNT];
	char *status_text[GPU_ST__COUNT];	/* the latest of each code */
	char comm[16];		/* cgbpf stats: its name in the trace (no model process) */
	uint64_t collect_ts;			/* first GPU_ST_COLLECTING */
	uint8_t how;				/* how the library came: enum gpu_how */
	/* Another client took CUPTI while the library collected
	 * (GPU_ST_TAKEN): GPU activity stopped at stop_ts (the end of the
	 * last operation received, else the latest GPU_ST_COLLECTING), the
	 * library said so at taken_ts. */
	bool taken;
	uint64_t stop_ts, taken_ts;
	uint64_t last_op_end;	/* the latest end of an operation received */
	/* Uprobes. */
	uint64_t api_calls;	/* CUDA API calls (outermost) seen */
	uint64_t queue_calls;	/* of which queued GPU work */
	uint64_t unflowed_calls;	/* queued work before collection was known */
	bool lib_silent;	/* its library was probed and said nothing (gpu__finish) */
	uint64_t api_entries, api_matched;	/* GPU_API entries, and those that found their call */
	uint32_t status_recovered;	/* statuses that came only as their repeat */
	/* Losses (GPU_DROPPED). */
	uint64_t dropped[GPU_DROP__COUNT];
	/* Activity. */
	struct gpu_dev **devs;	/* GPU_DEVS, by index; NULL until the first (gpuproc__dev_at) */
	struct hmap names;	/* name id -> char * (demangled) */
	uint64_t name_bytes;
	struct hmap streams;	/* (device, context, stream) hash -> struct gstream * */
	uint32_t next_lane, next_sync_lane, next_est;
	struct gpu_lane sync_lanes[GPU_LANES];
	struct hmap threads;	/* tid -> struct gpu_thread * */
	/* Correlation ids: an open-addressing table (slots, a power of two,
	 * at most half full), and the ids in the order they came, so the
	 * oldest goes first past CORR_MAX (gpu.c). */
	struct gpu_corr *corr_tab;
	uint32_t corr_slots, corr_count;
	uint32_t *corr_fifo;	/* a ring of ids, oldest at corr_head */
	uint32_t corr_head, corr_n, corr_cap;
	uint32_t corr_seq;	/* puts so far: a table entry's generation */
	uint64_t corr_seed;	/* offsets the ids' home slots (differs per process and capture) */
	/* Ops waiting to be written in (start, seq) order: those that came
	 * in that order wait in a ring (run), the others in a min-heap. */
	struct gpu_op *run;
	uint32_t run_head, run_n, run_cap;
	struct gpu_op *heap;
	uint32_t heap_n, capheap;
	uint32_t nheap;		/* ops waiting, run and heap */
	uint64_t max_start;
	/* Counts of what the ops showed. */
	uint64_t ops, kernels, copies, memsets, syncs;
	uint64_t no_launch;	/* ops whose launch call was not found */
	uint64_t unfinished;	/* ops still running at a forced flush: no times */
	uint64_t unfinished_said; /* of them, told by a stopped/flushed instant */
	uint64_t before_launch;	/* ops that start before their launch call began */
	uint64_t lane_overflow;	/* ops on a stream's last lane although they overlap */
	uint64_t unknown_names;	/* kernels whose name id was never sent */
	/* Trace (gpupf.c). */
	struct pfseq *info_seq;
	bool info_described, lost_described;
	/* Estimate (gpuest.c). */
	void *est;
	uint64_t est_spans;
	/* NCCL's profiler plugin (gpunccl.c). */
	void *nccl;
};

/* The capture's GPU state (struct gpu is user/sources/gpu/gpu.h's opaque type). */
struct straggle;

struct gpu {
	struct model *m;
	struct pftrace *pt;
	uint64_t flows;		/* flow ids given so far: the last one */
	struct hmap procs;	/* pid -> struct gpu_proc * */
	struct hmap lib_probed;	/* pids whose injection library cgbpf probed */
	uint64_t seq;
	bool flush_asked;
	uint64_t first_ts, last_ts;	/* span of the capture's GPU activity */
	/* Validation (the traced process writes every byte). */
	uint64_t batches, entries;
	uint64_t bad_batches;		/* records rejected as a whole */
	uint64_t bad_entries;		/* entries skipped (size, range, text) */
	uint64_t unknown_kinds;		/* entries of kinds this cgbpf does not know */
	uint64_t names_dropped;		/* over the per-process bound */
	uint64_t dropped_total;
	void *sum;			/* gpusum.c */
	struct straggle *nccl_strag;	/* gpunccl.c: GPU-side stragglers */
	struct hangwatch *hang;		/* session.hang: NCCL hangs (gpu__set_hang) */
	bool measured_only;		/* no estimates (gpu__end_quiet's dumps) */
	/* Capture windows: which operations are written (gpu__set_keep). */
	int (*keep)(void *ctx, uint32_t pid, uint64_t launch_ts);
	void (*arrived)(void *ctx, uint32_t pid, uint64_t launch_ts, bool kernel);
	void *keep_ctx;
};

/* pid's state, added if new; NULL on ENOMEM. announce: make pid known to
 * the model, as its tracks hang under its process track (a capture; not
 * cgbpf stats, whose pids are not this machine's). */
struct gpu_proc *gpuproc__get(struct gpu *g, uint32_t pid, bool announce);
/* Already known, else NULL. */
struct gpu_proc *gpuproc__find(const struct gpu *g, uint32_t pid);
/* The device's state (created on first use); NULL on ENOMEM. */
struct gpu_dev *gpuproc__dev(struct gpu_proc *p, uint8_t index);
/* Device index of p, or NULL when none reported it. */
static inline struct gpu_dev *gpuproc__dev_at(const struct gpu_proc *p, int index)
{
	return p->devs ? p->devs[index] : NULL;
}
/* The stream's state (created on first use); NULL on ENOMEM. */
struct gstream *gpuproc__stream(struct gpu_proc *p, uint8_t device, uint32_t context,
				uint32_t id);
/* A kernel's name: its demangled name, or what stands for it. */
const char *gpuproc__kernel_name(const struct gpu_proc *p, const struct gpu_op *op, char *buf,
				 size_t len);
/* Frees what only writing the trace needs (names, streams, threads,
 * correlation ids, waiting operations): gone when the process is. */
void gpuproc__free_bulk(struct gpu_proc *p);
/* Frees p and all it holds but its estimate (gpuest__free first). */
void gpuproc__free(struct gpu_proc *p);

#endif
