// SPDX-License-Identifier: MIT
/*
 * NCCL's profiler plugin's entries (bpf/gpu_rec.h GPU_NCCL_*) in the
 * trace. Under the process, per communicator (NCCL's commHash, which is
 * the same in every rank; cgbpf's own "NCCL comm" tracks hash fewer bytes
 * of the unique id, so the two ids differ): a group "NCCL <hash> rank
 * r/n: GPU (NCCL profiler)" holding "channel c" tracks (the GPU span of
 * each operation on that channel of NCCL's kernel, named after the
 * operation, with its sequence number, bytes, algorithm and protocol) and
 * "proxy channel c send|recv" tracks (network operations).
 *
 * Every field comes from the traced process and is checked. A channel
 * span that overlaps the previous one of its track (the tasks of one
 * kernel, a group, share their channels' spans) goes to the channel's
 * next lane, "channel c (2)"; past the last lane it starts where the
 * previous one ended, says by how much (clamped_ns) and is counted.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include "core/hangwatch.h"
#include "lib/ncclbw.h"
#include "lib/straggle.h"
#include "out/pfsink.h"
#include "sources/gpu/gpunccl.h"
#include "sources/gpu/gpupf.h"

#define COMMS_MAX 256		/* communicators per process; more are counted */
#define CHANNELS 64		/* NCCL's MAXCHANNELS */
#define TASKS 128		/* recent tasks per communicator (algo, proto) */
#define LANES 4			/* tracks per channel for spans that overlap */

struct gtask {
	uint64_t seq;
	uint8_t func, algo, proto, nchannels;
	uint32_t tid;
	int32_t peer;
	uint64_t bytes;
};

/* Per function of a communicator: operations with a span on channel 0
 * (nccl_sum's GPU time of an operation, user/lib/ncclbw.h), their GPU
 * time summed, and the bytes and time of those whose size came. */
struct gfunc {
	uint64_t ops, gpu_ns, bytes, sized_ns;
};

struct gcomm {
	uint64_t hash;
	int32_t rank, nranks, nnodes;
	uint32_t idx;		/* in the process, from 1 */
	bool known;		/* a GPU_NCCL_COMM came */
	bool described, described_known;
	char name[64];
	struct gtask tasks[TASKS];
	uint32_t ntasks;
	struct pfseq *ch_seq[CHANNELS][LANES];
	uint64_t ch_end[CHANNELS][LANES];
	uint8_t ch_described[CHANNELS];	/* bit per lane */
	struct pfseq *px_seq[CHANNELS][2];
	bool px_described[CHANNELS][2];
	struct gfunc funcs[GPU_NF__COUNT];
	uint64_t fseq[GPU_NF__COUNT];	/* collectives: the latest entered's number + 1 */
};

struct gnccl {
	struct gcomm *comms[COMMS_MAX];
	uint32_t n;
	struct gpunccl_totals t;
	uint64_t over;		/* entries of communicators past COMMS_MAX */
};

static const char *const func_names[GPU_NF__COUNT] = {
	[GPU_NF_UNKNOWN] = "?", [GPU_NF_ALLREDUCE] = "AllReduce",
	[GPU_NF_ALLGATHER] = "AllGather", [GPU_NF_REDUCESCATTER] = "ReduceScatter",
	[GPU_NF_BROADCAST] = "Broadcast", [GPU_NF_REDUCE] = "Reduce",
	[GPU_NF_ALLTOALL] = "AlltoAll", [GPU_NF_SEND] = "Send", [GPU_NF_RECV] = "Recv",
	[GPU_NF_GATHER] = "Gather", [GPU_NF_SCATTER] = "Scatter",
};
/* The host API's names of NCCL's functions (report rows, hang lines). */
static const char *const op_names[GPU_NF__COUNT] = {
	"nccl?", "ncclAllReduce", "ncclAllGather", "ncclReduceScatter", "ncclBroadcast",
	"ncclReduce", "ncclAlltoAll", "ncclSend", "ncclRecv", "ncclGather", "ncclScatter",
};
static const char *const algo_names[GPU_NA__COUNT] = {
	"?", "TREE", "RING", "COLLNET_DIRECT", "COLLNET_CHAIN", "NVLS", "NVLS_TREE", "PAT",
};
static const char *const proto_names[GPU_NP__COUNT] = { "?", "LL", "LL128", "SIMPLE" };

const char *gpunccl__func_name(unsigned func)
{
	return func < GPU_NF__COUNT ? func_names[func] : "?";
}

unsigned gpunccl__func_of(const char *name)
{
	for (unsigned i = 1; name && i < GPU_NF__COUNT; i++)
		if (!strcmp(name, func_names[i]))
			return i;
	return GPU_NF_UNKNOWN;
}

uint64_t gpunccl__strag_seq(unsigned func, uint64_t seq)
{
	bool p2p = func == GPU_NF_SEND || func == GPU_NF_RECV;

	if (func == GPU_NF_UNKNOWN || func >= GPU_NF__COUNT || (p2p && !seq))
		return 0;
	/* The function in the high bits (a send's and its receive's: one). */
	return (uint64_t)(p2p ? GPU_NF_SEND : func) << 48 | ((seq + !p2p) & ((1ull << 48) - 1));
}

const char gpunccl__strag_title[] = "NCCL stragglers, GPU side: whose kernel the others wait for "
				    "(nccl_stragglers_gpu; NCCL's profiler plugin)";
const char gpunccl__strag_basis[] = "lateness: how long after the first rank's kernel this "
				    "rank's kernel started the operation (channel 0's GPU start); "
				    "matched by NCCL's commHash and sequence number";

static struct gnccl *state(struct gpu_proc *p)
{
	if (!p->nccl)
		p->nccl = calloc(1, sizeof(struct gnccl));
	return p->nccl;
}

/* A rank of a communicator in this process: several ranks of one
 * communicator may be threads of one process. */
static struct gcomm *comm_get(struct gnccl *s, uint64_t hash, int32_t rank)
{
	struct gcomm *c;

	if (rank < 0 || rank >= (1 << 20))
		return NULL;
	for (uint32_t i = 0; i < s->n; i++)
		if (s->comms[i]->hash == hash && s->comms[i]->rank == rank)
			return s->comms[i];
	if (s->n == COMMS_MAX) {
		s->over++;
		return NULL;
	}
	c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->hash = hash;
	c->rank = rank;
	c->nranks = c->nnodes = -1;
	c->idx = s->n + 1;
	s->comms[s->n++] = c;
	s->t.comms++;
	return c;
}

static void describe(struct gpu *g, struct gpu_proc *p, struct gcomm *c)
{
	char name[128], desc[256];

	/* Again once its size is known (a channel may come first). */
	if (c->described && (c->described_known || !c->known))
		return;
	if (c->nranks > 0)
		snprintf(name, sizeof(name), "NCCL %04x rank %d/%d: GPU (NCCL profiler)",
			 (unsigned)(c->hash >> 48), c->rank, c->nranks);
	else
		snprintf(name, sizeof(name), "NCCL %04x rank %d/?: GPU (NCCL profiler)",
			 (unsigned)(c->hash >> 48), c->rank);
	snprintf(desc, sizeof(desc),
		 "NCCL's commHash %016" PRIx64 "%s%s; %d node(s). Channel tracks: the GPU span of "
		 "each operation on that channel of NCCL's kernel; proxy tracks: network "
		 "operations", c->hash, c->name[0] ? ", name " : "", c->name, c->nnodes);
	pftrace__track_desc(g->pt, gpupf__track_uuid(GT_NCCL_GROUP, p->pid, c->idx),
			    UUID_PROCESS(p->pid), name, desc);
	c->described = true;
	c->described_known = c->known;
}

static bool on_comm(struct gpu *g, struct gpu_proc *p, struct gnccl *s, const uint8_t *e,
		    size_t size)
{
	struct gpu_nccl_comm m;
	struct gcomm *c;
	size_t n;

	if (size < sizeof(m) + 1 || size > sizeof(m) + 256)
		return false;
	memcpy(&m, e, sizeof(m));
	n = strnlen((const char *)e + sizeof(m), size - sizeof(m));
	if (n == size - sizeof(m) || m.nranks <= 0 || m.nranks > (1 << 20) || m.rank < 0 ||
	    m.rank >= m.nranks)
		return false;
	c = comm_get(s, m.comm, m.rank);
	if (!c)
		return true;
	c->nranks = m.nranks;
	c->nnodes = m.nnodes;
	snprintf(c->name, sizeof(c->name), "%.*s", (int)n, (const char *)e + sizeof(m));
	c->known = true;
	if (g->pt)
		describe(g, p, c);
	hangwatch__learn(g->hang, HW_PLUGIN, c->hash, c->nranks, c->rank, p->pid);
	return true;
}

/*
 * The rank entered the operation: the hang watcher's entry
 * (core/hangwatch.h) for communicators the host side does not know
 * (created before the capture). NCCL starts and stops a task together,
 * once it launched the operation's kernel (or when its host stream
 * reaches the plan), whatever the GPU does next: a hung collective's
 * waiting ranks send theirs at once, the missing rank none.
 */
static void hang_enter(struct gpu *g, struct gpu_proc *p, const struct gcomm *c,
		       const struct gpu_nccl_op *o)
{
	int a = -1, b = -1;

	if (!g->hang || c->nranks <= 0 || o->func == GPU_NF_UNKNOWN)
		return;
	if (o->func == GPU_NF_SEND || o->func == GPU_NF_RECV) {
		if (o->peer < 0)
			return;
		a = o->func == GPU_NF_SEND ? o->rank : o->peer;
		b = o->func == GPU_NF_SEND ? o->peer : o->rank;
	}
	hangwatch__enter(g->hang, HW_PLUGIN, o->comm, c->nranks, o->rank, p->pid,
			 gpunccl__strag_seq(o->func, o->seq), a, b, op_names[o->func], o->bytes,
			 o->start);
}

static bool on_op(struct gpu *g, struct gpu_proc *p, struct gnccl *s, const uint8_t *e,
		  size_t size)
{
	struct gpu_nccl_op o;
	struct gcomm *c;
	struct gtask *t;

	if (size < sizeof(o))
		return false;
	memcpy(&o, e, sizeof(o));
	if (o.func >= GPU_NF__COUNT || o.algo >= GPU_NA__COUNT || o.proto >= GPU_NP__COUNT ||
	    o.end < o.start)
		return false;
	c = comm_get(s, o.comm, o.rank);
	if (!c)
		return o.rank >= 0;
	t = &c->tasks[c->ntasks++ % TASKS];
	*t = (struct gtask){ .seq = o.seq, .func = o.func, .algo = o.algo, .proto = o.proto,
			     .nchannels = o.nchannels, .bytes = o.bytes, .tid = o.tid,
			     .peer = o.peer };
	s->t.ops++;
	if (o.func != GPU_NF_SEND && o.func != GPU_NF_RECV && o.seq + 1 > c->fseq[o.func])
		c->fseq[o.func] = o.seq + 1;
	hang_enter(g, p, c, &o);
	return true;
}

void gpunccl__each_comm(const struct gpu_proc *p,
			void (*fn)(void *ctx, uint32_t pid, uint64_t hash, int rank, int nranks,
				   uint64_t entered),
			void *ctx)
{
	const struct gnccl *s = p->nccl;

	for (uint32_t i = 0; s && i < s->n; i++) {
		const struct gcomm *c = s->comms[i];
		uint64_t sum = 0;
		bool any = false;

		for (unsigned f = 0; f < GPU_NF__COUNT; f++) {
			sum += c->fseq[f];
			any |= c->fseq[f] != 0;
		}
		if (c->nranks > 0 && any)
			fn(ctx, p->pid, c->hash, c->rank, c->nranks, sum);
	}
}

static struct gtask *task_find(struct gcomm *c, uint8_t func, uint64_t seq)
{
	uint32_t n = c->ntasks < TASKS ? c->ntasks : TASKS;

	for (uint32_t i = 0; i < n; i++) {
		struct gtask *t = &c->tasks[(c->ntasks - 1 - i) % TASKS];

		if (t->func == func && t->seq == seq)
			return t;
	}
	return NULL;
}

/*
 * The GPU-side straggler report: the rank whose kernel started an
 * operation last (its first channel's GPU start), matched across ranks
 * and processes by NCCL's commHash and its own sequence number per
 * function (sends and receives: the library's per peer and direction),
 * so communicators created before the capture are matched too.
 */
/* This machine's name, as the trace's cgbpf.hostname (cgbpf stats reads
 * the same rows back with it). */
static const char *host_name(void)
{
	static char name[65];
	struct utsname u;

	if (!name[0] && !uname(&u))
		snprintf(name, sizeof(name), "%s", u.nodename);
	return name;
}

/* NCCL's API function (enum nccl_fn, -1: none) of the plugin's func,
 * looked up by name once per function rather than once per span. */
static int api_fn(unsigned func)
{
	static int fn[GPU_NF__COUNT];
	static bool done;

	if (!done) {
		for (unsigned i = 0; i < GPU_NF__COUNT; i++)
			fn[i] = ncclbw__fn_of_op(func_names[i]);
		done = true;
	}
	return func < GPU_NF__COUNT ? fn[func] : -1;
}

/* A span of channel 0 (its lane's drawn start, as cgbpf stats reads the
 * trace back: both reports are one rule over one input); t: its task when
 * still known (a send's or receive's peer comes from it). */
static void feed(struct gpu *g, struct gpu_proc *p, struct gcomm *c, const struct gpu_nccl_ch *ch,
		 uint64_t start, const struct gtask *t)
{
	bool p2p = ch->func == GPU_NF_SEND || ch->func == GPU_NF_RECV;
	char id[24];
	struct straggle_op op = {
		.host = host_name(), .comm = id, .rank = c->nranks > 0 ? c->rank : -1,
		.nranks = c->nranks, .pid = p->pid, .name = op_names[ch->func],
		.seq = gpunccl__strag_seq(ch->func, ch->seq), .peer = -1,
		.recv = ch->func == GPU_NF_RECV, .ts = start, .end = ch->end, .how = "nccl_seq",
	};

	if (!g->nccl_strag) {
		g->nccl_strag = straggle__new();
		if (!g->nccl_strag)
			return;
		straggle__no_gaps(g->nccl_strag);
		straggle__title(g->nccl_strag, gpunccl__strag_title, gpunccl__strag_basis);
	}
	if (p2p && t && t->peer >= 0)
		op.peer = t->peer;
	else if (p2p)
		op.seq = 0;	/* no peer: not matched (stats reads no peer arg either) */
	snprintf(id, sizeof(id), "%04x", (unsigned)(c->hash >> 48));
	straggle__add(g->nccl_strag, &op);
	/* The operation's GPU time: the same span, for the GPU-side table
	 * and nccl_sum. */
	c->funcs[ch->func].ops++;
	c->funcs[ch->func].gpu_ns += ch->end - start;
	if (t && t->bytes) {
		c->funcs[ch->func].bytes += t->bytes;
		c->funcs[ch->func].sized_ns += ch->end - start;
	}
	if (g->m)
		ncclbw__gpu_add(&g->m->nccl_gpu, api_fn(ch->func),
				ch->end - start, t ? t->bytes : 0, c->nranks);
}

static bool on_channel(struct gpu *g, struct gpu_proc *p, struct gnccl *s, const uint8_t *e,
		       size_t size)
{
	struct gpu_nccl_ch ch;
	struct pf_annot a[10];
	struct gtask *t;
	struct gcomm *c;
	uint64_t start, clamped = 0, uuid;
	struct pfseq **seq;
	int n = 0, lane;

	if (size < sizeof(ch))
		return false;
	memcpy(&ch, e, sizeof(ch));
	if (ch.channel >= CHANNELS || ch.func >= GPU_NF__COUNT || ch.end < ch.start ||
	    ch.end - ch.start > 3600ull * 1000000000)
		return false;
	c = comm_get(s, ch.comm, ch.rank);
	if (!c)
		return ch.rank >= 0;
	s->t.channels++;
	s->t.gpu_ns += ch.end - ch.start;
	if (ch.skew_ns > s->t.skew_max_ns)
		s->t.skew_max_ns = ch.skew_ns;
	t = task_find(c, ch.func, ch.seq);
	if (!g->pt) {
		if (ch.channel == 0)
			feed(g, p, c, &ch, ch.start, t);
		return true;
	}
	/* The first lane free at its start (the tasks of one kernel, a
	 * group, share their channels' spans); none: the last, from where
	 * its previous span ended. */
	for (lane = 0; lane < LANES - 1 && c->ch_end[ch.channel][lane] > ch.start; lane++)
		;
	start = ch.start;
	if (start < c->ch_end[ch.channel][lane]) {
		start = c->ch_end[ch.channel][lane];
		clamped = start - ch.start;
		s->t.clamped++;
		if (ch.end < start)
			ch.end = start;
	}
	c->ch_end[ch.channel][lane] = ch.end;
	describe(g, p, c);
	uuid = gpupf__track_uuid(GT_NCCL_CH, p->pid, c->idx << 9 | lane << 7 | ch.channel);
	if (!(c->ch_described[ch.channel] & 1u << lane)) {
		char name[32];

		if (lane)
			snprintf(name, sizeof(name), "channel %u (%d)", ch.channel, lane + 1);
		else
			snprintf(name, sizeof(name), "channel %u", ch.channel);
		pftrace__track(g->pt, uuid, gpupf__track_uuid(GT_NCCL_GROUP, p->pid, c->idx), name);
		c->ch_described[ch.channel] |= (uint8_t)(1u << lane);
	}
	if (ch.channel == 0)
		feed(g, p, c, &ch, start, t);
	seq = &c->ch_seq[ch.channel][lane];
	if (!*seq)
		*seq = pftrace__seq(g->pt, uuid, start);
	if (!*seq)
		return true;
	a[n++] = (struct pf_annot){ .name = "seq", .type = PA_UINT, .u = ch.seq };
	if (t) {
		a[n++] = (struct pf_annot){ .name = "bytes", .type = PA_UINT, .u = t->bytes };
		a[n++] = (struct pf_annot){ .name = "algo", .type = PA_STR, .s = algo_names[t->algo] };
		a[n++] = (struct pf_annot){ .name = "proto", .type = PA_STR,
					    .s = proto_names[t->proto] };
		a[n++] = (struct pf_annot){ .name = "channels", .type = PA_UINT, .u = t->nchannels };
		if (t->func == GPU_NF_SEND || t->func == GPU_NF_RECV)
			a[n++] = (struct pf_annot){ .name = "peer", .type = PA_INT, .i = t->peer };
	}
	a[n++] = (struct pf_annot){ .name = "seen_late_ns", .type = PA_UINT, .u = ch.skew_ns };
	if (clamped)
		a[n++] = (struct pf_annot){ .name = "clamped_ns", .type = PA_UINT, .u = clamped };
	pftrace__begin(g->pt, *seq, start, func_names[ch.func], a, n);
	pftrace__end(g->pt, *seq, ch.end, NULL, 0);
	return true;
}

static bool on_proxy(struct gpu *g, struct gpu_proc *p, struct gnccl *s, const uint8_t *e,
		     size_t size)
{
	struct gpu_nccl_proxy x;
	struct pf_annot a[6];
	struct gcomm *c;
	char name[48];
	int n = 0;

	if (size < sizeof(x))
		return false;
	memcpy(&x, e, sizeof(x));
	if (x.channel >= CHANNELS || x.func >= GPU_NF__COUNT || x.send > 1 || x.end < x.start)
		return false;
	c = comm_get(s, x.comm, x.rank);
	if (!c)
		return x.rank >= 0;
	s->t.proxies++;
	s->t.proxy_bytes += x.bytes;
	if (!g->pt)
		return true;
	describe(g, p, c);
	if (!c->px_described[x.channel][x.send]) {
		snprintf(name, sizeof(name), "proxy channel %u %s", x.channel,
			 x.send ? "send" : "recv");
		pftrace__track(g->pt, gpupf__track_uuid(GT_NCCL_PROXY, p->pid,
							c->idx << 8 | x.channel << 1 | x.send),
			       gpupf__track_uuid(GT_NCCL_GROUP, p->pid, c->idx), name);
		c->px_described[x.channel][x.send] = true;
	}
	if (!c->px_seq[x.channel][x.send])
		c->px_seq[x.channel][x.send] = pftrace__seq(
			g->pt,
			gpupf__track_uuid(GT_NCCL_PROXY, p->pid, c->idx << 8 | x.channel << 1 | x.send),
			x.start);
	if (!c->px_seq[x.channel][x.send])
		return true;
	snprintf(name, sizeof(name), "%s %s %d", func_names[x.func], x.send ? "to" : "from",
		 x.peer);
	a[n++] = (struct pf_annot){ .name = "seq", .type = PA_UINT, .u = x.seq };
	a[n++] = (struct pf_annot){ .name = "bytes", .type = PA_UINT, .u = x.bytes };
	a[n++] = (struct pf_annot){ .name = "steps", .type = PA_UINT, .u = x.steps };
	a[n++] = (struct pf_annot){ .name = "peer", .type = PA_INT, .i = x.peer };
	pftrace__begin(g->pt, c->px_seq[x.channel][x.send], x.start, name, a, n);
	pftrace__end(g->pt, c->px_seq[x.channel][x.send], x.end, NULL, 0);
	return true;
}

bool gpunccl__entry(struct gpu *g, struct gpu_proc *p, uint16_t kind, const uint8_t *e,
		    size_t size)
{
	struct gnccl *s = state(p);

	if (!s)
		return true;	/* ENOMEM: not the process's fault */
	switch (kind) {
	case GPU_NCCL_COMM:
		return on_comm(g, p, s, e, size);
	case GPU_NCCL_OP:
		return on_op(g, p, s, e, size);
	case GPU_NCCL_CHANNEL:
		return on_channel(g, p, s, e, size);
	case GPU_NCCL_PROXY:
		return on_proxy(g, p, s, e, size);
	default:
		return false;
	}
}

void gpunccl__totals(const struct gpu_proc *p, struct gpunccl_totals *t)
{
	const struct gnccl *s = p->nccl;

	memset(t, 0, sizeof(*t));
	if (s)
		*t = s->t;
}

void gpunccl__free(struct gpu_proc *p)
{
	struct gnccl *s = p->nccl;

	if (!s)
		return;
	for (uint32_t i = 0; i < s->n; i++)
		free(s->comms[i]);
	free(s);
	p->nccl = NULL;
}

/* Bytes the operation moves as nccl-tests counts them, and the bus
 * bandwidth's factor over that (user/lib/ncclbw.h), by NCCL's own
 * function names. */
static double size_factor(unsigned func, int nranks)
{
	return ncclbw__size_factor(ncclbw__coll(api_fn(func)), nranks);
}

static double bus_factor(unsigned func, int nranks)
{
	return ncclbw__bus_factor(ncclbw__coll(api_fn(func)), nranks);
}

static void print_comm(const struct gpu_proc *p, const struct gcomm *c, FILE *f)
{
	for (unsigned fn = 1; fn < GPU_NF__COUNT; fn++) {
		const struct gfunc *x = &c->funcs[fn];
		double sec, size;

		if (!x->ops)
			continue;
		sec = (double)x->sized_ns / 1e9;
		size = (double)x->bytes * size_factor(fn, c->nranks);
		fprintf(f, "   %-7u %04x %4d/%-4d %-14s %8" PRIu64 " %14" PRIu64 " %12.3f %10.3f",
			p->pid, (unsigned)(c->hash >> 48), c->rank, c->nranks, func_names[fn], x->ops,
			x->bytes, (double)x->gpu_ns / 1e6, (double)x->gpu_ns / 1e3 / (double)x->ops);
		if (sec > 0 && c->nranks > 0)
			fprintf(f, " %9.2f %9.2f\n", size / sec / 1e9,
				size * bus_factor(fn, c->nranks) / sec / 1e9);
		else
			fprintf(f, " %9s %9s\n", "-", "-");
	}
}

void gpunccl__print(const struct gpu *g, const struct gpu_proc *const *ps, size_t np, FILE *f)
{
	bool head = false;

	for (size_t i = 0; i < np; i++) {
		const struct gnccl *s = ps[i]->nccl;

		for (uint32_t j = 0; s && j < s->n; j++) {
			if (!head)
				fprintf(f, "\n** NCCL operations, GPU side (NCCL's profiler plugin: "
					   "each operation's span on its channel 0, as nccl_sum times it):"
					   "\n\n   %-7s %-4s %-9s %-14s %8s %14s %12s %10s %9s %9s\n",
					"pid", "comm", "rank", "op", "count", "bytes", "gpu_ms",
					"mean_us", "algbw", "busbw");
			head = true;
			print_comm(ps[i], s->comms[j], f);
		}
		if (s && s->n)
			fprintf(f, "   pid %u: %" PRIu64 " rank(s) of communicators, %" PRIu64
				   " operations, %" PRIu64 " channel spans (GPU times reported up to "
				   "%.1f us late), %" PRIu64 " proxy operations\n", ps[i]->pid,
				s->t.comms, s->t.ops, s->t.channels, (double)s->t.skew_max_ns / 1e3,
				s->t.proxies);
		if (s && (s->t.clamped || s->over))
			fprintf(f, "   pid %u: %" PRIu64 " channel spans drawn clamped (they overlapped "
				   "the previous one of their channel), %" PRIu64 " entries of "
				   "communicators past %d\n", ps[i]->pid, s->t.clamped, s->over,
				COMMS_MAX);
	}
	if (head)
		fprintf(f, "   (GB/s; comm: the first 4 hex digits of NCCL's commHash, which "
			   "differs from the id of the NCCL summary's communicators)\n");
	if (g->nccl_strag && straggle__any(g->nccl_strag) &&
	    straggle__print(g->nccl_strag, SUMTAB_TEXT, f))
		fprintf(f, "\n   GPU-side stragglers: out of memory\n");
}
