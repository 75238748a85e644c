// SPDX-License-Identifier: MIT
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/hangwatch.h"
#include "lib/hmap.h"
#include "lib/log.h"
#include "lib/procfs.h"

#define TICK_NS (500ull * 1000000)
#define OPEN_MAX 65536		/* operations watched at once (then counted) */
/* A communicator with this many operations open and a rank never seen
 * here has ranks elsewhere: no longer watched. */
#define REMOTE_OPEN 64

/* A communicator's ranks as seen on this host: the process of each. */
struct hcomm {
	uint64_t id;
	enum hw_side side;
	int nranks, known;
	uint32_t *pids;		/* by rank; 0: not seen */
	uint32_t open;		/* its operations open */
	bool remote;		/* ranks elsewhere: not watched */
	/* rank << 4 | series -> the highest collective number it entered
	 * (series: the plugin's function, from the number's high bits; the
	 * host side's are one series). */
	struct hmap prog;
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

struct hangwatch {
	const struct model *m;
	uint64_t after_ns, last_tick;
	struct hmap comms;	/* hash(side, id) (+ probe) -> struct hcomm * */
	struct hmap ops;	/* hash (+ probe) -> struct hop * */
	struct hmap py;		/* pid -> struct hpy * */
	struct hmap host_ranks;	/* hash(pid, rank, nranks) -> 1: the host side watches it */
	uint64_t said, unwatched;
};

struct hangwatch *hangwatch__new(const struct model *m, uint64_t after_ns)
{
	struct hangwatch *h = calloc(1, sizeof(*h));

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

static void hcomm_free(struct hcomm *c)
{
	if (c) {
		hmap__free(&c->prog);
		free(c->pids);
		free(c);
	}
}

void hangwatch__free(struct hangwatch *h)
{
	uint64_t v;

	if (!h)
		return;
	for (size_t it = 0; hmap__next(&h->ops, &it, NULL, &v);)
		hop_free((struct hop *)(uintptr_t)v);
	for (size_t it = 0; hmap__next(&h->comms, &it, NULL, &v);)
		hcomm_free((struct hcomm *)(uintptr_t)v);
	for (size_t it = 0; hmap__next(&h->py, &it, NULL, &v);)
		free((void *)(uintptr_t)v);
	hmap__free(&h->ops);
	hmap__free(&h->comms);
	hmap__free(&h->py);
	hmap__free(&h->host_ranks);
	free(h);
}

uint64_t hangwatch__said(const struct hangwatch *h)
{
	return h ? h->said : 0;
}

static uint64_t rank_key(uint32_t pid, int rank, int nranks)
{
	return hash__u64((uint64_t)pid << 32 ^ hash__u64((uint64_t)(uint32_t)rank << 32 ^
							 (uint32_t)nranks));
}

bool hangwatch__host_knows(const struct hangwatch *h, uint32_t pid, int rank, int nranks)
{
	return h && hmap__get(&h->host_ranks, rank_key(pid, rank, nranks));
}

/* The communicator (side, id); *key: where it is (or goes) in comms. */
static struct hcomm *comm_find(struct hangwatch *h, enum hw_side side, uint64_t id,
			       uint64_t *key)
{
	uint64_t *v;

	for (*key = hash__u64(id ^ (uint64_t)side << 63 ^ side); (v = hmap__get(&h->comms, *key));
	     (*key)++) {
		struct hcomm *c = (struct hcomm *)(uintptr_t)*v;

		if (c->id == id && c->side == side)
			return c;
	}
	return NULL;
}

/* The communicator of id, rank learned to be in pid; NULL: not watched
 * (out of range, two sizes under one id, the host side's already). */
static struct hcomm *learn(struct hangwatch *h, enum hw_side side, uint64_t id, int nranks,
			   int rank, uint32_t pid)
{
	struct hcomm *c;
	uint64_t key;

	if (!h || !id || rank < 0 || nranks < 2 || rank >= nranks || !pid)
		return NULL;
	if (side == HW_HOST)
		hmap__put(&h->host_ranks, rank_key(pid, rank, nranks), 1);
	else if (hmap__get(&h->host_ranks, rank_key(pid, rank, nranks)))
		return NULL;
	c = comm_find(h, side, id, &key);
	if (c && c->nranks != nranks)
		return NULL;	/* two communicators of one id: not watched */
	if (!c) {
		c = calloc(1, sizeof(*c));
		if (!c || !(c->pids = calloc(nranks, sizeof(*c->pids))) ||
		    hmap__put(&h->comms, key, (uintptr_t)c)) {
			hcomm_free(c);
			return NULL;
		}
		c->id = id;
		c->side = side;
		c->nranks = nranks;
	}
	if (!c->pids[rank])
		c->known++;
	c->pids[rank] = pid;
	return c;
}

void hangwatch__learn(struct hangwatch *h, enum hw_side side, uint64_t id, int nranks, int rank,
		      uint32_t pid)
{
	learn(h, side, id, nranks, rank, pid);
}

/* The number said: the plugin's keys carry the function in their high
 * 16 bits (gpunccl__strag_seq), the host's are the number itself. */
static uint64_t shown_seq(const struct hop *o)
{
	return o->comm->side == HW_PLUGIN ? o->seq & ((1ull << 48) - 1) : o->seq;
}

static uint64_t op_hash(const struct hcomm *c, uint64_t seq, int a, int b)
{
	return hash__u64(c->id ^ c->side ^ hash__u64(seq ^ (uint64_t)(uint32_t)a << 32 ^
						     (uint32_t)b));
}

/* The operation (comm, seq, a, b), made with n slots when new; *key:
 * where it is in ops. */
static struct hop *op_of(struct hangwatch *h, struct hcomm *c, uint64_t seq, int a, int b, int n,
			 uint64_t *key)
{
	struct hop *o;
	uint64_t *v;

	for (*key = op_hash(c, seq, a, b); (v = hmap__get(&h->ops, *key)); (*key)++) {
		o = (struct hop *)(uintptr_t)*v;
		if (o->comm == c && o->seq == seq && o->a == a && o->b == b)
			return o;
	}
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
static void let_go(struct hangwatch *h, struct hcomm *c)
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
	dbg("NCCL communicator %04x%s: %d of its %d ranks traced here: not watched for hangs",
	    (unsigned)(c->id >> 48), c->side == HW_PLUGIN ? " (NCCL profiler)" : "", c->known,
	    c->nranks);
}

void hangwatch__enter(struct hangwatch *h, enum hw_side side, uint64_t id, int nranks,
		      int rank, uint32_t pid, uint64_t seq, int a, int b, const char *name,
		      uint64_t bytes, uint64_t ts)
{
	struct hcomm *c = learn(h, side, id, nranks, rank, pid);
	bool p2p = a >= 0;
	int slot = rank, n = nranks;
	struct hop *o;
	uint64_t key;

	if (!c || c->remote || !seq || !ts)
		return;
	/* Every entry counts, ranks not seen yet or not (the record of a
	 * rank's creation may come after another's first operation); a
	 * communicator with ranks elsewhere (another host, not traced) is
	 * let go once its open operations pile up: nothing to compare here. */
	if (c->open >= REMOTE_OPEN && c->known < c->nranks) {
		let_go(h, c);
		return;
	}
	if (p2p) {
		/* A send to itself: which slot is which is not known here. */
		if (a >= nranks || b < 0 || b >= nranks || a == b || (rank != a && rank != b))
			return;
		slot = rank == b;
		n = 2;
	}
	if (!p2p) {
		uint64_t k = (uint64_t)rank << 4 | (seq >> 48 & 15), *v = hmap__get(&c->prog, k);

		if (!v)
			hmap__put(&c->prog, k, seq);
		else if (seq > *v)
			*v = seq;
	}
	o = op_of(h, c, seq, a, b, n, &key);
	if (!o || o->ts[slot])
		return;
	if (!o->seen++) {
		c->open++;
		o->name = name;
		o->bytes = bytes;
	}
	o->ts[slot] = ts;
	if (o->seen == o->n) {
		c->open--;
		if (o->said)
			info("NCCL: %s #%" PRIu64 " on communicator %04x: every rank entered it at "
			     "last", o->name, shown_seq(o), (unsigned)(c->id >> 48));
		hmap__del(&h->ops, key, NULL);
		hop_free(o);
	}
}

void hangwatch__note_py(struct hangwatch *h, uint32_t pid, const char *site, const char *call,
			uint64_t ts)
{
	uint64_t *v;
	struct hpy *p;

	if (!h || !site)
		return;
	v = hmap__get(&h->py, pid);
	p = v ? (struct hpy *)(uintptr_t)*v : NULL;
	if (!p) {
		p = calloc(1, sizeof(*p));
		if (!p || hmap__put(&h->py, pid, (uintptr_t)p)) {
			free(p);
			return;
		}
	}
	if (strcmp(p->site, site))
		snprintf(p->site, sizeof(p->site), "%s", site);
	p->call = call;
	p->ts = ts;
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
static void say_thread(const struct hangwatch *h, uint32_t pid, uint32_t tid, uint64_t now,
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
static void say_doing(const struct hangwatch *h, uint32_t pid, uint64_t now)
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

static void say(struct hangwatch *h, struct hop *o, uint64_t now)
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
	warn("NCCL hang? %s #%" PRIu64 "%s (%" PRIu64 " bytes) on communicator %04x (%d ranks%s): "
	     "rank(s) %s entered it, the first %.1f s ago; waiting for:", o->name, shown_seq(o),
	     where, o->bytes, (unsigned)(c->id >> 48), c->nranks,
	     c->side == HW_PLUGIN ? "; NCCL's profiler plugin: its commHash, and its numbers of "
				    "this function's operations from 1" : "",
	     waiting, (now - first) / 1e9);
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

/* Whether pid lives: the model knows it (record), or /proc does (a
 * monitor's model knows a process only from its records, and the
 * plugin's ranks are learned from theirs before any call record). */
static bool alive(const struct hangwatch *h, uint32_t pid)
{
	return hmap__get(&h->m->procs, pid) || procfs__alive((pid_t)pid);
}

/* Communicators with nothing open whose every process is gone (the
 * monitor forgets the dead): kept no longer. */
static void forget_dead(struct hangwatch *h)
{
	uint64_t k, v;

	for (size_t it = 0; hmap__next(&h->comms, &it, &k, &v);) {
		struct hcomm *c = (struct hcomm *)(uintptr_t)v;
		bool live = false;

		for (int r = 0; r < c->nranks && !live; r++)
			live = c->pids[r] && alive(h, c->pids[r]);
		if (c->open || live)
			continue;
		for (int r = 0; r < c->nranks && c->side == HW_HOST; r++)
			if (c->pids[r])
				hmap__del(&h->host_ranks, rank_key(c->pids[r], r, c->nranks), NULL);
		hmap__del(&h->comms, k, NULL);
		hcomm_free(c);
	}
	for (size_t it = 0; hmap__next(&h->py, &it, &k, &v);) {
		if (alive(h, (uint32_t)k))
			continue;
		hmap__del(&h->py, k, NULL);
		free((void *)(uintptr_t)v);
	}
}

/* A collective whose every missing rank entered a later one of its
 * series. */
static bool passed(const struct hop *o)
{
	const struct hcomm *c = o->comm;

	if (o->a >= 0)
		return false;	/* sends/receives: numbered per peer */
	for (int i = 0; i < o->n; i++) {
		const uint64_t *v;

		if (o->ts[i])
			continue;
		v = hmap__get(&c->prog, (uint64_t)i << 4 | (o->seq >> 48 & 15));
		if (!v || *v <= o->seq)
			return false;
	}
	return true;
}

unsigned hangwatch__tick(struct hangwatch *h, uint64_t now)
{
	unsigned n = 0;
	uint64_t k, v;

	if (!h || now - h->last_tick < TICK_NS)
		return 0;
	h->last_tick = now;
	forget_dead(h);
	for (size_t it = 0; hmap__next(&h->ops, &it, &k, &v);) {
		struct hop *o = (struct hop *)(uintptr_t)v;
		uint64_t first = UINT64_MAX;

		if (o->said || o->comm->known < o->comm->nranks)
			continue;
		for (int i = 0; i < o->n; i++)
			if (o->ts[i] && o->ts[i] < first)
				first = o->ts[i];
		if (first == UINT64_MAX || now < first || now - first < h->after_ns)
			continue;
		if (passed(o)) {
			/* Every missing rank is past it: it entered it unseen
			 * (before the capture, or a lost record). */
			o->comm->open--;
			hmap__del(&h->ops, k, NULL);
			hop_free(o);
			continue;
		}
		o->said = true;
		h->said++;
		n++;
		say(h, o, now);
	}
	return n;
}
