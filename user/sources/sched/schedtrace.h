/* SPDX-License-Identifier: MIT */
/*
 * The scheduler domain: scheduler records (bpf/sched_rec.h) to Perfetto
 * ftrace bundles (one packet sequence per CPU, compact_sched for switches
 * and wakings with --sched all, explicit sched_switch / sched_waking
 * events with --sched targets), ProcessTree packets for every task seen,
 * and per-thread state times for the summary.
 */
#ifndef CGBPF_SCHEDTRACE_H
#define CGBPF_SCHEDTRACE_H

#include <stdint.h>
#include <stdio.h>
#include "core/model.h"
#include "core/opts.h"
#include "lib/hmap.h"
#include "out/perfetto.h"

struct cgbpf_bpf;
struct schedtrace;

/* Between open and load: the scope knob, the ring size, and no programs
 * loaded for SCHED_OFF. */
int schedtrace__prepare(struct cgbpf_bpf *skel, enum sched_scope scope, uint64_t ring_bytes);
/* After load: attaches the scheduler programs (nothing for SCHED_OFF). */
int schedtrace__attach(struct cgbpf_bpf *skel, enum sched_scope scope);

/* A decoder writing into pt (NULL: summary only). targets holds the tgids
 * whose threads the summary reports (record.c's live set). NULL + errno. */
struct schedtrace *schedtrace__new(struct pftrace *pt, struct model *m, enum sched_scope scope,
				   const struct hmap *targets);
/* Frees; accepts NULL. */
void schedtrace__free(struct schedtrace *s);
/* ring_buffer sample callback for the sched_events ring. */
int schedtrace__handle(void *ctx, void *data, size_t size);
/* Writes every pending bundle and process-tree entry. */
void schedtrace__flush(struct schedtrace *s);
/* Capture windows: keep(ctx, ts) says whether a switch or waking at ts
 * is written (the summary counts them all). */
void schedtrace__set_keep(struct schedtrace *s, bool (*keep)(void *ctx, uint64_t ts), void *ctx);
/* The summary's "Scheduler" section; lost[] is the drops per record type. */
void schedtrace__print(const void *s, const uint64_t *lost, FILE *f);
/* Counters for tests and the benchmark. */
uint64_t schedtrace__switches(const struct schedtrace *s);

#endif
