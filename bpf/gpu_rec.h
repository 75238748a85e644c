/* SPDX-License-Identifier: MIT */
/*
 * GPU activity as the injection library (inject/gpu.c) hands it to cgbpf.
 *
 * The library turns CUPTI's activity records into the compact entries
 * below, packs them into a batch of at most GPU_BATCH_MAX bytes and calls
 * its probe site cgbpf_gpu_batch(batch, len) (a 5-byte nop that does
 * nothing unless probed). cgbpf's uprobe on that site (bpf/gpu.bpf.c)
 * copies the batch, as it is, into the events ring as one REC_GPU_BATCH
 * record; user space splits it (user/sources/gpu/gpu.c). No file, socket or shared
 * memory links the library to cgbpf: the library knows it is watched by
 * reading its own probe site (a probe replaces the nop's first byte in the
 * process's view of the page) and collects only then.
 *
 * Every entry starts with struct gpu_ent; size is the whole entry, a
 * multiple of 8, and a reader skips kinds it does not know. Times are
 * CLOCK_BOOTTIME nanoseconds, the clock of every other cgbpf record (the
 * library registers a CUPTI timestamp callback that reads it). The layout
 * is the same for the library (C, any compiler), BPF and user space: only
 * fixed-width fields, naturally aligned.
 *
 * The library is the traced process's code: user space validates every
 * field it uses (user/core/ingest.c) and never trusts a size or an index.
 */
#ifndef CGBPF_GPU_REC_H
#define CGBPF_GPU_REC_H

#ifdef __BPF__
/* vmlinux.h has the __u types. */
#else
#include <stdint.h>
typedef uint8_t gr_u8;
typedef uint16_t gr_u16;
typedef uint32_t gr_u32;
typedef uint64_t gr_u64;
typedef int32_t gr_s32;
#endif
#ifdef __BPF__
typedef __u8 gr_u8;
typedef __u16 gr_u16;
typedef __u32 gr_u32;
typedef __u64 gr_u64;
typedef __s32 gr_s32;
#endif

/* Bytes of entries in one batch (the copy BPF makes is bounded by it). */
#define GPU_BATCH_MAX 4096

/*
 * The driver function cgbpf probes last in a libcuda file, after every
 * function it traces there, with a program that does nothing (struct
 * api_lib's probed_last): once its first byte is int3 in a process, all
 * of that file's probes are live there. The library's wait in cuInit
 * (inject/gpu.c, wait_for_driver) reads it. A function no program calls
 * on a hot path, exported by every driver since CUDA 6.
 */
#define GPU_DRIVER_PROBED_LAST "cuGetErrorName"
/* The library's probe site, by name (cgbpf finds it in the ELF symbols). */
#define GPU_PROBE_SITE "cgbpf_gpu_batch"
/*
 * cgbpf asks for a flush by probing this second site (a 5-byte nop too)
 * before it stops: the library, which watches both sites' first bytes,
 * flushes CUPTI, sends what it had and a GPU_STATUS GPU_ST_FLUSHED, and
 * cgbpf detaches once every collecting process said so (or a timeout
 * passed, which it reports).
 */
#define GPU_FLUSH_SITE "cgbpf_gpu_flush"
/*
 * A capture window ended: cgbpf probes this third site until the window's
 * file closes. The library then asks CUPTI for its completed records every
 * poll (a default flush: a kernel still running stays in CUPTI, whole,
 * until it ends, where a forced flush would hand it over without times),
 * and says GPU_ST_FLUSHED after the first such flush. Libraries without
 * it get the flush site (forced) instead.
 */
#define GPU_WINDOW_SITE "cgbpf_gpu_window"
/* Bytes of a name entry's text, NUL included. */
#define GPU_NAME_MAX 1024

enum gpu_ent_kind {
	GPU_KERNEL = 1,		/* struct gpu_kernel */
	GPU_MEMCPY = 2,		/* struct gpu_memcpy */
	GPU_MEMSET = 3,		/* struct gpu_memset */
	GPU_SYNC = 4,		/* struct gpu_sync */
	GPU_API = 5,		/* struct gpu_api: the CPU call a correlation id belongs to */
	GPU_NAME = 6,		/* struct gpu_name: a kernel name, sent before its first use */
	GPU_DEVICE = 7,		/* struct gpu_device */
	GPU_STATUS = 8,		/* struct gpu_status: what the library could (not) do, and why */
	GPU_DROPPED = 9,	/* struct gpu_dropped: records lost, and where */
	GPU_STREAM = 10,	/* struct gpu_stream: a stream's priority (optional) */
	GPU_NCCL_COMM = 11,	/* struct gpu_nccl_comm: NCCL's profiler plugin met a communicator */
	GPU_NCCL_OP = 12,	/* struct gpu_nccl_op: a collective or send/recv NCCL launched */
	GPU_NCCL_CHANNEL = 13,	/* struct gpu_nccl_ch: one channel of its kernel, GPU times */
	GPU_NCCL_PROXY = 14,	/* struct gpu_nccl_proxy: one proxy (network) operation */
	GPU_ENT__COUNT,
};

struct gpu_ent {
	gr_u16 kind;		/* enum gpu_ent_kind */
	gr_u16 size;		/* whole entry, header included; multiple of 8 */
};

/* A kernel as it ran (CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL). 80 bytes. */
struct gpu_kernel {
	struct gpu_ent e;
	gr_u32 corr;		/* CUPTI correlation id: the launching call's (gpu_api) */
	gr_u64 start, end;
	gr_u32 name_id;		/* a gpu_name sent before (0: no name) */
	gr_u32 stream;		/* CUPTI stream id, unique in the context */
	gr_u32 context;		/* CUPTI context id */
	gr_u32 graph_id;	/* the graph it ran in; 0: none */
	gr_u32 grid[3];
	gr_u16 block[3];
	gr_u16 regs;		/* registers per thread */
	gr_u32 smem_static;	/* bytes per block */
	gr_u32 smem_dynamic;	/* bytes per block */
	gr_u8 device;
	gr_u8 pad[7];
};

/* CUpti_ActivityMemcpyKind, as CUPTI numbers it. */
enum gpu_copy_kind {
	GPU_COPY_UNKNOWN = 0,
	GPU_COPY_HTOD = 1,
	GPU_COPY_DTOH = 2,
	GPU_COPY_HTOA = 3,
	GPU_COPY_ATOH = 4,
	GPU_COPY_ATOA = 5,
	GPU_COPY_ATOD = 6,
	GPU_COPY_DTOA = 7,
	GPU_COPY_DTOD = 8,
	GPU_COPY_HTOH = 9,
	GPU_COPY_PTOP = 10,
};

/* A copy as it ran (CUPTI_ACTIVITY_KIND_MEMCPY, MEMCPY2 for peer). 56 bytes. */
struct gpu_memcpy {
	struct gpu_ent e;
	gr_u32 corr;
	gr_u64 start, end;
	gr_u64 bytes;
	gr_u32 stream;
	gr_u32 context;
	gr_u32 graph_id;
	gr_u8 copy_kind;	/* enum gpu_copy_kind */
	gr_u8 src_kind;		/* CUpti_ActivityMemoryKind of the source */
	gr_u8 dst_kind;		/* and of the destination */
	gr_u8 flags;		/* GPU_COPY_ASYNC */
	gr_u8 device;		/* the device that ran it */
	gr_u8 peer;		/* peer copies: the other device; else = device */
	gr_u8 pad[6];
};

#define GPU_COPY_ASYNC 0x01

/* A memset as it ran (CUPTI_ACTIVITY_KIND_MEMSET). 56 bytes. */
struct gpu_memset {
	struct gpu_ent e;
	gr_u32 corr;
	gr_u64 start, end;
	gr_u64 bytes;
	gr_u32 value;
	gr_u32 stream;
	gr_u32 context;
	gr_u8 device;
	gr_u8 mem_kind;		/* CUpti_ActivityMemoryKind */
	gr_u8 pad[2];
	gr_u32 graph_id;	/* the graph it ran in; 0: none */
	gr_u32 pad2;
};

/* A synchronization the CPU waited in (CUPTI_ACTIVITY_KIND_SYNCHRONIZATION).
 * 40 bytes. */
struct gpu_sync {
	struct gpu_ent e;
	gr_u32 corr;
	gr_u64 start, end;
	gr_u32 type;		/* CUpti_ActivitySynchronizationType */
	gr_u32 stream;		/* CUPTI_SYNCHRONIZATION_INVALID_VALUE (~0u) when none */
	gr_u32 context;
	gr_u32 pad;
};

/* The CPU side of a correlation id (CUPTI_ACTIVITY_KIND_DRIVER / RUNTIME,
 * enabled only for the calls that put work on a stream): links the GPU
 * work to the uprobe slice of the call on thread tid that contains
 * [start, end]. 40 bytes. */
struct gpu_api {
	struct gpu_ent e;
	gr_u32 corr;
	gr_u64 start, end;
	gr_u32 tid;		/* kernel thread id (gettid), as cgbpf's records */
	gr_u32 cbid;		/* CUpti_driver_api_trace_cbid / runtime cbid */
	gr_u8 runtime;		/* 0: driver API, 1: runtime API */
	gr_u8 pad[7];
};

/* A kernel name, sent once per process before the first entry that uses
 * its id (ids start at 1). The mangled name, NUL terminated, as CUPTI
 * gave it; user space demangles. Size: 8 + the text rounded up to 8. */
struct gpu_name {
	struct gpu_ent e;
	gr_u32 id;
	char name[];		/* NUL terminated, at most GPU_NAME_MAX bytes */
};

/* A device (CUPTI_ACTIVITY_KIND_DEVICE). 96 bytes. */
struct gpu_device {
	struct gpu_ent e;
	gr_u32 id;
	gr_u64 global_memory;	/* bytes */
	gr_u8 uuid[16];
	gr_u32 sm_count;
	gr_u32 compute_major, compute_minor;
	gr_u32 pad;
	char name[48];		/* NUL terminated */
};

/* What the library could do, or why not (GPU_STATUS). */
enum gpu_status_code {
	GPU_ST_COLLECTING = 1,	/* activity enabled; text: the CUPTI library's path */
	GPU_ST_STOPPED = 2,	/* activity disabled and flushed (cgbpf went away) */
	GPU_ST_NO_CUPTI = 3,	/* no CUPTI library found; text: where it looked */
	GPU_ST_CUPTI_FAILED = 4,/* a CUPTI call failed; text: which, and its error string */
	GPU_ST_HELD = 5,	/* another tool holds CUPTI; text: its name when CUPTI says */
	GPU_ST_NO_DEVICE = 6,	/* the driver found no GPU (text: the driver's error) */
	GPU_ST_FLUSHED = 7,	/* everything collected so far was sent (GPU_FLUSH_SITE) */
	GPU_ST_TAKEN = 8,	/* another client took CUPTI's activity buffer callbacks while
				 * collecting: nothing more comes; text: its name when CUPTI
				 * says (cuptiSubscribe_v2), else what is known */
	GPU_ST_WAITED = 9,	/* InitializeInjection, with cgbpf attached, waited for the
				 * process's driver file to be probed (issue 27); error 0:
				 * it was, 1: the library gave up (CGBPF_MAP_WAIT_MS); text:
				 * "<microseconds> <file>" */
};

/* Size: 16 + the text rounded up to 8. */
struct gpu_status {
	struct gpu_ent e;
	gr_u32 code;		/* enum gpu_status_code */
	gr_s32 error;		/* the CUptiResult / CUresult, 0 when none */
	gr_u32 flags;		/* GPU_STATUS_REPEAT */
	char text[];		/* NUL terminated, at most 256 bytes */
};

/* The status said again: the library repeats GPU_ST_COLLECTING with its
 * first periodic flushes, in case the first went nowhere (seen once with
 * cgbpf record -p on an H200, cause unknown). A cgbpf that has the status
 * ignores the repeat. */
#define GPU_STATUS_REPEAT 1u

/* Records lost before they reached cgbpf (GPU_DROPPED). 24 bytes. */
struct gpu_dropped {
	struct gpu_ent e;
	gr_u32 where;		/* 1: CUPTI's buffers (cuptiActivityGetNumDroppedRecords),
				 * 2: the library's own queue */
	gr_u64 count;		/* lost since the last gpu_dropped of that kind */
	gr_u32 context;		/* CUPTI's count is per context; 0 otherwise */
	gr_u32 pad;
};

/* A stream (CUPTI_ACTIVITY_KIND_STREAM), sent before or after its first
 * activity: the trace names its track with its priority. Optional: a
 * stream without one is shown without. 24 bytes. */
struct gpu_stream {
	struct gpu_ent e;
	gr_u32 context;
	gr_u32 stream;
	gr_s32 priority;	/* lower is higher priority, as CUDA numbers them */
	gr_u32 flags;		/* CUpti_ActivityStreamFlag */
	gr_u8 device;
	gr_u8 pad[3];
};

/*
 * NCCL's profiler plugin (inject/ncclprof.c; NCCL_PROFILER_PLUGIN names
 * the injection library). NCCL's own identity of an operation is
 * (comm, func, seq): comm is NCCL's commHash (a hash of the unique id,
 * the same in every rank, unlike cgbpf's own communicator id, which
 * hashes fewer of its bytes), seq its count of func's operations on that
 * communicator. Sends and receives have no NCCL number: the library
 * counts them per (comm, peer, direction), from its first one.
 */
enum gpu_nccl_func {
	GPU_NF_UNKNOWN = 0,
	GPU_NF_ALLREDUCE = 1,
	GPU_NF_ALLGATHER = 2,
	GPU_NF_REDUCESCATTER = 3,
	GPU_NF_BROADCAST = 4,
	GPU_NF_REDUCE = 5,
	GPU_NF_ALLTOALL = 6,
	GPU_NF_SEND = 7,
	GPU_NF_RECV = 8,
	GPU_NF_GATHER = 9,
	GPU_NF_SCATTER = 10,
	GPU_NF__COUNT,
};

/* init met a communicator (once per communicator and process).
 * Size: 40 + the name rounded up to 8. */
struct gpu_nccl_comm {
	struct gpu_ent e;
	gr_u32 tid;		/* the thread that created it (in ncclCommInit*) */
	gr_u64 comm;		/* NCCL's commHash */
	gr_u64 ts;		/* when init ran */
	gr_s32 rank, nranks;
	gr_s32 nnodes;
	gr_u32 pad;
	char name[];		/* config.commName, NUL terminated; "" when none */
};

/* A task (NCCL's Coll or P2p event): started on the calling thread
 * before the kernel launch, stopped after it. 64 bytes. */
struct gpu_nccl_op {
	struct gpu_ent e;
	gr_u32 tid;
	gr_u64 comm;
	gr_u64 seq;
	gr_u64 start, end;	/* host: CLOCK_BOOTTIME */
	gr_u64 bytes;		/* count x datatype size */
	gr_s32 rank;
	gr_s32 peer;		/* send/recv: the peer; collectives: the root (-1: none) */
	gr_u8 func;		/* enum gpu_nccl_func */
	gr_u8 algo;		/* enum gpu_nccl_algo */
	gr_u8 proto;		/* enum gpu_nccl_proto */
	gr_u8 nchannels;
	gr_u8 nwarps;
	gr_u8 dtype_size;	/* 0: unknown datatype */
	gr_u8 pad[2];
};

enum gpu_nccl_algo {
	GPU_NA_UNKNOWN = 0, GPU_NA_TREE, GPU_NA_RING, GPU_NA_COLLNET_DIRECT,
	GPU_NA_COLLNET_CHAIN, GPU_NA_NVLS, GPU_NA_NVLS_TREE, GPU_NA_PAT, GPU_NA__COUNT,
};
enum gpu_nccl_proto {
	GPU_NP_UNKNOWN = 0, GPU_NP_LL, GPU_NP_LL128, GPU_NP_SIMPLE, GPU_NP__COUNT,
};

/* One channel of a task's kernel, as the GPU timed it (%globaltimer,
 * which NCCL's kernel writes at the channel's start and end). The
 * library maps it onto CLOCK_BOOTTIME with the smallest host-minus-GPU
 * difference it has seen (the proxy thread sees a timestamp after the
 * GPU wrote it, so every difference is the clocks' offset plus a delay
 * >= 0; the smallest is the best bound): skew_ns is this entry's own
 * difference minus that smallest, the delay with which it was seen.
 * 56 bytes. */
struct gpu_nccl_ch {
	struct gpu_ent e;
	gr_u32 channel;
	gr_u64 comm;
	gr_u64 seq;
	gr_u64 start, end;	/* CLOCK_BOOTTIME, mapped */
	gr_u32 skew_ns;		/* saturates at ~4 s */
	gr_s32 rank;
	gr_u8 func;
	gr_u8 pad[7];
};

/* A proxy operation (the proxy thread moving one channel's data to or
 * from a peer over the network), with its steps summed: proxy steps
 * are never sent one by one. 64 bytes. */
struct gpu_nccl_proxy {
	struct gpu_ent e;
	gr_u32 tid;		/* the proxy thread */
	gr_u64 comm;
	gr_u64 seq;
	gr_u64 start, end;	/* host */
	gr_u64 bytes;		/* transferred, summed over its steps */
	gr_s32 rank, peer;
	gr_u32 steps;		/* steps that stopped */
	gr_u8 channel;
	gr_u8 send;		/* 1: send, 0: receive */
	gr_u8 func;
	gr_u8 pad;
};

#ifndef __BPF__
/* The layout is an interface between separately built programs. */
_Static_assert(sizeof(struct gpu_kernel) == 80, "gpu_kernel layout");
_Static_assert(sizeof(struct gpu_memcpy) == 56, "gpu_memcpy layout");
_Static_assert(sizeof(struct gpu_memset) == 56, "gpu_memset layout");
_Static_assert(sizeof(struct gpu_sync) == 40, "gpu_sync layout");
_Static_assert(sizeof(struct gpu_api) == 40, "gpu_api layout");
_Static_assert(sizeof(struct gpu_name) == 8, "gpu_name layout");
_Static_assert(sizeof(struct gpu_device) == 96, "gpu_device layout");
_Static_assert(sizeof(struct gpu_status) == 16, "gpu_status layout");
_Static_assert(sizeof(struct gpu_dropped) == 24, "gpu_dropped layout");
_Static_assert(sizeof(struct gpu_stream) == 24, "gpu_stream layout");
_Static_assert(sizeof(struct gpu_nccl_comm) == 40, "gpu_nccl_comm layout");
_Static_assert(sizeof(struct gpu_nccl_op) == 64, "gpu_nccl_op layout");
_Static_assert(sizeof(struct gpu_nccl_ch) == 56, "gpu_nccl_ch layout");
_Static_assert(sizeof(struct gpu_nccl_proxy) == 64, "gpu_nccl_proxy layout");
#endif

#endif /* CGBPF_GPU_REC_H */
