// SPDX-License-Identifier: MIT
/*
 * nccl_stragglers for communicators older than the capture: RANK and
 * WORLD_SIZE from the environment, collectives aligned by operation and
 * time (user/lib/stragalign.h says what holds and why).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "lib/arr.h"
#include "lib/hmap.h"
#include "lib/stragalign.h"

#define ANCHOR_WITHIN 64	/* a rank's first operations searched for the anchor */
#define AGREE 8			/* operations after the anchor that must agree */

struct aop {
	uint64_t ts, end, name, bytes;
	uint32_t name_ix;	/* into the names */
};

/* A communicator of unknown rank in one process. */
struct acomm {
	char *host, *label;
	uint32_t pid;
	bool newer;		/* stragalign__newer */
	struct aop *ops;
	size_t n, cap;
	/* While feeding. */
	int rank, world;
	const char *job;
	long shift;		/* its index of the reference's first operation; -1: none */
	int why;		/* enum why */
};

struct aenv {
	char *host, *job;
	uint32_t pid;
	int rank, world;
};

enum why { W_OK, W_NO_ENV, W_NEWER, W_SEVERAL, W_ONE_RANK, W_SAME_RANK, W_NO_ANCHOR, W__COUNT };

struct stragalign {
	struct acomm *c;
	size_t nc, capc;
	struct hmap ix;		/* hash(host, pid, label) (+ probe) -> index + 1 */
	struct aenv *e;
	size_t ne, cape;
	char **names;		/* operation names, interned */
	size_t nnames, capnames;
	struct hmap name_ix;	/* hash(name) (+ probe) -> index + 1 */
	uint64_t held;
	bool fed;
};

struct stragalign *stragalign__new(void)
{
	return calloc(1, sizeof(struct stragalign));
}

void stragalign__free(struct stragalign *a)
{
	if (!a)
		return;
	for (size_t i = 0; i < a->nc; i++) {
		free(a->c[i].host);
		free(a->c[i].label);
		free(a->c[i].ops);
	}
	for (size_t i = 0; i < a->ne; i++) {
		free(a->e[i].host);
		free(a->e[i].job);
	}
	for (size_t i = 0; i < a->nnames; i++)
		free(a->names[i]);
	free(a->names);
	free(a->c);
	free(a->e);
	hmap__free(&a->ix);
	hmap__free(&a->name_ix);
	free(a);
}

static uint64_t key(const char *host, uint32_t pid, const char *label)
{
	return hash__bytes(host, strlen(host)) ^ hash__u64(pid) ^
	       hash__u64(hash__bytes(label, strlen(label)));
}

static struct acomm *comm_of(struct stragalign *a, const struct straggle_op *op)
{
	uint64_t h = key(op->host, op->pid, op->comm), *v;
	struct acomm *c;

	for (; (v = hmap__get(&a->ix, h)); h++) {
		c = &a->c[*v - 1];
		if (c->pid == op->pid && !strcmp(c->host, op->host) && !strcmp(c->label, op->comm))
			return c;
	}
	if (arr__grow((void **)&a->c, &a->capc, a->nc, sizeof(*a->c)))
		return NULL;
	c = &a->c[a->nc];
	memset(c, 0, sizeof(*c));
	c->host = strdup(op->host);
	c->label = strdup(op->comm);
	c->pid = op->pid;
	if (!c->host || !c->label || hmap__put(&a->ix, h, a->nc + 1)) {
		free(c->host);
		free(c->label);
		return NULL;
	}
	a->nc++;
	return c;
}

static long name_of(struct stragalign *a, const char *name)
{
	uint64_t h = hash__bytes(name, strlen(name)), *v;

	for (; (v = hmap__get(&a->name_ix, h)); h++)
		if (!strcmp(a->names[*v - 1], name))
			return (long)(*v - 1);
	if (arr__grow((void **)&a->names, &a->capnames, a->nnames, sizeof(*a->names)))
		return -1;
	a->names[a->nnames] = strdup(name);
	if (!a->names[a->nnames] || hmap__put(&a->name_ix, h, a->nnames + 1)) {
		free(a->names[a->nnames]);
		return -1;
	}
	return (long)a->nnames++;
}

int stragalign__newer(struct stragalign *a, const char *host, uint32_t pid, const char *label)
{
	struct straggle_op op = { .host = host, .pid = pid, .comm = label };
	struct acomm *c = a->fed ? NULL : comm_of(a, &op);

	if (!c && !a->fed)
		return -ENOMEM;
	if (c)
		c->newer = true;
	return 0;
}

int stragalign__op(struct stragalign *a, const struct straggle_op *op, uint64_t bytes)
{
	struct acomm *c;
	long nm;

	if (a->fed)
		return 0;
	c = comm_of(a, op);
	nm = c ? name_of(a, op->name) : -1;
	if (nm < 0 || arr__grow((void **)&c->ops, &c->cap, c->n, sizeof(*c->ops)))
		return -ENOMEM;
	c->ops[c->n++] = (struct aop){ .ts = op->ts, .end = op->end, .bytes = bytes,
				       .name = hash__bytes(op->name, strlen(op->name)),
				       .name_ix = (uint32_t)nm };
	a->held++;
	return 0;
}

int stragalign__env(struct stragalign *a, const char *host, uint32_t pid, int rank, int world,
		    const char *job)
{
	struct aenv *e;

	for (size_t i = 0; i < a->ne; i++)
		if (a->e[i].pid == pid && !strcmp(a->e[i].host, host))
			return 0;
	if (arr__grow((void **)&a->e, &a->cape, a->ne, sizeof(*a->e)))
		return -ENOMEM;
	e = &a->e[a->ne];
	e->host = strdup(host);
	e->job = strdup(job ? job : "");
	e->pid = pid;
	e->rank = rank;
	e->world = world;
	if (!e->host || !e->job) {
		free(e->host);
		free(e->job);
		return -ENOMEM;
	}
	a->ne++;
	return 0;
}

uint64_t stragalign__held(const struct stragalign *a)
{
	return a ? a->held : 0;
}

/* Each communicator's rank and job, or why it has none. */
static void place(struct stragalign *a)
{
	for (size_t i = 0; i < a->nc; i++) {
		struct acomm *c = &a->c[i];

		c->why = c->newer ? W_NEWER : W_NO_ENV;
		c->shift = -1;
		if (c->newer)
			continue;
		for (size_t j = 0; j < a->ne; j++) {
			const struct aenv *e = &a->e[j];

			if (e->pid != c->pid || strcmp(e->host, c->host))
				continue;
			if (e->rank >= 0 && e->world >= 2 && e->rank < e->world) {
				c->rank = e->rank;
				c->world = e->world;
				c->job = e->job;
				c->why = W_OK;
			}
			break;
		}
		/* Two such communicators in one process: which is the world? */
		for (size_t j = 0; j < a->nc && c->why == W_OK; j++)
			if (j != i && !a->c[j].newer && a->c[j].n && a->c[j].pid == c->pid &&
			    !strcmp(a->c[j].host, c->host))
				c->why = W_SEVERAL;
	}
}

static bool same_job(const struct acomm *x, const struct acomm *y)
{
	return x->job && y->job && x->world == y->world && !strcmp(x->job, y->job);
}

static bool agree(const struct aop *x, const struct aop *y)
{
	return x->name == y->name && x->bytes == y->bytes;
}

/* Where c's operations meet the reference's first one; -1: nowhere. */
static long anchor(const struct acomm *c, const struct acomm *ref)
{
	const struct aop *r0 = &ref->ops[0];

	for (size_t i = 0; i < c->n && i < ANCHOR_WITHIN; i++) {
		const struct aop *o = &c->ops[i];
		bool ok = agree(o, r0) && o->ts <= r0->end && r0->ts <= o->end;

		for (size_t k = 1; ok && k <= AGREE && i + k < c->n && k < ref->n; k++)
			ok = agree(&c->ops[i + k], &ref->ops[k]);
		if (ok)
			return (long)i;
	}
	return -1;
}

/* The ranks of one job: a reference, each one's shift, or why not. */
static void align_job(struct stragalign *a, size_t first)
{
	const struct acomm *job = &a->c[first];
	struct acomm *ref = NULL;
	size_t ranks = 0;

	for (size_t i = first; i < a->nc; i++)
		for (size_t j = first; j < i; j++)
			if (a->c[i].why == W_OK && a->c[j].why != W_NO_ENV &&
			    a->c[j].why != W_NEWER && a->c[j].why != W_SEVERAL &&
			    same_job(&a->c[j], &a->c[i]) &&
			    same_job(&a->c[i], job) && a->c[j].rank == a->c[i].rank)
				a->c[i].why = a->c[j].why = W_SAME_RANK;
	for (size_t i = first; i < a->nc; i++) {
		struct acomm *c = &a->c[i];

		if (c->why != W_OK || !same_job(c, job) || !c->n)
			continue;
		ranks++;
		if (!ref || c->ops[0].ts > ref->ops[0].ts)
			ref = c;
	}
	for (size_t i = first; i < a->nc; i++) {
		struct acomm *c = &a->c[i];

		if (c->why != W_OK || !same_job(c, job))
			continue;
		if (ranks < 2 || !c->n) {
			c->why = W_ONE_RANK;
			continue;
		}
		c->shift = c == ref ? 0 : anchor(c, ref);
		if (c->shift < 0)
			c->why = W_NO_ANCHOR;
	}
}

static int feed_comm(struct stragalign *a, struct straggle *s, const struct acomm *c,
		     const char *id)
{
	for (size_t i = 0; i < c->n; i++) {
		const struct aop *o = &c->ops[i];
		struct straggle_op op = {
			.host = c->host, .comm = id, .rank = c->rank, .nranks = c->world,
			.pid = c->pid, .name = a->names[o->name_ix], .peer = -1, .ts = o->ts,
			.end = o->end,
			/* From the anchor on, every rank's numbers agree. */
			.seq = (1ull << 32) + i - (uint64_t)c->shift, .how = "env+time",
		};
		int err = straggle__add(s, &op);

		if (err)
			return err;
	}
	return 0;
}

int stragalign__feed(struct stragalign *a, struct straggle *s)
{
	static const char *const why_text[W__COUNT] = {
		[W_NO_ENV] = "no RANK and WORLD_SIZE in the process's environment",
		[W_NEWER] = "split during the capture from a communicator older than it (no id "
			    "the ranks share)",
		[W_SEVERAL] = "several of them in one process: which is the world is not known",
		[W_ONE_RANK] = "one rank of the job traced",
		[W_SAME_RANK] = "two processes with one RANK in one job",
		[W_NO_ANCHOR] = "no operation overlapping the other ranks' in time (on a GPU, NCCL "
				"calls return at once: NCCL's profiler plugin matches them)",
	};
	uint64_t lost[W__COUNT] = { 0 }, fed = 0, ranks = 0;
	char line[256];
	int err = 0;

	if (!a || a->fed)
		return 0;
	a->fed = true;
	place(a);
	/* Each job once, from its first communicator (the earlier ones of
	 * another job, or without one, do not count). */
	for (size_t i = 0; i < a->nc; i++) {
		bool seen = false;

		for (size_t j = 0; j < i && !seen && a->c[i].why == W_OK; j++)
			seen = a->c[j].why != W_NO_ENV && a->c[j].why != W_NEWER &&
			       a->c[j].why != W_SEVERAL && same_job(&a->c[j], &a->c[i]);
		if (a->c[i].why == W_OK && !seen)
			align_job(a, i);
	}
	for (size_t i = 0; i < a->nc && !err; i++) {
		const struct acomm *c = &a->c[i];
		char id[32];

		if (c->why != W_OK) {
			lost[c->why] += c->n;
			continue;
		}
		snprintf(id, sizeof(id), "env:%04x",
			 (unsigned)(hash__bytes(c->job, strlen(c->job)) ^
				    hash__u64((uint64_t)c->world)) & 0xffff);
		err = feed_comm(a, s, c, id);
		fed += c->n;
		ranks++;
	}
	if (fed) {
		snprintf(line, sizeof(line), "matched by RANK/WORLD_SIZE and alignment by operation "
			 "and time (communicators older than the capture): %" PRIu64 " operation(s) "
			 "of %" PRIu64 " rank(s)", fed, ranks);
		err = err ? err : straggle__note(s, line);
	}
	for (int w = W_NO_ENV; w < W__COUNT && !err; w++) {
		if (!lost[w])
			continue;
		straggle__count_unknown(s, lost[w]);
		snprintf(line, sizeof(line), "not aligned: %" PRIu64 " operation(s) of "
			 "communicators of unknown id: %s", lost[w], why_text[w]);
		err = straggle__note(s, line);
	}
	return err;
}

static int env_int(int (*get)(void *, pid_t, const char *, char *, size_t), void *ctx,
		   pid_t pid, const char *name)
{
	char buf[32], *end;
	long v;

	if (get(ctx, pid, name, buf, sizeof(buf)))
		return -1;
	v = strtol(buf, &end, 10);
	return *buf && !*end && v >= 0 && v < (1 << 20) ? (int)v : -1;
}

void stragalign__read_env(int (*get)(void *ctx, pid_t pid, const char *name, char *buf,
				     size_t n),
			  void *ctx, pid_t pid, int *rank, int *world, char *job, size_t cap)
{
	char a[128], b[32];

	*rank = env_int(get, ctx, pid, "RANK");
	*world = env_int(get, ctx, pid, "WORLD_SIZE");
	if (*rank < 0 || *world < 1) {
		/* srun's own numbering, for jobs that set no RANK. */
		int r = env_int(get, ctx, pid, "SLURM_PROCID"), n = env_int(get, ctx, pid,
									     "SLURM_NTASKS");

		if (r >= 0 && n > 0) {
			*rank = r;
			*world = n;
		}
	}
	if (*rank < 0) {
		/* One node's launcher (LOCAL_RANK of LOCAL_WORLD_SIZE): the
		 * rank only where the node is the whole job. */
		int r = env_int(get, ctx, pid, "LOCAL_RANK"), n = env_int(get, ctx, pid,
									   "LOCAL_WORLD_SIZE");

		if (r >= 0 && n > 0 && (*world < 1 || *world == n)) {
			*rank = r;
			*world = n;
		}
	}
	*job = 0;
	if (!get(ctx, pid, "TORCHELASTIC_RUN_ID", a, sizeof(a)))
		snprintf(job, cap, "%s", a);
	else if (!get(ctx, pid, "MASTER_ADDR", a, sizeof(a)) &&
		 !get(ctx, pid, "MASTER_PORT", b, sizeof(b)))
		snprintf(job, cap, "%s:%s", a, b);
	else if (!get(ctx, pid, "SLURM_JOB_ID", a, sizeof(a)))
		snprintf(job, cap, "slurm %s", a);
}
