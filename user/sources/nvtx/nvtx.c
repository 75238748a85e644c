// SPDX-License-Identifier: MIT
/*
 * sources/nvtx/: NVTX ranges, marks and names, from the NVTX v2 library's
 * probes and the injection library's (NVTX v3): the API library's
 * descriptor, the `nvtx` source and the nvtx_sum table.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include "cgbpf.skel.h"
#include "nvtx_rec.h"
#include "core/apilib.h"
#include "core/attach.h"
#include "core/inject.h"
#include "core/opts.h"
#include "core/session.h"
#include "core/source.h"
#include "core/ustr.h"
#include "lib/elf/elfsym.h"
#include "lib/hmap.h"
#include "lib/log.h"
#include "lib/stats.h"
#include "lib/sumtab.h"
#include "out/pfsink.h"
#include "out/summary.h"
#include "sources/nvtx/nvtx.h"

#define NV_DEPTH 64		/* open push/pop ranges per thread */
#define NV_SLOTS 64		/* concurrently open start/end ranges per process */
#define NV_MAX_ANNOTS 6

enum { STYLE_PUSHPOP, STYLE_STARTEND };

struct nv_open {
	uint64_t ts;
	uint64_t domain;
	uint64_t id;		/* start/end: the range id */
	uint32_t slot;		/* start/end: the async track */
	char *name;
	uint32_t win;		/* the capture window it began in; UINT32_MAX: outside */
};

struct nv_thread {
	int depth;
	struct nv_open stack[NV_DEPTH];
	struct nv_open *pending;	/* v2: a start whose id comes at its return */
	char *pending_domain;		/* v2: a domain whose handle comes at its return */
};

struct nv_proc {
	uint32_t pid;
	struct hmap domains;	/* handle -> char * name */
	struct hmap cats;	/* hash(domain, id) -> char * name */
	struct hmap open;	/* start/end id -> struct nv_open * */
	uint64_t slots;		/* bitmap of async tracks in use */
	uint64_t described;	/* bitmap of async tracks described */
};

struct nv_row {
	char *domain, *name;
	int style;
	struct stats st;
};

struct nvtx {
	struct model *m;
	struct pftrace *pt;
	struct hmap procs;	/* pid -> struct nv_proc * */
	struct hmap threads;	/* tid -> struct nv_thread * */
	struct hmap rows;	/* hash -> struct nv_row * (summary) */
	uint64_t unmatched;	/* pops and ends whose push/start came before attach */
	uint64_t marks;
};

/* ------------------------------------------------------------ attach */

static const char *const probes[] = {
	"push", "pop", "start", "end", "mark", "name_thread", "name_category",
	"domain_create", "domain_destroy", "register_string",
};

/* Legacy NVTX v2: libnvToolsExt's exported functions, each with its own
 * program (bpf/nvtx.bpf.c); starts and domain creations also at return. */
static int attach_v2(struct attach *a, const char *path, const char *display)
{
	struct cgbpf_bpf *k = attach__skel(a);
	const struct { const char *sym; struct bpf_program *prog; bool ret; } v2[] = {
		{ "nvtxRangePushA", k->progs.nvtx2_push_a },
		{ "nvtxRangePushW", k->progs.nvtx2_push_w },
		{ "nvtxRangePushEx", k->progs.nvtx2_push_ex },
		{ "nvtxRangePop", k->progs.nvtx2_pop },
		{ "nvtxMarkA", k->progs.nvtx2_mark_a },
		{ "nvtxMarkW", k->progs.nvtx2_mark_w },
		{ "nvtxMarkEx", k->progs.nvtx2_mark_ex },
		{ "nvtxRangeStartA", k->progs.nvtx2_start_a },
		{ "nvtxRangeStartA", k->progs.nvtx2_started, true },
		{ "nvtxRangeStartW", k->progs.nvtx2_start_w },
		{ "nvtxRangeStartW", k->progs.nvtx2_started, true },
		{ "nvtxRangeStartEx", k->progs.nvtx2_start_ex },
		{ "nvtxRangeStartEx", k->progs.nvtx2_started, true },
		{ "nvtxRangeEnd", k->progs.nvtx2_end },
		{ "nvtxNameOsThreadA", k->progs.nvtx2_name_thread_a },
		{ "nvtxDomainCreateA", k->progs.nvtx2_domain_create_a },
		{ "nvtxDomainCreateA", k->progs.nvtx2_domain_created, true },
		{ "nvtxDomainRangePushEx", k->progs.nvtx2_domain_push_ex },
		{ "nvtxDomainRangePop", k->progs.nvtx2_domain_pop },
		{ "nvtxDomainMarkEx", k->progs.nvtx2_domain_mark_ex },
		{ "nvtxDomainRangeStartEx", k->progs.nvtx2_domain_start_ex },
		{ "nvtxDomainRangeStartEx", k->progs.nvtx2_started, true },
		{ "nvtxDomainRangeEnd", k->progs.nvtx2_domain_end },
	};
	struct elfsym *es = elfsym__open(path);
	int n = 0, err = 0;

	if (!es)
		return -errno;
	for (size_t i = 0; i < sizeof(v2) / sizeof(v2[0]) && !err; i++) {
		uint64_t off;

		if (elfsym__offset(es, v2[i].sym, &off)) {
			dbg("%s: no %s", display, v2[i].sym);
			continue;
		}
		err = attach__uprobe(a, v2[i].prog, path, off, v2[i].ret);
		n += !err;
	}
	elfsym__close(es);
	return err ? err : n;
}

static int attach_file(struct attach *a, const char *path, const char *display)
{
	const char *base = strrchr(display, '/');
	struct cgbpf_bpf *skel = attach__skel(a);
	struct bpf_program *progs[] = {
		skel->progs.nvtx_push, skel->progs.nvtx_pop, skel->progs.nvtx_start,
		skel->progs.nvtx_end, skel->progs.nvtx_mark, skel->progs.nvtx_name_thread,
		skel->progs.nvtx_name_category, skel->progs.nvtx_domain_create,
		skel->progs.nvtx_domain_destroy, skel->progs.nvtx_register_string,
	};
	int n = 0;

	base = base ? base + 1 : display;
	if (!strncmp(base, "libnvToolsExt.so", 16))
		return attach_v2(a, path, display);
	if (!inject__is_lib(base))
		return -ENOSYS;
	for (size_t i = 0; i < sizeof(probes) / sizeof(probes[0]); i++) {
		int err = attach__usdt(a, progs[i], path, "cgbpf_nvtx", probes[i]);

		if (err)
			return err;
		n++;
	}
	return n;
}

/*
 * cgbpf's own injection library is probed for every process that maps it,
 * not per target: libbpf 1.1's USDT attach frees twice when the process
 * exits while its probes go in (a short-lived fork: seen under load). Only
 * processes that chose it (NVTX_INJECTION64_PATH) map it, and BPF keeps
 * the targets' events alone.
 */
static bool shared_file(const char *display)
{
	const char *base = strrchr(display, '/');

	return inject__is_lib(base ? base + 1 : display);
}

static const char *func_name(uint16_t func)
{
	return "nvtx?";
}

static uint64_t cookie(uint16_t func)
{
	return CK_MAKE(LIB_NVTX, func, PK_REGS, 0, 0);
}

static void nop(struct model *m, struct thread *t, struct call *c)
{
}

static const struct lib_ops ops = {
	.name = "nvtx",
	.func_name = func_name,
	.enter = nop,
	.exit = nop,
};

/* The injection library (NVTX v3 applications, USDT) and the legacy
 * libnvToolsExt of NVTX v2 applications (uprobes). */
static const char *const watch[] = { "libcgbpf-inject.so", "libcgbpf-nvtx.so", "libnvToolsExt.so",
				      NULL };

const struct api_lib nvtx_lib = {
	.id = LIB_NVTX,
	.name = "nvtx",
	.title = "NVTX",
	.watch = watch,
	.nfuncs = 0,
	.symbol = func_name,
	.cookie = cookie,
	.ops = &ops,
	.attach_file = attach_file,
	.shared_file = shared_file,
};

/* ------------------------------------------------------------ state */

struct nvtx *nvtx__new(struct model *m, struct pftrace *pt)
{
	struct nvtx *n = calloc(1, sizeof(*n));

	if (n) {
		n->m = m;
		n->pt = pt;
	}
	return n;
}

static void free_names(struct hmap *h)
{
	uint64_t v;

	for (size_t it = 0; hmap__next(h, &it, NULL, &v);)
		free((void *)(uintptr_t)v);
	hmap__free(h);
}

static void free_proc(struct nv_proc *p)
{
	uint64_t v;

	free_names(&p->domains);
	free_names(&p->cats);
	for (size_t it = 0; hmap__next(&p->open, &it, NULL, &v);) {
		struct nv_open *o = (void *)(uintptr_t)v;

		free(o->name);
		free(o);
	}
	hmap__free(&p->open);
	free(p);
}

static void free_thread(struct nv_thread *t)
{
	for (int i = 0; i < t->depth && i < NV_DEPTH; i++)
		free(t->stack[i].name);
	if (t->pending) {
		free(t->pending->name);
		free(t->pending);
	}
	free(t->pending_domain);
	free(t);
}

/* v2 wide messages arrive as UTF-32 code units: to UTF-8, in place
 * (UTF-8 never needs more than the 4 bytes a code unit took). */
static void utf32_to_utf8(char *s, uint16_t len)
{
	char out[REC_NVTX_STR];
	size_t o = 0;

	for (size_t i = 0; i + 4 <= len && o + 5 < sizeof(out); i += 4) {
		uint32_t c;

		memcpy(&c, s + i, 4);
		if (c < 0x80) {
			out[o++] = c;
		} else if (c < 0x800) {
			out[o++] = 0xc0 | c >> 6;
			out[o++] = 0x80 | (c & 0x3f);
		} else if (c < 0x10000) {
			out[o++] = 0xe0 | c >> 12;
			out[o++] = 0x80 | ((c >> 6) & 0x3f);
			out[o++] = 0x80 | (c & 0x3f);
		} else if (c < 0x110000) {
			out[o++] = 0xf0 | c >> 18;
			out[o++] = 0x80 | ((c >> 12) & 0x3f);
			out[o++] = 0x80 | ((c >> 6) & 0x3f);
			out[o++] = 0x80 | (c & 0x3f);
		}
	}
	memcpy(s, out, o);
	s[o] = 0;
}

void nvtx__free(struct nvtx *n)
{
	uint64_t v;

	if (!n)
		return;
	for (size_t it = 0; hmap__next(&n->procs, &it, NULL, &v);)
		free_proc((void *)(uintptr_t)v);
	for (size_t it = 0; hmap__next(&n->threads, &it, NULL, &v);)
		free_thread((void *)(uintptr_t)v);
	for (size_t it = 0; hmap__next(&n->rows, &it, NULL, &v);) {
		struct nv_row *r = (void *)(uintptr_t)v;

		stats__free(&r->st);
		free(r->domain);
		free(r->name);
		free(r);
	}
	hmap__free(&n->procs);
	hmap__free(&n->threads);
	hmap__free(&n->rows);
	free(n);
}

static struct nv_proc *proc_of(struct nvtx *n, uint32_t pid)
{
	uint64_t *v = hmap__get(&n->procs, pid);
	struct nv_proc *p;

	if (v)
		return (void *)(uintptr_t)*v;
	p = calloc(1, sizeof(*p));
	if (!p || hmap__put(&n->procs, pid, (uintptr_t)p)) {
		free(p);
		return NULL;
	}
	p->pid = pid;
	return p;
}

static struct nv_thread *thread_of(struct nvtx *n, uint32_t tid)
{
	uint64_t *v = hmap__get(&n->threads, tid);
	struct nv_thread *t;

	if (v)
		return (void *)(uintptr_t)*v;
	t = calloc(1, sizeof(*t));
	if (!t || hmap__put(&n->threads, tid, (uintptr_t)t)) {
		free(t);
		return NULL;
	}
	return t;
}

static void put_name(struct hmap *h, uint64_t key, const char *name)
{
	char *s = strdup(name);
	uint64_t old;

	if (!s)
		return;
	if (hmap__del(h, key, &old))
		free((void *)(uintptr_t)old);
	if (hmap__put(h, key, (uintptr_t)s))
		free(s);
}

/*
 * A domain's name: from its creation record, or, for a domain created
 * before cgbpf attached, read through the handle (the injection library's
 * handles point to the name, inject/cgbpf_nvtx_probes.h).
 */
static const char *domain_name(struct nv_proc *p, uint64_t handle)
{
	uint64_t *v;
	char buf[REC_NVTX_STR];
	struct iovec local = { buf, sizeof(buf) - 1 }, remote = { (void *)(uintptr_t)handle,
								 sizeof(buf) - 1 };
	ssize_t got;

	if (!handle)
		return "NVTX";
	v = hmap__get(&p->domains, handle);
	if (v)
		return (const char *)(uintptr_t)*v;
	got = process_vm_readv(p->pid, &local, 1, &remote, 1, 0);
	if (got <= 0)
		snprintf(buf, sizeof(buf), "domain 0x%" PRIx64, handle);
	else
		buf[got < (ssize_t)sizeof(buf) ? got : (ssize_t)sizeof(buf) - 1] = 0;
	put_name(&p->domains, handle, buf);
	v = hmap__get(&p->domains, handle);
	return v ? (const char *)(uintptr_t)*v : "?";
}

static uint64_t cat_key(uint64_t domain, uint64_t id)
{
	uint64_t k[2] = { domain, id };

	return hash__bytes(k, sizeof(k));
}

/* ------------------------------------------------------------ trace */

struct annots {
	struct pf_annot a[NV_MAX_ANNOTS];
	int n;
	char color[16], payload[40], cat[24];
};

static void build_annots(struct nv_proc *p, const struct rec_nvtx *r, struct annots *an)
{
	an->n = 0;
	if (r->color_type == 1) {
		/* ARGB: the alpha channel is not a color a viewer can show. */
		snprintf(an->color, sizeof(an->color), "#%06x", r->color & 0xffffff);
		an->a[an->n++] = (struct pf_annot){ .name = "color", .type = PA_STR, .s = an->color };
	}
	if (r->category) {
		uint64_t *v = hmap__get(&p->cats, cat_key(r->domain, r->category));

		if (v) {
			an->a[an->n++] = (struct pf_annot){ .name = "category", .type = PA_STR,
							    .s = (const char *)(uintptr_t)*v };
		} else {
			an->a[an->n++] = (struct pf_annot){ .name = "category", .type = PA_UINT,
							    .u = r->category };
		}
	}
	switch (r->payload_type) {
	case 1:	/* u64 */
	case 4:	/* u32 */
		an->a[an->n++] = (struct pf_annot){ .name = "payload", .type = PA_UINT,
						    .u = r->payload };
		break;
	case 2:	/* i64 */
		an->a[an->n++] = (struct pf_annot){ .name = "payload", .type = PA_INT,
						    .i = (int64_t)r->payload };
		break;
	case 5:	/* i32 */
		an->a[an->n++] = (struct pf_annot){ .name = "payload", .type = PA_INT,
						    .i = (int32_t)r->payload };
		break;
	case 3: {	/* double */
		double d;

		memcpy(&d, &r->payload, sizeof(d));
		snprintf(an->payload, sizeof(an->payload), "%.17g", d);
		an->a[an->n++] = (struct pf_annot){ .name = "payload", .type = PA_STR,
						    .s = an->payload };
		break;
	}
	case 6: {	/* float */
		uint32_t bits = (uint32_t)r->payload;
		float f;

		memcpy(&f, &bits, sizeof(f));
		snprintf(an->payload, sizeof(an->payload), "%.9g", f);
		an->a[an->n++] = (struct pf_annot){ .name = "payload", .type = PA_STR,
						    .s = an->payload };
		break;
	}
	}
}

static struct pfseq *seq(struct nvtx *n, uint32_t pid, uint32_t tid, uint64_t ts)
{
	struct thread *t;

	if (!n->pt || model__muted_pid(n->m, pid))
		return NULL;
	t = model__thread(n->m, pid, tid);
	return t ? pfsink__seq(n->pt, t, ts) : NULL;
}

static void count(struct nvtx *n, const char *domain, const char *name, int style, uint64_t dur)
{
	char key[2 * REC_NVTX_STR + 4];
	uint64_t h, *v;
	struct nv_row *r;

	snprintf(key, sizeof(key), "%d\x1f%s\x1f%s", style, domain, name);
	for (h = hash__bytes(key, strlen(key)); (v = hmap__get(&n->rows, h)); h++) {
		r = (void *)(uintptr_t)*v;
		if (r->style == style && !strcmp(r->domain, domain) && !strcmp(r->name, name))
			goto found;
	}
	r = calloc(1, sizeof(*r));
	if (!r)
		return;
	r->domain = strdup(domain);
	r->name = strdup(name);
	r->style = style;
	if (!r->domain || !r->name || hmap__put(&n->rows, h, (uintptr_t)r)) {
		free(r->domain);
		free(r->name);
		free(r);
		return;
	}
found:
	stats__add(&r->st, dur);
}

/* Opens range o under id. A range still open under the same id (its end
 * was lost, or the process reuses ids) is dropped: the map held the only
 * pointer to it. 0 or -ENOMEM. */
static int put_open(struct nvtx *n, struct nv_proc *p, uint64_t id, struct nv_open *o)
{
	uint64_t v;

	if (hmap__del(&p->open, id, &v)) {
		struct nv_open *old = (void *)(uintptr_t)v;

		if (old->slot != o->slot)
			p->slots &= ~(1ull << old->slot);
		free(old->name);
		free(old);
		n->unmatched++;
	}
	return hmap__put(&p->open, id, (uintptr_t)o);
}

/* The message or name of r: the string in the record, or, when r points
 * to one it could not carry (wide, v2, or not yet paged in), that string
 * read from the process into wide (len bytes). */
static const char *record_text(struct nvtx *n, const struct rec_nvtx *r, char *wide, size_t len)
{
	const struct rec_hdr *h = &r->hdr;
	ssize_t got;

	if (!r->msg)
		return r->str;
	if (r->msg_kind == NV_MSG_UTF32) {
		struct iovec local = { wide, len - 4 };
		struct iovec remote = { (void *)(uintptr_t)r->msg, len - 4 };
		uint16_t units = 0;

		got = process_vm_readv(h->pid, &local, 1, &remote, 1, 0);
		if (got > 0) {
			memset(wide + got, 0, 4);
			while (units + 4 <= got && memcmp(wide + units, "\0\0\0\0", 4))
				units += 4;
			utf32_to_utf8(wide, units);
		}
	} else {
		got = ustr__read(h->pid, r->msg, wide, len);
	}
	if (got > 0 && wide[0])
		return wide;
	if (got <= 0) {
		/* Gone (it exited right after the call) or not memory:
		 * say so rather than show a blank. */
		const char *text = ustr__unreadable(r->msg, wide, len);

		n->m->strings_unreadable++;
		return text;
	}
	return r->str;
}

/* The window a range opening now in pid belongs to; UINT32_MAX while pid
 * is muted. */
static uint32_t open_window(struct nvtx *n, uint32_t pid)
{
	return model__muted_pid(n->m, pid) ? UINT32_MAX : model__window_pid(n->m, pid);
}

/* Whether range o, ending now in pid, began in the current window and pid
 * is not muted: else its begin is not in the file. */
static bool begun_here(struct nvtx *n, const struct nv_open *o, uint32_t pid)
{
	return o->win == model__window_pid(n->m, pid) && !model__muted_pid(n->m, pid);
}

/* nvtxRangePush: a slice on the thread's own track, kept on its stack. */
static void on_push(struct nvtx *n, struct nv_proc *p, const struct rec_nvtx *r, const char *msg)
{
	const struct rec_hdr *h = &r->hdr;
	struct nv_thread *t = thread_of(n, h->tid);
	struct annots an;
	struct pfseq *s;

	if (!t)
		return;
	/* A capture range opens before its own slice is written. */
	if (n->m->range)
		n->m->range(n->m->range_ctx, true, h->pid, h->tid, h->ts,
			    domain_name(p, r->domain), msg);
	s = seq(n, h->pid, h->tid, h->ts);
	if (t->depth < NV_DEPTH) {
		struct nv_open *o = &t->stack[t->depth];

		o->ts = h->ts;
		o->domain = r->domain;
		o->name = strdup(msg);
		o->win = open_window(n, h->pid);
	}
	t->depth++;
	if (s) {
		build_annots(p, r, &an);
		pftrace__begin_cat(n->pt, s, h->ts, domain_name(p, r->domain), msg, an.a, an.n);
	}
}

/* nvtxRangePop: ends the thread's innermost pushed range. */
static void on_pop(struct nvtx *n, struct nv_proc *p, const struct rec_nvtx *r)
{
	const struct rec_hdr *h = &r->hdr;
	struct nv_thread *t = thread_of(n, h->tid);
	struct pfseq *s;

	if (!t || !t->depth) {
		n->unmatched++;
		return;
	}
	t->depth--;
	s = seq(n, h->pid, h->tid, h->ts);
	if (t->depth < NV_DEPTH) {
		struct nv_open *o = &t->stack[t->depth];
		bool in = begun_here(n, o, h->pid);

		if (!in)
			s = NULL;
		if (in)
			count(n, domain_name(p, o->domain), o->name ? o->name : "?",
			      STYLE_PUSHPOP, h->ts - o->ts);
		if (s)
			pftrace__end(n->pt, s, h->ts, NULL, 0);
		if (n->m->range)
			n->m->range(n->m->range_ctx, false, h->pid, h->tid, h->ts,
				    domain_name(p, o->domain), o->name ? o->name : "?");
		free(o->name);
		o->name = NULL;
	} else if (s) {
		pftrace__end(n->pt, s, h->ts, NULL, 0);
	}
}

/* nvtxRangeStart: a slice on the lowest free async track of the process,
 * open under its id until its end, on whichever thread. */
static void on_start(struct nvtx *n, struct nv_proc *p, const struct rec_nvtx *r, const char *msg)
{
	const struct rec_hdr *h = &r->hdr;
	struct nv_open *o = calloc(1, sizeof(*o));
	struct nv_thread *t;
	struct annots an;
	struct pfseq *s;
	uint64_t uuid;
	int slot;

	if (!o)
		return;
	/* The lowest free async track, so concurrent ranges never share one. */
	slot = p->slots == UINT64_MAX ? NV_SLOTS - 1 : __builtin_ctzll(~p->slots);
	p->slots |= 1ull << slot;
	if (n->m->range)
		n->m->range(n->m->range_ctx, true, h->pid, h->tid, h->ts,
			    domain_name(p, r->domain), msg);
	o->ts = h->ts;
	o->domain = r->domain;
	o->id = r->id;
	o->slot = slot;
	o->name = strdup(msg);
	o->win = open_window(n, h->pid);
	if (!r->id) {
		/* v2: the id is the return value, in the next record. */
		t = thread_of(n, h->tid);
		if (!t) {
			free(o->name);
			free(o);
			return;
		}
		if (t->pending) {
			free(t->pending->name);
			free(t->pending);
		}
		t->pending = o;
	} else if (put_open(n, p, r->id, o)) {
		free(o->name);
		free(o);
		return;
	}
	s = seq(n, h->pid, h->tid, h->ts);
	if (!s)
		return;
	uuid = UUID_NVTX((uint64_t)h->pid << 8 | slot);
	if (!(p->described & (1ull << slot))) {
		char name[32];

		snprintf(name, sizeof(name), "NVTX ranges %d", slot + 1);
		pftrace__track(n->pt, uuid, UUID_PROCESS(h->pid), name);
		p->described |= 1ull << slot;
	}
	build_annots(p, r, &an);
	pftrace__begin_on(n->pt, s, h->ts, uuid, domain_name(p, r->domain), msg, an.a, an.n);
}

/* v2 nvtxRangeStart's return: the id of the range the thread started. */
static void on_started(struct nvtx *n, struct nv_proc *p, const struct rec_nvtx *r)
{
	struct nv_thread *t = thread_of(n, r->hdr.tid);

	if (!t || !t->pending)
		return;
	t->pending->id = r->id;
	if (put_open(n, p, r->id, t->pending)) {
		p->slots &= ~(1ull << t->pending->slot);
		free(t->pending->name);
		free(t->pending);
	}
	t->pending = NULL;
}

/* nvtxRangeEnd: ends the range open under r's id. */
static void on_end(struct nvtx *n, struct nv_proc *p, const struct rec_nvtx *r)
{
	const struct rec_hdr *h = &r->hdr;
	struct nv_open *o;
	struct pfseq *s;
	uint64_t v;
	bool in;

	if (!hmap__del(&p->open, r->id, &v)) {
		n->unmatched++;
		return;
	}
	o = (void *)(uintptr_t)v;
	p->slots &= ~(1ull << o->slot);
	/* Ended on whichever thread: its sequence, the range's track. */
	s = seq(n, h->pid, h->tid, h->ts);
	in = begun_here(n, o, h->pid);
	if (!in)
		s = NULL;
	if (in)
		count(n, domain_name(p, o->domain), o->name ? o->name : "?",
		      STYLE_STARTEND, h->ts - o->ts);
	if (s)
		pftrace__end_on(n->pt, s, h->ts, UUID_NVTX((uint64_t)h->pid << 8 | o->slot),
				NULL, 0);
	if (n->m->range)
		n->m->range(n->m->range_ctx, false, h->pid, h->tid, h->ts,
			    domain_name(p, o->domain), o->name ? o->name : "?");
	free(o->name);
	free(o);
}

/* nvtxMark: an instant on the thread's track, its domain as an arg. */
static void on_mark(struct nvtx *n, struct nv_proc *p, const struct rec_nvtx *r, const char *msg)
{
	const struct rec_hdr *h = &r->hdr;
	struct pfseq *s;
	struct annots an;

	n->marks++;
	s = seq(n, h->pid, h->tid, h->ts);
	if (!s)
		return;
	build_annots(p, r, &an);
	if (an.n < NV_MAX_ANNOTS)
		an.a[an.n++] = (struct pf_annot){ .name = "domain", .type = PA_STR,
						  .s = domain_name(p, r->domain) };
	pftrace__instant(n->pt, s, h->ts, 0, msg, an.a, an.n);
}

void nvtx__record(struct nvtx *n, const struct rec_nvtx *r, size_t size)
{
	const struct rec_hdr *h = &r->hdr;
	struct nv_proc *p = proc_of(n, h->pid);
	char wide[REC_NVTX_STR];
	const char *text, *msg;	/* the message or name; msg: never blank */
	struct nv_thread *t;

	if (!p)
		return;
	text = record_text(n, r, wide, sizeof(wide));
	msg = text[0] ? text : "(unnamed)";
	switch (r->probe) {
	case NV_DOMAIN_CREATE:
		if (r->domain) {
			put_name(&p->domains, r->domain, text);
		} else if ((t = thread_of(n, h->tid))) {
			/* v2: the handle comes with the return. */
			free(t->pending_domain);
			t->pending_domain = strdup(text);
		}
		break;
	case NV_DOMAIN_CREATED:
		t = thread_of(n, h->tid);
		if (t && t->pending_domain) {
			put_name(&p->domains, r->domain, t->pending_domain);
			free(t->pending_domain);
			t->pending_domain = NULL;
		}
		break;
	case NV_STARTED:
		on_started(n, p, r);
		break;
	case NV_DOMAIN_DESTROY:
		/* Keep the name: ranges of the domain may still end later. */
		break;
	case NV_NAME_CATEGORY:
		put_name(&p->cats, cat_key(r->domain, r->category), text);
		break;
	case NV_NAME_THREAD:
		if (r->id)
			model__thread_name(n->m, h->pid, r->id, text);
		break;
	case NV_REGISTER_STRING:
		break;	/* messages are read through the handle at use */
	case NV_PUSH:
		on_push(n, p, r, msg);
		break;
	case NV_POP:
		on_pop(n, p, r);
		break;
	case NV_START:
		on_start(n, p, r, msg);
		break;
	case NV_END:
		on_end(n, p, r);
		break;
	case NV_MARK:
		on_mark(n, p, r, msg);
		break;
	}
}

void nvtx__proc_exit(struct nvtx *n, uint32_t pid, uint64_t ts)
{
	uint64_t v;

	if (hmap__del(&n->procs, pid, &v))
		free_proc((void *)(uintptr_t)v);
}

void nvtx__finish(struct nvtx *n, uint64_t ts)
{
}

/* ------------------------------------------------------------ summary */

void nvtx__print(const void *ctx, const uint64_t *drops, FILE *f)
{
	const struct nvtx *n = ctx;
	struct sumtab_row *rows;
	char **names;
	uint64_t v;
	size_t nr = 0;

	(void)drops;
	rows = calloc(n->rows.count ? n->rows.count : 1, sizeof(*rows));
	names = calloc(n->rows.count ? n->rows.count : 1, sizeof(*names));
	if (!rows || !names) {
		free(rows);
		free(names);
		return;
	}
	for (size_t it = 0; hmap__next((struct hmap *)&n->rows, &it, NULL, &v);) {
		struct nv_row *r = (void *)(uintptr_t)v;
		bool dflt = !strcmp(r->domain, "NVTX");

		/* A range of another domain than the default: "domain:name". */
		if (asprintf(&names[nr], "%s%s%s", dflt ? "" : r->domain, dflt ? "" : ":",
			     r->name) < 0)
			names[nr] = NULL;
		rows[nr] = (struct sumtab_row){ .name = names[nr] ? names[nr] : r->name,
						.style = r->style == STYLE_PUSHPOP ? "PushPop" :
										     "StartEnd",
						.st = &r->st };
		nr++;
	}
	sumtab__nvtx(f, SUMTAB_TEXT, rows, nr, n->marks, n->unmatched);
	for (size_t i = 0; i < nr; i++)
		free(names[i]);
	free(names);
	free(rows);
}

/* ---------------------------------------------------------------- source */

static int nvtx_init(struct session *s, void **state)
{
	*state = nvtx__new(&s->model, s->pt);
	if (!*state) {
		err("out of memory");
		return -ENOMEM;
	}
	return 0;
}

/* NVTX v3 calls do nothing without a tool: give the command cgbpf's,
 * unless it brings its own. */
static void nvtx_spawn(struct session *s, void *state, const char *cmd)
{
	char inj[PATH_MAX];

	(void)state;
	if (!(s->o->trace_mask & TRACE_BIT(LIB_NVTX)) || getenv("NVTX_INJECTION64_PATH"))
		return;
	if (inject__path(inj, sizeof(inj)))
		setenv("NVTX_INJECTION64_PATH", inj, 1);
	else
		warn("libcgbpf-inject.so not found next to cgbpf: NVTX ranges of %s will "
		     "not be traced (docs/nvtx-inject.md)", cmd);
}

static int nvtx_rec(struct session *s, void *state, const void *data, size_t size)
{
	(void)s;
	nvtx__record(state, data, size);
	return 0;
}

static void nvtx_proc(struct session *s, void *state, enum src_proc ev, uint32_t pid, uint64_t ts)
{
	(void)s;
	if (ev == SRC_PROC_EXIT)
		nvtx__proc_exit(state, pid, ts);
}

static void nvtx_finish(struct session *s, void *state, struct capture_info *ci)
{
	if (s->o->trace_mask & TRACE_BIT(LIB_NVTX)) {
		const struct nvtx *n = state;
		char v[24];

		summary__add_section(ci, SUMMARY_LIB + LIB_NVTX, nvtx__print, state);
		/* The one nvtx_sum number the ranges in the trace do not tell. */
		snprintf(v, sizeof(v), "%" PRIu64, n->unmatched);
		if (s->pt)
			pftrace__attribute(s->pt, "cgbpf.nvtx_unmatched", v);
	}
}

static void nvtx_fini(struct session *s, void *state)
{
	(void)s;
	nvtx__free(state);
}

const struct source src_nvtx = {
	.name = "nvtx",
	.types = { REC_NVTX },
	.init = nvtx_init,
	.spawn = nvtx_spawn,
	.record = nvtx_rec,
	.proc = nvtx_proc,
	.finish = nvtx_finish,
	.fini = nvtx_fini,
};
