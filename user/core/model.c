// SPDX-License-Identifier: MIT
#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/apilib.h"
#include "core/model.h"
#include "core/ustr.h"
#include "lib/log.h"
#include "lib/ncclbw.h"
#include "lib/procfs.h"

#define EMIT(m, fn, ...) \
	for (int _i = 0; _i < (m)->nsinks; _i++) \
		if ((m)->sinks[_i].fn) \
			(m)->sinks[_i].fn((m)->sinks[_i].ctx, __VA_ARGS__)

void model__init(struct model *m)
{
	memset(m, 0, sizeof(*m));
	for (unsigned l = 0; l < LIB__COUNT; l++)
		m->libs[l] = apilib__get(l) ? apilib__get(l)->ops : NULL;
}

int model__add_sink(struct model *m, const struct sink *s)
{
	if (m->nsinks == MAX_SINKS)
		return -E2BIG;
	m->sinks[m->nsinks++] = *s;
	return 0;
}

int model__add_sink_first(struct model *m, const struct sink *s)
{
	if (m->nsinks == MAX_SINKS)
		return -E2BIG;
	memmove(&m->sinks[1], &m->sinks[0], m->nsinks * sizeof(m->sinks[0]));
	m->sinks[0] = *s;
	m->nsinks++;
	return 0;
}

static void free_names(struct hmap *h)
{
	uint64_t v;

	for (size_t it = 0; hmap__next(h, &it, NULL, &v);)
		free((void *)(uintptr_t)v);
	hmap__free(h);
}

static void free_proc(struct model *m, struct proc *p)
{
	for (unsigned l = 0; l < LIB__COUNT; l++)
		if (m->libs[l] && m->libs[l]->proc_free)
			m->libs[l]->proc_free(p);
	free_names(&p->names);
	free_names(&p->stubs);
	hmap__free(&p->allocs);
	hmap__free(&p->streams);
	free(p->launch_fmt);
	free(p->cmdline);
	free(p);
}

static void free_thread(struct thread *t)
{
	for (int i = 0; i < t->depth; i++) {
		free(t->stack[i].str);
		free(t->stack[i].outs);
	}
	free(t->stack);
	free(t->bt);
	free(t);
}

void model__forget(struct model *m, uint32_t pid)
{
	uint64_t v, tid, pv;
	uint64_t *gone = NULL;
	size_t n = 0, cap = 0;

	if (!hmap__del(&m->procs, pid, &pv))
		return;
	for (size_t it = 0; hmap__next(&m->threads, &it, &tid, &v);) {
		struct thread *t = (void *)(uintptr_t)v;

		if (t->proc->pid != pid)
			continue;
		if (n == cap) {
			size_t nc = cap ? cap * 2 : 16;
			uint64_t *ng = realloc(gone, nc * sizeof(*ng));

			if (!ng)
				break;
			gone = ng;
			cap = nc;
		}
		gone[n++] = tid;
	}
	for (size_t i = 0; i < n; i++)
		if (hmap__del(&m->threads, gone[i], &v))
			free_thread((void *)(uintptr_t)v);
	free(gone);
	free_proc(m, (void *)(uintptr_t)pv);
}

void model__free(struct model *m)
{
	uint64_t v;

	for (size_t it = 0; hmap__next(&m->threads, &it, NULL, &v);)
		free_thread((void *)(uintptr_t)v);
	for (size_t it = 0; hmap__next(&m->procs, &it, NULL, &v);)
		free_proc(m, (void *)(uintptr_t)v);
	for (size_t it = 0; hmap__next(&m->name_hints, &it, NULL, &v);)
		free((void *)(uintptr_t)v);
	hmap__free(&m->threads);
	hmap__free(&m->procs);
	hmap__free(&m->name_hints);
	ncclbw__gpu_free(m->nccl_gpu);
	m->nccl_gpu = NULL;
}

struct proc *model__proc(struct model *m, uint32_t pid)
{
	return model__proc_as(m, pid, NULL);
}

struct proc *model__proc_as(struct model *m, uint32_t pid, const char *comm)
{
	uint64_t *v = hmap__get(&m->procs, pid);
	struct proc *p;

	uint64_t *hint = hmap__get(&m->name_hints, pid);

	if (!(comm && *comm) && hint)
		comm = (const char *)(uintptr_t)*hint;
	if (v) {
		p = (void *)(uintptr_t)*v;
		if (p->comm_guessed && comm && *comm) {
			snprintf(p->comm, sizeof(p->comm), "%.15s", comm);
			p->comm_guessed = false;
			EMIT(m, process, p);
		}
		return p;
	}
	p = calloc(1, sizeof(*p));
	if (!p || hmap__put(&m->procs, pid, (uintptr_t)p)) {
		free(p);
		return NULL;
	}
	p->pid = pid;
	p->muted = m->proc_mute;
	/* Stream ordinals 0..2 are the NULL, legacy and per-thread streams. */
	p->next_stream = 1;
	if (procfs__comm(pid, 0, p->comm, sizeof(p->comm))) {
		if (comm && *comm) {
			snprintf(p->comm, sizeof(p->comm), "%.15s", comm);
		} else {
			snprintf(p->comm, sizeof(p->comm), "pid %u", pid);
			p->comm_guessed = true;
		}
	}
	p->cmdline = procfs__cmdline(pid);
	if (procfs__container_id(pid, p->container, sizeof(p->container)))
		p->container[0] = 0;
	EMIT(m, process, p);
	return p;
}

static void drop_hint(struct model *m, uint32_t pid)
{
	uint64_t v;

	if (hmap__del(&m->name_hints, pid, &v))
		free((void *)(uintptr_t)v);
}

void model__proc_hint(struct model *m, uint32_t pid, const char *comm)
{
	uint64_t *v = hmap__get(&m->procs, pid);
	char *s;

	if (!comm || !*comm)
		return;
	if (v) {
		model__proc_as(m, pid, comm);	/* renames it if it is "pid N" */
		return;
	}
	s = strndup(comm, 15);
	drop_hint(m, pid);
	if (s && hmap__put(&m->name_hints, pid, (uintptr_t)s))
		free(s);
}

void model__proc_name(struct model *m, uint32_t pid, const char *comm)
{
	struct proc *p = model__proc(m, pid);

	if (!p || !strncmp(p->comm, comm, sizeof(p->comm) - 1))
		return;
	snprintf(p->comm, sizeof(p->comm), "%.15s", comm);
	p->comm_guessed = false;
	EMIT(m, process, p);
}

void model__thread_name(struct model *m, uint32_t pid, uint32_t tid, const char *name)
{
	struct thread *t = model__thread(m, pid, tid);

	if (!t)
		return;
	t->app_named = true;
	if (!strncmp(t->name, name, sizeof(t->name) - 1))
		return;
	snprintf(t->name, sizeof(t->name), "%.15s", name);
	EMIT(m, thread, t);
}

void model__proc_refresh(struct model *m, uint32_t pid)
{
	uint64_t *v = hmap__get(&m->procs, pid);
	struct proc *p;
	char comm[16];
	char *cmdline;

	if (!v) {
		model__proc(m, pid);
		return;
	}
	p = (void *)(uintptr_t)*v;
	cmdline = procfs__cmdline(pid);
	if (procfs__comm(pid, 0, comm, sizeof(comm)) || !cmdline || !*cmdline) {
		free(cmdline);
		return;
	}
	if (!strcmp(comm, p->comm) && p->cmdline && !strcmp(cmdline, p->cmdline)) {
		free(cmdline);
		return;
	}
	memcpy(p->comm, comm, sizeof(comm));
	free(p->cmdline);
	p->cmdline = cmdline;
	EMIT(m, process, p);
}

struct thread *model__thread(struct model *m, uint32_t pid, uint32_t tid)
{
	uint64_t *v = hmap__get(&m->threads, tid);
	struct thread *t;
	struct proc *p;

	if (v) {
		t = (void *)(uintptr_t)*v;
		if (t->proc->pid == pid)
			return t;
		/* The tid was reused by another process: start afresh. */
		hmap__del(&m->threads, tid, NULL);
		free_thread(t);
	}
	p = model__proc(m, pid);
	if (!p)
		return NULL;
	t = calloc(1, sizeof(*t));
	if (!t || hmap__put(&m->threads, tid, (uintptr_t)t)) {
		free(t);
		return NULL;
	}
	t->tid = tid;
	t->proc = p;
	if (procfs__comm(pid, tid, t->name, sizeof(t->name)))
		snprintf(t->name, sizeof(t->name), "%s", tid == pid ? p->comm : "");
	EMIT(m, thread, t);
	return t;
}

static bool has_string(const struct model *m, const struct call *c)
{
	return m->libs[c->lib]->has_string && m->libs[c->lib]->has_string(c->func);
}

bool model__inside_cuda_api(const struct thread *t, const struct call *c)
{
	/* Callers sit below c on the stack; at call_end c was just popped. */
	ptrdiff_t below;

	if (!t->stack)
		return false;
	below = c - t->stack;

	if (below < 0 || below > CALL_DEPTH)
		below = 0;
	for (int i = 0; i < t->depth && i < below; i++)
		if (t->stack[i].lib == LIB_CUDA || t->stack[i].lib == LIB_CUDART)
			return true;
	return false;
}

/* "stream N": an ordinal per process in order of first sight, so the
 * value is stable, short and interns well. */
const char *model__stream_name(struct proc *p, uint64_t h, bool ptsz, char *buf, size_t len)
{
	uint64_t *v;

	if (h == 0)
		return ptsz ? "per-thread default" : "default";
	if (h == 1)
		return "legacy default";
	if (h == 2)
		return "per-thread default";
	v = hmap__get(&p->streams, h);
	if (!v) {
		if (hmap__put(&p->streams, h, p->next_stream))
			return "stream ?";
		v = hmap__get(&p->streams, h);
		p->next_stream++;
	}
	snprintf(buf, len, "stream %" PRIu64, *v);
	return buf;
}

const char *model__func_name(const struct model *m, uint8_t lib, uint16_t func)
{
	if (lib >= LIB__COUNT || !m->libs[lib])
		return "?";
	return m->libs[lib]->func_name(func);
}

static void begin(struct model *m, struct thread *t, struct call *c)
{
	c->begun = true;
	if (model__muted(m, t))
		return;
	c->written = true;
	if (m->call_py)
		m->call_py(m->call_py_ctx, t, c);
	if (m->call_flow)
		c->flow = m->call_flow(m->call_flow_ctx, t, c);
	EMIT(m, call_begin, t, c);
}

/* Opens or closes a window of p (NULL: of every process, the model's). */
static void mute(struct model *m, struct proc *only, bool muted, uint64_t ts,
		 bool (*keep)(uint8_t lib, uint16_t func))
{
	uint64_t v;

	if (!muted) {
		/* A new file knows nothing of what was allocated before. */
		for (size_t it = 0; hmap__next(&m->procs, &it, NULL, &v);) {
			struct proc *p = (void *)(uintptr_t)v;
			struct thread *t;

			if (only && p != only)
				continue;
			for (int k = 0; k < CTR__COUNT; k++) {
				if (!p->mem_peak[k] || !(t = model__thread(m, p->pid, p->pid)))
					continue;
				EMIT(m, counter, t, k, ts, p->mem[k]);
			}
		}
		return;
	}
	for (size_t it = 0; hmap__next(&m->threads, &it, NULL, &v);) {
		struct thread *t = (void *)(uintptr_t)v;
		int n = 0;

		if (only && t->proc != only)
			continue;
		/* Innermost first: slices nest. */
		for (int i = t->depth - 1; i >= 0; i--) {
			struct call *c = &t->stack[i];

			if (!c->written)
				continue;
			c->end_ts = ts;
			c->nend = 0;
			c->bt = NULL;
			EMIT(m, call_end, t, c);
			c->written = false;
		}
		for (int i = 0; i < t->depth; i++) {
			struct call *c = &t->stack[i];

			if (keep && !keep(c->lib, c->func)) {
				free(c->str);
				free(c->outs);
				continue;
			}
			if (n != i)
				t->stack[n] = *c;
			n++;
		}
		t->depth = n;
	}
}

void model__mute(struct model *m, bool muted, uint64_t ts,
		 bool (*keep)(uint8_t lib, uint16_t func))
{
	if (m->muted == muted)
		return;
	if (!muted) {
		m->muted = false;
		m->window++;
	}
	mute(m, NULL, muted, ts, keep);
	m->muted = muted;
}

void model__mute_pid(struct model *m, uint32_t pid, bool muted, uint64_t ts,
		     bool (*keep)(uint8_t lib, uint16_t func))
{
	uint64_t *v = hmap__get(&m->procs, pid);
	struct proc *p = v ? (void *)(uintptr_t)*v : NULL;

	if (!p || p->muted == muted)
		return;
	if (!muted) {
		p->muted = false;
		p->window++;
	}
	mute(m, p, muted, ts, keep);
	p->muted = muted;
}

bool model__muted_pid(const struct model *m, uint32_t pid)
{
	uint64_t *v;

	if (m->muted || !m->proc_mute)
		return m->muted;
	v = hmap__get(&m->procs, pid);
	return !v || ((struct proc *)(uintptr_t)*v)->muted;
}

uint32_t model__window_pid(const struct model *m, uint32_t pid)
{
	uint64_t *v;

	if (!m->proc_mute)
		return m->window;
	v = hmap__get(&m->procs, pid);
	return m->window + (v ? ((struct proc *)(uintptr_t)*v)->window : 0);
}

void model__call_enter(struct model *m, const struct rec_call_enter *r)
{
	struct thread *t = model__thread(m, r->hdr.pid, r->hdr.tid);
	struct call *c;

	if (!t || r->lib >= LIB__COUNT || !m->libs[r->lib])
		return;
	if (!t->stack && !(t->stack = calloc(CALL_DEPTH, sizeof(*t->stack))))
		return;
	if (t->depth == CALL_DEPTH) {
		/* Deeper than any real API nesting: returns were lost. Close
		 * the oldest so the newest calls stay visible. */
		struct call *old = &t->stack[0];

		old->end_ts = r->hdr.ts;
		old->ended = false;
		old->nend = 0;
		if (!old->begun)
			begin(m, t, old);
		if (old->written)
			EMIT(m, call_end, t, old);
		free(old->str);
		free(old->outs);
		memmove(&t->stack[0], &t->stack[1], (CALL_DEPTH - 1) * sizeof(t->stack[0]));
		t->depth--;
		m->lost_exits++;
	}
	c = &t->stack[t->depth++];
	memset(c, 0, offsetof(struct call, scratch));
	c->lib = r->lib;
	c->func = r->func;
	c->name = m->libs[c->lib]->func_name(c->func);
	c->ts = r->hdr.ts;
	memcpy(c->args, r->args, sizeof(c->args));
	m->libs[c->lib]->enter(m, t, c);
	/* A string argument follows in its own record (model__string) and
	 * is needed by the begin event, so wait for it. */
	if (!has_string(m, c))
		begin(m, t, c);
}

/* The out array of the call about to return on its thread (it comes right
 * before the exit record), for the domain module's exit. */
void model__out_array(struct model *m, const struct rec_out_array *r)
{
	uint64_t *v = hmap__get(&m->threads, r->hdr.tid);
	struct thread *t = v ? (void *)(uintptr_t)*v : NULL;
	struct call *c;

	if (!t || !t->depth)
		return;
	c = &t->stack[t->depth - 1];
	if (c->func != r->func || c->lib != r->lib || c->outs || !r->n || r->n > OUT_ARRAY_MAX)
		return;
	c->outs = malloc(r->n * sizeof(*c->outs));
	if (!c->outs)
		return;
	memcpy(c->outs, r->v, r->n * sizeof(*c->outs));
	c->nouts = r->n;
	c->out_len = r->len;
}

void model__string(struct model *m, const struct rec_string *r)
{
	uint64_t *v = hmap__get(&m->threads, r->hdr.tid);
	struct thread *t = v ? (void *)(uintptr_t)*v : NULL;
	struct call *c;

	if (!t || !t->depth) {
		m->strings_orphaned++;
		return;
	}
	c = &t->stack[t->depth - 1];
	/* A late one (STR_LATE) answers a pending entry of this call, which
	 * the calls it made have returned to by now. */
	if (c->func != r->func || c->lib != r->lib || c->str ||
	    ((r->flags & STR_LATE) && c->begun && !c->str_pending)) {
		m->strings_orphaned++;
		return;
	}
	if (r->flags & STR_UNREADABLE)
		m->strings_unreadable++;
	if (r->flags & STR_PENDING) {
		/* Read at the return: begin now, so that what the call does
		 * (nested calls, syscalls) nests in it; the name comes later. */
		c->str_pending = true;
		c->str_addr = r->addr;
		if (!c->begun)
			begin(m, t, c);
		return;
	}
	if (r->flags & (STR_LATE | STR_UNREAD))
		m->strings_late++;
	c->str = strndup(r->str, r->len);
	if (c->begun) {
		c->str_late = true;
		return;
	}
	m->libs[c->lib]->enter(m, t, c);
	begin(m, t, c);
}

/* A string still pending at the call's end: its return record was lost
 * (ring full) or never came (longjmp): read it from the process if it can. */
static void settle_string(struct model *m, struct thread *t, struct call *c)
{
	char buf[REC_STRING_MAX];

	if (!c->str_pending || c->str)
		return;
	if (ustr__read(t->proc->pid, c->str_addr, buf, sizeof(buf)) < 0) {
		ustr__unreadable(c->str_addr, buf, sizeof(buf));
		m->strings_unreadable++;
	} else {
		m->strings_late++;
	}
	c->str = strdup(buf);
	c->str_late = true;
}

static void end_call(struct model *m, struct thread *t, struct call *c)
{
	settle_string(m, t, c);
	if (c->ended)
		m->libs[c->lib]->exit(m, t, c);
	if (c->written)
		EMIT(m, call_end, t, c);
	free(c->str);
	c->str = NULL;
	free(c->outs);
	c->outs = NULL;
}

void model__call_exit(struct model *m, const struct rec_call_exit *r)
{
	uint64_t *v = hmap__get(&m->threads, r->hdr.tid);
	struct thread *t = v ? (void *)(uintptr_t)*v : NULL;
	int i;

	if (!t) {
		m->unmatched_exits++;
		return;
	}
	for (i = t->depth - 1; i >= 0; i--)
		if (t->stack[i].func == r->func && t->stack[i].lib == r->lib)
			break;
	if (i < 0) {
		/* Entered before cgbpf attached. */
		m->unmatched_exits++;
		free(t->bt);
		t->bt = NULL;
		return;
	}
	/* Calls above the match lost their returns (longjmp, a probe that
	 * missed): close them here. */
	while (t->depth - 1 > i) {
		struct call *lost = &t->stack[--t->depth];

		lost->end_ts = r->hdr.ts;
		lost->nend = 0;
		if (!lost->begun)
			begin(m, t, lost);
		end_call(m, t, lost);
		m->lost_exits++;
	}
	{
		struct call *c = &t->stack[--t->depth];

		c->end_ts = r->hdr.ts;
		c->ret = r->ret;
		c->out = r->out;
		c->has_out = r->has_out;
		c->ended = true;
		/* Sent right before this return; another call's is stale. */
		if (t->bt && t->bt->lib == c->lib && t->bt->func == c->func)
			c->bt = t->bt;
		/* The string record never came (ring full): begin now. */
		if (!c->begun)
			begin(m, t, c);
		end_call(m, t, c);
		c->bt = NULL;
		free(t->bt);
		t->bt = NULL;
	}
}

void model__thread_exit(struct model *m, const struct rec_proc *r)
{
	uint64_t *v = hmap__get(&m->threads, r->hdr.tid);
	struct thread *t = v ? (void *)(uintptr_t)*v : NULL;

	if (!t)
		return;
	/* Keep the thread's last name: it may have renamed itself after
	 * cgbpf first saw it; a name the application gave through NVTX is
	 * the one it wants to see. */
	if (!t->app_named && strncmp(t->name, r->comm, sizeof(t->name))) {
		snprintf(t->name, sizeof(t->name), "%.15s", r->comm);
		EMIT(m, thread, t);
	}
	/* Its call stack is most of a thread's memory (hours of churn keep
	 * every thread): gone with it unless a call is still open. */
	if (!t->depth) {
		free(t->stack);
		t->stack = NULL;
	}
}

/* The arguments an exec record carries, space separated; NULL if none. */
static char *exec_args(const struct rec_proc *r)
{
	const struct rec_exec *e = (const void *)r;
	size_t n;
	char *s;

	if (r->hdr.size < sizeof(*e) || !e->args_len)
		return NULL;
	n = e->args_len < REC_EXEC_ARGS ? e->args_len : REC_EXEC_ARGS;
	while (n > 0 && !e->args[n - 1])
		n--;
	if (!n || !(s = malloc(n + 5)))
		return NULL;
	for (size_t i = 0; i < n; i++)
		s[i] = e->args[i] ? e->args[i] : ' ';
	strcpy(s + n, e->args_cut ? " ..." : "");
	return s;
}

void model__proc_exec(struct model *m, const struct rec_proc *r)
{
	uint64_t *v = hmap__get(&m->procs, r->hdr.pid);
	struct proc *p = v ? (void *)(uintptr_t)*v : NULL;
	struct thread *t;
	char *cmdline;

	if (!p)
		return;
	/* Seen before its exec (a command cgbpf forked, in its syscalls or
	 * samples before the exec), it was named from /proc then: the old
	 * program. By now /proc may show a later rename or nothing at all. */
	snprintf(p->comm, sizeof(p->comm), "%.15s", r->comm);
	p->comm_guessed = false;
	cmdline = procfs__cmdline(r->hdr.pid);
	if (!cmdline || !*cmdline) {
		/* Exited already: the arguments the exec record carries. */
		free(cmdline);
		cmdline = exec_args(r);
	}
	free(p->cmdline);
	p->cmdline = cmdline;
	EMIT(m, process, p);
	v = hmap__get(&m->threads, r->hdr.pid);
	t = v ? (void *)(uintptr_t)*v : NULL;
	if (t && t->proc == p && !t->app_named && strncmp(t->name, p->comm, sizeof(t->name))) {
		memcpy(t->name, p->comm, sizeof(t->name));
		EMIT(m, thread, t);
	}
}

void model__proc_exit(struct model *m, const struct rec_proc *r)
{
	uint64_t *v = hmap__get(&m->procs, r->hdr.pid);
	struct proc *p = v ? (void *)(uintptr_t)*v : NULL;

	model__thread_exit(m, r);
	drop_hint(m, r->hdr.pid);
	if (p) {
		if (p->comm_guessed)
			model__proc_as(m, r->hdr.pid, r->comm);
		p->exited = true;
		/* A cache for launches to come (made again if one is read late). */
		free(p->launch_fmt);
		p->launch_fmt = NULL;
	}
}

void model__mem(struct model *m, struct thread *t, enum counter_kind k, uint64_t ts,
		int64_t delta)
{
	struct proc *p = t->proc;
	int64_t v;

	/* Sizes are the traced process's arguments: saturate, never wrap. */
	if (__builtin_add_overflow(p->mem[k], delta, &v))
		v = delta < 0 ? 0 : INT64_MAX;
	p->mem[k] = v < 0 ? 0 : v;
	if (p->mem[k] > p->mem_peak[k])
		p->mem_peak[k] = p->mem[k];
	if (!model__muted(m, t))
		EMIT(m, counter, t, k, ts, p->mem[k]);
}

void model__sample(struct model *m, uint32_t pid, uint32_t tid, const struct stack *st)
{
	struct thread *t = model__thread(m, pid, tid);

	if (!t)
		return;
	if (m->sample_at ? m->sample_at(m->sample_at_ctx, pid, st->ts) : !model__muted(m, t))
		EMIT(m, sample, t, st);
}

void model__backtrace(struct model *m, uint32_t pid, uint32_t tid, struct stack *st)
{
	struct thread *t = model__thread(m, pid, tid);

	if (!t) {
		free(st);
		return;
	}
	/* One that found no return (its exit record was lost) gives way. */
	free(t->bt);
	t->bt = st;
}
