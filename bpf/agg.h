/* SPDX-License-Identifier: MIT */
/* Monitor aggregates shared by BPF (bpf/agg.bpf.h) and user/capture/monitor.c. */
#ifndef CGBPF_AGG_H
#define CGBPF_AGG_H

#include "events.h"

/* The "library" of syscall aggregates (func = syscall number). */
#define AGG_LIB_SYSCALL 15

#define AGG_BUCKETS 40		/* log2(ns): bucket i holds [2^i, 2^(i+1)) ns */
#define AGG_MAX_KEYS 16384	/* (process, function) pairs; LRU beyond */

struct agg_key {
	__u32 pid;
	__u16 func;
	__u8 lib;
	__u8 nranks;		/* NCCL: the communicator's size (0: unknown), else 0 */
};

struct agg_val {
	__u64 count;
	__u64 total_ns;
	__u64 bytes;
	__u64 errors;
	__u64 hist[AGG_BUCKETS];
};

#define AGG_F_ERRORS	1	/* a non-zero return (other than ok_ret2) is an error */
#define AGG_F_SLOW	2	/* lasting >= trigger_slow_ns triggers a dump */
#define AGG_F_ALLOC	4	/* device memory: *a[ptr_arg-1] = pointer of bytes, at return */
#define AGG_F_FREE	8	/* device memory: a[ptr_arg-1] = pointer freed */
#define AGG_F_COMM_INIT	16	/* NCCL: *a[ptr_arg-1] = a communicator of a[bytes_arg-1] ranks */
#define AGG_F_COMM	32	/* NCCL: a[comm_arg-1] is the communicator (7: first stack slot) */

/* GPU memory held, per allocation and per process (AGG_F_ALLOC/FREE). */
struct agg_alloc_key {
	__u32 pid;
	__u32 pad;
	__u64 ptr;
};

#define AGG_MAX_ALLOCS 262144

/* Per (lib, func): bytes = a[bytes_arg-1] * (dtype_arg ? size(a[dtype_arg-1]) : mult). */
struct agg_cfg {
	__u8 bytes_arg;		/* 1..6, 0: no bytes */
	__u8 mult;
	__u8 dtype_arg;		/* 1..6: an ncclDataType_t argument */
	__u8 flags;
	__u8 ptr_arg;		/* 1..6: AGG_F_ALLOC's out pointer, AGG_F_FREE's pointer */
	__u8 comm_arg;		/* AGG_F_COMM: 1..7 */
	__u8 pad[2];
	__s32 ok_ret2;		/* a second success code (CUDA_ERROR_NOT_READY), or 0 */
};

/* A call that should make the monitor dump its flight recorder. */
struct rec_trigger {
	struct rec_hdr hdr;
	__u16 func;
	__u8 lib;
	__u8 pad[5];
	__u64 dur_ns;
	__s64 ret;
};

#endif
