// SPDX-License-Identifier: MIT
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "lib/hmap.h"
#include "lib/log.h"
#include "sources/nccl/nccl.h"
#include "sources/nccl/ncclhang.h"

#define TICK_NS (500ull * 1000000)
#define OPEN_MAX 65536		/* operations watched at once (then counted) */
/* A communicator with this many operations open and a rank never seen
 * here has ranks elsewhere: no longer watched. */
#define REMOTE_OPEN 64

/* A communicator's ranks as seen on this host: the process of each. */
struct hcomm {
	uint64_t id;
	int nranks, known;
	uint32_t *pids;		/* by rank; 0: not seen */
	uint32_t open;		/* its operations open */
	bool remote;		/* ranks elsewhere: not watched */
};

/* An operation some ranks entered: their entries by slot (rank, or
 * sender / receiver of a send/receive pair). */
struct hop {
	struct hcomm *comm;
	uint64_t seq;
	int a, b;		/* p2p: sender, receiver; -1 for a collective */
	const char *name;
	uint64_t bytes;
	int n, seen;
	uint64_t *ts;		/* 0: not entered */
	bool said;
};

/* A process's last traced call made from Python: its call site (copied:
 * the monitor's strings do not outlive a window), call and time. */
struct hpy {
	char site[160];
	const char *call;
	uint64_t ts;
};

struct ncclhang {
	const struct model *m;
	uint64_t after_ns, last_tick;
	struct hmap comms;	/* id -> struct hcomm * */
	struct hmap ops;	/* hash (+ probe) -> struct hop * */
	struct hmap py;		/* pid -> struct hpy * */
	uint64_t said, unwatched;
};

struct ncclhang *ncclhang__new(const struct model *m, uint64_t after_ns)
{
	struct ncclhang *h = calloc(1, sizeof(*h));

	if (h) {
		h->m = m;
		h->after_ns = after_ns;
	}
	return h;
}

static void hop_free(struct hop *o)
{
	if (o) {
		free(o->ts);
		free(o);
	}
}

void ncclhang__free(struct ncclhang *h)
{
	uint64_t v;

	if (!h)
		return;
	for (size_t it = 0; hmap__next(&h->ops, &it, NULL, &v);)
		hop_free((struct hop *)(uintptr_t)v);
	for (size_t it = 0; hmap__next(&h->comms, &it, NULL, &v);) {
		struct hcomm *c = (struct hcomm *)(uintptr_t)v;

		free(c->pids);
		free(c);
	}
	for (size_t it = 0; hmap__next(&h->py, &it, NULL, &v);)
		free((void *)(uintptr_t)v);
	hmap__free(&h->ops);
	hmap__free(&h->comms);
	hmap__free(&h->py);
	free(h);
}

uint64_t ncclhang__said(const struct ncclhang *h)
{
	return h ? h->said : 0;
}

/* The communicator of comm's id, its rank learned to be in comm's process. */
static struct hcomm *learn(struct ncclhang *h, const struct nccl_comm *comm)
{
	uint64_t *v = hmap__get(&h->comms, comm->id);
	struct hcomm *c;

	if (!comm->id || comm->rank < 0 || comm->nranks < 2 || comm->rank >= comm->nranks)
		return NULL;
	c = v ? (struct hcomm *)(uintptr_t)*v : NULL;
	if (c && c->nranks != comm->nranks)
		return NULL;	/* two communicators of one id: not watched */
	if (!c) {
		c = calloc(1, sizeof(*c));
		if (!c || !(c->pids = calloc(comm->nranks, sizeof(*c->pids))) ||
		    hmap__put(&h->comms, comm->id, (uintptr_t)c)) {
			if (c)
				free(c->pids);
			free(c);
			return NULL;
		}
		c->id = comm->id;
		c->nranks = comm->nranks;
	}
	if (!c->pids[comm->rank])
		c->known++;
	c->pids[comm->rank] = comm->pid;
	return c;
}

static uint64_t op_hash(uint64_t id, uint64_t seq, int a, int b)
{
	return hash__u64(id ^ hash__u64(seq ^ (uint64_t)(uint32_t)a << 32 ^ (uint32_t)b));
}

/* The operation (comm, seq, a, b), made with n slots when create is set;
 * *key: where it is (or goes) in ops. */
static struct hop *op_of(struct ncclhang *h, struct hcomm *c, uint64_t seq, int a, int b, int n,
			 bool create, uint64_t *key)
{
	struct hop *o;
	uint64_t *v;

	for (*key = op_hash(c->id, seq, a, b); (v = hmap__get(&h->ops, *key)); (*key)++) {
		o = (struct hop *)(uintptr_t)*v;
		if (o->comm == c && o->seq == seq && o->a == a && o->b == b)
			return o;
	}
	if (!create)
		return NULL;
	if (h->ops.count >= OPEN_MAX) {
		h->unwatched++;
		return NULL;
	}
	o = calloc(1, sizeof(*o));
	if (!o || !(o->ts = calloc(n, sizeof(*o->ts))) || hmap__put(&h->ops, *key, (uintptr_t)o)) {
		hop_free(o);
		return NULL;
	}
	o->comm = c;
	o->seq = seq;
	o->a = a;
	o->b = b;
	o->n = n;
	return o;
}

/* Stops watching communicator c, whose ranks are not all here. */
static void let_go(struct ncclhang *h, struct hcomm *c)
{
	uint64_t k, v;

	c->remote = true;
	for (size_t it = 0; hmap__next(&h->ops, &it, &k, &v);) {
		struct hop *o = (struct hop *)(uintptr_t)v;

		if (o->comm == c) {
			hmap__del(&h->ops, k, NULL);
			hop_free(o);
		}
	}
	c->open = 0;
	dbg("NCCL communicator %04x: %d of its %d ranks traced here: not watched for hangs",
	    nccl__short_id(c->id), c->known, c->nranks);
}

/* Remembers the Python call site of a traced call of t's process: what a
 * rank that has not entered an operation did last, for the hang line. */
static void note_py(struct ncclhang *h, const struct thread *t, const struct call *c)
{
	const char *site = c->py_user ? c->py_user : c->py_site;
	uint64_t *v = hmap__get(&h->py, t->proc->pid);
	struct hpy *p = v ? (struct hpy *)(uintptr_t)*v : NULL;

	if (!p) {
		p = calloc(1, sizeof(*p));
		if (!p || hmap__put(&h->py, t->proc->pid, (uintptr_t)p)) {
			free(p);
			return;
		}
	}
	if (strcmp(p->site, site))
		snprintf(p->site, sizeof(p->site), "%s", site);
	p->call = c->name;
	p->ts = c->ts;
}

static void on_begin(void *ctx, struct thread *t, struct call *c)
{
	struct ncclhang *h = ctx;
	const struct nccl_call *nc = c->lib == LIB_NCCL ? nccl__call(t, c) : NULL;
	const struct nccl_func *f;
	struct hcomm *hc;
	struct hop *o;
	bool p2p;
	int a = -1, b = -1, slot, n;
	uint64_t key;

	if (c->py_site && t->proc)
		note_py(h, t, c);
	if (!nc || nc->nested || !nc->comm || !nc->seq)
		return;
	f = &nccl_funcs[c->func];
	p2p = f->cls == NC_C_P2P;
	if ((f->cls != NC_C_COLL && !p2p) || !(hc = learn(h, nc->comm)) || hc->remote)
		return;
	/* Every entry counts, ranks not seen yet or not (the record of a
	 * rank's creation may come after another's first operation); a
	 * communicator with ranks elsewhere (another host, not traced) is
	 * let go once its open operations pile up: nothing to compare here. */
	if (hc->open >= REMOTE_OPEN && hc->known < hc->nranks) {
		let_go(h, hc);
		return;
	}
	slot = nc->comm->rank;
	n = hc->nranks;
	if (p2p) {
		if (nc->root < 0 || nc->root >= hc->nranks)
			return;
		a = f->coll == NCOLL_RECV ? nc->root : nc->comm->rank;
		b = f->coll == NCOLL_RECV ? nc->comm->rank : nc->root;
		slot = f->coll == NCOLL_RECV;
		n = 2;
	}
	o = op_of(h, hc, nc->seq, a, b, n, true, &key);
	if (!o || o->ts[slot])
		return;
	if (!o->seen++)
		hc->open++;
	if (o->seen == 1) {
		o->name = c->name;
		o->bytes = nc->bytes;
	}
	o->ts[slot] = c->ts;
	if (o->seen == o->n) {
		hc->open--;
		if (o->said)
			info("NCCL: %s #%" PRIu64 " on communicator %04x: every rank entered it at "
			     "last", o->name, o->seq, nccl__short_id(hc->id));
		hmap__del(&h->ops, key, NULL);
		hop_free(o);
	}
}

/* The creation of a communicator tells where its rank lives. */
static void on_end(void *ctx, struct thread *t, struct call *c)
{
	const struct nccl_call *nc = c->lib == LIB_NCCL ? nccl__call(t, c) : NULL;

	if (nc && nc->comm && nccl_funcs[c->func].cls == NC_C_INIT_RANK)
		learn(ctx, nc->comm);
}

struct sink ncclhang__sink(struct ncclhang *h)
{
	return (struct sink){ .ctx = h, .call_begin = on_begin, .call_end = on_end };
}

/* ------------------------------------------------------------ saying it */

static const char *syscall_name(long nr)
{
#ifdef __x86_64__
	switch (nr) {
	case 0: return "read";
	case 7: return "poll";
	case 16: return "ioctl";
	case 23: return "select";
	case 24: return "sched_yield";
	case 35: return "nanosleep";
	case 45: return "recvfrom";
	case 47: return "recvmsg";
	case 61: return "wait4";
	case 202: return "futex";
	case 230: return "clock_nanosleep";
	case 232: return "epoll_wait";
	case 270: return "pselect6";
	case 271: return "ppoll";
	case 281: return "epoll_pwait";
	}
#endif
	(void)nr;
	return NULL;
}

/* One thread of a process that has not entered: its state letter and
 * name, its system call, its innermost open traced call. */
static void say_thread(const struct ncclhang *h, uint32_t pid, uint32_t tid, uint64_t now,
		       char *buf, size_t len)
{
	char path[96], line[512], comm[32] = "?", state = '?', sys[48] = "";
	const uint64_t *v = hmap__get(&h->m->threads, tid);
	const struct thread *t = v ? (const struct thread *)(uintptr_t)*v : NULL;
	const char *p, *name;
	FILE *f;
	long nr = -1;

	snprintf(path, sizeof(path), "/proc/%u/task/%u/stat", pid, tid);
	if ((f = fopen(path, "re"))) {
		if (fgets(line, sizeof(line), f) && (p = strrchr(line, ')')) && p[1] && p[2]) {
			const char *o = strchr(line, '(');

			state = p[2];
			if (o && p > o)
				snprintf(comm, sizeof(comm), "%.*s", (int)(p - o - 1), o + 1);
		}
		fclose(f);
	}
	snprintf(path, sizeof(path), "/proc/%u/task/%u/syscall", pid, tid);
	if ((f = fopen(path, "re"))) {
		if (fgets(line, sizeof(line), f)) {
			if (!strncmp(line, "running", 7))
				snprintf(sys, sizeof(sys), ", running");
			else if (sscanf(line, "%ld", &nr) == 1 && nr >= 0 && (name = syscall_name(nr)))
				snprintf(sys, sizeof(sys), ", in %s", name);
			else if (nr >= 0)
				snprintf(sys, sizeof(sys), ", in syscall %ld", nr);
		}
		fclose(f);
	}
	if (t && t->stack && t->depth > 0) {
		const struct call *c = &t->stack[t->depth - 1];
		const char *site = c->py_user ? c->py_user : c->py_site;

		snprintf(buf, len, "%u %s (%c%s; in %s for %.1f s%s%s)", tid, comm, state, sys,
			 c->name, (now - c->ts) / 1e9, site ? ", called at " : "", site ? site : "");
	} else
		snprintf(buf, len, "%u %s (%c%s)", tid, comm, state, sys);
}

/* What process pid is doing now, thread by thread (at most 8). */
static void say_doing(const struct ncclhang *h, uint32_t pid, uint64_t now)
{
	char path[64], what[384];
	const uint64_t *v;
	struct dirent *e;
	int n = 0, more = 0;
	DIR *d;

	snprintf(path, sizeof(path), "/proc/%u/task", pid);
	d = opendir(path);
	if (!d) {
		warn("  pid %u: %s", pid, errno == ENOENT ? "gone" : strerror(errno));
		return;
	}
	while ((e = readdir(d))) {
		uint32_t tid = (uint32_t)strtoul(e->d_name, NULL, 10);

		if (!tid)
			continue;
		if (n++ >= 8) {
			more++;
			continue;
		}
		say_thread(h, pid, tid, now, what, sizeof(what));
		warn("  pid %u thread %s", pid, what);
	}
	closedir(d);
	if (more)
		warn("  pid %u: %d more thread(s)", pid, more);
	v = hmap__get(&h->py, pid);
	if (v) {
		const struct hpy *p = (const struct hpy *)(uintptr_t)*v;

		warn("  pid %u: its last traced call from Python: %s at %s, %.1f s ago", pid,
		     p->call, p->site, now > p->ts ? (now - p->ts) / 1e9 : 0.0);
	}
}

static void say(struct ncclhang *h, struct hop *o, uint64_t now)
{
	struct hcomm *c = o->comm;
	char waiting[256] = "", where[64];
	uint64_t first = UINT64_MAX;
	uint32_t shown[16];
	size_t w = 0;

	for (int i = 0; i < o->n; i++) {
		int rank = o->a < 0 ? i : i ? o->b : o->a;

		if (!o->ts[i])
			continue;
		if (o->ts[i] < first)
			first = o->ts[i];
		if (w < sizeof(waiting) - 16)
			w += snprintf(waiting + w, sizeof(waiting) - w, "%s%d (pid %u)", w ? ", " : "",
				      rank, c->pids[rank]);
	}
	if (o->a >= 0)
		snprintf(where, sizeof(where), " rank %d -> rank %d", o->a, o->b);
	else
		where[0] = 0;
	warn("NCCL hang? %s #%" PRIu64 "%s (%" PRIu64 " bytes) on communicator %04x (%d ranks): "
	     "rank(s) %s entered it, the first %.1f s ago; waiting for:", o->name, o->seq, where,
	     o->bytes, nccl__short_id(c->id), c->nranks, waiting, (now - first) / 1e9);
	for (int i = 0, nshown = 0; i < o->n; i++) {
		int rank = o->a < 0 ? i : i ? o->b : o->a;
		bool again = false;

		if (o->ts[i])
			continue;
		for (int k = 0; k < nshown && k < 16; k++)
			again |= shown[k] == c->pids[rank];
		warn(" rank %d (pid %u), which has not entered it%s", rank, c->pids[rank],
		     again ? " (threads above)" : "; its threads now:");
		if (again)
			continue;
		if (nshown < 16)
			shown[nshown++] = c->pids[rank];
		say_doing(h, c->pids[rank], now);
	}
}

/* Communicators with nothing open whose every process the model forgot
 * (the monitor forgets the dead): kept no longer. */
static void forget_dead(struct ncclhang *h)
{
	uint64_t k, v;

	for (size_t it = 0; hmap__next(&h->comms, &it, &k, &v);) {
		struct hcomm *c = (struct hcomm *)(uintptr_t)v;
		bool alive = false;

		for (int r = 0; r < c->nranks && !alive; r++)
			alive = c->pids[r] && hmap__get(&h->m->procs, c->pids[r]);
		if (c->open || alive)
			continue;
		hmap__del(&h->comms, k, NULL);
		free(c->pids);
		free(c);
	}
	for (size_t it = 0; hmap__next(&h->py, &it, &k, &v);) {
		if (hmap__get(&h->m->procs, (uint32_t)k))
			continue;
		hmap__del(&h->py, k, NULL);
		free((void *)(uintptr_t)v);
	}
}

unsigned ncclhang__tick(struct ncclhang *h, uint64_t now)
{
	unsigned n = 0;
	uint64_t v;

	if (!h || now - h->last_tick < TICK_NS)
		return 0;
	h->last_tick = now;
	forget_dead(h);
	for (size_t it = 0; hmap__next(&h->ops, &it, NULL, &v);) {
		struct hop *o = (struct hop *)(uintptr_t)v;
		uint64_t first = UINT64_MAX;

		if (o->said || o->comm->known < o->comm->nranks)
			continue;
		for (int i = 0; i < o->n; i++)
			if (o->ts[i] && o->ts[i] < first)
				first = o->ts[i];
		if (first == UINT64_MAX || now < first || now - first < h->after_ns)
			continue;
		o->said = true;
		h->said++;
		n++;
		say(h, o, now);
	}
	return n;
}
