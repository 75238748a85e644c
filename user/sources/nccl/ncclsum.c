// SPDX-License-Identifier: MIT
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include "lib/hmap.h"
#include "lib/ncclbw.h"
#include "lib/outname.h"
#include "lib/stats.h"
#include "lib/stragalign.h"
#include "lib/straggle.h"
#include "lib/sumtab.h"
#include "out/perfetto.h"
#include "sources/nccl/nccl.h"
#include "sources/nccl/ncclsum.h"

struct op_sum {
	uint64_t calls;		/* returned, not nested */
	uint64_t errors;
	uint64_t grouped;	/* enqueued in a group */
	uint64_t bytes;		/* successful calls, grouped ones included */
	struct stats time;	/* successful calls outside groups */
	/* Bandwidth over timed calls on communicators of known size. */
	uint64_t bw_time;
	double size, bus_size;
	uint64_t unknown_size;	/* timed calls left out of the bandwidth */
};

struct ncclsum {
	const struct model *m;
	struct op_sum ops[NC_FN__COUNT];
	struct stats groups;
	uint64_t group_ops, group_bytes;
	uint64_t nested;
	struct straggle *strag;	/* nccl_stragglers: every rank's operations */
	struct stragalign *align;	/* ... of communicators older than the capture */
	struct hmap env_read;	/* pids whose RANK/WORLD_SIZE were read (1: found) */
	char **env_attr;	/* "pid rank world job" of each, for cgbpf stats */
	size_t nenv;
	bool strag_oom;
	char host[65];		/* as the trace's cgbpf.hostname */
};

struct ncclsum *ncclsum__new(const struct model *m)
{
	struct ncclsum *s = calloc(1, sizeof(*s));
	struct utsname u;

	if (!s)
		return NULL;
	s->m = m;
	s->strag = straggle__new();
	s->align = stragalign__new();
	if (!s->strag || !s->align) {
		straggle__free(s->strag);
		stragalign__free(s->align);
		free(s);
		return NULL;
	}
	if (!uname(&u))
		snprintf(s->host, sizeof(s->host), "%s", u.nodename);
	return s;
}

void ncclsum__free(struct ncclsum *s)
{
	if (!s)
		return;
	for (int i = 0; i < NC_FN__COUNT; i++)
		stats__free(&s->ops[i].time);
	stats__free(&s->groups);
	straggle__free(s->strag);
	stragalign__free(s->align);
	hmap__free(&s->env_read);
	for (size_t i = 0; i < s->nenv; i++)
		free(s->env_attr[i]);
	free(s->env_attr);
	free(s);
}

/* pid's RANK, WORLD_SIZE and job, read once (while it lives: its first
 * operation on a communicator older than the capture). 0 or -ENOMEM. */
static int learn_env(struct ncclsum *s, uint32_t pid)
{
	char job[160], attr[224], **n;
	int rank, world;

	if (hmap__get(&s->env_read, pid))
		return 0;
	if (hmap__put(&s->env_read, pid, 1))
		return -ENOMEM;
	stragalign__read_env(outname__proc_env, NULL, (pid_t)pid, &rank, &world, job,
			     sizeof(job));
	if (rank < 0 || world < 2)
		return 0;
	n = realloc(s->env_attr, (s->nenv + 1) * sizeof(*n));
	if (!n)
		return -ENOMEM;
	s->env_attr = n;
	snprintf(attr, sizeof(attr), "%u %d %d %s", pid, rank, world, job);
	if (!(s->env_attr[s->nenv] = strdup(attr)))
		return -ENOMEM;
	s->nenv++;
	return stragalign__env(s->align, s->host, pid, rank, world, job);
}

/* An operation for nccl_stragglers: its communicator as its track names
 * it (user/sources/nccl/ncclpf.c), rank and size unknown without an id
 * shared by the ranks. */
static void add_op(struct ncclsum *s, const struct thread *t, const struct call *c,
		   const struct nccl_call *nc)
{
	const struct nccl_comm *comm = nc->comm;
	bool p2p = nccl_funcs[c->func].cls == NC_C_P2P;
	struct straggle_op op = {
		.host = s->host, .rank = comm->id ? comm->rank : -1, .nranks = comm->nranks,
		.pid = comm->pid, .tid = t->tid, .name = c->name, .seq = nc->seq,
		.peer = p2p ? nc->root : -1,
		.recv = p2p && nccl_funcs[c->func].coll == NCOLL_RECV, .ts = c->ts,
		.end = c->end_ts,
	};
	char id[64];

	if (comm->id)
		snprintf(id, sizeof(id), "%04x", nccl__short_id(comm->id));
	else
		snprintf(id, sizeof(id), "(0x%" PRIx64 ")", comm->handle);
	op.comm = id;
	if (p2p && op.peer < 0)
		op.seq = 0;
	if (!comm->id && !p2p && comm->older) {
		/* Older than the capture: aligned at the end, through the
		 * environment's RANK and WORLD_SIZE. */
		if (learn_env(s, comm->pid) || stragalign__op(s->align, &op, nc->bytes))
			s->strag_oom = true;
		return;
	}
	if (straggle__add(s->strag, &op))
		s->strag_oom = true;
}

static void on_end(void *ctx, struct thread *t, struct call *c)
{
	struct ncclsum *s = ctx;
	const struct nccl_call *nc;
	const struct nccl_func *f;
	struct op_sum *o;
	bool ok;
	uint64_t dur;

	if (c->lib != LIB_NCCL || !(nc = nccl__call(t, c)))
		return;
	f = &nccl_funcs[c->func];
	/* What its communicator's track shows, as cgbpf stats reads it. */
	if (!nc->nested && nc->comm && (f->cls == NC_C_COLL || f->cls == NC_C_P2P))
		add_op(s, t, c, nc);
	if (!c->ended)
		return;
	if (nc->nested) {
		s->nested++;
		return;
	}
	o = &s->ops[c->func];
	ok = c->ret == 0;
	dur = c->end_ts - c->ts;
	o->calls++;
	if (c->ret)
		o->errors++;
	if (nc->group_close) {
		stats__add(&s->groups, c->end_ts - nc->group_ts);
		s->group_ops += nc->group_ops;
		s->group_bytes += nc->group_bytes;
	}
	if ((f->cls != NC_C_COLL && f->cls != NC_C_P2P) || !ok)
		return;
	o->bytes += nc->bytes;
	if (nc->grouped) {
		o->grouped++;
		return;
	}
	stats__add(&o->time, dur);
	if (!nc->comm || nc->comm->nranks < 1) {
		o->unknown_size++;
		return;
	}
	o->bw_time += dur;
	o->size += nc->bytes * ncclbw__size_factor(f->coll, nc->comm->nranks);
	o->bus_size += nc->bytes * ncclbw__size_factor(f->coll, nc->comm->nranks) *
		       ncclbw__bus_factor(f->coll, nc->comm->nranks);
}

struct sink ncclsum__sink(struct ncclsum *s)
{
	return (struct sink){ .ctx = s, .call_end = on_end };
}

/* Every communicator of every traced process, for sumtab; NULL with *n
 * 0 when there is none (or on ENOMEM). */
static struct sumtab_nccl_comm *comms(const struct ncclsum *s, size_t *n)
{
	struct sumtab_nccl_comm *all = NULL;
	const struct nccl_comm *c;
	size_t cap = 0;
	uint64_t v;

	*n = 0;
	for (size_t it = 0; hmap__next(&s->m->procs, &it, NULL, &v);)
		for (c = nccl__comms((const struct proc *)(uintptr_t)v); c; c = c->next) {
			if (*n == cap) {
				size_t nc = cap ? cap * 2 : 16;
				struct sumtab_nccl_comm *a = realloc(all, nc * sizeof(*a));

				if (!a) {
					free(all);
					*n = 0;
					return NULL;
				}
				all = a;
				cap = nc;
			}
			all[(*n)++] = (struct sumtab_nccl_comm){ .id = c->id, .handle = c->handle,
								 .rank = c->rank, .nranks = c->nranks,
								 .pid = c->pid };
		}
	return all;
}

void ncclsum__describe(const struct ncclsum *s, struct pftrace *pt)
{
	struct sumtab_nccl_comm *all;
	const struct nccl_comm *c;
	size_t n;
	uint64_t v;

	if (!s || !pt)
		return;
	all = comms(s, &n);
	/* nccl_sum lists the communicators as the capture ended: cgbpf stats
	 * reads them here (id handle rank nranks pid). */
	for (size_t i = 0; i < n; i++) {
		char v[96];

		snprintf(v, sizeof(v), "%" PRIx64 " %" PRIx64 " %d %d %u", all[i].id, all[i].handle,
			 all[i].rank, all[i].nranks, all[i].pid);
		pftrace__attribute(pt, "cgbpf.nccl_comm", v);
	}
	free(all);
	/* And the environment of processes with communicators older than the
	 * capture (pid rank world job), for their alignment; communicators
	 * of unknown id that are not older (a split of one) are not aligned. */
	for (size_t i = 0; i < s->nenv; i++)
		pftrace__attribute(pt, "cgbpf.nccl_env", s->env_attr[i]);
	for (size_t it = 0; s->nenv && hmap__next(&s->m->procs, &it, NULL, &v);)
		for (c = nccl__comms((const struct proc *)(uintptr_t)v); c; c = c->next) {
			char x[64];

			if (c->id || c->older)
				continue;
			snprintf(x, sizeof(x), "%u (0x%" PRIx64 ")", c->pid, c->handle);
			pftrace__attribute(pt, "cgbpf.nccl_newer", x);
		}
}

void ncclsum__activity(struct ncclsum *s,
		       int (*fn)(void *ctx, const struct straggle_named *n, FILE *f), void *ctx)
{
	straggle__activity(s->strag, fn, ctx);
}

void ncclsum__print(const void *ctx, const uint64_t *drops, FILE *f)
{
	/* Medians sort their samples in place. */
	struct ncclsum *s = (struct ncclsum *)ctx;
	struct sumtab_nccl_op ops[NC_FN__COUNT];
	struct sumtab_nccl t = { .ops = ops, .nops = NC_FN__COUNT, .groups = &s->groups,
				 .group_ops = s->group_ops, .group_bytes = s->group_bytes,
				 .nested = s->nested };

	(void)drops;
	for (int i = 0; i < NC_FN__COUNT; i++) {
		struct op_sum *o = &s->ops[i];

		ops[i] = (struct sumtab_nccl_op){
			.name = nccl_funcs[i].name,
			.transfer = nccl_funcs[i].cls == NC_C_COLL || nccl_funcs[i].cls == NC_C_P2P,
			.calls = o->calls, .errors = o->errors, .grouped = o->grouped,
			.bytes = o->bytes, .time = &o->time, .bw_time = o->bw_time,
			.unknown_size = o->unknown_size, .size = o->size, .bus_size = o->bus_size,
			.gpu = s->m->nccl_gpu ? &s->m->nccl_gpu->fn[i] : NULL,
		};
	}
	t.comms = comms(s, &t.ncomms);
	sumtab__nccl(f, SUMTAB_TEXT, &t);
	free(t.comms);
	/* With two ranks of a communicator or more, as cgbpf stats shows it;
	 * or to say what could not be matched. */
	if (stragalign__feed(s->align, s->strag))
		fprintf(f, "\n   nccl_stragglers: out of memory\n");
	if ((straggle__any(s->strag) || straggle__unknown(s->strag)) &&
	    (s->strag_oom || straggle__print(s->strag, SUMTAB_TEXT, f)))
		fprintf(f, "\n   nccl_stragglers: out of memory\n");
}
