// SPDX-License-Identifier: MIT
/*
 * NCCL (libnccl.so.2) call decoding. Communicators are learned from the
 * calls that create them (their handle comes back through an out pointer
 * read at return) and from ncclCommCount / ncclCommUserRank; groups from
 * ncclGroupStart / ncclGroupEnd per thread. A call NCCL makes to its own
 * API from inside another (ncclBcast calls ncclBroadcast through the PLT
 * in NVIDIA's build) is marked nested and counted nowhere.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "agg.h"
#include "nccl_hash.h"
#include "core/apilib.h"
#include "lib/arr.h"
#include "sources/nccl/nccl.h"

#define NCCL_FUNC_DESC(sym, cls_, coll_, cnt, dt, op, root_, comm_, st) \
	[NC_FN_##sym] = { #sym, cls_, coll_, cnt, dt, op, root_, comm_, st },
const struct nccl_func nccl_funcs[NC_FN__COUNT] = { NCCL_FUNCS(NCCL_FUNC_DESC) };
#undef NCCL_FUNC_DESC

#define NCCL_IN_PROGRESS 7	/* ncclInProgress: a non-blocking call goes on */

struct nccl_thread {
	int group_depth;
	uint64_t group_ts;
	uint32_t group_ops;
	uint64_t group_bytes;
	struct nccl_call calls[CALL_DEPTH];	/* by position in the thread's call stack */
};

struct nccl_proc {
	struct hmap comms;	/* handle -> struct nccl_comm *, live ones */
	struct hmap seeds;	/* handle -> const struct nccl_seed * (nccl__seed) */
	struct hmap threads;	/* tid -> struct nccl_thread * */
	struct nccl_comm *first, *last;
	uint32_t ncomms;
	uint32_t init_alls;
};

static const char *const dtype_names[] = {
	"int8", "uint8", "int32", "uint32", "int64", "uint64", "float16", "float32",
	"float64", "bfloat16", "float8e4m3", "float8e5m2",
};
static const uint8_t dtype_sizes[] = { 1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1 };
static const char *const redop_names[] = { "sum", "prod", "max", "min", "avg" };
static const char *const result_names[] = {
	"ncclSuccess", "ncclUnhandledCudaError", "ncclSystemError", "ncclInternalError",
	"ncclInvalidArgument", "ncclInvalidUsage", "ncclRemoteError", "ncclInProgress",
};

#define COUNT_OF(a) (sizeof(a) / sizeof((a)[0]))

unsigned nccl__dtype_size(int dtype)
{
	return dtype >= 0 && dtype < (int)COUNT_OF(dtype_sizes) ? dtype_sizes[dtype] : 0;
}

const char *nccl__dtype_name(int dtype)
{
	return dtype >= 0 && dtype < (int)COUNT_OF(dtype_names) ? dtype_names[dtype] : NULL;
}

const char *nccl__result_name(int64_t code)
{
	return code >= 0 && code < (int64_t)COUNT_OF(result_names) ? result_names[code] : NULL;
}

static const char *func_name(uint16_t func)
{
	return func < NC_FN__COUNT ? nccl_funcs[func].name : "nccl?";
}

static uint64_t cookie(uint16_t func)
{
	const struct nccl_func *f = &nccl_funcs[func];
	int kind = PK_REGS;

	switch (f->cls) {
	case NC_C_INIT_RANK:
		/* The 128-byte ncclUniqueId is passed by value, in memory
		 * after the return address: BPF hashes it as NCCL does (its
		 * commHash); rank moves up to the third register. */
		return CK_MAKE_OUT(LIB_NCCL, func, PK_NCCL_UID, 0, 0);
	case NC_C_INIT_ALL:
		/* comms[0 .. ndev - 1]: all read at the return. */
		return CK_MAKE_OUT(LIB_NCCL, func, PK_REGS, 0, 0) | CK_OUT_ARRAY;
	case NC_C_SPLIT:
		return CK_MAKE_OUT(LIB_NCCL, func, PK_REGS, 3, 0);
	case NC_C_COUNT:
	case NC_C_USER_RANK:
		return CK_MAKE_OUT(LIB_NCCL, func, PK_REGS, 1, 1);
	}
	if (f->comm >= 6 || f->stream >= 6 || f->root >= 6)
		kind = PK_STACK3;
	return CK_MAKE(LIB_NCCL, func, kind, 0, 0);
}

/* ------------------------------------------------------------ state */

static struct nccl_proc *proc_state(struct proc *p)
{
	if (!p->lib_state[LIB_NCCL])
		p->lib_state[LIB_NCCL] = calloc(1, sizeof(struct nccl_proc));
	return p->lib_state[LIB_NCCL];
}

static void proc_free(struct proc *p)
{
	struct nccl_proc *np = p->lib_state[LIB_NCCL];
	uint64_t v;

	if (!np)
		return;
	for (size_t it = 0; hmap__next(&np->threads, &it, NULL, &v);)
		free((void *)(uintptr_t)v);
	for (struct nccl_comm *c = np->first, *next; c; c = next) {
		next = c->next;
		hmap__free(&c->p2p_seq);
		free(c);
	}
	hmap__free(&np->threads);
	hmap__free(&np->comms);
	hmap__free(&np->seeds);
	free(np);
	p->lib_state[LIB_NCCL] = NULL;
}

struct nccl_comm *nccl__comms(const struct proc *p)
{
	const struct nccl_proc *np = p->lib_state[LIB_NCCL];

	return np ? np->first : NULL;
}

static struct nccl_thread *thread_state(struct nccl_proc *np, uint32_t tid)
{
	uint64_t *v = hmap__get(&np->threads, tid);
	struct nccl_thread *nt;

	if (v)
		return (void *)(uintptr_t)*v;
	nt = calloc(1, sizeof(*nt));
	if (nt && hmap__put(&np->threads, tid, (uintptr_t)nt)) {
		free(nt);
		nt = NULL;
	}
	return nt;
}

const struct nccl_call *nccl__call(const struct thread *t, const struct call *c)
{
	struct nccl_proc *np = t->proc->lib_state[LIB_NCCL];
	ptrdiff_t i = c - t->stack;
	uint64_t *v;
	const struct nccl_call *nc;

	if (c->lib != LIB_NCCL || !np || i < 0 || i >= CALL_DEPTH)
		return NULL;
	v = hmap__get(&np->threads, t->tid);
	if (!v)
		return NULL;
	nc = &((struct nccl_thread *)(uintptr_t)*v)->calls[i];
	/* The call stack shifts when returns were lost: never hand out
	 * another call's decoding. */
	return nc->ts == c->ts && nc->func == c->func ? nc : NULL;
}

static void relabel(struct nccl_comm *c)
{
	char r[12], n[12];

	snprintf(r, sizeof(r), c->rank >= 0 ? "%d" : "?", c->rank);
	snprintf(n, sizeof(n), c->nranks >= 0 ? "%d" : "?", c->nranks);
	if (c->id)
		snprintf(c->label, sizeof(c->label), "%04x rank %s/%s", nccl__short_id(c->id), r, n);
	else
		snprintf(c->label, sizeof(c->label), "(0x%" PRIx64 ") rank %s/%s", c->handle, r, n);
	if (c->described)
		c->stale = true;
}

/* A new communicator behind handle (replacing a destroyed one whose
 * handle was reused), created by a call entered at ts (0: before the
 * capture). A seed for the handle created no later is this one or an
 * older one, and created in the ring: never to be used. */
static struct nccl_comm *comm_new(struct nccl_proc *np, uint32_t pid, uint64_t handle,
				  uint64_t id, int rank, int nranks, uint64_t ts)
{
	struct nccl_comm *c = calloc(1, sizeof(*c));
	uint64_t *v;

	if (!c)
		return NULL;
	v = ts ? hmap__get(&np->seeds, handle) : NULL;
	if (v && ((const struct nccl_seed *)(uintptr_t)*v)->created_ts <= ts)
		hmap__del(&np->seeds, handle, NULL);
	if (hmap__put(&np->comms, handle, (uintptr_t)c)) {
		free(c);
		return NULL;
	}
	c->handle = handle;
	c->id = id;
	c->created_ts = ts;
	c->pid = pid;
	c->ordinal = ++np->ncomms;
	c->rank = rank;
	c->nranks = nranks;
	relabel(c);
	if (np->last)
		np->last->next = c;
	else
		np->first = c;
	np->last = c;
	return c;
}

/* The live communicator behind handle, used by a call entered at ts; one
 * created before cgbpf attached (or by a call it does not see) gets an
 * entry of unknown id, rank and size when create is set. */
static struct nccl_comm *comm_get(struct nccl_proc *np, uint32_t pid, uint64_t handle,
				  bool create, uint64_t ts)
{
	uint64_t *v = hmap__get(&np->comms, handle);
	struct nccl_comm *c;

	if (v)
		return (void *)(uintptr_t)*v;
	v = create && handle ? hmap__get(&np->seeds, handle) : NULL;
	/* In use before the seed's communicator was created: an older one
	 * behind the same handle, destroyed since. */
	if (v && ((const struct nccl_seed *)(uintptr_t)*v)->created_ts > ts)
		v = NULL;
	if (v) {
		const struct nccl_seed *s = (const void *)(uintptr_t)*v;

		/* Once: a handle used again after a destroy is another. */
		hmap__del(&np->seeds, handle, NULL);
		c = comm_new(np, pid, handle, s->id, s->rank, s->nranks, s->created_ts);
		if (!c)
			return NULL;
		c->older = s->older;
		c->seeded = true;
		c->coll_seq = s->coll_seq;
		for (size_t i = 0; i < s->np2p; i++)
			hmap__put(&c->p2p_seq, s->p2p[i][0], s->p2p[i][1]);
		return c;
	}
	c = create && handle ? comm_new(np, pid, handle, 0, -1, -1, 0) : NULL;
	if (c)
		c->older = true;
	return c;
}

/* ------------------------------------------------------------ annotations */

static void annot(struct call *c, bool end, struct pf_annot a)
{
	struct pf_annot *arr = end ? c->end : c->begin;
	int *n = end ? &c->nend : &c->nbegin;

	if (*n < CALL_ANNOTS)
		arr[(*n)++] = a;
}

static void annot_u(struct call *c, bool end, const char *name, uint64_t v)
{
	annot(c, end, (struct pf_annot){ .name = name, .type = PA_UINT, .u = v });
}

static void annot_i(struct call *c, bool end, const char *name, int64_t v)
{
	annot(c, end, (struct pf_annot){ .name = name, .type = PA_INT, .i = v });
}

static void annot_s(struct call *c, bool end, const char *name, const char *v)
{
	annot(c, end, (struct pf_annot){ .name = name, .type = PA_STR, .s = v });
}

static const char *redop_name(int op, char *buf, size_t len)
{
	if (op >= 0 && op < (int)COUNT_OF(redop_names))
		return redop_names[op];
	/* ncclRedOpCreatePreMulSum's operators are numbered from ncclNumOps. */
	snprintf(buf, len, "custom %d", op);
	return buf;
}

static void annot_comm(struct call *c, bool end, const struct nccl_comm *comm)
{
	if (comm)
		annot_s(c, end, "comm", comm->label);
}

/* The enclosing NCCL call of stack position i, or NULL. */
static const struct call *enclosing(const struct thread *t, ptrdiff_t i)
{
	while (--i >= 0)
		if (t->stack[i].lib == LIB_NCCL)
			return &t->stack[i];
	return NULL;
}

/* ------------------------------------------------------------ seeds */

struct nccl_seed *nccl__seeds(const struct model *m, size_t *n)
{
	struct nccl_seed *s = NULL;
	size_t cap = 0;
	uint64_t v, k, cnt;

	*n = 0;
	for (size_t it = 0; hmap__next(&m->procs, &it, NULL, &v);) {
		const struct proc *p = (const void *)(uintptr_t)v;

		for (const struct nccl_comm *c = nccl__comms(p); c; c = c->next) {
			struct nccl_seed *x;

			if (c->destroyed || !c->handle)
				continue;
			if (arr__grow((void **)&s, &cap, *n, sizeof(*s)))
				goto nomem;
			x = &s[(*n)++];
			memset(x, 0, sizeof(*x));
			x->pid = c->pid;
			x->older = c->older;
			x->rank = c->rank;
			x->nranks = c->nranks;
			x->handle = c->handle;
			x->id = c->id;
			x->created_ts = c->created_ts;
			x->coll_seq = c->coll_seq;
			if (!c->p2p_seq.count)
				continue;
			x->p2p = calloc(c->p2p_seq.count, sizeof(*x->p2p));
			if (!x->p2p)
				goto nomem;
			for (size_t j = 0; hmap__next(&c->p2p_seq, &j, &k, &cnt);) {
				x->p2p[x->np2p][0] = k;
				x->p2p[x->np2p++][1] = cnt;
			}
		}
	}
	return s;
nomem:
	nccl__seeds_free(s, *n);
	*n = 0;
	return NULL;
}

void nccl__seeds_free(struct nccl_seed *s, size_t n)
{
	for (size_t i = 0; s && i < n; i++)
		free(s[i].p2p);
	free(s);
}

void nccl__seed(struct model *m, const struct nccl_seed *s, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		struct proc *p = model__proc(m, s[i].pid);
		struct nccl_proc *np = p ? proc_state(p) : NULL;

		if (np)
			hmap__put(&np->seeds, s[i].handle, (uintptr_t)&s[i]);
	}
}

/* What a first replay entered on a seeded communicator is the live
 * model's last; the rest came before the ring's start. */
void nccl__seeds_rebase(struct nccl_seed *s, size_t n, const struct model *counted)
{
	for (size_t i = 0; i < n; i++) {
		uint64_t *v = hmap__get(&counted->procs, s[i].pid);
		const struct nccl_proc *np = v ? ((const struct proc *)(uintptr_t)*v)
						       ->lib_state[LIB_NCCL] : NULL;
		const struct nccl_comm *c;
		uint64_t *cv = np ? hmap__get(&np->comms, s[i].handle) : NULL;

		if (!cv)
			continue;
		c = (const void *)(uintptr_t)*cv;
		if (!c->seeded)
			continue;
		/* Seeded at the live counts: the replay added its own. */
		s[i].coll_seq = c->coll_seq >= 2 * s[i].coll_seq ? 0 : 2 * s[i].coll_seq - c->coll_seq;
		for (size_t j = 0; j < s[i].np2p; j++) {
			uint64_t *pv = hmap__get(&c->p2p_seq, s[i].p2p[j][0]), live = s[i].p2p[j][1];

			s[i].p2p[j][1] = pv && *pv < 2 * live ? 2 * live - *pv : 0;
		}
	}
}

/* ------------------------------------------------------------ decoding */

/* The number of an operation entering on comm: the comm's next
 * collective, or the next send to / receive from peer. 0: none. */
static uint64_t next_seq(struct nccl_comm *comm, const struct nccl_func *f, int peer)
{
	uint64_t key, *v;

	if (!comm)
		return 0;
	if (f->cls == NC_C_COLL)
		return ++comm->coll_seq;
	if (f->cls != NC_C_P2P || peer < 0)
		return 0;
	key = (uint64_t)peer << 1 | (f->coll == NCOLL_RECV);
	v = hmap__get(&comm->p2p_seq, key);
	if (v)
		return ++*v;
	return hmap__put(&comm->p2p_seq, key, 1) ? 0 : 1;
}

static void decode_op(struct proc *p, struct nccl_proc *np, struct nccl_thread *nt,
		      struct call *c, struct nccl_call *nc)
{
	const struct nccl_func *f = &nccl_funcs[c->func];
	const uint64_t *a = c->args;
	const char *dt;

	nc->count = a[f->count];
	nc->dtype = (int32_t)a[f->dtype];
	nc->bytes = nc->count * nccl__dtype_size(nc->dtype);
	if (f->redop >= 0)
		nc->redop = (int32_t)a[f->redop];
	if (f->root >= 0)
		nc->root = (int32_t)a[f->root];
	nc->comm = comm_get(np, p->pid, a[f->comm], true, c->ts);
	nc->grouped = !nc->nested && nt->group_depth > 0;
	nc->seq = nc->nested ? 0 : next_seq(nc->comm, f, nc->root);
	c->bytes = nc->bytes;

	annot_comm(c, false, nc->comm);
	if (nc->seq)
		annot_u(c, false, "seq", nc->seq);
	annot_u(c, false, "count", nc->count);
	dt = nccl__dtype_name(nc->dtype);
	if (dt)
		annot_s(c, false, "datatype", dt);
	else
		annot_i(c, false, "datatype", nc->dtype);
	annot_u(c, false, "bytes", nc->bytes);
	if (f->redop >= 0)
		annot_s(c, false, "op", redop_name(nc->redop, c->scratch[1], sizeof(c->scratch[1])));
	if (f->root >= 0)
		annot_i(c, false, f->cls == NC_C_P2P ? "peer" : "root", nc->root);
	/* Named as CUDA calls name it (the process's shared ordinals), so a
	 * stream reads the same on NCCL and CUDA slices. */
	annot_s(c, false, "stream",
		model__stream_name(p, a[f->stream], false, c->scratch[2], sizeof(c->scratch[2])));
	if (nc->grouped)
		annot_s(c, false, "group", "enqueued: runs at ncclGroupEnd");
}

static void enter(struct model *m, struct thread *t, struct call *c)
{
	const struct nccl_func *f;
	struct nccl_proc *np = proc_state(t->proc);
	struct nccl_thread *nt = np ? thread_state(np, t->tid) : NULL;
	ptrdiff_t i = c - t->stack;
	const struct call *outer;
	const uint64_t *a = c->args;
	struct nccl_call *nc;

	c->nbegin = 0;
	if (!nt || c->func >= NC_FN__COUNT || i < 0 || i >= CALL_DEPTH)
		return;
	f = &nccl_funcs[c->func];
	nc = &nt->calls[i];
	memset(nc, 0, sizeof(*nc));
	nc->ts = c->ts;
	nc->func = c->func;
	nc->dtype = nc->redop = nc->root = -1;
	outer = enclosing(t, i);
	nc->nested = outer != NULL;
	switch (f->cls) {
	case NC_C_COLL:
	case NC_C_P2P:
		decode_op(t->proc, np, nt, c, nc);
		break;
	case NC_C_GROUP_START:
		if (!nc->nested && nt->group_depth++ == 0) {
			nc->group_open = true;
			nt->group_ts = c->ts;
			nt->group_ops = 0;
			nt->group_bytes = 0;
		}
		break;
	case NC_C_GROUP_END:
		break;
	case NC_C_INIT_RANK:
		annot_i(c, false, "nranks", (int32_t)a[1]);
		annot_i(c, false, "rank", (int32_t)a[2]);
		snprintf(c->scratch[0], sizeof(c->scratch[0]), "%04x",
			 nccl__short_id(a[6]));
		annot_s(c, false, "comm_id", c->scratch[0]);
		break;
	case NC_C_INIT_ALL:
		annot_i(c, false, "ndev", (int32_t)a[1]);
		break;
	case NC_C_SPLIT:
		nc->comm = comm_get(np, t->proc->pid, a[0], true, c->ts);
		annot_comm(c, false, nc->comm);
		annot_i(c, false, "color", (int32_t)a[1]);
		annot_i(c, false, "key", (int32_t)a[2]);
		break;
	case NC_C_COUNT:
	case NC_C_USER_RANK:
		/* Learning a communicator created before attach is their use. */
		nc->comm = comm_get(np, t->proc->pid, a[0], true, c->ts);
		annot_comm(c, false, nc->comm);
		break;
	case NC_C_FREE:
		nc->comm = comm_get(np, t->proc->pid, a[0], false, c->ts);
		annot_comm(c, false, nc->comm);
		break;
	}
	if (outer)
		annot_s(c, false, "nested", outer->name);
}

static void exit_(struct model *m, struct thread *t, struct call *c)
{
	struct nccl_proc *np = t->proc->lib_state[LIB_NCCL];
	struct nccl_thread *nt = np ? thread_state(np, t->tid) : NULL;
	struct nccl_call *nc = (struct nccl_call *)nccl__call(t, c);
	const uint64_t *a = c->args;
	bool ok = c->ret == 0 || c->ret == NCCL_IN_PROGRESS;
	struct nccl_comm *comm;
	uint64_t id = 0;

	c->nend = 0;
	if (c->ret) {
		const char *r = nccl__result_name(c->ret);

		if (r)
			snprintf(c->scratch[0], sizeof(c->scratch[0]), "%s (%" PRId64 ")", r, c->ret);
		else
			snprintf(c->scratch[0], sizeof(c->scratch[0]), "ncclResult_t %" PRId64, c->ret);
		annot_s(c, true, "result", c->scratch[0]);
	}
	if (!nt || !nc)
		return;
	switch (nccl_funcs[c->func].cls) {
	case NC_C_COLL:
	case NC_C_P2P:
		if (nc->grouped && ok) {
			nt->group_ops++;
			nt->group_bytes += nc->bytes;
		}
		break;
	case NC_C_GROUP_END:
		/* NCCL leaves the group even when ncclGroupEnd fails; without
		 * one open it fails with ncclInvalidUsage and changes nothing. */
		if (nc->nested || nt->group_depth <= 0 || --nt->group_depth > 0)
			break;
		nc->group_close = true;
		nc->group_ts = nt->group_ts;
		nc->group_ops = nt->group_ops;
		nc->group_bytes = nt->group_bytes;
		break;
	case NC_C_INIT_RANK:
		if (!ok || !c->has_out || !c->out)
			break;
		id = a[6];	/* NCCL's commHash (bpf/nccl_hash.h) */
		nc->comm = comm_new(np, t->proc->pid, c->out, id, (int32_t)a[2], (int32_t)a[1],
				    c->ts);
		annot_comm(c, true, nc->comm);
		break;
	case NC_C_INIT_ALL:
		/* One communicator of ndev ranks, all in this process: comms[i]
		 * is rank i. The array comes in its own record (CK_OUT_ARRAY,
		 * at most OUT_ARRAY_MAX); without it (lost, or past the
		 * bound) comms[0] is the exit's out word and the others become
		 * known, without an id, when first used. Its unique id is made
		 * inside NCCL: the id is cgbpf's, not NCCL's commHash. */
		if (!ok || !c->has_out || !c->out)
			break;
		id = hash__u64((uint64_t)t->proc->pid << 32 ^ ++np->init_alls ^ hash__u64(c->out));
		nc->comm = comm_new(np, t->proc->pid, c->out, id, 0, (int32_t)a[1], c->ts);
		annot_comm(c, true, nc->comm);
		for (uint16_t i = 1; c->outs && c->outs[0] == c->out && i < c->nouts; i++)
			if (c->outs[i] && !hmap__get(&np->comms, c->outs[i]))
				comm_new(np, t->proc->pid, c->outs[i], id, i, (int32_t)a[1],
					 c->ts);
		break;
	case NC_C_SPLIT:
		if (!ok)
			break;
		comm = nc->comm;
		/* Every member of the parent splits it in the same order: the
		 * parent's id, the split's number (from 1, NOCOLOR calls
		 * counted) and the color name the child the same in every
		 * rank's process, and as NCCL names it (its commHash). */
		if (comm) {
			comm->splits++;
			if (comm->id)
				id = nccl_hash_split(comm->id, (uint32_t)comm->splits,
						     (uint32_t)a[1]);
		}
		if (c->has_out && c->out) {
			struct nccl_comm *child = comm_new(np, t->proc->pid, c->out, id, -1, -1,
							   c->ts);

			if (child)
				annot_s(c, true, "new_comm", child->label);
		}
		break;
	case NC_C_FREE:
		comm = nc->comm;
		if (ok && comm && !comm->destroyed) {
			comm->destroyed = true;
			hmap__del(&np->comms, comm->handle, NULL);
		}
		break;
	case NC_C_COUNT:
	case NC_C_USER_RANK:
		comm = nc->comm;
		if (!ok || !c->has_out || !comm)
			break;
		if (nccl_funcs[c->func].cls == NC_C_COUNT) {
			annot_i(c, true, "count", (int32_t)c->out);
			if (comm->nranks != (int32_t)c->out) {
				comm->nranks = (int32_t)c->out;
				relabel(comm);
			}
		} else {
			annot_i(c, true, "rank", (int32_t)c->out);
			if (comm->rank != (int32_t)c->out) {
				comm->rank = (int32_t)c->out;
				relabel(comm);
			}
		}
		break;
	}
}

static const struct lib_ops ops = {
	.name = "nccl",
	.func_name = func_name,
	.enter = enter,
	.exit = exit_,
	.proc_free = proc_free,
};

static const char *const watch[] = { "libnccl.so", NULL };

/* monitor: a collective's bytes are count x sizeof(datatype), both in
 * registers for every op; collectives and group ends can hang (a straggler
 * rank) and may trigger a dump; ncclInProgress (7) is not an error. */
static void agg_cfg(uint16_t func, struct agg_cfg *c)
{
	const struct nccl_func *f = &nccl_funcs[func];

	if ((f->cls == NC_C_COLL || f->cls == NC_C_P2P) && f->count >= 0 && f->count < 6 &&
	    f->dtype >= 0 && f->dtype < 6) {
		c->bytes_arg = f->count + 1;
		c->dtype_arg = f->dtype + 1;
	}
	c->flags = AGG_F_ERRORS;
	if (f->cls == NC_C_COLL || f->cls == NC_C_P2P || f->cls == NC_C_GROUP_END)
		c->flags |= AGG_F_SLOW;
	/* Communicator sizes, for the bus bandwidth: learned at
	 * ncclCommInitRank* (*a0 = comm of a1 ranks), looked up per call. */
	if (f->cls == NC_C_INIT_RANK) {
		c->flags |= AGG_F_COMM_INIT;
		c->ptr_arg = 1;
		c->bytes_arg = 2;
	}
	if ((f->cls == NC_C_COLL || f->cls == NC_C_P2P) && f->comm >= 0 && f->comm <= 6) {
		c->flags |= AGG_F_COMM;
		c->comm_arg = f->comm + 1;
	}
	c->ok_ret2 = 7;
}

const struct api_lib nccl_lib = {
	.id = LIB_NCCL,
	.name = "nccl",
	.title = "NCCL",
	.watch = watch,
	.nfuncs = NC_FN__COUNT,
	.symbol = func_name,
	.cookie = cookie,
	.ops = &ops,
	.agg_cfg = agg_cfg,
};
