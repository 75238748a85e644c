/* SPDX-License-Identifier: MIT */
/*
 * Communicators created before the capture (record -p, -a on a running
 * job: "rank ?/?"), matched for nccl_stragglers anyway: each process's
 * rank and the job's size come from its environment (RANK, WORLD_SIZE, as
 * torchrun, Slurm wrappers and Ray Train set them; the job from
 * TORCHELASTIC_RUN_ID, else MASTER_ADDR:MASTER_PORT, else SLURM_JOB_ID),
 * and the ranks' collectives, numbered from each capture's start, are
 * aligned by operation and time: the rank whose first operation came
 * last is the reference, and another rank's operation that is the same
 * (name and bytes) and overlaps the reference's first one in time (every
 * rank is inside a blocking collective at once when its last rank
 * enters) is the same instance; the next ones must agree. Then they go to
 * the report as one communicator ("env:" and 4 hex digits of the job's
 * hash) with the WORLD_SIZE ranks.
 *
 * What holds: a process with one such communicator (the world: DDP's;
 * with several, which one is the world is not known: not matched), host
 * calls that block until the peers arrive (CPU collectives, the fake
 * NCCL). On a GPU NCCL's calls return at once and do not overlap: there
 * the GPU-side report from NCCL's profiler plugin matches them. Whatever
 * is not matched is counted, by reason, in the report's notes.
 */
#ifndef CGBPF_STRAGALIGN_H
#define CGBPF_STRAGALIGN_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "lib/straggle.h"

struct stragalign;

struct stragalign *stragalign__new(void);
void stragalign__free(struct stragalign *a);
/* A collective of a communicator of unknown rank (op->rank < 0; op->comm
 * names it in its process, e.g. "(0x55d0c0)"), with its bytes. 0 or
 * -ENOMEM. */
int stragalign__op(struct stragalign *a, const struct straggle_op *op, uint64_t bytes);
/* Process pid of host had RANK=rank, WORLD_SIZE=world, and the job key
 * (may be ""). 0 or -ENOMEM. */
int stragalign__env(struct stragalign *a, const char *host, uint32_t pid, int rank, int world,
		    const char *job);
/* Communicator label of pid of host is not older than the capture (its
 * id is unknown because it was split from one that is): not aligned. */
int stragalign__newer(struct stragalign *a, const char *host, uint32_t pid, const char *label);
/* Aligns what it can, adds it to s, counts the rest in s's unknown
 * operations and says how (straggle__note). Once; later calls do
 * nothing. 0 or -ENOMEM. */
int stragalign__feed(struct stragalign *a, struct straggle *s);
/* Operations held (not fed yet). */
uint64_t stragalign__held(const struct stragalign *a);

/* The environment's job key of pid ("" when none) and its rank and world
 * size (-1 when absent or not numbers): RANK and WORLD_SIZE, else
 * SLURM_PROCID and SLURM_NTASKS, else LOCAL_RANK and LOCAL_WORLD_SIZE
 * where WORLD_SIZE is absent or the same (one node); read with get(ctx,
 * pid, name, buf, n) (outname__proc_env's signature). */
void stragalign__read_env(int (*get)(void *ctx, pid_t pid, const char *name, char *buf,
				     size_t n),
			  void *ctx, pid_t pid, int *rank, int *world, char *job, size_t cap);

#endif
