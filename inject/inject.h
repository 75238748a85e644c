/* SPDX-License-Identifier: MIT */
/*
 * What the injection library's parts call in each other: gpu.c owns the
 * watcher thread and the batch site; ncclprof.c (NCCL's profiler plugin)
 * queues its entries and hands them over from the watcher.
 */
#ifndef CGBPF_INJECT_H
#define CGBPF_INJECT_H

#include <stdbool.h>
#include <stdint.h>

/* gpu.c: appends whole entries (bpf/gpu_rec.h, each a multiple of 8
 * bytes) to the batch and sends it. Any thread; takes the batch lock. */
void gpu__send_entries(const uint8_t *ents, uint32_t len);
/* gpu.c: whether a cgbpf is attached now (the batch site is probed). */
bool gpu__attached(void);
/* gpu.c: CUDA_INJECTION64_PATH's entry, idempotent: starts the watcher. */
int InitializeInjection(void);

/* ncclprof.c, from the watcher at every poll: on is whether a cgbpf is
 * attached (the batch site probed). Sets NCCL's event mask on the edges
 * and sends what the plugin queued; all: with every channel span held
 * (cgbpf leaves, or the process exits). */
void ncclprof__poll(bool on, bool all);
/* ncclprof.c: in the child of a fork, as gpu.c's forked(). */
void ncclprof__forked(void);

#endif /* CGBPF_INJECT_H */
