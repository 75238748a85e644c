/* SPDX-License-Identifier: MIT */
/* The Perfetto sink: model events to track descriptors, slices and counters. */
#ifndef CGBPF_PFSINK_H
#define CGBPF_PFSINK_H

#include "core/model.h"
#include "out/perfetto.h"

/* Track uuids: one namespace per kind so pids and tids never collide. */
#define UUID_PROCESS(pid)	((1ull << 56) | (pid))
#define UUID_THREAD(tid)	((2ull << 56) | (tid))
#define UUID_COUNTER(pid, k)	((3ull << 56) | ((uint64_t)(k) << 32) | (pid))
#define UUID_CGBPF		(4ull << 56)
#define UUID_CGBPF_DROPS	((4ull << 56) | 1)
/* Per-library namespaces: 5 NCCL communicators, 6 NVTX (async ranges,
 * domains), 7 GPU; the low 56 bits are the library's own. */
#define UUID_NCCL(x)		((5ull << 56) | ((x) & ((1ull << 56) - 1)))
#define UUID_NVTX(x)		((6ull << 56) | ((x) & ((1ull << 56) - 1)))
/* 7: GPU activity (user/sources/gpu/gpupf.c: devices, streams, estimates). */
#define UUID_GPU(x)		((7ull << 56) | ((x) & ((1ull << 56) - 1)))

/* The sink writing model events into pt. */
struct sink pfsink__sink(struct pftrace *pt);
/* Thread t's packet sequence (created at ts on first use), for other sinks
 * writing on its behalf; NULL on ENOMEM. */
struct pfseq *pfsink__seq(struct pftrace *pt, struct thread *t, uint64_t ts);

#endif
