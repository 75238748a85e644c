// SPDX-License-Identifier: MIT
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "lib/arr.h"
#include "lib/hmap.h"
#include "lib/stats.h"
#include "lib/straggle.h"

struct comm {
	char *id;
	int nranks;
	bool conflict;		/* two processes claimed one rank */
	const char *how;	/* straggle_op.how of its first operation */
	size_t nrows;		/* its ranks seen */
	uint64_t matched, waited;
};

struct row {
	size_t comm;
	int rank;
	uint32_t pid;
	char *host;
	uint64_t ops, last, waited;
	struct stats late;
	uint64_t prev_end;	/* the return of its latest operation on the communicator */
	struct straggle_gap *gaps;	/* before the operations it entered last */
	size_t ngaps, capgaps;
	bool dead;		/* straggle__forget_pid: its process exited */
	uint64_t nseq, seq_min, seq_max;	/* its collectives' sequence numbers */
	bool seq_mixed;		/* numbers of several series (the high 16 bits differ) */
};

/* An operation of one communicator as its ranks enter it: every rank's
 * slot (a collective) or the sender's and the receiver's (p2p). */
struct inst {
	size_t comm;
	uint64_t seq;
	int a, b;		/* p2p: sender, receiver; a collective: -1, -1 */
	uint64_t name;		/* hash of the operation's name */
	int n, seen;
	uint64_t *ts, *from;
	size_t *row;		/* SIZE_MAX: not entered yet */
	uint64_t first;		/* the earliest entry */
};

struct straggle {
	struct comm *comms;
	size_t ncomms, capcomms;
	struct hmap comm_ix;	/* hash(id, nranks) (+ probe) -> index + 1 */
	struct row *rows;
	size_t nrows, caprows;
	struct hmap row_ix;	/* hash(comm, rank) (+ probe) -> index + 1 */
	struct hmap insts;	/* hash(comm, seq, a, b) (+ probe) -> struct inst * */
	uint64_t coll, p2p;	/* instances matched */
	uint64_t unknown;	/* operations of a rank not known */
	uint64_t no_seq;	/* operations without a sequence number */
	uint64_t single;	/* operations on communicators of one rank */
	uint64_t bad;		/* rank or peer out of range */
	uint64_t twice;		/* a rank entering one instance twice */
	uint64_t mismatched;	/* instances whose ranks named other operations */
	uint64_t incomplete;	/* instances some rank never entered */
	uint64_t incomplete_ops;
	bool finished, any;
	bool no_gaps;
	ssize_t named;		/* row index, -1: none */
	int (*activity)(void *ctx, const struct straggle_named *n, FILE *f);
	void *activity_ctx;
	const char *title;	/* the text heading (straggle__title) */
	const char *basis;	/* a line under it; NULL: none */
	char **notes;		/* straggle__note's lines */
	size_t nnotes;
};

struct straggle *straggle__new(void)
{
	struct straggle *s = calloc(1, sizeof(*s));

	if (s) {
		s->named = -1;
		s->title = "NCCL stragglers: which rank the others wait for (nccl_stragglers)";
	}
	return s;
}

void straggle__title(struct straggle *s, const char *title, const char *basis)
{
	s->title = title;
	s->basis = basis;
}

static void inst_free(struct inst *in)
{
	if (!in)
		return;
	free(in->ts);
	free(in->from);
	free(in->row);
	free(in);
}

void straggle__free(struct straggle *s)
{
	uint64_t v;

	if (!s)
		return;
	for (size_t it = 0; hmap__next(&s->insts, &it, NULL, &v);)
		inst_free((struct inst *)(uintptr_t)v);
	for (size_t i = 0; i < s->ncomms; i++)
		free(s->comms[i].id);
	for (size_t i = 0; i < s->nrows; i++) {
		free(s->rows[i].host);
		free(s->rows[i].gaps);
		stats__free(&s->rows[i].late);
	}
	for (size_t i = 0; i < s->nnotes; i++)
		free(s->notes[i]);
	free(s->notes);
	hmap__free(&s->insts);
	hmap__free(&s->comm_ix);
	hmap__free(&s->row_ix);
	free(s->comms);
	free(s->rows);
	free(s);
}

/* The index of communicator (id, nranks), added if new; -1 on ENOMEM. */
static ssize_t comm_of(struct straggle *s, const char *id, int nranks, const char *how)
{
	uint64_t h = hash__bytes(id, strlen(id)) ^ hash__u64((uint64_t)nranks), *v;
	struct comm *c;

	for (; (v = hmap__get(&s->comm_ix, h)); h++) {
		c = &s->comms[*v - 1];
		if (c->nranks == nranks && !strcmp(c->id, id))
			return (ssize_t)(*v - 1);
	}
	if (arr__grow((void **)&s->comms, &s->capcomms, s->ncomms, sizeof(*s->comms)))
		return -1;
	c = &s->comms[s->ncomms];
	memset(c, 0, sizeof(*c));
	c->id = strdup(id);
	c->nranks = nranks;
	c->how = how ? how : "seq";
	if (!c->id || hmap__put(&s->comm_ix, h, s->ncomms + 1)) {
		free(c->id);
		return -1;
	}
	return (ssize_t)s->ncomms++;
}

/* The index of (comm, rank)'s row, added if new; -1 on ENOMEM. */
static ssize_t row_of(struct straggle *s, size_t comm, const struct straggle_op *op)
{
	uint64_t h = hash__u64((uint64_t)comm << 32 | (uint32_t)op->rank), *v;
	struct row *r;

	for (; (v = hmap__get(&s->row_ix, h)); h++) {
		r = &s->rows[*v - 1];
		if (r->comm == comm && r->rank == op->rank && r->dead) {
			/* A new process as a rank of a forgotten one. */
			free(r->host);
			free(r->gaps);
			stats__free(&r->late);
			memset(r, 0, sizeof(*r));
			r->comm = comm;
			r->rank = op->rank;
			r->pid = op->pid;
			r->host = strdup(op->host);
			return r->host ? (ssize_t)(*v - 1) : -1;
		}
		if (r->comm == comm && r->rank == op->rank) {
			/* Another process as the same rank: two jobs, or two
			 * communicators whose short ids collide. */
			if (r->pid != op->pid || strcmp(r->host, op->host))
				s->comms[comm].conflict = true;
			return (ssize_t)(*v - 1);
		}
	}
	if (arr__grow((void **)&s->rows, &s->caprows, s->nrows, sizeof(*s->rows)))
		return -1;
	r = &s->rows[s->nrows];
	memset(r, 0, sizeof(*r));
	r->comm = comm;
	r->rank = op->rank;
	r->pid = op->pid;
	r->host = strdup(op->host);
	if (!r->host || hmap__put(&s->row_ix, h, s->nrows + 1)) {
		free(r->host);
		return -1;
	}
	s->comms[comm].nrows++;
	return (ssize_t)s->nrows++;
}

static uint64_t inst_hash(size_t comm, uint64_t seq, int a, int b)
{
	return hash__u64(hash__u64((uint64_t)comm << 32 ^ seq) ^ (uint64_t)(uint32_t)a << 32 ^
			 (uint32_t)b);
}

/* The instance (comm, seq, a, b), created with n slots if new. *h: its key. */
static struct inst *inst_of(struct straggle *s, size_t comm, uint64_t seq, int a, int b, int n,
			    uint64_t *h)
{
	struct inst *in;
	uint64_t *v;

	for (*h = inst_hash(comm, seq, a, b); (v = hmap__get(&s->insts, *h)); (*h)++) {
		in = (struct inst *)(uintptr_t)*v;
		if (in->comm == comm && in->seq == seq && in->a == a && in->b == b)
			return in;
	}
	in = calloc(1, sizeof(*in));
	if (!in)
		return NULL;
	in->comm = comm;
	in->seq = seq;
	in->a = a;
	in->b = b;
	in->n = n;
	in->ts = calloc(n, sizeof(*in->ts));
	in->from = calloc(n, sizeof(*in->from));
	in->row = malloc(n * sizeof(*in->row));
	if (!in->ts || !in->from || !in->row || hmap__put(&s->insts, *h, (uintptr_t)in)) {
		inst_free(in);
		return NULL;
	}
	for (int i = 0; i < n; i++)
		in->row[i] = SIZE_MAX;
	return in;
}

struct entry {
	uint64_t ts;
	int slot;
};

static int by_ts(const void *x, const void *y)
{
	const struct entry *a = x, *b = y;

	return a->ts < b->ts ? -1 : a->ts > b->ts;
}

static int add_gap(struct straggle *s, struct row *r, uint64_t from, uint64_t to)
{
	if (s->no_gaps || !from || from >= to || r->ngaps >= STRAGGLE_GAPS)
		return 0;
	if (arr__grow((void **)&r->gaps, &r->capgaps, r->ngaps, sizeof(*r->gaps)))
		return -ENOMEM;
	r->gaps[r->ngaps++] = (struct straggle_gap){ from, to };
	return 0;
}

/* Every rank entered in: its lateness goes to the ranks' rows. */
static int fold(struct straggle *s, struct inst *in)
{
	struct entry *e = malloc(in->n * sizeof(*e));
	uint64_t before = 0;
	struct row *last;
	int k;

	if (!e)
		return -ENOMEM;
	for (int i = 0; i < in->n; i++)
		e[i] = (struct entry){ in->ts[i], i };
	qsort(e, in->n, sizeof(*e), by_ts);
	/* Sorted by entry: rank k found k others waiting, since their entries. */
	for (k = 0; k < in->n; k++) {
		struct row *r = &s->rows[in->row[e[k].slot]];
		uint64_t waited = (uint64_t)k * e[k].ts - before;

		before += e[k].ts;
		r->ops++;
		r->waited += waited;
		s->comms[in->comm].waited += waited;
		stats__add(&r->late, e[k].ts - e[0].ts);
	}
	k = e[in->n - 1].slot;
	free(e);
	last = &s->rows[in->row[k]];
	last->last++;
	s->comms[in->comm].matched++;
	if (in->a >= 0)
		s->p2p++;
	else
		s->coll++;
	return add_gap(s, last, in->from[k], in->ts[k]);
}

int straggle__add(struct straggle *s, const struct straggle_op *op)
{
	bool p2p = op->peer >= 0 || op->recv;
	int a = -1, b = -1, slot = op->rank, n = op->nranks, err = 0;
	ssize_t c, ri;
	struct inst *in;
	struct row *r;
	uint64_t h, from;

	if (op->rank < 0 || op->nranks <= 0) {
		s->unknown++;
		return 0;
	}
	if (!op->seq) {
		s->no_seq++;
		return 0;
	}
	if (op->nranks == 1 && !p2p) {
		s->single++;	/* nobody to wait for */
		return 0;
	}
	if (op->rank >= op->nranks || (p2p && (op->peer < 0 || op->peer >= op->nranks))) {
		s->bad++;
		return 0;
	}
	c = comm_of(s, op->comm, op->nranks, op->how);
	ri = c < 0 ? -1 : row_of(s, (size_t)c, op);
	if (ri < 0)
		return -ENOMEM;
	r = &s->rows[ri];
	from = r->prev_end;
	if (op->end > r->prev_end)
		r->prev_end = op->end;
	if (p2p) {
		a = op->recv ? op->peer : op->rank;
		b = op->recv ? op->rank : op->peer;
		slot = op->recv;
		n = 2;
	}
	in = inst_of(s, (size_t)c, op->seq, a, b, n, &h);
	if (!in)
		return -ENOMEM;
	if (in->row[slot] != SIZE_MAX) {
		s->twice++;
		return 0;
	}
	if (!in->seen)
		in->name = hash__bytes(op->name, strlen(op->name));
	else if (!p2p && in->name != hash__bytes(op->name, strlen(op->name)))
		s->mismatched++;
	in->row[slot] = (size_t)ri;
	if (!p2p) {
		/* NCCL's own numbers (the GPU-side report) count each
		 * function apart, its id in the high bits: holes are only
		 * looked for within one series. */
		if (r->nseq && (op->seq ^ r->seq_min) >> 48)
			r->seq_mixed = true;
		if (!r->nseq || op->seq < r->seq_min)
			r->seq_min = op->seq;
		if (op->seq > r->seq_max)
			r->seq_max = op->seq;
		r->nseq++;
	}
	in->ts[slot] = op->ts;
	if (!in->first || op->ts < in->first)
		in->first = op->ts;
	in->from[slot] = from;
	s->any = true;
	if (++in->seen == in->n) {
		err = fold(s, in);
		hmap__del(&s->insts, h, NULL);
		inst_free(in);
	}
	return err;
}

void straggle__no_gaps(struct straggle *s)
{
	s->no_gaps = true;
}

void straggle__expire(struct straggle *s, uint64_t ts)
{
	uint64_t k, v;

	for (size_t it = 0; hmap__next(&s->insts, &it, &k, &v);) {
		struct inst *in = (struct inst *)(uintptr_t)v;

		if (in->first >= ts)
			continue;
		s->incomplete++;
		s->incomplete_ops += in->seen;
		hmap__del(&s->insts, k, NULL);
		inst_free(in);
	}
}

void straggle__forget_pid(struct straggle *s, uint32_t pid)
{
	for (size_t i = 0; i < s->nrows; i++)
		if (s->rows[i].pid == pid)
			s->rows[i].dead = true;
}

void straggle__sample(const struct straggle_row *r, const char *prefix,
		      enum straggle_series what, char *buf, size_t len)
{
	static const char *const names[STRAG__SERIES] = {
		"matched_total", "entered_last_total", "others_waited_seconds_total",
		"late_seconds_total",
	};
	char val[32];

	if (what == STRAG_WAITED)
		snprintf(val, sizeof(val), "%.9f", r->waited_ns / 1e9);
	else if (what == STRAG_LATE)
		snprintf(val, sizeof(val), "%.9f", r->late_ns / 1e9);
	else
		snprintf(val, sizeof(val), "%" PRIu64, what == STRAG_LAST ? r->last : r->ops);
	snprintf(buf, len, "%s_%s{comm=\"%.4s\",rank=\"%d\",nranks=\"%d\",pid=\"%u\"} %s\n",
		 prefix, names[what], r->comm, r->rank, r->nranks, r->pid, val);
}

void straggle__each(const struct straggle *s, void (*cb)(void *ctx, const struct straggle_row *r),
		    void *ctx)
{
	for (size_t i = 0; i < s->nrows; i++) {
		const struct row *r = &s->rows[i];

		if (r->dead)
			continue;
		cb(ctx, &(struct straggle_row){ .comm = s->comms[r->comm].id, .host = r->host,
						.rank = r->rank, .nranks = s->comms[r->comm].nranks,
						.pid = r->pid, .ops = r->ops, .last = r->last,
						.waited_ns = r->waited, .late_ns = r->late.total });
	}
}

uint64_t straggle__unknown(const struct straggle *s)
{
	return s->unknown;
}

void straggle__count_unknown(struct straggle *s, uint64_t n)
{
	s->unknown += n;
}

int straggle__note(struct straggle *s, const char *line)
{
	char **n = realloc(s->notes, (s->nnotes + 1) * sizeof(*n));

	if (!n)
		return -ENOMEM;
	s->notes = n;
	s->notes[s->nnotes] = strdup(line);
	if (!s->notes[s->nnotes])
		return -ENOMEM;
	s->nnotes++;
	return 0;
}

bool straggle__any(const struct straggle *s)
{
	for (size_t i = 0; i < s->ncomms; i++)
		if (s->comms[i].nrows >= 2)
			return true;
	return false;
}

static int by_from(const void *x, const void *y)
{
	const struct straggle_gap *a = x, *b = y;

	return a->from < b->from ? -1 : a->from > b->from;
}

/* The rank the others wait for: the one of most waiting caused, when it
 * entered last in two thirds of its operations or more (three quarters
 * with two ranks, where chance alone makes each last half of the time),
 * at least STRAGGLE_MIN_OPS of them, and caused at least half of its
 * communicator's waiting. */
static ssize_t pick(struct straggle *s)
{
	ssize_t best = -1;

	for (size_t i = 0; i < s->nrows; i++) {
		struct row *r = &s->rows[i];
		const struct comm *c = &s->comms[r->comm];
		uint64_t need = c->nranks == 2 ? 75 : 67;

		if (c->nranks < 2 || c->conflict || r->ops < STRAGGLE_MIN_OPS ||
		    r->last * 100 < need * r->ops ||
		    r->waited * 2 < c->waited || !r->waited)
			continue;
		if (best < 0 || r->waited > s->rows[best].waited)
			best = (ssize_t)i;
	}
	return best;
}

bool straggle__finish(struct straggle *s, struct straggle_named *nm)
{
	uint64_t v;

	if (!s->finished) {
		for (size_t it = 0; hmap__next(&s->insts, &it, NULL, &v);) {
			struct inst *in = (struct inst *)(uintptr_t)v;

			s->incomplete++;
			s->incomplete_ops += in->seen;
			inst_free(in);
		}
		hmap__free(&s->insts);
		s->named = pick(s);
		if (s->named >= 0) {
			struct row *r = &s->rows[s->named];

			/* A rank named with no gaps has a NULL array. */
			if (r->ngaps > 1)
				qsort(r->gaps, r->ngaps, sizeof(*r->gaps), by_from);
		}
		s->finished = true;
	}
	if (s->named < 0 || !nm)
		return s->named >= 0;
	{
		struct row *r = &s->rows[s->named];
		const struct comm *c = &s->comms[r->comm];

		*nm = (struct straggle_named){ .comm = c->id, .host = r->host, .rank = r->rank,
					       .nranks = c->nranks, .pid = r->pid, .ops = r->ops,
					       .last = r->last, .waited_ns = r->waited,
					       .late_med_ns = stats__median(&r->late),
					       .gaps = r->gaps, .ngaps = r->ngaps };
	}
	return true;
}

static int by_comm_rank(const void *x, const void *y, void *ctx)
{
	const struct straggle *s = ctx;
	const struct row *a = &s->rows[*(const size_t *)x], *b = &s->rows[*(const size_t *)y];
	int d = strcmp(s->comms[a->comm].id, s->comms[b->comm].id);

	if (d)
		return d;
	if (s->comms[a->comm].nranks != s->comms[b->comm].nranks)
		return s->comms[a->comm].nranks - s->comms[b->comm].nranks;
	return a->rank - b->rank;
}

static const char *const cols[] = { "comm", "rank", "pid", "host", "collectives", "last",
				    "last_pct", "late_med_ns", "late_p90_ns", "others_waited_ns",
				    "named", "matched_by" };
#define NCOLS ((int)(sizeof(cols) / sizeof(cols[0])))

/* Collectives a rank's numbers skip: numbered one after another on its
 * communicator, so a hole is an operation this capture did not see. */
static void seq_holes(struct straggle *s, FILE *f)
{
	uint64_t missing = 0, ranks = 0;
	const struct row *ex = NULL;

	for (size_t i = 0; i < s->nrows; i++) {
		const struct row *r = &s->rows[i];
		uint64_t m = r->nseq ? r->seq_max - r->seq_min + 1 - r->nseq : 0;

		if (!r->nseq || r->seq_mixed || r->seq_max - r->seq_min + 1 < r->nseq || !m)
			continue;
		missing += m;
		ranks++;
		if (!ex)
			ex = r;
	}
	if (!missing)
		return;
	fprintf(f, "   sequence numbers missing: %" PRIu64 " collective(s) of %" PRIu64 " rank(s) "
		   "not in these traces between their first and last (records lost, calls outside "
		   "the capture's windows, or a trace left out); e.g. rank %d of communicator %s: %"
		   PRIu64 " of #%" PRIu64 "-#%" PRIu64 "; their instances are not compared\n",
		missing, ranks, ex->rank, s->comms[ex->comm].id,
		ex->seq_max - ex->seq_min + 1 - ex->nseq, ex->seq_min, ex->seq_max);
}

static void notes(struct straggle *s, FILE *f)
{
	fprintf(f, "\n   matched by communicator and sequence number: %" PRIu64 " collective(s), %"
		   PRIu64 " send/receive pair(s)\n", s->coll, s->p2p);
	if (s->incomplete)
		fprintf(f, "   not matched: %" PRIu64 " operation(s) of %" PRIu64 " instance(s) some "
			   "rank never entered in these traces (a rank not traced, or the capture's "
			   "ends)\n", s->incomplete_ops, s->incomplete);
	if (s->unknown)
		fprintf(f, "   not matched: %" PRIu64 " operation(s) on communicators whose rank or "
			   "size is unknown (created before the capture: \"rank ?/?\"; with NCCL's "
			   "profiler plugin loaded, the GPU-side report matches them)\n", s->unknown);
	if (s->single)
		fprintf(f, "   not compared: %" PRIu64 " operation(s) on communicators of one rank "
			   "(nobody to wait for)\n", s->single);
	seq_holes(s, f);
	if (s->no_seq)
		fprintf(f, "   not matched: %" PRIu64 " operation(s) without a sequence number "
			   "(traces written before cgbpf numbered them)\n", s->no_seq);
	if (s->bad || s->twice)
		fprintf(f, "   left out: %" PRIu64 " operation(s) with a rank or peer out of range, %"
			   PRIu64 " entering an instance a second time\n", s->bad, s->twice);
	if (s->mismatched)
		fprintf(f, "   %" PRIu64 " instance(s) whose ranks entered different collectives "
			   "under one number (a communicator captured part-way)\n", s->mismatched);
	for (size_t i = 0; i < s->ncomms; i++)
		if (s->comms[i].conflict)
			fprintf(f, "   communicator %s of %d ranks: one rank in two processes (two jobs, "
				   "or ids that collide): nobody named there\n", s->comms[i].id,
				s->comms[i].nranks);
	for (size_t i = 0; i < s->nnotes; i++)
		fprintf(f, "   %s\n", s->notes[i]);
}

void straggle__activity(struct straggle *s,
			int (*fn)(void *ctx, const struct straggle_named *n, FILE *f), void *ctx)
{
	s->activity = fn;
	s->activity_ctx = ctx;
}

/* The named line; true when the activity follows (printed by the caller
 * into *n's section after the report). */
static bool named_line(struct straggle *s, FILE *f, struct straggle_named *out)
{
	struct straggle_named n;
	bool below;

	if (!straggle__finish(s, &n)) {
		fprintf(f, "   No rank holds the others back: none entered last in two thirds or "
			   "more of its operations (%d at least) while causing most of the "
			   "waiting.\n", STRAGGLE_MIN_OPS);
		return false;
	}
	below = s->activity && !s->activity(s->activity_ctx, &n, NULL);
	fprintf(f, "   Rank %d of communicator %s (%d ranks; pid %u%s%s) is the one the others "
		   "wait for: it entered last in %" PRIu64 " of %" PRIu64 " operations (%.0f%%), "
		   "%.3f ms after the first rank at the median; the others waited %.3f ms in all "
		   "for it. What it did before its late entries: %s.\n", n.rank, n.comm, n.nranks,
		n.pid, *n.host ? " on " : "", n.host, n.last, n.ops, 100.0 * n.last / n.ops,
		n.late_med_ns / 1e6, n.waited_ns / 1e6,
		below ? "below (nccl_straggler_activity)" :
			"cgbpf stats --report nccl_straggler_activity on the trace");
	*out = n;
	return below;
}

int straggle__print(struct straggle *s, enum sumtab_fmt fmt, FILE *f)
{
	size_t *ix = malloc((s->nrows ? s->nrows : 1) * sizeof(*ix));

	if (!ix)
		return -ENOMEM;
	straggle__finish(s, NULL);
	for (size_t i = 0; i < s->nrows; i++)
		ix[i] = i;
	qsort_r(ix, s->nrows, sizeof(*ix), by_comm_rank, s);
	if (fmt == SUMTAB_TEXT)
		fprintf(f, "\n** %s:\n\n%s%s%s", s->title, s->basis ? "   " : "",
			s->basis ? s->basis : "", s->basis ? "\n\n" : "");
	if (fmt == SUMTAB_TEXT) {
		if (!s->any) {
			fprintf(f, "   %s\n", s->single ? "no communicator of two ranks or more: nothing "
				   "to compare" : "no NCCL operation with a known rank and sequence number");
			notes(s, f);
			free(ix);
			return 0;
		}
		fprintf(f, " %-8s %6s %8s %-16s %11s %8s %8s %14s %14s %18s\n", "Comm", "Rank", "PID",
			"Host", "Collectives", "Last", "Last (%)", "Late Med (ns)", "Late P90 (ns)",
			"Others Waited (ns)");
		fprintf(f, " %-8s %6s %8s %-16s %11s %8s %8s %14s %14s %18s\n", "--------", "------",
			"--------", "----------------", "-----------", "--------", "--------",
			"--------------", "--------------", "------------------");
	} else {
		sumtab__begin(f, fmt, cols, NCOLS);
	}
	for (size_t k = 0; k < s->nrows; k++) {
		struct row *r = &s->rows[ix[k]];
		double pct = r->ops ? 100.0 * r->last / r->ops : 0;

		if (fmt == SUMTAB_TEXT) {
			fprintf(f, " %-8s %6d %8u %-16s %11" PRIu64 " %8" PRIu64 " %8.1f %14" PRIu64
				   " %14" PRIu64 " %18" PRIu64 "\n", s->comms[r->comm].id, r->rank,
				r->pid, *r->host ? r->host : "-", r->ops, r->last, pct,
				stats__median(&r->late), stats__quantile(&r->late, 0.9), r->waited);
		} else {
			const struct sumtab_cell c[NCOLS] = {
				{ SC_STR, .s = s->comms[r->comm].id }, { SC_U64, .u = (uint64_t)r->rank },
				{ SC_U64, .u = r->pid }, { SC_STR, .s = r->host },
				{ SC_U64, .u = r->ops }, { SC_U64, .u = r->last },
				{ SC_DOUBLE, .d = pct }, { SC_U64, .u = stats__median(&r->late) },
				{ SC_U64, .u = stats__quantile(&r->late, 0.9) },
				{ SC_U64, .u = r->waited },
				{ SC_U64, .u = (ssize_t)ix[k] == s->named },
				{ SC_STR, .s = s->comms[r->comm].how },
			};

			sumtab__row(f, fmt, cols, c, NCOLS, k == 0);
		}
	}
	if (fmt == SUMTAB_TEXT) {
		struct straggle_named n;

		notes(s, f);
		if (named_line(s, f, &n) && s->activity(s->activity_ctx, &n, f)) {
			free(ix);
			return -ENOMEM;
		}
	} else {
		sumtab__end(f, fmt);
	}
	free(ix);
	return 0;
}
