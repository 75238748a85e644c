// SPDX-License-Identifier: MIT
#include <stdio.h>
#include <string.h>
#include "out/pfsink.h"

static const char *const counter_names[CTR__COUNT] = {
	[CTR_GPU_MEM] = "GPU memory (cuMemAlloc)",
	[CTR_HOST_PINNED] = "Pinned host memory (cuMemAllocHost)",
};

static void on_process(void *ctx, struct proc *p)
{
	char name[48], label[32];

	if (!p->container[0]) {
		pftrace__process(ctx, UUID_PROCESS(p->pid), p->pid, p->comm, p->cmdline);
		return;
	}
	/* Containers reuse pids and names: say which one, in the name the UI
	 * shows and as a label a query can filter on. */
	snprintf(name, sizeof(name), "%s [container %s]", p->comm, p->container);
	snprintf(label, sizeof(label), "container=%s", p->container);
	pftrace__process_labeled(ctx, UUID_PROCESS(p->pid), p->pid, name, p->cmdline, label);
}

static void on_thread(void *ctx, struct thread *t)
{
	pftrace__thread(ctx, UUID_THREAD(t->proc->pid, t->tid), UUID_PROCESS(t->proc->pid), t->proc->pid,
			t->tid, t->name);
}

static struct pfseq *seq_of(struct pftrace *pt, struct thread *t, uint64_t ts)
{
	if (!t->seq)
		t->seq = pftrace__seq(pt, UUID_THREAD(t->proc->pid, t->tid), ts);
	return t->seq;
}

struct pfseq *pfsink__seq(struct pftrace *pt, struct thread *t, uint64_t ts)
{
	return seq_of(pt, t, ts);
}

static void on_begin(void *ctx, struct thread *t, struct call *c)
{
	struct pfseq *s = seq_of(ctx, t, c->ts);
	struct pf_flow f = { .out = c->flow };

	if (!s)
		return;
	if (c->flow)
		pftrace__begin_flow(ctx, s, c->ts, 0, NULL, c->name, c->begin, c->nbegin, &f);
	else
		pftrace__begin(ctx, s, c->ts, c->name, c->begin, c->nbegin);
}

#define BT_FRAMES 192

/* The backtrace of a slow call goes inline on its slice's end: the slice
 * is on the thread's sequence, whose interning holds only names. */
static void end_with_stack(struct pftrace *pt, struct pfseq *s, struct call *c)
{
	const struct stack *bt = c->bt;
	const char *names[BT_FRAMES];
	char unknown[BT_FRAMES][48];
	int n = 0;

	for (int i = bt->n - 1; i >= 0 && n < BT_FRAMES; i--, n++) {
		const struct sym_frame *f = &bt->frames[i];

		if (f->function) {
			names[n] = f->function;
			continue;
		}
		/* Unsymbolized: where it is, as perf prints it. */
		if (f->module) {
			const char *base = strrchr(f->module, '/');

			snprintf(unknown[n], sizeof(unknown[n]), "%.24s+0x%llx",
				 base ? base + 1 : f->module, (unsigned long long)f->module_off);
		} else {
			snprintf(unknown[n], sizeof(unknown[n]), "0x%llx",
				 (unsigned long long)f->ip);
		}
		names[n] = unknown[n];
	}
	pftrace__end_stack(pt, s, c->end_ts, c->end, c->nend, names, n);
}

static void on_end(void *ctx, struct thread *t, struct call *c)
{
	struct pfseq *s = seq_of(ctx, t, c->end_ts);

	if (!s)
		return;
	if (!c->ended) {
		/* Its return was lost: the summary leaves it out, and so must
		 * cgbpf stats. */
		struct pf_annot lost = { .name = "return_lost", .type = PA_BOOL, .u = 1 };

		pftrace__end(ctx, s, c->end_ts, &lost, 1);
		return;
	}
	if (c->bt && c->bt->n)
		end_with_stack(ctx, s, c);
	else
		pftrace__end(ctx, s, c->end_ts, c->end, c->nend);
}

static void on_counter(void *ctx, struct thread *t, enum counter_kind k, uint64_t ts,
		       int64_t value)
{
	struct pfseq *s = seq_of(ctx, t, ts);
	struct proc *p = t->proc;

	if (!s)
		return;
	if (!p->counter_described[k]) {
		pftrace__counter_track(ctx, UUID_COUNTER(p->pid, k), UUID_PROCESS(p->pid),
				       counter_names[k], PF_UNIT_BYTES);
		p->counter_described[k] = true;
	}
	pftrace__counter(ctx, s, ts, UUID_COUNTER(p->pid, k), value);
}

/* A syscall is a slice on its thread's track, nested inside the API call
 * it happened in: its record arrives after that call's entry and before
 * its return on the same thread. */
static void on_syscall(void *ctx, struct thread *t, const struct syscall_ev *e)
{
	struct pfseq *s = seq_of(ctx, t, e->ts);

	if (!s)
		return;
	pftrace__begin_cat(ctx, s, e->ts, "syscall", e->name, e->begin, e->nbegin);
	pftrace__end(ctx, s, e->end_ts, e->end, e->nend);
}

struct sink pfsink__sink(struct pftrace *pt)
{
	return (struct sink){
		.ctx = pt,
		.process = on_process,
		.thread = on_thread,
		.call_begin = on_begin,
		.call_end = on_end,
		.counter = on_counter,
		.syscall = on_syscall,
	};
}
