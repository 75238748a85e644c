// SPDX-License-Identifier: MIT
/*
 * sources/stacks/: CPU samples and slow-call backtraces: the `stacks`
 * source (stacks.c: unwinding through lib/elf, the CPU samples section)
 * and their PerfSample packets (pfstacks.c).
 */
#include <errno.h>
#include <inttypes.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <bpf/libbpf.h>
#include "cgbpf.skel.h"
#include "pyframes_rec.h"
#include "core/apilib.h"
#include "core/ingest.h"
#include "core/opts.h"
#include "core/reaper.h"
#include "core/session.h"
#include "core/source.h"
#include "lib/elf/symbolize.h"
#include "lib/hmap.h"
#include "lib/log.h"
#include "lib/procfs.h"
#include "lib/sumtab.h"
#include "out/summary.h"
#include "sources/stacks/pfstacks.h"
#include "sources/stacks/stacks.h"

#define MAX_FRAMES (STACK_KERNEL_MAX + STACK_USER_MAX + PY_FRAMES_MAX)

struct stacks {
	struct model *m;
	struct symbolizer *sym;
	struct bpf_link **links;
	int nlinks;
	struct stacks_stats st;
	struct hmap self;		/* hash(name) -> index + 1 in tops */
	struct hmap warm;		/* pids whose maps the symbolizer has read */
	uint32_t *exited;		/* exits to pass on once the rings are drained */
	size_t nexited, capexited;
	struct sumtab_self *tops;
	size_t ntops, captops;
	struct sym_frame frames[MAX_FRAMES];	/* the sample being decoded */
	struct sym_frame mixed[MAX_FRAMES];
};

struct stacks *stacks__new(struct model *m)
{
	struct stacks *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	s->m = m;
	s->sym = symbolizer__new();
	if (!s->sym) {
		int e = errno;

		free(s);
		errno = e;
		return NULL;
	}
	return s;
}

void stacks__prefetch_kernel(struct stacks *s)
{
	symbolizer__kernel_prefetch(s->sym);
}

void stacks__free(struct stacks *s)
{
	if (!s)
		return;
	for (int i = 0; i < s->nlinks; i++)
		reaper__link(s->links[i]);	/* closes the perf event too */
	free(s->links);
	free(s->tops);
	hmap__free(&s->self);
	hmap__free(&s->warm);
	free(s->exited);
	symbolizer__free(s->sym);
	free(s);
}

static int open_cpu_clock(int cpu, uint32_t hz)
{
	struct perf_event_attr a = {
		.type = PERF_TYPE_SOFTWARE,
		.config = PERF_COUNT_SW_CPU_CLOCK,
		.size = sizeof(a),
		.freq = 1,
		.sample_freq = hz,
	};

	return syscall(__NR_perf_event_open, &a, -1, cpu, -1, PERF_FLAG_FD_CLOEXEC);
}

int stacks__start_sampling(struct stacks *s, struct bpf_program *prog, uint32_t hz)
{
	int ncpu = libbpf_num_possible_cpus(), err = 0;

	if (ncpu <= 0)
		return ncpu ? ncpu : -ENODEV;
	s->links = calloc(ncpu, sizeof(*s->links));
	if (!s->links)
		return -ENOMEM;
	s->st.hz = hz;
	for (int cpu = 0; cpu < ncpu; cpu++) {
		int fd = open_cpu_clock(cpu, hz);
		struct bpf_link *l;

		if (fd < 0) {
			err = -errno;
			if (err == -ENODEV)	/* offline */
				continue;
			if (err == -EINVAL)
				err("--sample-hz %u: the kernel refuses this rate (see "
				    "/proc/sys/kernel/perf_event_max_sample_rate); use a lower one "
				    "or --sample-hz 0", hz);
			else
				err("opening the CPU clock perf event on CPU %d: %s", cpu,
				    strerror(-err));
			return err;
		}
		l = bpf_program__attach_perf_event(prog, fd);
		if (!l) {
			err = -errno;
			close(fd);
			err("attaching the sampler on CPU %d: %s", cpu, strerror(-err));
			return err;
		}
		s->links[s->nlinks++] = l;
	}
	s->st.cpus = s->nlinks;
	return 0;
}

/* Symbolizes one frame. Return addresses (every frame but the innermost)
 * are looked up at ip - 1: a call at the very end of a function returns
 * past its last byte. */
static void symbolize(struct stacks *s, uint32_t pid, uint64_t ip, bool kernel, bool ret,
		      struct sym_frame *f)
{
	if (!kernel) {
		if (ret)
			symbolizer__user_ret(s->sym, pid, ip, f);
		else
			symbolizer__user(s->sym, pid, ip, f);
	} else {
		uint64_t at = ret && ip ? ip - 1 : ip;

		symbolizer__kernel(s->sym, at, f);
		if (f->function)
			f->function_off += ip - at;
	}
	f->ip = ip;
	f->kernel = kernel;
	s->st.frames++;
	if (!f->function)
		s->st.unsymbolized++;
}

/* Self samples per function (the innermost frame), for the summary. */
static void count_self(struct stacks *s, const struct sym_frame *f)
{
	const char *name = f->function;
	uint64_t h, *v;

	if (!name) {
		const char *slash = f->module ? strrchr(f->module, '/') : NULL;

		name = slash ? slash + 1 : f->module ? f->module : "[unknown]";
	}
	h = hash__bytes(name, strlen(name));
	v = hmap__get(&s->self, h);
	if (v) {
		s->tops[*v - 1].n++;
		return;
	}
	if (s->ntops == s->captops) {
		size_t nc = s->captops ? 2 * s->captops : 64;
		struct sumtab_self *t = realloc(s->tops, nc * sizeof(*t));

		if (!t)
			return;
		s->tops = t;
		s->captops = nc;
	}
	s->tops[s->ntops].name = name;
	s->tops[s->ntops].n = 1;
	if (!hmap__put(&s->self, h, s->ntops + 1))
		s->ntops++;
}

static bool is_eval_loop(const struct sym_frame *f)
{
	return !f->kernel && f->function && !strcmp(f->function, "_PyEval_EvalFrameDefault");
}

/*
 * Mixed stacks (issue 12): the Python frames sent right before this
 * record (the model's stack_py hook: user/sources/python/pysrc.c) go
 * above the native frame of the eval loop that runs them: one Python
 * frame per _PyEval_EvalFrameDefault before 3.11, from 3.11 every frame
 * up to the entry frame that call began with. A Python frame is a frame
 * of the module "[python]" named "function (file:line)". Frames left over
 * (a native unwind that stopped short of the eval loop) go at the outer
 * end. Returns the new frame count.
 */
static int mix_python(struct stacks *s, const struct rec_stack *r, int nkernel, int n)
{
	const struct py_stack_frame *py;
	int np = s->m->stack_py ? s->m->stack_py(s->m->stack_py_ctx, r->hdr.tid,
						 r->hdr.type == REC_STACK_SAMPLE, r->lib, r->func,
						 &py) : 0, j = 0, k = 0;

	if (np <= 0)
		return n;
	for (int i = 0; i < n && k < MAX_FRAMES; i++) {
		if (i >= nkernel && j < np && is_eval_loop(&s->frames[i])) {
			do {
				s->mixed[k++] = (struct sym_frame){ .function = py[j].name,
								    .module = "[python]" };
			} while (!py[j++].entry && j < np && k < MAX_FRAMES);
		}
		if (k < MAX_FRAMES)
			s->mixed[k++] = s->frames[i];
	}
	while (j < np && k < MAX_FRAMES)
		s->mixed[k++] = (struct sym_frame){ .function = py[j++].name, .module = "[python]" };
	memcpy(s->frames, s->mixed, k * sizeof(s->frames[0]));
	s->st.python_frames += np;
	return k;
}

int stacks__record(struct stacks *s, const struct rec_stack *r, size_t size)
{
	uint64_t ips[STACK_USER_MAX];
	const uint64_t *user = (const uint64_t *)r->user;
	int nuser = r->nuser, n = 0;
	bool truncated = false;
	struct stack st = { 0 };

	if (size != ingest__min_size(r->hdr.type) + r->copy_len ||
	    r->nuser > STACK_USER_MAX || r->nkernel > STACK_KERNEL_MAX)
		return -EINVAL;
	for (int i = 0; i < r->nkernel; i++)
		symbolize(s, r->hdr.pid, r->kernel[i], true, i > 0, &s->frames[n++]);
	st.nkernel = n;
	/*
	 * The copied stack unwinds with DWARF CFI what frame pointers cannot
	 * (code built without them: there the kernel's walk follows a
	 * clobbered rbp and may even find more, bogus, frames). The kernel's
	 * walk stays only when the unwind ran out of copied stack before it
	 * or failed outright.
	 */
	if (r->copy_len) {
		struct sym_regs regs = { .ip = r->ip, .sp = r->sp, .bp = r->bp };
		bool trunc = false;
		int k = symbolizer__unwind(s->sym, r->hdr.pid, r->hdr.tid, &regs, r->data,
					   r->copy_len, ips, STACK_USER_MAX, &trunc);

		if (k > 0 && (k >= nuser || (k > 1 && !trunc))) {
			user = ips;
			nuser = k;
			truncated = trunc;
			s->st.dwarf++;
		}
	}
	if (user != ips && r->nuser == STACK_USER_MAX)
		truncated = true;
	for (int i = 0; i < nuser; i++)
		symbolize(s, r->hdr.pid, user[i], false, i > 0, &s->frames[n++]);
	n = mix_python(s, r, st.nkernel, n);
	st.ts = r->hdr.ts;
	st.cpu = r->hdr.cpu;
	st.n = n;
	st.truncated = truncated;
	st.kernel_mode = r->flags & STACK_F_KERNEL_MODE;
	st.frames = s->frames;
	st.lib = r->lib;
	st.func = r->func;
	s->st.truncated += truncated;
	if (r->hdr.type == REC_STACK_SAMPLE) {
		s->st.samples++;
		if (n)
			count_self(s, &s->frames[0]);
		model__sample(s->m, r->hdr.pid, r->hdr.tid, &st);
	} else {
		struct stack *bt = malloc(sizeof(*bt) + n * sizeof(*bt->frames));

		s->st.backtraces++;
		if (!bt)
			return 0;
		*bt = st;
		bt->frames = (struct sym_frame *)(bt + 1);
		memcpy(bt->frames, s->frames, n * sizeof(*bt->frames));
		model__backtrace(s->m, r->hdr.pid, r->hdr.tid, bt);
	}
	return 0;
}

struct warm_ctx {
	struct symbolizer *sym;
	uint32_t pid;
};

static int warm_map(const struct map_entry *e, void *ctx)
{
	struct warm_ctx *w = ctx;
	struct sym_frame f;

	if (e->perms[2] == 'x' && e->inode && e->path[0] == '/')
		symbolizer__user(w->sym, w->pid, e->start, &f);
	return 0;
}

/*
 * Has the symbolizer open every executable file of the process now, while
 * it is alive: a record decoded after the process exited can only use what
 * was opened before (a short program's last backtrace often is such a
 * record). One lookup per mapped file does it.
 */
static void warm(struct stacks *s, uint32_t pid)
{
	struct warm_ctx w = { .sym = s->sym, .pid = pid };

	procfs__for_each_map(pid, warm_map, &w);
	hmap__put(&s->warm, pid, 1);
}

void stacks__proc_changed(struct stacks *s, uint32_t pid)
{
	if (!s)
		return;
	symbolizer__invalidate(s->sym, pid);
	warm(s, pid);
}

void stacks__proc_seen(struct stacks *s, uint32_t pid)
{
	if (s && !hmap__get(&s->warm, pid))
		warm(s, pid);
}

/*
 * The exit record comes through the API ring, the process's last samples
 * through the samples ring, which the consumer may drain later: the
 * symbolizer hears of the exit only after both rings were drained.
 */
void stacks__proc_exit(struct stacks *s, uint32_t pid)
{
	if (!s)
		return;
	hmap__del(&s->warm, pid, NULL);
	if (s->nexited == s->capexited) {
		size_t nc = s->capexited ? 2 * s->capexited : 16;
		uint32_t *n = realloc(s->exited, nc * sizeof(*n));

		if (!n)
			return;	/* the symbolizer keeps that process's state */
		s->exited = n;
		s->capexited = nc;
	}
	s->exited[s->nexited++] = pid;
}

void stacks__drained(struct stacks *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->nexited; i++)
		symbolizer__proc_exit(s->sym, s->exited[i]);
	s->nexited = 0;
}

const struct stacks_stats *stacks__stats(const struct stacks *s)
{
	return &s->st;
}

struct symbolizer *stacks__symbolizer(struct stacks *s)
{
	return s->sym;
}

void stacks__summary(struct stacks *s, uint64_t backtrace_ns, FILE *f)
{
	const struct stacks_stats *st = &s->st;

	if (!st->hz && backtrace_ns == UINT64_MAX)
		return;
	fprintf(f, "\n** CPU samples:\n\n");
	if (st->hz)
		fprintf(f, "   %" PRIu64 " samples at %u Hz on %d CPU(s)\n", st->samples, st->hz,
			st->cpus);
	else
		fprintf(f, "   sampling off (--sample-hz 0)\n");
	if (backtrace_ns != UINT64_MAX)
		fprintf(f, "   backtraces: %" PRIu64 " API calls >= %.3f ms\n", st->backtraces,
			backtrace_ns / 1e6);
	if (st->samples + st->backtraces)
		fprintf(f, "   truncated stacks: %" PRIu64 " of %" PRIu64
			"; unsymbolized frames: %" PRIu64 " of %" PRIu64 "\n",
			st->truncated, st->samples + st->backtraces, st->unsymbolized, st->frames);
	if (st->python_frames)
		fprintf(f, "   Python frames mixed in: %" PRIu64 "\n", st->python_frames);
	/* hmap indexes are stale after sorting: counting is over. */
	hmap__free(&s->self);
	sumtab__cpu_self(f, SUMTAB_TEXT, s->tops, s->ntops, st->samples);
}

/* ---------------------------------------------------------------- source */

struct stacks_src {
	struct pfstacks *pf;
	bool symbols;	/* anything needs the targets' symbols */
};

static int stacks_init(struct session *s, void **state)
{
	const struct record_opts *o = s->o;
	struct stacks_src *st = calloc(1, sizeof(*st));

	if (!st) {
		err("out of memory");
		return -ENOMEM;
	}
	*state = st;
	/* Host stubs of runtime launches are named by the symbolizer too. */
	st->symbols = o->sample_hz || o->backtrace_threshold_ns != THRESHOLD_OFF ||
		      (o->trace_mask & TRACE_BIT(LIB_CUDART));
	s->stacks = stacks__new(&s->model);
	if (!s->stacks) {
		err("starting the symbolizer: %s", strerror(errno));
		return -errno ? -errno : -ENOMEM;
	}
	s->model.sym = stacks__symbolizer(s->stacks);
	if (s->pt) {
		struct sink sk;

		st->pf = pfstacks__new(s->pt);
		if (!st->pf) {
			err("out of memory");
			return -ENOMEM;
		}
		sk = pfstacks__sink(st->pf);
		model__add_sink(&s->model, &sk);
	}
	return 0;
}

static int stacks_prepare(struct session *s, void *state)
{
	const struct record_opts *o = s->o;
	struct cgbpf_bpf *skel = s->skel;
	uint64_t ring = bpf_map__max_entries(skel->maps.events);

	(void)state;
	skel->rodata->backtrace_ns = o->backtrace_threshold_ns == THRESHOLD_OFF ? 0 :
				     o->backtrace_threshold_ns ? o->backtrace_threshold_ns : 1;
	skel->rodata->stack_copy = o->stack_copy;
	bpf_program__set_autoload(skel->progs.sample, o->sample_hz > 0);
	/* Samples of 2 CPUs at 99 Hz fill ~2 MB/s with 8 KiB stack copies. */
	return bpf_map__set_max_entries(skel->maps.samples,
					o->sample_hz ? (ring / 4 > (8u << 20) ? ring / 4 : 8u << 20) :
					4096);
}

static int stacks_start(struct session *s, void *state)
{
	int err;

	(void)state;
	if (!s->o->sample_hz)
		return 0;
	/* Samples carry kernel stacks: the kernel's symbols are read now, on
	 * a thread of their own, not at the first sample on the consumer's. */
	stacks__prefetch_kernel(s->stacks);
	if (ring_buffer__add(s->rb, bpf_map__fd(s->skel->maps.samples), s->handle, s)) {
		err = -errno ? -errno : -ENOMEM;
		err("setting up the samples' ring buffer: %s", strerror(-err));
		return err;
	}
	return stacks__start_sampling(s->stacks, s->skel->progs.sample, s->o->sample_hz);
}

static int stacks_rec(struct session *s, void *state, const void *data, size_t size)
{
	(void)state;
	return stacks__record(s->stacks, data, size) ? -EINVAL : 0;
}

static void stacks_proc(struct session *s, void *state, enum src_proc ev, uint32_t pid,
			uint64_t ts)
{
	struct stacks_src *st = state;

	(void)ts;
	if (ev == SRC_PROC_EXIT)
		stacks__proc_exit(s->stacks, pid);
	else if (st->symbols && ev == SRC_PROC_SEEN)
		stacks__proc_seen(s->stacks, pid);
	else if (st->symbols)
		stacks__proc_changed(s->stacks, pid);
}

static void stacks_tick(struct session *s, void *state, uint64_t now)
{
	(void)state;
	(void)now;
	stacks__drained(s->stacks);
}

/* A window's end: its file waits for one more drain of the rings, which
 * brings the samples up to the window's end (the samples' ring is read
 * after the record that ended it). */
static bool stacks_window_close(struct session *s, void *state, uint32_t pid)
{
	(void)state;
	(void)pid;
	return s->o->sample_hz > 0;
}

/* The "CPU samples" section; ctx is the session. */
static void stacks_print(const void *ctx, const uint64_t *drops, FILE *f)
{
	const struct session *s = ctx;

	(void)drops;
	stacks__summary(s->stacks, s->o->backtrace_threshold_ns, f);
}

static void stacks_finish(struct session *s, void *state, struct capture_info *ci)
{
	const struct stacks_stats *st = stacks__stats(s->stacks);
	char v[32];

	(void)state;
	summary__add_section(ci, SUMMARY_CPU, stacks_print, s);
	/* For `cgbpf stats`: what the samples in the trace do not say. */
	if (s->pt && st->hz) {
		snprintf(v, sizeof(v), "%u", st->hz);
		pftrace__attribute(s->pt, "cgbpf.sample_hz", v);
		snprintf(v, sizeof(v), "%d", st->cpus);
		pftrace__attribute(s->pt, "cgbpf.sample_cpus", v);
	}
}

static void stacks_fini(struct session *s, void *state)
{
	struct stacks_src *st = state;

	/* It holds the sampler's links: before the BPF object goes. */
	stacks__free(s->stacks);
	s->stacks = NULL;
	s->model.sym = NULL;
	if (st)
		pfstacks__free(st->pf);
	free(st);
}

const struct source src_stacks = {
	.name = "stacks",
	.types = { REC_STACK_SAMPLE, REC_STACK_BT },
	.init = stacks_init,
	.prepare = stacks_prepare,
	.start = stacks_start,
	.record = stacks_rec,
	.proc = stacks_proc,
	.tick = stacks_tick,
	.window_close = stacks_window_close,
	.finish = stacks_finish,
	.fini = stacks_fini,
};
