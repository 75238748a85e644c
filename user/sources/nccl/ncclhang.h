/* SPDX-License-Identifier: MIT */
/*
 * NCCL hangs, live (record and monitor, --nccl-hang-after): an operation
 * that some ranks of a communicator entered and another has not entered
 * after the limit is said at once on stderr: the communicator, the
 * operation (name, sequence number, bytes), which ranks wait and since
 * when, which rank has not entered it and what that rank is doing now
 * (its threads' states and system calls from /proc, its open traced
 * calls). Only communicators whose every rank is traced on this host are
 * watched: across hosts, a rank's progress is a metric (issue 28).
 */
#ifndef CGBPF_NCCLHANG_H
#define CGBPF_NCCLHANG_H

#include <stdint.h>
#include "core/model.h"

struct ncclhang;

/* A watcher of m's NCCL operations, saying those waiting past after_ns;
 * NULL on ENOMEM. */
struct ncclhang *ncclhang__new(const struct model *m, uint64_t after_ns);
void ncclhang__free(struct ncclhang *h);
/* The sink feeding it (call begins and ends). */
struct sink ncclhang__sink(struct ncclhang *h);
/* Looks at the open operations (at most every 500 ms of now, BOOTTIME
 * ns); returns how many were newly said (a monitor dumps then). */
unsigned ncclhang__tick(struct ncclhang *h, uint64_t now);
/* Operations said so far. */
uint64_t ncclhang__said(const struct ncclhang *h);

#endif
