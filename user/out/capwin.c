// SPDX-License-Identifier: MIT
/*
 * Capture windows: which records each file holds (docs/design.md,
 * "Capture windows"). Records reach this module in ring order, which is
 * each thread's program order and, across threads, the order the BPF
 * programs reserved them in: a window opens at the record that begins
 * its range (before the model takes it) and closes after the record that
 * ends it, so what lies between, and nothing else, is written.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <bpf/bpf.h>
#include "core/apilib.h"
#include "core/model.h"
#include "lib/log.h"
#include "lib/outname.h"
#include "out/capwin.h"
#include "out/perfetto.h"
#include "out/pfsplit.h"
#include "out/summary.h"

/* ---------------------------------------------------------------- options */

static int bad(char *msg, size_t len, const char *fmt, const char *arg)
{
	snprintf(msg, len, fmt, arg);
	return -EINVAL;
}

int capture__parse_range(const char *s, struct capture_opts *c, char *msg, size_t len)
{
	if (!strcmp(s, "cudaProfilerApi"))
		c->range = CAPTURE_RANGE_PROFILER;
	else if (!strcmp(s, "nvtx"))
		c->range = CAPTURE_RANGE_NVTX;
	else
		return bad(msg, len, "invalid --capture-range '%s': expected cudaProfilerApi or nvtx",
			   s);
	return 0;
}

int capture__parse_nvtx(const char *s, struct capture_opts *c, char *msg, size_t len)
{
	const char *at = strrchr(s, '@');
	size_t n = at ? (size_t)(at - s) : strlen(s);

	if (!n || n >= sizeof(c->nvtx_name) || (at && (!at[1] || strlen(at + 1) >=
							sizeof(c->nvtx_domain))))
		return bad(msg, len, "invalid --nvtx-capture '%s': expected RANGE or RANGE@DOMAIN "
			   "(each 1 to 63 characters)", s);
	memcpy(c->nvtx_name, s, n);
	c->nvtx_name[n] = 0;
	snprintf(c->nvtx_domain, sizeof(c->nvtx_domain), "%s", at ? at + 1 : "");
	c->nvtx_given = true;
	return 0;
}

/* A decimal number below 2^32 with nothing after it. */
static int parse_u32(const char *s, const char *end, uint32_t *v)
{
	uint64_t x = 0;

	if (s == end || end - s > 10)
		return -EINVAL;
	for (; s < end; s++) {
		if (*s < '0' || *s > '9')
			return -EINVAL;
		x = x * 10 + (*s - '0');
	}
	if (x > UINT32_MAX)
		return -EINVAL;
	*v = x;
	return 0;
}

int capture__parse_end(const char *s, struct capture_opts *c, char *msg, size_t len)
{
	c->end_given = true;
	if (!strcmp(s, "stop")) {
		c->repeat = false;
		return 0;
	}
	if (!strcmp(s, "repeat")) {
		c->repeat = true;
		c->repeat_max = 0;
		return 0;
	}
	if (!strncmp(s, "repeat:", 7) && !parse_u32(s + 7, s + strlen(s), &c->repeat_max) &&
	    c->repeat_max) {
		c->repeat = true;
		return 0;
	}
	return bad(msg, len, "invalid --capture-range-end '%s': expected stop, repeat or "
		   "repeat:N (N >= 1)", s);
}

int capture__parse_schedule(const char *s, struct capture_opts *c, char *msg, size_t len)
{
	bool seen[5] = { false };
	const char *p = s;

	while (*p) {
		static const char *const keys[] = { "wait=", "warmup=", "active=", "repeat=",
						    "skip_first=" };
		uint32_t *dst[] = { &c->wait, &c->warmup, &c->active, &c->cycles, &c->skip_first };
		const char *end = strchr(p, ',');
		size_t k;

		if (!end)
			end = p + strlen(p);
		for (k = 0; k < 5 && strncmp(p, keys[k], strlen(keys[k])); k++)
			;
		if (k == 5 || seen[k] || parse_u32(p + strlen(keys[k]), end, dst[k]))
			return bad(msg, len, "invalid --schedule '%s': expected "
				   "wait=W,warmup=U,active=A[,repeat=R][,skip_first=S] (numbers of steps)", s);
		seen[k] = true;
		p = *end ? end + 1 : end;
		if (*end && !*p)
			return bad(msg, len, "invalid --schedule '%s': trailing comma", s);
	}
	if (!seen[0] || !seen[1] || !seen[2])
		return bad(msg, len, "invalid --schedule '%s': wait, warmup and active are all "
			   "needed (repeat is optional, 0: no limit)", s);
	if (!c->active)
		return bad(msg, len, "invalid --schedule '%s': active must be at least 1 (a "
			   "schedule that writes no step)", s);
	c->schedule = true;
	return 0;
}

int capture__check(const struct capture_opts *c, char *msg, size_t len)
{
	if (c->nvtx_given && c->range != CAPTURE_RANGE_NVTX)
		return bad(msg, len, "--nvtx-capture needs --capture-range nvtx%s", "");
	if (c->range == CAPTURE_RANGE_NVTX && !c->nvtx_given)
		return bad(msg, len, "--capture-range nvtx needs --nvtx-capture RANGE[@DOMAIN]%s", "");
	if (c->end_given && !c->range)
		return bad(msg, len, "--capture-range-end needs --capture-range%s", "");
	if (c->schedule && !c->range)
		return bad(msg, len, "--schedule counts steps of a capture range: add "
			   "--capture-range nvtx or cudaProfilerApi%s", "");
	if (c->schedule && c->end_given)
		return bad(msg, len, "--schedule ends by its own repeat=R: drop "
			   "--capture-range-end%s", "");
	return 0;
}

bool capture__gated(const struct capture_opts *c)
{
	return c->range || c->delay_ns;
}

bool capture__numbered(const struct capture_opts *c)
{
	/* A schedule of one cycle writes one file: named as -o says. */
	return c->range && (c->repeat || (c->schedule && c->cycles != 1));
}

/* -- COMMAND's %q: the environment it inherited, cgbpf's own (the
 * command may be gone when a window opens late). */
static int own_env(void *ctx, pid_t pid, const char *name, char *buf, size_t n)
{
	(void)pid;
	return outname__proc_env(ctx, 0, name, buf, n);
}

int capture__file_name(const char *pattern, bool numbered, unsigned seq, int pid, char *buf,
		       size_t len, char *msg, size_t msglen)
{
	static const char ext[] = ".perfetto-trace";
	struct outname_ctx ctx = { .pid = pid < 0 ? -pid : pid, .seq = seq,
				   .env = pid < 0 ? own_env : NULL };
	size_t pl = strlen(pattern), el = strlen(ext);
	char with_n[4096];
	int n;

	if (numbered && !outname__uses(pattern, 'n')) {
		if (pl > el && !strcmp(pattern + pl - el, ext))
			n = snprintf(with_n, sizeof(with_n), "%.*s-%%n%s", (int)(pl - el), pattern,
				     ext);
		else
			n = snprintf(with_n, sizeof(with_n), "%s-%%n", pattern);
		if (n < 0 || (size_t)n >= sizeof(with_n)) {
			snprintf(msg, msglen, "-o '%s': the name is too long", pattern);
			return -ENAMETOOLONG;
		}
		pattern = with_n;
	}
	return outname__expand(pattern, &ctx, buf, len, msg, msglen) ? -EINVAL : 0;
}

/* Whether a call's return reaches the model outside a window. */
static bool keeps(uint8_t lib, uint16_t func)
{
	return apilib__capture_class(lib, func) & CAP_PASS;
}

/* ---------------------------------------------------------------- windows */

/* How long a file whose window ended waits for what sources still hold
 * of it (GPU activity: the injection library answers a flush in tens of
 * ms; without an answer, what came by then is written). */
#define CLOSE_WAIT_NS (1500ull * 1000000)

/* A stretch of time a file holds: its window, or each active step of a
 * schedule cycle (the gaps between them are not in it). */
struct span {
	uint64_t t0, t1;	/* t1 UINT64_MAX: open */
};

struct cap_file {
	char *path;		/* NULL with --summary-only */
	uint32_t pid;		/* --split-per-process: whose; else 0 */
	uint64_t first_step, steps;
	uint64_t t0, t1;
	uint64_t calls, launches;
	uint64_t gpu_ops;	/* GPU operations launched in its spans, written */
	uint64_t gpu_late;	/* ... that came after the file closed: lost */
	uint64_t kernels_in;	/* kernels launched in its spans, come in */
	struct span *spans;
	size_t nspans;
};

/* The windows of one scope: every target together, or one process
 * (--split-per-process: each counts its own steps, has its own files). */
struct scope {
	uint32_t pid;		/* 0: every target */
	uint32_t open;		/* capture ranges open now */
	uint64_t steps;		/* occurrences begun since armed */
	bool active;		/* the current occurrence is written */
	bool file_open;
	/* The file's window is over and it waits (close_by at most) for
	 * what sources still hold of it: GPU activity CUPTI delivers later. */
	bool closing;
	uint64_t close_by;
	bool done;
	unsigned nfiles;	/* its files so far (%n) */
	size_t cur;		/* its open file: index in capture.files */
	size_t last;		/* its last closed file + 1; 0: none */
};

struct capture {
	struct capture_env env;
	const struct capture_opts *o;
	uint64_t armed_at;	/* BOOTTIME from which ranges count (--delay) */
	bool armed;
	struct scope all;	/* without --split-per-process */
	struct hmap scopes;	/* --split-per-process: pid -> struct scope * */
	uint64_t steps_gone;	/* steps of the scopes of exited processes */
	bool done;
	struct cap_file *files;
	size_t nfiles;
	struct hmap range_tids;	/* profiler: threads inside a stop call (nesting) */
	struct hmap open_pids;	/* pid -> capture ranges it has open (one scope) */
	bool failed;		/* a window's file could not be written */
};

/* pid's scope if it has one (NULL: none yet). */
static struct scope *find_scope(const struct capture *c, uint32_t pid)
{
	uint64_t *v;

	if (!c->env.split)
		return (struct scope *)&c->all;
	v = hmap__get(&c->scopes, pid);
	return v ? (struct scope *)(uintptr_t)*v : NULL;
}

/* pid's scope; NULL on ENOMEM (its records then open no window). */
static struct scope *scope_of(struct capture *c, uint32_t pid)
{
	struct scope *s = find_scope(c, pid);

	if (s)
		return s;
	s = calloc(1, sizeof(*s));
	if (!s || hmap__put(&c->scopes, pid, (uintptr_t)s)) {
		free(s);
		return NULL;
	}
	s->pid = pid;
	return s;
}

static struct cap_file *cur(struct capture *c, const struct scope *s)
{
	return s->file_open ? &c->files[s->cur] : NULL;
}

static void counting_end(void *ctx, struct thread *t, struct call *c)
{
	struct capture *cap = ctx;
	struct scope *s = cap->env.split ? scope_of(cap, t->proc->pid) : &cap->all;
	struct cap_file *f = s ? cur(cap, s) : NULL;

	if (!f)
		return;
	/* Outermost calls, as the summary counts them. */
	if (model__inside_cuda_api(t, c) && (c->lib == LIB_CUDA || c->lib == LIB_CUDART))
		return;
	f->calls++;
	if (c->is_launch)
		f->launches++;
}

/* The file's spans: one opens at ts (false on ENOMEM: the file then
 * holds no GPU activity of it), the open one ends at ts. */
static bool span_open(struct cap_file *f, uint64_t ts)
{
	struct span *n = realloc(f->spans, (f->nspans + 1) * sizeof(*n));

	if (!n)
		return false;
	f->spans = n;
	n[f->nspans++] = (struct span){ ts, UINT64_MAX };
	return true;
}

static void span_close(struct cap_file *f, uint64_t ts)
{
	if (f->nspans && f->spans[f->nspans - 1].t1 == UINT64_MAX)
		f->spans[f->nspans - 1].t1 = ts;
}

static bool in_spans(const struct cap_file *f, uint64_t ts)
{
	size_t lo = 0, hi = f->nspans;

	/* The last span that began at or before ts. */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (f->spans[mid].t0 <= ts)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo && ts <= f->spans[lo - 1].t1;
}

static void mute(struct capture *c, struct scope *s, bool muted, uint64_t ts)
{
	struct cap_file *f = cur(c, s);

	if (f && muted)
		span_close(f, ts);
	else if (f)
		span_open(f, ts);
	if (c->env.split)
		model__mute_pid(c->env.m, s->pid, muted, ts, keeps);
	else
		model__mute(c->env.m, muted, ts, keeps);
}

/* A process's window file, named by -o for its pid and its own %n. */
static int open_split(struct capture *c, struct scope *s, struct cap_file *n)
{
	static const char ext[] = ".perfetto-trace";
	const char *pattern = c->env.pattern, *path;
	size_t pl = strlen(pattern), el = strlen(ext);
	char with_n[4096];
	int err;

	if (capture__numbered(c->o) && !outname__uses(pattern, 'n')) {
		int k = pl > el && !strcmp(pattern + pl - el, ext) ?
			snprintf(with_n, sizeof(with_n), "%.*s-%%n%s", (int)(pl - el), pattern, ext) :
			snprintf(with_n, sizeof(with_n), "%s-%%n", pattern);

		if (k < 0 || (size_t)k >= sizeof(with_n)) {
			err("-o '%s': the name is too long", pattern);
			return -ENAMETOOLONG;
		}
		pattern = with_n;
	}
	err = pfsplit__window_open(c->env.pt, s->pid, pattern, s->nfiles + 1, &path);
	if (!err && !(n->path = strdup(path)))
		err = -ENOMEM;
	return err;
}

static int open_file(struct capture *c, struct scope *s, uint64_t ts)
{
	struct cap_file *n = realloc(c->files, (c->nfiles + 1) * sizeof(*n));
	char path[4096];
	int err = 0;

	if (!n)
		return -ENOMEM;
	c->files = n;
	n = &c->files[c->nfiles];
	memset(n, 0, sizeof(*n));
	n->pid = s->pid;
	n->first_step = s->steps;
	n->t0 = ts;
	if (c->env.pt && c->env.split) {
		err = open_split(c, s, n);
		if (err) {
			c->failed = true;
			return err;
		}
	} else if (c->env.pt) {
		char msg[4096 + 128];

		err = capture__file_name(c->env.pattern, capture__numbered(c->o), c->nfiles + 1,
					 c->env.pid, path, sizeof(path), msg, sizeof(msg));
		if (err) {
			err("%s", msg);
			c->failed = true;
			return err;
		}
		if (!(n->path = strdup(path)))
			err = -ENOMEM;
		if (!err)
			err = pftrace__resume(c->env.pt, path, c->env.force);
		if (err)
			c->failed = true;
		if (err == -EEXIST) {
			err("%s exists: cgbpf does not overwrite it without --force", path);
			free(n->path);
			n->path = NULL;
			return err;
		}
		if (err) {
			err("cannot write %s: %s", path, strerror(-err));
			free(n->path);
			return err;
		}
	}
	s->cur = c->nfiles++;
	s->nfiles++;
	s->file_open = true;
	dbg("capture: file %zu (%s) opened", c->nfiles, n->path ? n->path : "-");
	return 0;
}

/* The file of s closes now: sources write what they held for it. */
static void finish_close(struct capture *c, struct scope *s)
{
	struct cap_file *f = cur(c, s);
	int err;

	if (!f)
		return;
	if (c->env.window_end)
		c->env.window_end(c->env.flush_ctx, s->pid);
	s->closing = false;
	s->file_open = false;
	s->last = s->cur + 1;
	if (!c->env.pt)
		return;
	if (c->env.flush)
		c->env.flush(c->env.flush_ctx);
	if (c->env.split) {
		if (!pfsplit__window_close(c->env.pt, s->pid))
			info("wrote %s (pid %u, %" PRIu64 " step(s), %" PRIu64 " API calls)",
			     f->path, s->pid, f->steps, f->calls);
		return;
	}
	err = pftrace__pause(c->env.pt, NULL);
	if (err)
		err("writing %s failed: %s", f->path, strerror(-err));
	else
		info("wrote %s (%" PRIu64 " step(s), %" PRIu64 " API calls)", f->path, f->steps,
		     f->calls);
}

/*
 * The window of s is over at ts. Its file stays open while sources bring
 * what they still hold of it (CUPTI hands a window's GPU activity over
 * after the window, in buffers): at most CLOSE_WAIT_NS, less when every
 * source says it came (capture__tick). Meanwhile the model is muted and
 * only what happened inside the file's spans is written.
 */
static void close_file(struct capture *c, struct scope *s, uint64_t ts)
{
	struct cap_file *f = cur(c, s);

	if (!f || s->closing)
		return;
	f->t1 = ts;
	span_close(f, ts);
	if (c->env.window_close && c->env.window_close(c->env.flush_ctx, s->pid)) {
		s->closing = true;
		s->close_by = ts + CLOSE_WAIT_NS;
		dbg("capture: file %zu waits for what its window left", s->cur + 1);
		return;
	}
	finish_close(c, s);
}

/* The schedule's phase of step n: 0 wait, 1 warm-up, 2 active, -1 past the last cycle. */
static int phase(const struct capture_opts *o, uint64_t n)
{
	uint64_t cyc = (uint64_t)o->wait + o->warmup + o->active, ph;

	if (!o->schedule)
		return 2;
	if (n < o->skip_first)
		return 0;
	n -= o->skip_first;
	if (o->cycles && n >= (uint64_t)o->cycles * cyc)
		return -1;
	ph = n % cyc;
	return ph < o->wait ? 0 : ph < (uint64_t)o->wait + o->warmup ? 1 : 2;
}

/* The scope's windows are over: the whole capture when it is the only
 * one (per process, cgbpf goes on for the other processes' windows). */
static void scope_done(struct capture *c, struct scope *s)
{
	s->done = true;
	if (!c->env.split)
		c->done = true;
}

static void occurrence_begin(struct capture *c, struct scope *s, uint64_t ts)
{
	uint64_t n;

	if (!c->armed || s->done || c->done)
		return;
	n = s->steps++;
	if (phase(c->o, n) != 2)
		return;
	/* A file still waiting for its last window's GPU activity: what
	 * has not come by now is lost to it (counted). */
	if (s->closing)
		finish_close(c, s);
	if (!s->file_open && open_file(c, s, ts)) {
		/* Named per process: one name that cannot be written
		 * stops that process's windows only. */
		scope_done(c, s);
		return;
	}
	cur(c, s)->steps++;
	s->active = true;
	mute(c, s, false, ts);
}

static void occurrence_end(struct capture *c, struct scope *s, uint64_t ts)
{
	const struct capture_opts *o = c->o;
	uint64_t n = s->steps - 1;

	if (!s->active)
		return;
	s->active = false;
	mute(c, s, true, ts);
	if (o->schedule) {
		uint64_t cyc = (uint64_t)o->wait + o->warmup + o->active;

		n -= o->skip_first;	/* an active step is past them */
		if (n % cyc != cyc - 1)
			return;		/* more active steps in this cycle */
		close_file(c, s, ts);
		if (o->cycles && n + 1 >= (uint64_t)o->cycles * cyc)
			scope_done(c, s);
		return;
	}
	close_file(c, s, ts);
	if (!o->repeat || (o->repeat_max && s->nfiles >= o->repeat_max))
		scope_done(c, s);
}

static void on_range(void *ctx, bool begin, uint32_t pid, uint32_t tid, uint64_t ts,
		     const char *domain, const char *name)
{
	struct capture *c = ctx;
	const struct capture_opts *o = c->o;
	struct scope *s;

	(void)tid;
	if (strcmp(name, o->nvtx_name) || (o->nvtx_domain[0] && strcmp(domain, o->nvtx_domain)))
		return;
	if (!(s = scope_of(c, pid)))
		return;
	if (begin) {
		uint64_t *v = hmap__get(&c->open_pids, pid);

		hmap__put(&c->open_pids, pid, (v ? *v : 0) + 1);
		if (!s->open++)
			occurrence_begin(c, s, ts);
	} else if (s->open) {
		uint64_t *v = hmap__get(&c->open_pids, pid);

		if (v && *v > 1)
			(*v)--;
		else
			hmap__del(&c->open_pids, pid, NULL);
		if (!--s->open)
			occurrence_end(c, s, ts);
	}
}

void capture__proc_exit(struct capture *c, uint32_t pid, uint64_t ts)
{
	struct scope *s;
	uint64_t n, v;

	if (!c)
		return;
	/* Its ranges end with it: a window it held open closes. */
	if (hmap__del(&c->open_pids, pid, &n) && (s = scope_of(c, pid))) {
		s->open = n >= s->open ? 0 : s->open - n;
		if (!s->open)
			occurrence_end(c, s, ts);
	}
	/* Per process: its file ends with it (a schedule cycle it did not
	 * finish), and its pid may come back as another process. */
	if (!c->env.split || !hmap__del(&c->scopes, pid, &v))
		return;
	s = (void *)(uintptr_t)v;
	if (s->file_open && !s->closing) {
		/* Nothing more will come of it: the file closes now. */
		s->active = false;
		mute(c, s, true, ts);
		cur(c, s)->t1 = ts;
	}
	finish_close(c, s);
	c->steps_gone += s->steps;
	free(s);
}

/* --delay alone with --split-per-process: a process's window opens at
 * the delay, or at its first call after it. */
static void delay_open(struct capture *c, struct scope *s, uint64_t ts)
{
	if (!s || s->file_open || s->done || !c->armed)
		return;
	if (open_file(c, s, ts)) {
		scope_done(c, s);
		return;
	}
	s->active = true;
	mute(c, s, false, ts);
}

void capture__call_enter(struct capture *c, const struct rec_call_enter *r)
{
	struct scope *s;
	int cls;

	if (!c)
		return;
	if (c->env.split && !c->o->range && c->armed) {
		delay_open(c, scope_of(c, r->hdr.pid), r->hdr.ts);
		return;
	}
	if (c->o->range != CAPTURE_RANGE_PROFILER)
		return;
	cls = apilib__capture_class(r->lib, r->func);
	if ((cls & CAP_ON) && (s = scope_of(c, r->hdr.pid)) && !s->open) {
		s->open = 1;
		hmap__put(&c->open_pids, r->hdr.pid, 1);
		occurrence_begin(c, s, r->hdr.ts);
	} else if (cls & CAP_OFF) {
		/* cudaProfilerStop enters cuProfilerStop: the outer return ends it. */
		uint64_t *v = hmap__get(&c->range_tids, r->hdr.tid);

		hmap__put(&c->range_tids, r->hdr.tid, (v ? *v : 0) + 1);
	}
}

void capture__call_exit(struct capture *c, const struct rec_call_exit *r)
{
	struct scope *s;
	uint64_t *v;

	if (!c || c->o->range != CAPTURE_RANGE_PROFILER || !(apilib__capture_class(r->lib, r->func) & CAP_OFF))
		return;
	v = hmap__get(&c->range_tids, r->hdr.tid);
	if (v && *v > 1) {
		(*v)--;
		return;
	}
	hmap__del(&c->range_tids, r->hdr.tid, NULL);
	if (!(s = scope_of(c, r->hdr.pid)) || !s->open)
		return;
	s->open = 0;
	/* One scope: any target's stop ends the window of all. */
	if (c->env.split)
		hmap__del(&c->open_pids, r->hdr.pid, NULL);
	else
		hmap__free(&c->open_pids);
	occurrence_end(c, s, r->hdr.ts);
}

static void set_gate(struct capture *c, int64_t v)
{
	struct capture_gate g = { .open = v };
	uint32_t zero = 0;

	if (c->env.gate_fd >= 0 && bpf_map_update_elem(c->env.gate_fd, &zero, &g, BPF_ANY))
		warn("capture: setting the gate: %s", strerror(errno));
}

void capture__start(struct capture *c, uint64_t now)
{
	if (c)
		c->armed_at = now + c->o->delay_ns;
}

/* A closing file of s closes once its sources settled, or at close_by. */
static void settle(struct capture *c, struct scope *s, uint64_t now)
{
	if (s->closing && (now >= s->close_by || !c->env.window_settled ||
			   c->env.window_settled(c->env.flush_ctx, s->pid)))
		finish_close(c, s);
}

void capture__tick(struct capture *c, uint64_t now)
{
	uint64_t v;

	if (!c)
		return;
	settle(c, &c->all, now);
	for (size_t it = 0; hmap__next(&c->scopes, &it, NULL, &v);)
		settle(c, (struct scope *)(uintptr_t)v, now);
	if (c->armed || now < c->armed_at)
		return;
	c->armed = true;
	if (c->o->range)
		return;
	/* --delay alone: one window from now to the end. */
	set_gate(c, 1);
	info("capture: --delay passed; recording");
	if (c->env.split) {
		/* Every process known now; the others at their first call. */
		for (size_t it = 0; hmap__next(&c->env.m->procs, &it, NULL, &v);)
			delay_open(c, scope_of(c, ((struct proc *)(uintptr_t)v)->pid), now);
		return;
	}
	if (open_file(c, &c->all, now)) {
		c->done = true;
		return;
	}
	c->all.active = true;
	mute(c, &c->all, false, now);
}

static bool sample_at(void *ctx, uint32_t pid, uint64_t ts)
{
	return capture__keeps(ctx, pid, ts) == CAPTURE_KEEP;
}

bool capture__keeps_any(const struct capture *c, uint64_t ts)
{
	return !c || c->env.split || capture__keeps(c, 0, ts) == CAPTURE_KEEP;
}

struct capture *capture__new(const struct capture_env *env, uint64_t t0)
{
	struct capture *c = calloc(1, sizeof(*c));
	struct sink sk = { .call_end = counting_end };

	if (!c)
		return NULL;
	c->env = *env;
	c->o = env->o;
	c->armed_at = t0 + c->o->delay_ns;
	c->armed = !c->o->delay_ns;
	sk.ctx = c;
	if (model__add_sink(env->m, &sk)) {
		free(c);
		errno = E2BIG;
		return NULL;
	}
	env->m->range = c->o->range == CAPTURE_RANGE_NVTX ? on_range : NULL;
	env->m->range_ctx = c;
	env->m->sample_at = sample_at;
	env->m->sample_at_ctx = c;
	if (env->split) {
		uint64_t v;

		/* Each process muted until its own window. */
		env->m->proc_mute = true;
		for (size_t it = 0; hmap__next(&env->m->procs, &it, NULL, &v);)
			((struct proc *)(uintptr_t)v)->muted = true;
		if (env->pt)
			pfsplit__windows(env->pt);
		return c;
	}
	model__mute(env->m, true, t0, NULL);
	if (env->pt) {
		pftrace__keep_descriptors(env->pt);
		pftrace__pause(env->pt, env->made);
	}
	return c;
}

void capture__set_pid(struct capture *c, int pid)
{
	if (c)
		c->env.pid = -pid;	/* the command: %q from cgbpf's environment */
}

bool capture__failed(const struct capture *c)
{
	return c && c->failed;
}

const char *capture__file_path(const struct capture *c, size_t i)
{
	return c && i < c->nfiles ? c->files[i].path : NULL;
}

bool capture__done(const struct capture *c)
{
	/* Its last file first gets what its window left. */
	return c && c->done && !c->all.closing;
}

/* What becomes of something of pid at ts, and the file it is for (the
 * open one: KEEP; a closed one: LATE; NULL: OUTSIDE). */
static enum capture_keep where(const struct capture *c, uint32_t pid, uint64_t ts,
			       size_t *file)
{
	const struct scope *s = find_scope(c, pid);

	if (!s)
		return CAPTURE_OUTSIDE;
	if (s->file_open && in_spans(&c->files[s->cur], ts)) {
		*file = s->cur;
		return CAPTURE_KEEP;
	}
	/* Its closed files, latest first: most of what is outside every
	 * window came after the last one, and the search ends there. */
	for (size_t i = s->last; i > 0; i--) {
		const struct cap_file *f = &c->files[i - 1];

		if (c->env.split && f->pid != s->pid)
			continue;
		if (f->t1 < ts)
			break;
		if (in_spans(f, ts)) {
			*file = i - 1;
			return CAPTURE_LATE;
		}
	}
	return CAPTURE_OUTSIDE;
}

enum capture_keep capture__keeps(const struct capture *c, uint32_t pid, uint64_t ts)
{
	size_t file;

	return where(c, pid, ts, &file);
}

enum capture_keep capture__gpu_op(struct capture *c, uint32_t pid, uint64_t ts)
{
	size_t file = 0;
	enum capture_keep k = where(c, pid, ts, &file);

	if (k == CAPTURE_KEEP)
		c->files[file].gpu_ops++;
	else if (k == CAPTURE_LATE)
		c->files[file].gpu_late++;
	return k;
}

void capture__gpu_arrived(struct capture *c, uint32_t pid, uint64_t ts, bool kernel)
{
	size_t file = 0;

	if (kernel && where(c, pid, ts, &file) == CAPTURE_KEEP)
		c->files[file].kernels_in++;
}

bool capture__gpu_caught_up(const struct capture *c, uint32_t pid)
{
	const struct scope *s = find_scope(c, pid);
	const struct cap_file *f = s && s->closing ? &c->files[s->cur] : NULL;

	return !f || f->kernels_in >= f->launches;
}

size_t capture__files(const struct capture *c)
{
	return c ? c->nfiles : 0;
}

const char *capture__file(const struct capture *c, size_t i)
{
	return i < c->nfiles ? c->files[i].path : NULL;
}

static void print_section(const void *ctx, const uint64_t *drops, FILE *f)
{
	const struct capture *c = ctx;
	const struct capture_opts *o = c->o;
	uint64_t steps = c->all.steps + c->steps_gone, late = 0, v;

	for (size_t it = 0; hmap__next(&c->scopes, &it, NULL, &v);)
		steps += ((const struct scope *)(uintptr_t)v)->steps;
	fprintf(f, "** Capture windows:\n\n");
	if (o->range == CAPTURE_RANGE_NVTX)
		fprintf(f, "   range: NVTX \"%s\"%s%s, %" PRIu64 " occurrence(s) counted\n",
			o->nvtx_name, o->nvtx_domain[0] ? " in domain " : "", o->nvtx_domain,
			steps);
	else if (o->range == CAPTURE_RANGE_PROFILER)
		fprintf(f, "   range: cuProfilerStart/cudaProfilerStart .. Stop, %" PRIu64
			" occurrence(s) counted\n", steps);
	if (o->delay_ns)
		fprintf(f, "   delay: %.3f s\n", o->delay_ns / 1e9);
	if (o->schedule)
		fprintf(f, "   schedule: wait=%u warmup=%u active=%u repeat=%u skip_first=%u "
			"(steps)\n", o->wait, o->warmup, o->active, o->cycles, o->skip_first);
	if (!c->nfiles) {
		fprintf(f, "   no window opened: nothing was written\n\n");
		return;
	}
	if (c->env.split)
		fprintf(f, "   steps counted per process (--split-per-process)\n");
	if (c->env.split)
		fprintf(f, "\n   %4s  %8s  %9s  %6s  %10s  %10s  %10s  %10s  %s\n", "File", "Pid",
			"Steps", "(from)", "Length (s)", "API calls", "Launches", "GPU ops", "Path");
	else
		fprintf(f, "\n   %4s  %9s  %6s  %10s  %10s  %10s  %10s  %s\n", "File", "Steps",
			"(from)", "Length (s)", "API calls", "Launches", "GPU ops", "Path");
	for (size_t i = 0; i < c->nfiles; i++) {
		const struct cap_file *w = &c->files[i];

		late += w->gpu_late;
		fprintf(f, "   %4zu  ", i + 1);
		if (c->env.split)
			fprintf(f, "%8u  ", w->pid);
		fprintf(f, "%9" PRIu64 "  %6" PRIu64 "  %10.6f  %10" PRIu64 "  %10" PRIu64 "  %10"
			PRIu64 "  %s\n", w->steps, w->first_step, (w->t1 - w->t0) / 1e9, w->calls,
			w->launches, w->gpu_ops, w->path ? w->path : "(--summary-only)");
	}
	fprintf(f, "\n   GPU ops: operations launched inside the file's window(s), written to it "
		"(after the window ends, its file waits up to %.1f s for them)\n",
		CLOSE_WAIT_NS / 1e9);
	if (late) {
		fprintf(f, "   %" PRIu64 " GPU operation(s) launched inside a window came after its "
			"file was closed: LOST (not in any file)\n", late);
		for (size_t i = 0; i < c->nfiles; i++)
			if (c->files[i].gpu_late)
				fprintf(f, "      file %zu: %" PRIu64 "\n", i + 1, c->files[i].gpu_late);
	}
	fprintf(f, "\n");
}

void capture__finish(struct capture *c, uint64_t ts, struct capture_info *ci)
{
	uint64_t v;

	if (!c)
		return;
	/* The capture ended inside a window: it ends there; the core writes
	 * the end of that file. */
	if (c->all.file_open && !c->all.closing) {
		cur(c, &c->all)->t1 = ts;
		span_close(cur(c, &c->all), ts);
		model__mute(c->env.m, true, ts, NULL);
	}
	for (size_t it = 0; hmap__next(&c->scopes, &it, NULL, &v);) {
		struct scope *s = (void *)(uintptr_t)v;

		if (!s->file_open || s->closing)
			continue;
		cur(c, s)->t1 = ts;
		span_close(cur(c, s), ts);
		model__mute_pid(c->env.m, s->pid, true, ts, NULL);
		if (c->env.pt)
			info("wrote %s (pid %u, %" PRIu64 " step(s), %" PRIu64 " API calls; "
			     "the capture ended inside its window)", cur(c, s)->path, s->pid,
			     cur(c, s)->steps, cur(c, s)->calls);
	}
	summary__add_section(ci, SUMMARY_OTHER, print_section, c);
}

void capture__free(struct capture *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->nfiles; i++) {
		free(c->files[i].path);
		free(c->files[i].spans);
	}
	free(c->files);
	hmap__free(&c->range_tids);
	hmap__free(&c->open_pids);
	{
		uint64_t v;

		for (size_t it = 0; hmap__next(&c->scopes, &it, NULL, &v);)
			free((void *)(uintptr_t)v);
		hmap__free(&c->scopes);
	}
	free(c);
}
