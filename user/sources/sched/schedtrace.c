// SPDX-License-Identifier: MIT
/*
 * sources/sched/: the scheduler: the `sched` source and its ftrace data.
 *
 * Scheduler records to Perfetto ftrace data.
 *
 * Each CPU has a bundle under construction; a bundle is written as one
 * FtraceEventBundle packet when it holds BUNDLE_MAX events or on the
 * periodic flush, so memory stays bounded and every string table is
 * per bundle, as the compact encoding wants. Switches and wakings of one
 * CPU arrive in time order (their programs run with interrupts off, the
 * ring hands records out in reservation order); a record that would go
 * back in time on its CPU's compact arrays closes the bundle and starts a
 * new one instead of writing a negative delta (counted, never seen here).
 *
 * Each bundle is deflated into a compressed_packets packet (zlib level 1,
 * as Perfetto's own service does with DEFLATE): the compact arrays hold
 * 8 bytes per switch and 5 per wakeup, deflate cuts that ~4x for a few
 * microseconds per bundle.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <bpf/libbpf.h>
#include <zlib.h>
#include "cgbpf.skel.h"
#include "sched_rec.h"
#include "core/session.h"
#include "core/source.h"
#include "lib/log.h"
#include "lib/pb.h"
#include "lib/procfs.h"
#include "out/capwin.h"
#include "out/summary.h"
#include "sources/sched/schedtrace.h"

#define BUNDLE_MAX 1024		/* events per bundle */
#define CLONE_THREAD 0x10000

/* Field numbers, from perfetto_trace.proto. */
enum {
	PKT_FTRACE_EVENTS = 1,
	PKT_PROCESS_TREE = 2,
	PKT_TIMESTAMP = 8,
	PKT_SEQ_ID = 10,
	PKT_COMPRESSED = 50,
	TRACE_PACKET = 1,

	B_CPU = 1,
	B_EVENT = 2,
	B_COMPACT = 4,

	CS_SW_TS = 1,
	CS_SW_STATE = 2,
	CS_SW_PID = 3,
	CS_SW_PRIO = 4,
	CS_INTERN = 5,
	CS_SW_COMM = 6,
	CS_WK_TS = 7,
	CS_WK_PID = 8,
	CS_WK_CPU = 9,
	CS_WK_PRIO = 10,
	CS_WK_COMM = 11,
	CS_WK_FLAGS = 12,

	FE_TIMESTAMP = 1,
	FE_PID = 2,
	FE_COMMON_FLAGS = 5,
	FE_SCHED_SWITCH = 4,
	FE_SCHED_WAKING = 20,
	FE_SCHED_WAKEUP_NEW = 114,
	FE_TASK_NEWTASK = 235,
	FE_TASK_RENAME = 236,
	FE_SCHED_PROCESS_EXIT = 238,

	SW_PREV_COMM = 1,
	SW_PREV_PID = 2,
	SW_PREV_PRIO = 3,
	SW_PREV_STATE = 4,
	SW_NEXT_COMM = 5,
	SW_NEXT_PID = 6,
	SW_NEXT_PRIO = 7,

	WK_COMM = 1,		/* SchedWaking and SchedWakeupNew */
	WK_PID = 2,
	WK_PRIO = 3,
	WK_SUCCESS = 4,
	WK_TARGET_CPU = 5,

	NT_PID = 1,
	NT_COMM = 2,
	NT_CLONE_FLAGS = 3,

	RN_PID = 1,
	RN_OLDCOMM = 2,
	RN_NEWCOMM = 3,

	PE_COMM = 1,
	PE_PID = 2,
	PE_TGID = 3,
	PE_PRIO = 4,

	PT_PROCESSES = 1,
	PT_THREADS = 2,
	PTP_PID = 1,
	PTP_PPID = 2,
	PTP_CMDLINE = 3,
	PTP_CMDLINE_IS_COMM = 9,
	PTT_TID = 1,
	PTT_TGID = 3,
};

/* Kernel prio of a SCHED_NORMAL nice-0 task is 120. */
enum tstate { TS_UNKNOWN, TS_RUNNING, TS_RUNNABLE, TS_SLEEPING, TS_UNINT, TS_OTHER, TS__COUNT };

struct cpubuf {
	struct pb sw_ts, sw_state, sw_pid, sw_prio, sw_comm;
	struct pb wk_ts, wk_pid, wk_cpu, wk_prio, wk_comm, wk_flags;
	struct pb events;		/* whole FtraceEvent fields of the bundle */
	uint64_t sw_last, wk_last;	/* 0: none yet in this bundle */
	uint32_t n;			/* events in the bundle */
	char (*strs)[SCHED_COMM];	/* the bundle's intern table */
	uint32_t nstrs, capstrs;
	struct hmap strmap;		/* hash of a comm -> index */
	uint32_t seq;
};

/* Per-thread state times of target threads, for the summary. */
struct tstat {
	uint32_t tid, pid;
	char comm[SCHED_COMM];
	enum tstate state;
	uint64_t since;
	uint64_t ns[TS__COUNT];
	uint64_t switches_in;
};

struct schedtrace {
	struct pftrace *pt;
	struct model *m;
	enum sched_scope scope;
	/* Every process that was a target at some point of the capture:
	 * scheduler records come through a ring of their own and may be
	 * read after the events ring's exit of their process (the consumer
	 * drains one ring, then the other), so "alive now" would lose them. */
	const struct hmap *targets;
	struct cpubuf *cpus;
	uint32_t ncpus;
	struct hmap tids;		/* tid -> tgid + 1, announced in a ProcessTree */
	struct hmap pids;		/* tgid -> 1, announced */
	uint32_t gen;			/* the writer's file (pftrace__generation) */
	bool (*keep)(void *ctx, uint64_t ts);	/* capture windows; NULL: all */
	void *keep_ctx;
	struct pb tree_procs, tree_threads;	/* pending ProcessTree entries */
	uint64_t tree_ts;		/* the latest of theirs */
	uint32_t tree_seq;
	struct hmap stats;		/* tid -> struct tstat * */
	uint64_t switches, wakings, newtasks, renames, exits, reordered, invalid;
	uint64_t first_ts, last_ts;
	uint64_t unwritten;		/* bundles lost to ENOMEM */
	struct pb plain;		/* a bundle before deflate */
	uint8_t *zbuf;
	size_t zcap;
};

/* Whether the kernel lets BPF read the per-CPU preempt count (its address
 * is in kallsyms: CONFIG_KALLSYMS_ALL) for the context of a waking. */
static bool preempt_count_readable(void)
{
	char line[256];
	bool found = false;
	FILE *f = fopen("/proc/kallsyms", "re");

	if (!f)
		return false;
	while (!found && fgets(line, sizeof(line), f)) {
		char *sym = strrchr(line, ' ');

		found = sym && !strcmp(sym + 1, "__preempt_count\n");
	}
	fclose(f);
	return found;
}

int schedtrace__prepare(struct cgbpf_bpf *skel, enum sched_scope scope, uint64_t ring_bytes)
{
	bool on = scope != SCHED_OFF, pc = on && preempt_count_readable();

	skel->rodata->sched_scope = scope == SCHED_TARGETS ? SCHED_SCOPE_TARGETS : SCHED_SCOPE_ALL;
	bpf_program__set_autoload(skel->progs.sched_switch, on);
	bpf_program__set_autoload(skel->progs.sched_waking, on && !pc);
	bpf_program__set_autoload(skel->progs.sched_waking_pc, pc);
	bpf_program__set_autoload(skel->progs.sched_wakeup_new, on);
	bpf_program__set_autoload(skel->progs.sched_newtask, on);
	bpf_program__set_autoload(skel->progs.sched_rename, on);
	bpf_program__set_autoload(skel->progs.sched_exit, on);
	/* A ring must be at least a page: the smallest when unused. */
	return bpf_map__set_max_entries(skel->maps.sched_events, on ? ring_bytes : 4096);
}

int schedtrace__attach(struct cgbpf_bpf *skel, enum sched_scope scope)
{
	struct {
		struct bpf_program *p;
		struct bpf_link **l;
	} t[] = {
		{ skel->progs.sched_switch, &skel->links.sched_switch },
		{ skel->progs.sched_waking, &skel->links.sched_waking },
		{ skel->progs.sched_waking_pc, &skel->links.sched_waking_pc },
		{ skel->progs.sched_wakeup_new, &skel->links.sched_wakeup_new },
		{ skel->progs.sched_newtask, &skel->links.sched_newtask },
		{ skel->progs.sched_rename, &skel->links.sched_rename },
		{ skel->progs.sched_exit, &skel->links.sched_exit },
	};

	if (scope == SCHED_OFF)
		return 0;
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		if (!bpf_program__autoload(t[i].p))
			continue;	/* the other sched_waking variant */
		*t[i].l = bpf_program__attach(t[i].p);
		if (!*t[i].l) {
			int err = -errno;

			err("attaching %s: %s (try --sched off)", bpf_program__name(t[i].p),
			    strerror(-err));
			return err;
		}
	}
	return 0;
}

struct schedtrace *schedtrace__new(struct pftrace *pt, struct model *m, enum sched_scope scope,
				   const struct hmap *targets)
{
	struct schedtrace *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	s->pt = pt;
	s->m = m;
	s->scope = scope;
	s->targets = targets;
	pb__init(&s->tree_procs);
	pb__init(&s->tree_threads);
	if (pt)
		s->tree_seq = pftrace__new_seq_id(pt);
	return s;
}

static void cpubuf_free(struct cpubuf *c)
{
	struct pb *bufs[] = { &c->sw_ts, &c->sw_state, &c->sw_pid, &c->sw_prio, &c->sw_comm,
			      &c->wk_ts, &c->wk_pid, &c->wk_cpu, &c->wk_prio, &c->wk_comm,
			      &c->wk_flags, &c->events };

	for (size_t i = 0; i < sizeof(bufs) / sizeof(bufs[0]); i++)
		pb__free(bufs[i]);
	free(c->strs);
	hmap__free(&c->strmap);
}

void schedtrace__free(struct schedtrace *s)
{
	uint64_t v;

	if (!s)
		return;
	for (uint32_t i = 0; i < s->ncpus; i++)
		cpubuf_free(&s->cpus[i]);
	free(s->cpus);
	for (size_t it = 0; hmap__next(&s->stats, &it, NULL, &v);)
		free((void *)(uintptr_t)v);
	hmap__free(&s->stats);
	hmap__free(&s->tids);
	hmap__free(&s->pids);
	pb__free(&s->tree_procs);
	pb__free(&s->tree_threads);
	pb__free(&s->plain);
	free(s->zbuf);
	free(s);
}

uint64_t schedtrace__switches(const struct schedtrace *s)
{
	return s->switches;
}

/* ---------------------------------------------------------------- bundles */

static struct cpubuf *cpu_of(struct schedtrace *s, uint32_t cpu)
{
	if (cpu >= s->ncpus) {
		/* CPU numbers are small and dense; no fixed limit either way. */
		uint32_t n = cpu + 1;
		struct cpubuf *c;

		if (cpu > 65535)
			return NULL;
		c = realloc(s->cpus, n * sizeof(*c));
		if (!c)
			return NULL;
		memset(c + s->ncpus, 0, (n - s->ncpus) * sizeof(*c));
		for (uint32_t i = s->ncpus; i < n; i++)
			c[i].seq = s->pt ? pftrace__new_seq_id(s->pt) : 0;
		s->cpus = c;
		s->ncpus = n;
	}
	return &s->cpus[cpu];
}

static void packed(struct pb *pb, uint32_t field, const struct pb *arr)
{
	if (arr->len)
		pb__bytes(pb, field, arr->buf, arr->len);
}

/* Writes the deflated packet in s->plain (a Trace.packet field). */
static void write_deflated(struct schedtrace *s)
{
	uLongf zlen = compressBound(s->plain.len);
	struct pb *pb;

	if (s->plain.err) {
		s->unwritten++;
		return;
	}
	if (zlen > s->zcap) {
		uint8_t *p = realloc(s->zbuf, zlen);

		if (!p) {
			s->unwritten++;
			return;
		}
		s->zbuf = p;
		s->zcap = zlen;
	}
	/* Only ENOMEM can fail it with a compressBound() buffer. */
	if (compress2(s->zbuf, &zlen, s->plain.buf, s->plain.len, 1) != Z_OK) {
		s->unwritten++;
		return;
	}
	pb = pftrace__packet_begin(s->pt);
	if (pb) {
		pb__bytes(pb, PKT_COMPRESSED, s->zbuf, zlen);
		pftrace__packet_end(s->pt);
	}
}

static void bundle_flush(struct schedtrace *s, uint32_t cpu)
{
	struct cpubuf *c = &s->cpus[cpu];
	struct pb *pb = &s->plain;

	if (!c->n)
		return;
	pb__reset(pb);
	pb__begin(pb, TRACE_PACKET);
	if (s->pt) {
		pb__varint(pb, PKT_SEQ_ID, c->seq);
		pb__begin(pb, PKT_FTRACE_EVENTS);
		pb__varint(pb, B_CPU, cpu);
		pb__raw(pb, c->events.buf, c->events.len);
		if (c->sw_ts.len || c->wk_ts.len) {
			pb__begin(pb, B_COMPACT);
			for (uint32_t i = 0; i < c->nstrs; i++)
				pb__bytes(pb, CS_INTERN, c->strs[i], strnlen(c->strs[i], SCHED_COMM));
			packed(pb, CS_SW_TS, &c->sw_ts);
			packed(pb, CS_SW_STATE, &c->sw_state);
			packed(pb, CS_SW_PID, &c->sw_pid);
			packed(pb, CS_SW_PRIO, &c->sw_prio);
			packed(pb, CS_SW_COMM, &c->sw_comm);
			packed(pb, CS_WK_TS, &c->wk_ts);
			packed(pb, CS_WK_PID, &c->wk_pid);
			packed(pb, CS_WK_CPU, &c->wk_cpu);
			packed(pb, CS_WK_PRIO, &c->wk_prio);
			packed(pb, CS_WK_COMM, &c->wk_comm);
			packed(pb, CS_WK_FLAGS, &c->wk_flags);
			pb__end(pb);
		}
		pb__end(pb);
		pb__end(pb);
		write_deflated(s);
	}
	pb__reset(&c->sw_ts);
	pb__reset(&c->sw_state);
	pb__reset(&c->sw_pid);
	pb__reset(&c->sw_prio);
	pb__reset(&c->sw_comm);
	pb__reset(&c->wk_ts);
	pb__reset(&c->wk_pid);
	pb__reset(&c->wk_cpu);
	pb__reset(&c->wk_prio);
	pb__reset(&c->wk_comm);
	pb__reset(&c->wk_flags);
	pb__reset(&c->events);
	c->sw_last = c->wk_last = 0;
	c->n = 0;
	c->nstrs = 0;
	hmap__free(&c->strmap);
}

/* Index of comm in the bundle's intern table, added if new. */
static uint32_t intern(struct cpubuf *c, const char *comm)
{
	char key[SCHED_COMM] = { 0 };
	uint64_t h, *v;

	memcpy(key, comm, strnlen(comm, SCHED_COMM - 1));
	h = hash__bytes(key, sizeof(key));
	v = hmap__get(&c->strmap, h);
	if (v && !memcmp(c->strs[*v], key, sizeof(key)))
		return *v;
	if (c->nstrs == c->capstrs) {
		uint32_t n = c->capstrs ? c->capstrs * 2 : 64;
		void *p = realloc(c->strs, n * sizeof(*c->strs));

		if (!p)
			return 0;	/* the bundle has at least one string by now */
		c->strs = p;
		c->capstrs = n;
	}
	memcpy(c->strs[c->nstrs], key, sizeof(key));
	if (!v)		/* a hash collision keeps the first string mapped */
		hmap__put(&c->strmap, h, c->nstrs);
	return c->nstrs++;
}

/* The bundle for cpu, closed first when full or when ts would go back in
 * time on the compact array whose last timestamp is *last (NULL: none). */
static struct cpubuf *bundle_for(struct schedtrace *s, uint32_t cpu, uint64_t ts, bool sw,
				 bool wk)
{
	struct cpubuf *c = s->pt ? cpu_of(s, cpu) : NULL;

	if (!c)
		return NULL;	/* --summary-only: nothing to write */
	if ((sw && c->sw_last > ts) || (wk && c->wk_last > ts)) {
		s->reordered++;
		bundle_flush(s, cpu);
	} else if (c->n >= BUNDLE_MAX) {
		bundle_flush(s, cpu);
	}
	/* An empty bundle must still intern before a switch can refer to it. */
	if (c->nstrs == 0 && (sw || wk))
		intern(c, "");
	c->n++;
	return c;
}

static void event_begin(struct pb *pb, uint64_t ts, uint32_t pid, uint32_t field)
{
	pb__begin(pb, B_EVENT);
	pb__varint(pb, FE_TIMESTAMP, ts);
	pb__varint(pb, FE_PID, pid);
	pb__begin(pb, field);
}

static void event_end(struct pb *pb)
{
	pb__end(pb);
	pb__end(pb);
}

static void comm_field(struct pb *pb, uint32_t field, const char *comm)
{
	pb__bytes(pb, field, comm, strnlen(comm, SCHED_COMM));
}

/* ---------------------------------------------------------------- process tree */

static void tree_flush(struct schedtrace *s)
{
	struct pb *pb;

	if (!s->tree_procs.len && !s->tree_threads.len)
		return;
	pb = s->pt ? pftrace__packet_begin(s->pt) : NULL;
	if (pb) {
		pb__varint(pb, PKT_TIMESTAMP, s->tree_ts);
		pb__varint(pb, PKT_SEQ_ID, s->tree_seq);
		pb__begin(pb, PKT_PROCESS_TREE);
		pb__raw(pb, s->tree_procs.buf, s->tree_procs.len);
		pb__raw(pb, s->tree_threads.buf, s->tree_threads.len);
		pb__end(pb);
		pftrace__packet_end(s->pt);
	}
	pb__reset(&s->tree_procs);
	pb__reset(&s->tree_threads);
	s->tree_ts = 0;
}

static uint32_t read_ppid(uint32_t pid)
{
	char path[64], buf[512], *p;
	unsigned int ppid = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%u/stat", pid);
	f = fopen(path, "re");
	if (!f)
		return 0;
	if (fgets(buf, sizeof(buf), f) && (p = strrchr(buf, ')')) && sscanf(p + 1, " %*c %u", &ppid) != 1)
		ppid = 0;
	fclose(f);
	return ppid;
}

/*
 * A Process entry for pid: its command line, or its comm when it has none
 * (kernel threads, exited processes). With neither it has no cmdline at
 * all: trace processor skips such an entry (SystemProbesParser::
 * ParseProcessTree), where an empty one flagged cmdline_is_comm would
 * name the process and its main thread "" over their ftrace names.
 */
static uint32_t tree_process(struct schedtrace *s, uint32_t pid, const char *comm, uint32_t ppid)
{
	char *cmdline = procfs__cmdline(pid);
	struct pb *pb = &s->tree_procs;
	uint64_t *v;

	/* Gone already (a short program, or a backlog): the command line
	 * its exec record carried, when the model has it. Not when the
	 * model still has another name: /proc shows no command line in the
	 * middle of an exec either (the rename comes before the new
	 * program's arguments are in place), and the model's would then be
	 * the old program's, applied after the exec; its comm instead. */
	if ((!cmdline || !*cmdline) && (v = hmap__get(&s->m->procs, pid))) {
		const struct proc *p = (const void *)(uintptr_t)*v;

		if (p->cmdline && *p->cmdline && (!comm[0] || !strncmp(p->comm, comm, 15))) {
			free(cmdline);
			cmdline = strdup(p->cmdline);
		}
	}

	if (!ppid)
		ppid = read_ppid(pid);
	pb__begin(pb, PT_PROCESSES);
	pb__varint(pb, PTP_PID, pid);
	if (ppid)
		pb__varint(pb, PTP_PPID, ppid);
	if (cmdline && *cmdline) {
		pb__string(pb, PTP_CMDLINE, cmdline);
	} else if (comm[0]) {
		comm_field(pb, PTP_CMDLINE, comm);
		pb__bool(pb, PTP_CMDLINE_IS_COMM, true);
	}
	pb__end(pb);
	free(cmdline);
	return ppid;
}

/*
 * The pending ProcessTree is written at the time of its latest entry, so
 * no entry is read before the record that announced it. Trace processor
 * applies an entry at the packet's time: one for a pid before that pid's
 * task_newtask would make a process the fork then replaces (a second
 * process for the pid, with the pre-fork name).
 */
static void tree_at(struct schedtrace *s, uint64_t ts)
{
	if (ts > s->tree_ts)
		s->tree_ts = ts;
}

/* Makes sure the trace knows which process tid belongs to. */
static void see_task(struct schedtrace *s, uint64_t ts, uint32_t tid, uint32_t pid,
		     const char *comm, uint32_t ppid)
{
	uint64_t *v;

	if (!tid)
		return;		/* the idle tasks share tid 0 */
	/* A new file (capture windows): announce the threads again. */
	if (s->pt && s->gen != pftrace__generation(s->pt)) {
		s->gen = pftrace__generation(s->pt);
		hmap__free(&s->tids);
	}
	v = hmap__get(&s->tids, tid);
	if (v && *v == (uint64_t)pid + 1)
		return;
	hmap__put(&s->tids, tid, (uint64_t)pid + 1);
	if (!s->pt)
		return;
	tree_at(s, ts);
	if (!hmap__get(&s->pids, pid)) {
		/* Kept: a later entry for pid must not lose the parent. */
		ppid = tree_process(s, pid, tid == pid ? comm : "", ppid);
		hmap__put(&s->pids, pid, (uint64_t)ppid + 1);
	}
	pb__begin(&s->tree_threads, PT_THREADS);
	pb__varint(&s->tree_threads, PTT_TID, tid);
	pb__varint(&s->tree_threads, PTT_TGID, pid);
	pb__end(&s->tree_threads);
}

/* ---------------------------------------------------------------- state times */

static struct tstat *stat_of(struct schedtrace *s, uint32_t tid, uint32_t pid)
{
	uint64_t *v = hmap__get(&s->stats, tid);
	struct tstat *t;

	if (v)
		return (void *)(uintptr_t)*v;
	if (!tid || !s->targets || !hmap__get(s->targets, pid))
		return NULL;
	t = calloc(1, sizeof(*t));
	if (!t || hmap__put(&s->stats, tid, (uintptr_t)t)) {
		free(t);
		return NULL;
	}
	t->tid = tid;
	t->pid = pid;
	return t;
}

static void stat_to(struct tstat *t, uint64_t ts, enum tstate st)
{
	if (!t)
		return;
	if (t->state != TS_UNKNOWN && ts > t->since)
		t->ns[t->state] += ts - t->since;
	if (ts > t->since || t->state == TS_UNKNOWN)
		t->since = ts;
	t->state = st;
}

static enum tstate state_of(uint32_t prev_state)
{
	switch (prev_state) {
	case 0:
	case 0x100:	/* preempted */
		return TS_RUNNABLE;
	case 0x1:
		return TS_SLEEPING;
	case 0x2:
	case 0x80:	/* idle-uninterruptible (kernel threads) */
		return TS_UNINT;
	}
	return TS_OTHER;
}

/* ---------------------------------------------------------------- records */

/* Whether an event at ts is written (capture windows: by its time). */
static bool writes(const struct schedtrace *s, uint64_t ts)
{
	return !s->keep || s->keep(s->keep_ctx, ts);
}

void schedtrace__set_keep(struct schedtrace *s, bool (*keep)(void *ctx, uint64_t ts), void *ctx)
{
	s->keep = keep;
	s->keep_ctx = ctx;
}

static void on_switch(struct schedtrace *s, const struct rec_switch *r)
{
	uint64_t ts = r->hdr.ts;
	struct cpubuf *c = writes(s, ts) ?
		bundle_for(s, r->hdr.cpu, ts, s->scope != SCHED_TARGETS, false) : NULL;
	struct tstat *t;

	s->switches++;
	see_task(s, ts, r->hdr.tid, r->hdr.pid, r->prev_comm, 0);
	see_task(s, ts, r->next_tid, r->next_pid, r->next_comm, 0);
	t = stat_of(s, r->hdr.tid, r->hdr.pid);
	if (t) {
		memcpy(t->comm, r->prev_comm, SCHED_COMM);
		stat_to(t, ts, state_of(r->prev_state));
	}
	t = stat_of(s, r->next_tid, r->next_pid);
	if (t) {
		memcpy(t->comm, r->next_comm, SCHED_COMM);
		stat_to(t, ts, TS_RUNNING);
		t->switches_in++;
	}
	if (!c)
		return;
	if (s->scope == SCHED_TARGETS) {
		event_begin(&c->events, ts, r->hdr.tid, FE_SCHED_SWITCH);
		comm_field(&c->events, SW_PREV_COMM, r->prev_comm);
		pb__varint(&c->events, SW_PREV_PID, r->hdr.tid);
		pb__int(&c->events, SW_PREV_PRIO, r->prev_prio);
		pb__int(&c->events, SW_PREV_STATE, r->prev_state);
		comm_field(&c->events, SW_NEXT_COMM, r->next_comm);
		pb__varint(&c->events, SW_NEXT_PID, r->next_tid);
		pb__int(&c->events, SW_NEXT_PRIO, r->next_prio);
		event_end(&c->events);
		return;
	}
	pb__raw_varint(&c->sw_ts, c->sw_last ? ts - c->sw_last : ts);
	c->sw_last = ts;
	pb__raw_varint(&c->sw_state, r->prev_state);
	pb__raw_varint(&c->sw_pid, r->next_tid);
	pb__raw_varint(&c->sw_prio, (uint64_t)(int64_t)r->next_prio);
	pb__raw_varint(&c->sw_comm, intern(c, r->next_comm));
}

static void on_waking(struct schedtrace *s, const struct rec_waking *r)
{
	uint64_t ts = r->hdr.ts;
	bool compact = s->scope != SCHED_TARGETS && !(r->flags & WAKING_NEW);
	struct cpubuf *c = writes(s, ts) ? bundle_for(s, r->hdr.cpu, ts, false, compact) : NULL;
	struct tstat *t = stat_of(s, r->tid, r->pid);

	s->wakings++;
	see_task(s, ts, r->tid, r->pid, r->comm, 0);
	if (t && t->state != TS_RUNNING)
		stat_to(t, ts, TS_RUNNABLE);
	if (!c)
		return;
	if (!compact) {
		/* common_pid is the waker: current, as the tracepoint has it. */
		pb__begin(&c->events, B_EVENT);
		pb__varint(&c->events, FE_TIMESTAMP, ts);
		pb__varint(&c->events, FE_PID, r->hdr.tid);
		if (r->irq_flags)
			pb__varint(&c->events, FE_COMMON_FLAGS, r->irq_flags);
		pb__begin(&c->events, r->flags & WAKING_NEW ? FE_SCHED_WAKEUP_NEW : FE_SCHED_WAKING);
		comm_field(&c->events, WK_COMM, r->comm);
		pb__varint(&c->events, WK_PID, r->tid);
		pb__int(&c->events, WK_PRIO, r->prio);
		pb__varint(&c->events, WK_SUCCESS, 1);
		pb__int(&c->events, WK_TARGET_CPU, r->target_cpu);
		event_end(&c->events);
		return;
	}
	pb__raw_varint(&c->wk_ts, c->wk_last ? ts - c->wk_last : ts);
	c->wk_last = ts;
	pb__raw_varint(&c->wk_pid, r->tid);
	pb__raw_varint(&c->wk_cpu, (uint64_t)(int64_t)r->target_cpu);
	pb__raw_varint(&c->wk_prio, (uint64_t)(int64_t)r->prio);
	pb__raw_varint(&c->wk_comm, intern(c, r->comm));
	/* No common_pid in the compact form: trace processor takes the task
	 * running on this CPU as the waker, unless these flags say the waking
	 * came from an interrupt. */
	pb__raw_varint(&c->wk_flags, r->irq_flags);
}

static void on_task(struct schedtrace *s, const struct rec_task *r)
{
	uint64_t ts = r->hdr.ts;
	struct cpubuf *c = bundle_for(s, r->hdr.cpu, ts, false, false);
	struct pb *pb = c ? &c->events : NULL;

	switch (r->hdr.type) {
	case REC_SCHED_NEWTASK:
		s->newtasks++;
		see_task(s, ts, r->hdr.tid, r->hdr.pid, "", 0);
		/* A new task: a tid or pid seen before was reused. */
		hmap__del(&s->tids, r->tid, NULL);
		if (r->tid == r->pid)
			hmap__del(&s->pids, r->pid, NULL);
		/* After the task_newtask at ts, not tied with it. */
		see_task(s, ts + 1, r->tid, r->pid, r->comm, r->pid == r->hdr.pid ? 0 : r->hdr.pid);
		if (!pb)
			break;
		event_begin(pb, ts, r->hdr.tid, FE_TASK_NEWTASK);
		pb__varint(pb, NT_PID, r->tid);
		comm_field(pb, NT_COMM, r->comm);
		pb__varint(pb, NT_CLONE_FLAGS, r->clone_flags);
		event_end(pb);
		break;
	case REC_SCHED_RENAME: {
		uint64_t *v = hmap__get(&s->m->threads, r->tid);
		char name[SCHED_COMM + 1] = { 0 };

		s->renames++;
		memcpy(name, r->newcomm, SCHED_COMM);
		/* A thread the model named from /proc: its track name wins
		 * over ftrace's in trace processor, so rename it too. */
		if (v) {
			struct thread *t = (void *)(uintptr_t)*v;

			memcpy(t->name, name, sizeof(t->name) - 1);
			t->name[sizeof(t->name) - 1] = 0;
			for (int i = 0; i < s->m->nsinks; i++)
				if (s->m->sinks[i].thread)
					s->m->sinks[i].thread(s->m->sinks[i].ctx, t);
		}
		/* The main thread's name is the process's; exec and
		 * setproctitle also change the command line. */
		if (r->tid == r->pid) {
			uint64_t *pv = s->pt ? hmap__get(&s->pids, r->pid) : NULL;

			if (hmap__get(&s->m->procs, r->pid))
				model__proc_refresh(s->m, r->pid);
			/* Announced again with the parent it was announced with:
			 * /proc may be gone by now, and an entry without ppid
			 * would have trace processor re-parent it to pid 0. */
			if (pv) {
				uint32_t ppid = (uint32_t)(*pv - 1);

				/* After the task_rename at ts: the command line's
				 * first word names the process, as in traces of
				 * Perfetto's own probes, not the 15-character comm. */
				tree_at(s, ts + 1);
				ppid = tree_process(s, r->pid, name, ppid);
				hmap__put(&s->pids, r->pid, (uint64_t)ppid + 1);
			}
		}
		if (!pb)
			break;
		event_begin(pb, ts, r->hdr.tid, FE_TASK_RENAME);
		pb__varint(pb, RN_PID, r->tid);
		comm_field(pb, RN_OLDCOMM, r->comm);
		comm_field(pb, RN_NEWCOMM, r->newcomm);
		event_end(pb);
		break;
	}
	case REC_SCHED_EXIT: {
		struct tstat *t = stat_of(s, r->tid, r->pid);

		s->exits++;
		if (t)
			stat_to(t, ts, TS_OTHER);
		/* Still known after its exit: the dead task's last switch
		 * comes after this record, and announcing it again then, with
		 * /proc gone, would lose its parent. A reused tid or pid is
		 * announced afresh by its task_newtask. */
		if (!pb)
			break;
		event_begin(pb, ts, r->hdr.tid, FE_SCHED_PROCESS_EXIT);
		comm_field(pb, PE_COMM, r->comm);
		pb__varint(pb, PE_PID, r->tid);
		pb__varint(pb, PE_TGID, r->pid);
		pb__int(pb, PE_PRIO, r->prio);
		event_end(pb);
		break;
	}
	}
}

int schedtrace__handle(void *ctx, void *data, size_t size)
{
	struct schedtrace *s = ctx;
	const struct rec_hdr *h = data;
	size_t need = 0;

	if (size >= sizeof(*h)) {
		switch (h->type) {
		case REC_SCHED_SWITCH:
			need = sizeof(struct rec_switch);
			break;
		case REC_SCHED_WAKING:
			need = sizeof(struct rec_waking);
			break;
		case REC_SCHED_NEWTASK:
		case REC_SCHED_RENAME:
		case REC_SCHED_EXIT:
			need = sizeof(struct rec_task);
			break;
		}
	}
	/* Written by the kernel, not the traced process, but checked the
	 * same way: a layout mismatch must not be read as data. */
	if (!need || h->size != size || size < need) {
		s->invalid++;
		return 0;
	}
	if (!s->first_ts || h->ts < s->first_ts)
		s->first_ts = h->ts;
	if (h->ts > s->last_ts)
		s->last_ts = h->ts;
	switch (h->type) {
	case REC_SCHED_SWITCH:
		on_switch(s, data);
		break;
	case REC_SCHED_WAKING:
		on_waking(s, data);
		break;
	default:
		on_task(s, data);
		break;
	}
	return 0;
}

void schedtrace__flush(struct schedtrace *s)
{
	/* Tasks first: trace processor then knows every tid's process. */
	tree_flush(s);
	for (uint32_t i = 0; i < s->ncpus; i++)
		bundle_flush(s, i);
}

/* ---------------------------------------------------------------- summary */

static int cmp_stat(const void *a, const void *b)
{
	const struct tstat *x = *(struct tstat *const *)a, *y = *(struct tstat *const *)b;

	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	return x->tid < y->tid ? -1 : x->tid > y->tid;
}

void schedtrace__print(const void *ctx, const uint64_t *lost, FILE *f)
{
	const struct schedtrace *s = ctx;
	uint64_t lost_all = 0, v;
	struct tstat **ts;
	size_t n = 0;

	if (!s || s->scope == SCHED_OFF)
		return;
	for (int t = REC_SCHED_SWITCH; t <= REC_SCHED_EXIT; t++)
		lost_all += lost[t];
	fprintf(f, "\n** Scheduler (--sched %s):\n\n", s->scope == SCHED_TARGETS ? "targets" : "all");
	fprintf(f, "  context switches %" PRIu64 ", wakeups %" PRIu64 ", new tasks %" PRIu64
		", renames %" PRIu64 ", exits %" PRIu64 "\n",
		s->switches, s->wakings, s->newtasks, s->renames, s->exits);
	if (lost_all)
		fprintf(f, "  RECORDS LOST: %" PRIu64 " scheduler records (%" PRIu64
			" switches); CPU tracks have gaps\n", lost_all, lost[REC_SCHED_SWITCH]);
	else
		fprintf(f, "  no scheduler records lost\n");
	if (s->reordered || s->invalid)
		fprintf(f, "  %" PRIu64 " records out of time order on their CPU (new bundle), %" PRIu64
			" malformed\n", s->reordered, s->invalid);
	if (s->unwritten)
		fprintf(f, "  %" PRIu64 " bundles not written (out of memory)\n", s->unwritten);
	ts = malloc((s->stats.count + 1) * sizeof(*ts));
	if (!ts)
		return;
	for (size_t it = 0; hmap__next(&s->stats, &it, NULL, &v);)
		ts[n++] = (void *)(uintptr_t)v;
	qsort(ts, n, sizeof(*ts), cmp_stat);
	if (n)
		fprintf(f, "  %8s %8s %-16s %12s %12s %12s %12s %9s\n", "pid", "tid", "thread",
			"running ms", "runnable ms", "sleeping ms", "blocked(D) ms", "switches");
	for (size_t i = 0; i < n; i++) {
		const struct tstat *t = ts[i];
		uint64_t ns[TS__COUNT];

		memcpy(ns, t->ns, sizeof(ns));
		/* The interval still open at the end of the capture. */
		if (t->state != TS_UNKNOWN && s->last_ts > t->since)
			ns[t->state] += s->last_ts - t->since;
		fprintf(f, "  %8u %8u %-16.16s %12.1f %12.1f %12.1f %12.1f %9" PRIu64 "\n", t->pid,
			t->tid, t->comm, ns[TS_RUNNING] / 1e6, ns[TS_RUNNABLE] / 1e6,
			ns[TS_SLEEPING] / 1e6, ns[TS_UNINT] / 1e6, t->switches_in);
	}
	free(ts);
}

/* ---------------------------------------------------------------- source */

#define SCHED_RING_BYTES (8u << 20)

static int sched_init(struct session *s, void **state)
{
	*state = schedtrace__new(s->pt, &s->model, s->o->sched, &s->traced);
	if (!*state) {
		err("out of memory");
		return -ENOMEM;
	}
	return 0;
}

static int sched_prepare(struct session *s, void *state)
{
	(void)state;
	return schedtrace__prepare(s->skel, s->o->sched, SCHED_RING_BYTES);
}

static bool sched_keep(void *ctx, uint64_t ts)
{
	const struct session *s = ctx;

	return capture__keeps_any(s->cap, ts);
}

/* A window's end: its file waits for one more drain of the rings, which
 * brings the switches up to the window's end (read after the record that
 * ended it). */
static bool sched_window_close(struct session *s, void *state, uint32_t pid)
{
	(void)state;
	(void)pid;
	return s->o->sched != SCHED_OFF;
}

static int sched_start(struct session *s, void *state)
{
	int err;

	schedtrace__set_keep(state, sched_keep, s);
	if (schedtrace__attach(s->skel, s->o->sched))
		return -errno ? -errno : -EINVAL;
	if (s->o->sched == SCHED_OFF)
		return 0;
	if (ring_buffer__add(s->rb, bpf_map__fd(s->skel->maps.sched_events), schedtrace__handle,
			     state)) {
		err = -errno ? -errno : -ENOMEM;
		err("setting up the scheduler's ring buffer: %s", strerror(-err));
		return err;
	}
	return 0;
}

static void sched_flush(struct session *s, void *state)
{
	(void)s;
	schedtrace__flush(state);
}

static void sched_finish(struct session *s, void *state, struct capture_info *ci)
{
	(void)s;
	summary__add_section(ci, SUMMARY_OTHER, schedtrace__print, state);
}

static void sched_fini(struct session *s, void *state)
{
	(void)s;
	schedtrace__free(state);
}

const struct source src_sched = {
	.name = "sched",
	.init = sched_init,
	.prepare = sched_prepare,
	.start = sched_start,
	.flush = sched_flush,
	.window_close = sched_window_close,
	.finish = sched_finish,
	.fini = sched_fini,
};
