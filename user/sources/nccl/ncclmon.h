/* SPDX-License-Identifier: MIT */
/*
 * cgbpf monitor's NCCL metrics per communicator and rank: the sequence
 * number of the last collective each rank entered (cgbpf_nccl_last_seq,
 * what "rank R is behind" alerts compare across a communicator's ranks),
 * and its operations, bytes and host-side time. Fed by the model from the
 * NCCL call records the monitor's BPF programs send (NCCL calls only,
 * flight recorder or not); the communicator id, rank and sequence number
 * are the decoder's (user/sources/nccl/nccl.c), in user space. Rows of a
 * process that exited go at the second sweep that finds it gone, so the
 * labels stay bounded by the live ranks.
 */
#ifndef CGBPF_NCCLMON_H
#define CGBPF_NCCLMON_H

#include <stdbool.h>
#include <stdint.h>
#include "core/model.h"

struct ncclmon;

struct ncclmon *ncclmon__new(void);
void ncclmon__free(struct ncclmon *nm);
/* The sink feeding it. */
struct sink ncclmon__sink(struct ncclmon *nm);
/* Forgets each process alive() says is gone at two sweeps in a row. */
void ncclmon__sweep(struct ncclmon *nm, bool (*alive)(uint32_t pid));
/* The metrics, Prometheus text format, line by line through out(ctx, line). */
void ncclmon__render(const struct ncclmon *nm, void (*out)(void *ctx, const char *line),
		     void *ctx);
/* Rows held (communicator and rank of a live process). */
size_t ncclmon__rows(const struct ncclmon *nm);

#endif
