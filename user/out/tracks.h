/* SPDX-License-Identifier: MIT */
/*
 * Track uuids of the Perfetto trace: one namespace per kind (the top
 * byte) so pids and tids never collide. Shared by the sink that writes
 * the model's tracks (user/out/pfsink.c), the split that routes them by
 * process (user/out/pfsplit.c) and the writers of each library's tracks.
 */
#ifndef CGBPF_TRACKS_H
#define CGBPF_TRACKS_H

#include <stdint.h>

#define UUID_PROCESS(pid)	((1ull << 56) | (pid))
/* A thread's track is its process's and its own: a tid another process's
 * thread takes later (pids wrap at pid_max, 32768 on many hosts) is
 * another track. Pids and tids are below 2^22 (PID_MAX_LIMIT). */
#define UUID_THREAD(pid, tid)	((2ull << 56) | ((uint64_t)(pid) << 22) | (tid))
#define UUID_COUNTER(pid, k)	((3ull << 56) | ((uint64_t)(k) << 32) | (pid))
#define UUID_CGBPF		(4ull << 56)
#define UUID_CGBPF_DROPS	((4ull << 56) | 1)
/* Per-library namespaces: 5 NCCL communicators, 6 NVTX (async ranges,
 * domains), 7 GPU; the low 56 bits are the library's own. */
#define UUID_NCCL(x)		((5ull << 56) | ((x) & ((1ull << 56) - 1)))
#define UUID_NVTX(x)		((6ull << 56) | ((x) & ((1ull << 56) - 1)))
/* 7: GPU activity (user/sources/gpu/gpupf.c: devices, streams, estimates). */
#define UUID_GPU(x)		((7ull << 56) | ((x) & ((1ull << 56) - 1)))

/* A process's track (UUID_PROCESS), and the pid it names. */
#define UUID_IS_PROCESS(uuid)	((uuid) >> 56 == 1)
#define UUID_PID(uuid)		((uuid) & ((1ull << 56) - 1))

#endif
