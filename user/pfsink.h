/* SPDX-License-Identifier: MIT */
/* The Perfetto sink: model events to track descriptors, slices and counters. */
#ifndef CGBPF_PFSINK_H
#define CGBPF_PFSINK_H

#include "model.h"
#include "perfetto.h"

/* Track uuids: one namespace per kind so pids and tids never collide. */
#define UUID_PROCESS(pid)	((1ull << 56) | (pid))
#define UUID_THREAD(tid)	((2ull << 56) | (tid))
#define UUID_COUNTER(pid, k)	((3ull << 56) | ((uint64_t)(k) << 32) | (pid))
#define UUID_CGBPF		(4ull << 56)
#define UUID_CGBPF_DROPS	((4ull << 56) | 1)

/* The sink writing model events into pt. */
struct sink pfsink__sink(struct pftrace *pt);

#endif
