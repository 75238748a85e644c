// SPDX-License-Identifier: MIT
/*
 * NCCL's profiler plugin (v5 and v4: inject/nccl_prof_abi.h), in the injection
 * library: NCCL_PROFILER_PLUGIN=/path/libcgbpf-inject.so makes NCCL load
 * it at a communicator's init (record -- CMD sets it).
 *
 * Nothing runs while no cgbpf is attached: NCCL's event mask stays 0, so
 * NCCL calls none of the functions below but init and finalize. The
 * watcher thread (gpu.c, started from init if the driver has not started
 * it) sets the mask when the batch site is probed and clears it when the
 * probe goes. Then each task (a collective, a send, a receive), each
 * channel of its kernel with the GPU's own start and end, and each proxy
 * (network) operation with its steps summed becomes one fixed-size entry
 * (bpf/gpu_rec.h) in a bounded queue; the watcher hands the queue to
 * cgbpf every poll. The calling thread never traps into a probe: a task
 * costs two clock reads, a lock and a 64-byte copy. A full queue drops
 * entries and counts them (GPU_DROPPED, where 2).
 *
 * GPU times: NCCL's kernel writes %globaltimer at each channel's start and
 * end, and NCCL's proxy thread hands them over after it sees them. The
 * host time when the plugin is told minus the GPU time it is told is
 * always the clocks' offset plus a delay >= 0, so the smallest such
 * difference seen (over the current and the previous 10 s: the clocks
 * drift) is the best estimate of the offset; every channel is mapped with
 * it, and says by how much its own difference was larger (skew_ns).
 *
 * Task handles live in a ring of TASKS slots, never freed: a channel or
 * proxy event refers to its task through parentObj, and NCCL's proxy
 * thread starts those after the task stopped (a slot is reused TASKS
 * tasks later, far beyond the proxy's delay; a child copies its task's
 * identity when it starts). Channel and proxy handles come from a free
 * list of CHILDREN; none left: the event is dropped and counted.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/syscall.h>

#include "gpu_rec.h"
#include "inject.h"
#include "nccl_prof_abi.h"

#define EXPORT __attribute__((visibility("default")))

/* The events asked for while a cgbpf is attached. Group and the API
 * events add nothing the uprobes do not see; ProxyCtrl is the proxy
 * thread's own sleep and wake. */
#define MASK_ON (NPA_COLL | NPA_P2P | NPA_KERNEL_CH | NPA_PROXY_OP | NPA_PROXY_STEP)
#define TASKS 4096		/* task slots (a power of two) */
#define CHILDREN 1024		/* channel and proxy events open at once */
#define QUEUE_BYTES (256u << 10)	/* entries waiting for the watcher (~20 ms) */
#define P2P_PAIRS 1024		/* (comm, peer, direction) send/recv counters */
#define WINDOW_NS 10000000000ull	/* the offset estimate's window */
#define HELD 8192		/* channel spans held for two polls (20 to 40 ms) */

enum hkind { H_TASK = 1, H_KCH, H_PROXY, H_STEP };

/* A channel span waiting for the poll after next: mapped onto the host's
 * clock then, with every difference seen until that moment (the first
 * reports of a process, or of a loaded machine, come late: an estimate
 * from them alone would place the spans late, and move under the next
 * ones). Two polls, not one: its task, queued before it under another
 * lock, is then sent before it (ncclprof__poll). */
struct held_ch {
	struct gpu_nccl_ch e;	/* start, end: the GPU's clock until mapped */
	int64_t seen;		/* host time it was reported minus its GPU end */
};

struct comm_ctx {
	uint64_t comm;
	int rank, nranks, nnodes;
	uint32_t tid;
	uint64_t ts;
	char name[64];
	struct comm_ctx *next;
};

struct task {
	uint8_t kind;		/* H_TASK */
	uint8_t func;
	uint8_t algo, proto, nchannels, nwarps, dtype_size;
	uint32_t tid;
	uint64_t comm, seq, start, bytes;
	int32_t rank, peer;
};

struct proxy;

struct step {
	uint8_t kind;		/* H_STEP */
	struct proxy *op;
};

/* A channel (H_KCH) or a proxy operation (H_PROXY) and its steps. */
struct proxy {
	uint8_t kind;
	uint8_t func, channel, send;
	uint32_t tid;
	struct task *task;
	uint64_t comm, seq;
	int32_t rank, peer;
	uint64_t start, gpu_start, gpu_end, bytes;
	uint32_t steps;
	struct step step;
	struct proxy *free_next;
};

static struct {
	pthread_mutex_t lock;
	int *mask;		/* NCCL's, process-wide */
	bool on;
	bool forked;
	struct comm_ctx *comms;
	struct task *tasks;	/* TASKS, allocated at the first activation */
	uint32_t next_task;
	struct proxy *children, *free;
	uint8_t *q, *q2;	/* filled, and the one the watcher sends from */
	uint32_t qlen;
	/* The tasks' entries, queued by the calling threads under a lock of
	 * their own: P.lock is the proxy thread's, taken for each channel
	 * event, and sharing it made a calling thread wait for it. */
	pthread_mutex_t tlock;
	uint8_t *tq, *tq2;
	uint32_t tqlen;
	uint64_t tdropped;
	struct held_ch *held;	/* channel spans, the oldest first */
	uint32_t nheld, nold;	/* held; of them, held at the last poll */
	struct gpu_nccl_ch *late;	/* the last poll's: the rest, mapped */
	uint64_t dropped;
	struct { uint64_t key, seq; } p2p[P2P_PAIRS];
	int64_t off_cur, off_prev;	/* smallest host - GPU, this window and the last */
	bool have_cur, have_prev;
	uint64_t win_start;
	uint32_t polls_on;	/* polls since the activation */
} P = { .lock = PTHREAD_MUTEX_INITIALIZER, .tlock = PTHREAD_MUTEX_INITIALIZER };

/* Polls after an activation at which the communicators are described
 * again (100 ms, 0.5 s, 2 s): cgbpf may see the site probed a moment
 * before its program runs there (a perf-event uprobe is live before its
 * program is attached), and what the library sent meanwhile is lost; a
 * communicator older than the capture is described at activation only. */
static bool comms_again(uint32_t polls)
{
	return polls == 5 || polls == 25 || polls == 100;
}

static uint64_t now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_BOOTTIME, &t);
	return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* The calling thread's id, read once per thread (the system call costs
 * up to a microsecond in a VM, more than everything else a task does). */
static __thread uint32_t my_tid;

static uint32_t gettid_(void)
{
	if (!my_tid)
		my_tid = (uint32_t)syscall(SYS_gettid);
	return my_tid;
}

/* -------------------------------------------------------------- strings */

static uint8_t func_of(const char *f)
{
	static const char *const names[GPU_NF__COUNT] = {
		[GPU_NF_ALLREDUCE] = "AllReduce", [GPU_NF_ALLGATHER] = "AllGather",
		[GPU_NF_REDUCESCATTER] = "ReduceScatter", [GPU_NF_BROADCAST] = "Broadcast",
		[GPU_NF_REDUCE] = "Reduce", [GPU_NF_ALLTOALL] = "AlltoAll",
		[GPU_NF_SEND] = "Send", [GPU_NF_RECV] = "Recv", [GPU_NF_GATHER] = "Gather",
		[GPU_NF_SCATTER] = "Scatter",
	};

	for (uint8_t i = 1; f && i < GPU_NF__COUNT; i++)
		if (!strcmp(f, names[i]))
			return i;
	return GPU_NF_UNKNOWN;
}

static uint8_t algo_of(const char *a)
{
	static const char *const names[GPU_NA__COUNT] = {
		[GPU_NA_TREE] = "TREE", [GPU_NA_RING] = "RING",
		[GPU_NA_COLLNET_DIRECT] = "COLLNET_DIRECT", [GPU_NA_COLLNET_CHAIN] = "COLLNET_CHAIN",
		[GPU_NA_NVLS] = "NVLS", [GPU_NA_NVLS_TREE] = "NVLS_TREE", [GPU_NA_PAT] = "PAT",
	};

	for (uint8_t i = 1; a && i < GPU_NA__COUNT; i++)
		if (!strcmp(a, names[i]))
			return i;
	return GPU_NA_UNKNOWN;
}

static uint8_t proto_of(const char *p)
{
	static const char *const names[GPU_NP__COUNT] = {
		[GPU_NP_LL] = "LL", [GPU_NP_LL128] = "LL128", [GPU_NP_SIMPLE] = "SIMPLE",
	};

	for (uint8_t i = 1; p && i < GPU_NP__COUNT; i++)
		if (!strcmp(p, names[i]))
			return i;
	return GPU_NP_UNKNOWN;
}

/* Bytes of one element of NCCL's datatype name; 0 when unknown. */
static uint8_t dtype_size(const char *d)
{
	static const struct { const char *name; uint8_t size; } t[] = {
		{ "ncclInt8", 1 }, { "ncclUint8", 1 }, { "ncclInt32", 4 }, { "ncclUint32", 4 },
		{ "ncclInt64", 8 }, { "ncclUint64", 8 }, { "ncclFloat16", 2 },
		{ "ncclFloat32", 4 }, { "ncclFloat64", 8 }, { "ncclBfloat16", 2 },
		{ "ncclFloat8e4m3", 1 }, { "ncclFloat8e5m2", 1 },
	};

	for (size_t i = 0; d && i < sizeof(t) / sizeof(t[0]); i++)
		if (!strcmp(d, t[i].name))
			return t[i].size;
	return 0;
}

/* ---------------------------------------------------------------- queue */

/* Room for an entry in the queue, zeroed; NULL (and counted) when full.
 * Under P.lock. */
static void *put(uint16_t kind, uint32_t size)
{
	struct gpu_ent *e;

	if (!P.q || P.qlen + size > QUEUE_BYTES) {
		P.dropped++;
		return NULL;
	}
	e = (struct gpu_ent *)(P.q + P.qlen);
	memset(e, 0, size);
	e->kind = kind;
	e->size = (uint16_t)size;
	P.qlen += size;
	return e;
}

/* A task's entry, built outside the lock: one copy under the tasks'. */
static void put_task(const void *ent, uint32_t size)
{
	pthread_mutex_lock(&P.tlock);
	if (P.tq && P.tqlen + size <= QUEUE_BYTES) {
		memcpy(P.tq + P.tqlen, ent, size);
		P.tqlen += size;
	} else {
		P.tdropped++;
	}
	pthread_mutex_unlock(&P.tlock);
}

static void put_comm(const struct comm_ctx *c)
{
	size_t n = strlen(c->name) + 1;
	struct gpu_nccl_comm *e = put(GPU_NCCL_COMM, (uint32_t)((sizeof(*e) + n + 7) & ~7ul));

	if (!e)
		return;
	e->tid = c->tid;
	e->comm = c->comm;
	e->ts = c->ts;
	e->rank = c->rank;
	e->nranks = c->nranks;
	e->nnodes = c->nnodes;
	memcpy(e->name, c->name, n);
}

/* The slots are allocated once, at the first activation, and kept. */
static bool alloc_state(void)
{
	if (P.q)
		return true;
	P.tasks = calloc(TASKS, sizeof(*P.tasks));
	P.children = calloc(CHILDREN, sizeof(*P.children));
	P.q = malloc(QUEUE_BYTES);
	P.q2 = malloc(QUEUE_BYTES);
	P.held = malloc(HELD * sizeof(*P.held));
	P.late = malloc(HELD * sizeof(*P.late));
	pthread_mutex_lock(&P.tlock);
	P.tq = malloc(QUEUE_BYTES);
	P.tq2 = malloc(QUEUE_BYTES);
	if (!P.tasks || !P.children || !P.q || !P.q2 || !P.held || !P.late || !P.tq || !P.tq2) {
		free(P.tasks);
		free(P.children);
		free(P.q);
		free(P.q2);
		free(P.held);
		free(P.late);
		free(P.tq);
		free(P.tq2);
		P.tasks = NULL;
		P.children = NULL;
		P.q = P.q2 = NULL;
		P.held = NULL;
		P.late = NULL;
		P.tq = P.tq2 = NULL;
		pthread_mutex_unlock(&P.tlock);
		return false;
	}
	pthread_mutex_unlock(&P.tlock);
	for (uint32_t i = 0; i < CHILDREN; i++)
		P.children[i].free_next = i + 1 < CHILDREN ? &P.children[i + 1] : NULL;
	P.free = P.children;
	return true;
}

static void release_held(void);
static uint32_t release_all_held(void);

/* A queue's filled buffer, swapped with its other one, which the
 * callers fill meanwhile: its length (0: empty, nothing swapped). Under
 * the queue's lock. */
static uint32_t take(uint8_t **q, uint8_t **q2, uint32_t *len, uint8_t **out)
{
	uint32_t n = *len;

	if (!n)
		return 0;
	*out = *q;
	*q = *q2;
	*q2 = *out;
	*len = 0;
	return n;
}

/* One poll at a time (gpu.c's watcher, init, or at exit). */
static pthread_mutex_t one_poll = PTHREAD_MUTEX_INITIALIZER;

/*
 * The order cgbpf must see: a communicator's description before its
 * tasks, a task before its channel spans. Descriptions and tasks: the
 * queue, then the tasks' queue. A span is recorded after its task was
 * queued, and released into the queue only at the second poll after
 * (release_held): by then the task's queue was taken at least once
 * since it was recorded, so the task went out at a poll before. With
 * all (cgbpf leaves, or the process exits) the younger spans go too,
 * mapped under P.lock before the tasks' queue is taken, and sent after
 * it.
 */
void ncclprof__poll(bool on, bool all)
{
	uint8_t *sending = NULL, *tsending = NULL;
	uint32_t len = 0, tlen = 0, nlate = 0;
	uint64_t dropped;

	/* A child of fork does nothing here: its locks may have been held by
	 * a thread it does not have (ncclprof__forked reinitializes them). */
	if (__atomic_load_n(&P.forked, __ATOMIC_RELAXED))
		return;
	pthread_mutex_lock(&one_poll);
	pthread_mutex_lock(&P.lock);
	if (on && !P.on && alloc_state()) {
		__atomic_store_n(&P.on, true, __ATOMIC_RELEASE);
		P.polls_on = 0;
		/* Communicators created before: cgbpf learns them now. */
		for (struct comm_ctx *c = P.comms; c; c = c->next)
			put_comm(c);
	} else if (!on && P.on) {
		__atomic_store_n(&P.on, false, __ATOMIC_RELEASE);
	} else if (P.on && comms_again(++P.polls_on)) {
		for (struct comm_ctx *c = P.comms; c; c = c->next)
			put_comm(c);
	}
	if (P.mask)
		__atomic_store_n(P.mask, P.on ? MASK_ON : 0, __ATOMIC_RELAXED);
	release_held();
	if (all)
		nlate = release_all_held();
	len = take(&P.q, &P.q2, &P.qlen, &sending);
	dropped = P.dropped;
	P.dropped = 0;
	pthread_mutex_unlock(&P.lock);
	pthread_mutex_lock(&P.tlock);
	tlen = take(&P.tq, &P.tq2, &P.tqlen, &tsending);
	dropped += P.tdropped;
	P.tdropped = 0;
	pthread_mutex_unlock(&P.tlock);
	if (dropped) {
		struct gpu_dropped d = { .e = { GPU_DROPPED, sizeof(d) }, .where = 2,
					 .count = dropped };

		gpu__send_entries((const uint8_t *)&d, sizeof(d));
	}
	if (len)
		gpu__send_entries(sending, len);
	if (tlen)
		gpu__send_entries(tsending, tlen);
	if (nlate)
		gpu__send_entries((const uint8_t *)P.late, nlate * (uint32_t)sizeof(*P.late));
	pthread_mutex_unlock(&one_poll);
}

void ncclprof__forked(void)
{
	pthread_mutex_init(&P.lock, NULL);
	pthread_mutex_init(&P.tlock, NULL);
	pthread_mutex_init(&one_poll, NULL);
	__atomic_store_n(&P.forked, true, __ATOMIC_RELAXED);
	P.on = false;
	P.qlen = 0;
	P.tqlen = 0;
	if (P.mask)
		__atomic_store_n(P.mask, 0, __ATOMIC_RELAXED);
}

/* ------------------------------------------------------------ the clock */

/* One more host - GPU difference seen at host time h. Under P.lock. */
static void offset_seen(uint64_t h, int64_t d)
{
	if (h - P.win_start >= WINDOW_NS) {
		P.off_prev = P.off_cur;
		P.have_prev = P.have_cur;
		P.have_cur = false;
		P.win_start = h;
	}
	if (!P.have_cur || d < P.off_cur) {
		P.off_cur = d;
		P.have_cur = true;
	}
}

static int64_t offset(void)
{
	if (P.have_prev && (!P.have_cur || P.off_prev < P.off_cur))
		return P.off_prev;
	return P.off_cur;
}

/* --------------------------------------------------------------- events */

static npa_result_t prof_init(void **context, uint64_t comm_id, int *mask, const char *name,
			      int nnodes, int nranks, int rank, npa_logger_t log)
{
	struct comm_ctx *c = calloc(1, sizeof(*c));

	(void)log;
	if (!c)
		return NPA_INTERNAL_ERROR;
	c->comm = comm_id;
	c->rank = rank;
	c->nranks = nranks;
	c->nnodes = nnodes;
	c->tid = gettid_();
	c->ts = now_ns();
	if (name)
		strncpy(c->name, name, sizeof(c->name) - 1);
	/* The watcher sets the mask; started here when the driver did not
	 * load this library (CUDA_INJECTION64_PATH names another, or none). */
	InitializeInjection();
	pthread_mutex_lock(&P.lock);
	P.mask = mask;
	c->next = P.comms;
	P.comms = c;
	if (P.on)
		put_comm(c);
	pthread_mutex_unlock(&P.lock);
	/* Probed already (record -- CMD): from the first operation on. */
	ncclprof__poll(gpu__attached(), false);
	*context = c;
	return NPA_SUCCESS;
}

static npa_result_t prof_finalize(void *context)
{
	struct comm_ctx *c = context, **pp;

	pthread_mutex_lock(&P.lock);
	for (pp = &P.comms; *pp; pp = &(*pp)->next)
		if (*pp == c) {
			*pp = c->next;
			break;
		}
	pthread_mutex_unlock(&P.lock);
	free(c);
	return NPA_SUCCESS;
}

/* The number of the next send or receive of (comm, peer, direction),
 * from 1; 0 when the table is full. Under P.lock. */
static uint64_t p2p_seq(uint64_t comm, int peer, bool recv)
{
	uint64_t key = comm ^ ((uint64_t)(uint32_t)peer << 1 | recv) * 0x9e3779b97f4a7c15ull;
	uint32_t i = (uint32_t)(key >> 40) % P2P_PAIRS;

	key |= 1;	/* 0: a free slot */
	for (uint32_t n = 0; n < P2P_PAIRS; n++, i = (i + 1) % P2P_PAIRS) {
		if (P.p2p[i].key == key)
			return ++P.p2p[i].seq;
		if (!P.p2p[i].key) {
			P.p2p[i].key = key;
			return P.p2p[i].seq = 1;
		}
	}
	return 0;
}

/* Lock-free: the slot is this caller's until TASKS more tasks started. */
static void *start_task(struct comm_ctx *c, const struct npa_descr_v5 *d)
{
	struct task *t = &P.tasks[__atomic_fetch_add(&P.next_task, 1, __ATOMIC_RELAXED) % TASKS];

	memset(t, 0, sizeof(*t));
	t->kind = H_TASK;
	t->tid = gettid_();
	t->comm = c->comm;
	t->rank = c->rank;
	if (d->type == NPA_COLL) {
		t->func = func_of(d->coll.func);
		t->seq = d->coll.seq;
		t->dtype_size = dtype_size(d->coll.datatype);
		t->bytes = (uint64_t)d->coll.count * t->dtype_size;
		t->peer = d->coll.root;
		t->algo = algo_of(d->coll.algo);
		t->proto = proto_of(d->coll.proto);
		t->nchannels = d->coll.nchannels;
		t->nwarps = d->coll.nwarps;
	} else {
		t->func = func_of(d->p2p.func);
		t->dtype_size = dtype_size(d->p2p.datatype);
		t->bytes = (uint64_t)d->p2p.count * t->dtype_size;
		t->peer = d->p2p.peer;
		t->nchannels = d->p2p.nchannels;
		pthread_mutex_lock(&P.lock);
		t->seq = p2p_seq(c->comm, t->peer, t->func == GPU_NF_RECV);
		pthread_mutex_unlock(&P.lock);
	}
	t->start = now_ns();
	return t;
}

/* A channel or proxy event under task t (parentObj); NULL when t is not
 * one of ours, or the slots are full (counted). Under P.lock. */
static struct proxy *start_child(uint8_t kind, struct task *t)
{
	struct proxy *p;

	/* No task: it started before cgbpf attached (not tracked, not lost). */
	if (!t || t->kind != H_TASK)
		return NULL;
	if (!P.free) {
		P.dropped++;
		return NULL;
	}
	p = P.free;
	P.free = p->free_next;
	memset(p, 0, sizeof(*p));
	p->kind = kind;
	p->task = t;
	p->func = t->func;
	p->comm = t->comm;
	p->seq = t->seq;
	p->rank = t->rank;
	p->step.kind = H_STEP;
	p->step.op = p;
	return p;
}

static npa_result_t prof_start(void *context, void **handle, struct npa_descr_v5 *d)
{
	struct comm_ctx *c = context;
	struct proxy *p = NULL;
	void *h = NULL;
	uint64_t now;

	*handle = NULL;
	/* NCCL read a non-zero mask a moment ago; cgbpf may have left. */
	if (!c || !d || !__atomic_load_n(&P.on, __ATOMIC_ACQUIRE))
		return NPA_SUCCESS;
	if (d->type == NPA_COLL || d->type == NPA_P2P) {
		*handle = start_task(c, d);
		return NPA_SUCCESS;
	}
	/* NCCL starts Group, GroupApi, CollApi, P2pApi and KernelLaunch
	 * events whenever any bit is set: not asked for, not tracked. */
	if (d->type != NPA_KERNEL_CH && d->type != NPA_PROXY_OP && d->type != NPA_PROXY_STEP)
		return NPA_SUCCESS;
	pthread_mutex_lock(&P.lock);
	switch (d->type) {
	case NPA_KERNEL_CH:
		now = now_ns();
		p = start_child(H_KCH, d->parent);
		if (!p)
			break;
		p->channel = d->kernel_ch.channel;
		p->gpu_start = d->kernel_ch.ptimer;
		offset_seen(now, (int64_t)(now - p->gpu_start));
		h = p;
		break;
	case NPA_PROXY_OP:
		p = start_child(H_PROXY, d->parent);
		if (!p)
			break;
		p->channel = d->proxy_op.channel;
		p->peer = d->proxy_op.peer;
		p->send = d->proxy_op.is_send != 0;
		p->tid = gettid_();
		p->start = now_ns();
		h = p;
		break;
	case NPA_PROXY_STEP: {
		struct proxy *op = d->parent;

		if (op && op->kind == H_PROXY)
			h = &op->step;
		break;
	}
	default:
		break;
	}
	pthread_mutex_unlock(&P.lock);
	*handle = h;
	return NPA_SUCCESS;
}

static npa_result_t prof_state(void *handle, int state, union npa_state_args_v5 *a)
{
	uint8_t kind = handle ? *(const uint8_t *)handle : 0;
	uint64_t now;

	if (!a || (kind != H_KCH && kind != H_STEP))
		return NPA_SUCCESS;
	pthread_mutex_lock(&P.lock);
	if (kind == H_KCH && state == NPA_KERNEL_CH_STOP) {
		struct proxy *p = handle;

		now = now_ns();
		p->gpu_end = a->kernel_ch.ptimer;
		offset_seen(now, (int64_t)(now - p->gpu_end));
		p->start = now;	/* when it was seen: its skew */
	} else if (kind == H_STEP && (state == NPA_STEP_SEND_WAIT ||
				      state == NPA_STEP_RECV_FLUSH_WAIT)) {
		/* Once per step: the send's size when it goes out, the
		 * receive's when it arrived. */
		((struct step *)handle)->op->bytes += a->proxy_step.trans_size;
	}
	pthread_mutex_unlock(&P.lock);
	return NPA_SUCCESS;
}

/* Outside the lock but for the one copy. */
static void stop_task(const struct task *t)
{
	struct gpu_nccl_op e = { .e = { GPU_NCCL_OP, sizeof(e) } };

	e.tid = t->tid;
	e.comm = t->comm;
	e.seq = t->seq;
	e.start = t->start;
	e.end = now_ns();
	e.bytes = t->bytes;
	e.rank = t->rank;
	e.peer = t->peer;
	e.func = t->func;
	e.algo = t->algo;
	e.proto = t->proto;
	e.nchannels = t->nchannels;
	e.nwarps = t->nwarps;
	e.dtype_size = t->dtype_size;
	put_task(&e, sizeof(e));
}

static void map_channel(struct gpu_nccl_ch *e, int64_t seen)
{
	int64_t off = offset(), d = seen - off;

	e->start = (uint64_t)((int64_t)e->start + off);
	e->end = (uint64_t)((int64_t)e->end + off);
	e->skew_ns = d <= 0 ? 0 : d > UINT32_MAX ? UINT32_MAX : (uint32_t)d;
}

/* A held span, mapped with the estimate now, into the queue. Under P.lock. */
static void queue_mapped(struct held_ch *h)
{
	struct gpu_nccl_ch *e;

	map_channel(&h->e, h->seen);
	e = put(GPU_NCCL_CHANNEL, sizeof(*e));
	if (e)
		*e = h->e;
}

static void stop_channel(const struct proxy *p)
{
	struct held_ch h = { .e = { .e = { GPU_NCCL_CHANNEL, sizeof(h.e) } } };

	if (!p->gpu_end || p->gpu_end < p->gpu_start) {
		P.dropped++;
		return;
	}
	h.e.channel = p->channel;
	h.e.comm = p->comm;
	h.e.seq = p->seq;
	h.e.start = p->gpu_start;
	h.e.end = p->gpu_end;
	h.e.rank = p->rank;
	h.e.func = p->func;
	h.seen = (int64_t)(p->start - p->gpu_end);
	if (P.nheld < HELD)
		P.held[P.nheld++] = h;
	else
		queue_mapped(&h);	/* full (over HELD in two polls): now */
}

/* The spans held at the last poll, mapped, into the queue; the rest
 * wait for the next. Under P.lock. */
static void release_held(void)
{
	if (!P.nheld)
		return;	/* every poll while nothing is held (P.held may be NULL) */
	for (uint32_t i = 0; i < P.nold; i++)
		queue_mapped(&P.held[i]);
	memmove(P.held, P.held + P.nold, (P.nheld - P.nold) * sizeof(*P.held));
	P.nheld -= P.nold;
	P.nold = P.nheld;
}

/* The rest too, mapped into P.late (one poll at a time uses it): their
 * number. Under P.lock. */
static uint32_t release_all_held(void)
{
	uint32_t n = P.nheld;

	for (uint32_t i = 0; i < n; i++) {
		map_channel(&P.held[i].e, P.held[i].seen);
		P.late[i] = P.held[i].e;
	}
	P.nheld = P.nold = 0;
	return n;
}

static void stop_proxy(const struct proxy *p)
{
	struct gpu_nccl_proxy *e = put(GPU_NCCL_PROXY, sizeof(*e));

	if (!e)
		return;
	e->tid = p->tid;
	e->comm = p->comm;
	e->seq = p->seq;
	e->start = p->start;
	e->end = now_ns();
	e->bytes = p->bytes;
	e->rank = p->rank;
	e->peer = p->peer;
	e->steps = p->steps;
	e->channel = p->channel;
	e->send = p->send;
	e->func = p->func;
}

static npa_result_t prof_stop(void *handle)
{
	uint8_t kind = handle ? *(const uint8_t *)handle : 0;
	struct proxy *p = handle;

	if (!kind)
		return NPA_SUCCESS;
	if (kind == H_TASK) {
		if (__atomic_load_n(&P.on, __ATOMIC_ACQUIRE))
			stop_task(handle);
		return NPA_SUCCESS;
	}
	pthread_mutex_lock(&P.lock);
	switch (kind) {
	case H_STEP:
		((struct step *)handle)->op->steps++;
		break;
	case H_KCH:
	case H_PROXY:
		if (P.on && kind == H_KCH)
			stop_channel(p);
		else if (P.on)
			stop_proxy(p);
		p->kind = 0;
		p->free_next = P.free;
		P.free = p;
		break;
	default:
		break;
	}
	pthread_mutex_unlock(&P.lock);
	return NPA_SUCCESS;
}

EXPORT const struct npa_profiler_v5 ncclProfiler_v5 = {
	.name = "cgbpf",
	.init = prof_init,
	.start_event = prof_start,
	.stop_event = prof_stop,
	.record_event_state = prof_state,
	.finalize = prof_finalize,
};

/*
 * Version 4 (NCCL 2.27): the same functions behind init's other argument
 * order and the shorter descriptor, converted to v5's.
 */
static npa_result_t prof_init_v4(void **context, int *mask, const char *name, uint64_t comm_id,
				 int nnodes, int nranks, int rank, npa_logger_t log)
{
	return prof_init(context, comm_id, mask, name, nnodes, nranks, rank, log);
}

static npa_result_t prof_start_v4(void *context, void **handle, struct npa_descr_v4 *d4)
{
	struct npa_descr_v5 d;

	*handle = NULL;
	if (!d4)
		return NPA_SUCCESS;
	memset(&d, 0, sizeof(d));
	d.type = d4->type;
	d.parent = d4->parent;
	d.rank = d4->rank;
	switch (d4->type) {
	case NPA_COLL:
		memcpy(&d.coll, &d4->coll, sizeof(d4->coll));
		break;
	case NPA_P2P:
		memcpy(&d.p2p, &d4->p2p, sizeof(d4->p2p));
		break;
	case NPA_PROXY_OP:
		d.proxy_op.pid = d4->proxy_op.pid;
		d.proxy_op.channel = d4->proxy_op.channel;
		d.proxy_op.peer = d4->proxy_op.peer;
		d.proxy_op.nsteps = d4->proxy_op.nsteps;
		d.proxy_op.chunk_size = d4->proxy_op.chunk_size;
		d.proxy_op.is_send = d4->proxy_op.is_send;
		break;
	case NPA_PROXY_STEP:
		d.proxy_step.step = d4->proxy_step.step;
		break;
	case NPA_KERNEL_CH:
		d.kernel_ch.channel = d4->kernel_ch.channel;
		d.kernel_ch.ptimer = d4->kernel_ch.ptimer;
		break;
	default:
		return NPA_SUCCESS;
	}
	return prof_start(context, handle, &d);
}

EXPORT const struct npa_profiler_v4 ncclProfiler_v4 = {
	.name = "cgbpf",
	.init = prof_init_v4,
	.start_event = prof_start_v4,
	.stop_event = prof_stop,
	.record_event_state = prof_state,
	.finalize = prof_finalize,
};
