/* SPDX-License-Identifier: MIT */
/*
 * CPU samples in the Perfetto trace: PerfSample packets on one sequence of
 * their own, with mappings, frames, callstacks and their strings interned
 * on it, so the UI builds flame graphs for any time selection.
 */
#ifndef CGBPF_PFSTACKS_H
#define CGBPF_PFSTACKS_H

#include "core/model.h"
#include "out/perfetto.h"

struct pfstacks;

/* A writer of samples into pt; NULL on ENOMEM. */
struct pfstacks *pfstacks__new(struct pftrace *pt);
/* Frees; accepts NULL. The packets are already in pt. */
void pfstacks__free(struct pfstacks *ps);
/* The sink writing the model's samples. */
struct sink pfstacks__sink(struct pfstacks *ps);
/* Bytes written for samples so far (for the benchmark). */
uint64_t pfstacks__bytes(const struct pfstacks *ps);

#endif
