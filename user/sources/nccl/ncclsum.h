/* SPDX-License-Identifier: MIT */
/*
 * The "NCCL Summary" section: per collective / point-to-point function,
 * calls, bytes, host-side time and nccl-tests' algorithm and bus
 * bandwidth; groups; communicators and their ranks.
 */
#ifndef CGBPF_NCCLSUM_H
#define CGBPF_NCCLSUM_H

#include <stdio.h>
#include "core/model.h"

struct straggle_named;

struct ncclsum;
struct pftrace;

/* A summary of m's NCCL calls; m must outlive it (the communicator list
 * is read from m's processes when printing). NULL on ENOMEM. */
struct ncclsum *ncclsum__new(const struct model *m);
/* Frees; accepts NULL. */
void ncclsum__free(struct ncclsum *s);
/* The sink feeding s. */
struct sink ncclsum__sink(struct ncclsum *s);
/* Prints the section (nothing when no NCCL call was seen); ctx is the
 * struct ncclsum (a summary section, user/out/summary.h). */
void ncclsum__print(const void *ctx, const uint64_t *drops, FILE *f);
/* Writes the communicators nccl_sum lists into the trace (attributes
 * cgbpf.nccl_comm), for cgbpf stats. Accepts NULL. */
void ncclsum__describe(const struct ncclsum *s, struct pftrace *pt);
/* nccl_stragglers' named rank's activity (straggle__activity). */
void ncclsum__activity(struct ncclsum *s,
		       int (*fn)(void *ctx, const struct straggle_named *n, FILE *f), void *ctx);

#endif
