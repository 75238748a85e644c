// SPDX-License-Identifier: MIT
/*
 * sources/python/: Python call sites: this source, finding interpreters
 * (pyfind.c), code objects (pycode.c), the monitor's call-site table
 * (pysites.c), `check`'s view (pycheck.c), the offsets (pyoffsets.h).
 *
 * Python call sites (issue 12), the `python` event source: finds each
 * target's CPython (user/sources/python/pyfind.c) and tells the BPF frame readers
 * (bpf/python.bpf.h) where it is; turns their REC_PY_FRAMES records into
 * "file:line function" call sites (user/sources/python/pycode.c) that the call's slice
 * carries as arguments, "py" and, when the innermost frame is not the
 * user's own code, "py.user"; keeps the "Python call sites" summary
 * table; hands the frames of slow-call backtraces and CPU samples to the
 * stacks source for mixed stacks (user/sources/stacks/stacks.c), through
 * the model's stack_py hook.
 *
 * A record comes right before the record it belongs to on its thread
 * (bpf/pyframes_rec.h): a call's site waits in the thread's pending slot
 * until the model begins that call (the model's call_py hook).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "cgbpf.skel.h"
#include "pycode_rec.h"
#include "pyframes_rec.h"
#include "pysites_rec.h"
#include "core/attach.h"
#include "core/model.h"
#include "core/opts.h"
#include "core/session.h"
#include "core/source.h"
#include "lib/hmap.h"
#include "lib/log.h"
#include "lib/procfs.h"
#include "lib/stats.h"
#include "lib/sumtab.h"
#include "out/summary.h"
#include "sources/python/pycode.h"
#include "sources/python/pyfind.h"
#include "sources/python/pyoffsets.h"
#include "sources/python/pysites.h"

#define SITE_LEN 768		/* "file:line function" */
#define STACK_TEXT 8192		/* --python stack: the whole stack as one string */
#define RETRY_FAST_NS 2000000000ull	/* look for an interpreter often this long */
#define RETRY_MIN_NS 1000000ull		/* first again after 1 ms, then ever less often */
#define RETRY_SLOW_NS 1000000000ull	/* until once a second */
#define PROBES_PER_TICK 8
#define EXEC_WAIT_MS 50		/* the longest a python's loader is waited for at its exec */
#define RELOC_WAIT_MS 10	/* ... and for it to relocate libpython (then: next tick) */
#define TOP_SITES 15
#define INTERP_CHECK_NS 250000000ull	/* interpreters counted again this often */
#define INTERP_COUNT_MAX 1024
#define STACKS_MAX (64ull << 20)	/* bytes of distinct py.stack texts kept */
#define SITE_PEND_MAX 4096	/* monitor: threads with a site waiting for its REC_PY_SITE */

enum pyp_state { PYP_LOOKING, PYP_OK, PYP_REFUSED };

/* What cgbpf knows of one target's interpreter. */
struct pyp {
	uint32_t pid;
	enum pyp_state state;
	uint64_t first_ns, next_ns;	/* PYP_LOOKING: when to look again */
	uint64_t event_ns;		/* its last event read (exec, mapping, first call) */
	struct py_proc pp;
	struct py_info info;
	char why[256];			/* PYP_REFUSED: pyfind's reason */
	struct hmap codes;		/* code -> its class in the py_codes map */
	uint64_t records, unresolved;
	uint64_t exe;			/* exe_id() when found */
	unsigned interps, interps_max;	/* interpreters on its runtime's list: now, most seen */
	uint64_t interps_ns;		/* when counted */
	uint32_t gen;			/* this program's number in the capture (frames' key) */
	bool exited;			/* its process exited: the pid may come back, reused */
	struct uprobe *freed;		/* its code_dealloc probe (py_code_free) */
	char freed_why[160];		/* why there is none: said in the summary */
	bool reloc_said;		/* "found before its loader relocated it" */
};

/* One call site (interned text) and its calls. */
struct site {
	uint64_t calls, ns, launches, launch_ns;
	bool user;			/* its file is user code */
	bool stack_counted;		/* a py.stack text, in pysrc.stack_bytes */
	char text[];
};

/* The site whose text t is (t came from site_get()). */
static struct site *site_of(const char *t)
{
	return (struct site *)(t - offsetof(struct site, text));
}

/* The site of the call a thread enters next (PYR_CALL), or the frames of
 * its next backtrace / sample (PYR_BT, PYR_SAMPLE). */
struct pend {
	bool call;
	uint8_t lib;
	uint16_t func;
	const char *site, *user, *stack;
	int nframes;			/* bt / sample */
	uint8_t st_lib;			/* bt: the call's */
	uint16_t st_func;
	struct py_stack_frame frames[PY_FRAMES_MAX];
	bool has_bt, has_sample;
};

struct pysrc {
	struct session *s;
	uint8_t mode;
	struct pycode *pc;
	struct hmap procs;		/* pid -> struct pyp * */
	struct hmap pend;		/* tid -> struct pend * */
	struct hmap sites;		/* hash of text -> struct site * */
	struct hmap frames;		/* hash of (gen, code, lasti) -> struct site * */
	struct hmap multi;		/* hash of (gen, code): addresses that held several
					 * code objects (the frame cache is not used for them) */
	uint32_t gens;			/* the last pyp.gen given */
	int fd_procs, fd_codes, fd_codes_gen, fd_stat;
	uint64_t user_gen;		/* py_codes_gen's PY_GEN_USER slot */
	uint64_t orphans, unresolved, records;
	uint64_t codes, codes_bad;	/* REC_PY_CODE records taken, refused */
	uint64_t stat[PYS__COUNT];
	struct pysites *sites_out;	/* monitor --python-sites: where sampled sites go */
	struct hmap site_pend;		/* monitor: tid -> char * site of its next REC_PY_SITE */
	uint64_t site_samples, site_unresolved;
	uint64_t stack_bytes;		/* py.stack texts interned */
	uint64_t remarked;		/* user code marked again in py_codes */
	uint64_t stacks_dropped;	/* calls whose new py.stack was past STACKS_MAX */
	char stack_buf[STACK_TEXT];
};

static struct pyp *pyp_of(struct pysrc *ps, uint32_t pid)
{
	uint64_t *v = hmap__get(&ps->procs, pid);

	return v ? (void *)(uintptr_t)*v : NULL;
}

static struct pend *pend_of(struct pysrc *ps, uint32_t tid, bool create)
{
	uint64_t *v = hmap__get(&ps->pend, tid);
	struct pend *p;

	if (v)
		return (void *)(uintptr_t)*v;
	if (!create)
		return NULL;
	p = calloc(1, sizeof(*p));
	if (!p || hmap__put(&ps->pend, tid, (uintptr_t)p)) {
		free(p);
		return NULL;
	}
	return p;
}

/* The interned site of text: one copy per distinct text for the whole
 * capture (the trace's annotations point at it); with create false, only
 * one interned already. NULL on ENOMEM or when not there. */
static struct site *site_find(struct pysrc *ps, const char *text, bool create)
{
	uint64_t h = hash__bytes(text, strlen(text)), *v;
	struct site *st;

	/* A 64-bit hash collision between two call sites is not expected;
	 * should one happen, the later text probes on. */
	for (int i = 0; i < 8; i++, h = hash__u64(h + 1)) {
		v = hmap__get(&ps->sites, h);
		if (!v)
			break;
		st = (void *)(uintptr_t)*v;
		if (!strcmp(st->text, text))
			return st;
	}
	if (v || !create)
		return NULL;
	st = calloc(1, sizeof(*st) + strlen(text) + 1);
	if (!st)
		return NULL;
	strcpy(st->text, text);
	if (hmap__put(&ps->sites, h, (uintptr_t)st)) {
		free(st);
		return NULL;
	}
	return st;
}

/* py_codes_gen's user slot + 1: a class in py_codes or an entry of
 * py_procs changed (bpf/python.bpf.h). Only this thread writes the slot,
 * so the count kept here is the slot's. */
static void bump_codes_gen(struct pysrc *ps)
{
	uint32_t slot = PY_GEN_USER;
	uint64_t gen = ++ps->user_gen;

	bpf_map_update_elem(ps->fd_codes_gen, &slot, &gen, BPF_ANY);
}

static struct site *site_get(struct pysrc *ps, const char *text)
{
	return site_find(ps, text, true);
}

/*
 * Sets code's class in py_codes where it has an entry: the walk that
 * described the code object made one (PY_CODE_SENT). The record that asks
 * may be from before the object was freed, and its address may hold
 * another code object now: a free deletes the entry (py_code_free), so
 * the update fails (BPF_EXIST) and the next walk describes the address
 * again. (A free that came between a read of the entry and the write,
 * with a write that made one, let a leaf walk take a new code object for
 * the freed one's user code and name it so: the CI flake of
 * test_python's reuse scenario.) True when set.
 */
static bool set_class(struct pysrc *ps, struct pyp *p, uint64_t code, uint8_t cls)
{
	struct { uint32_t tgid, pad; uint64_t code; } k = { .tgid = p->pid, .code = code };

	return !bpf_map_update_elem(ps->fd_codes, &k, &cls, BPF_EXIST);
}

/* Tells the BPF walks what code is (PY_CODE_USER: the leaf walk stops
 * there), once per code object and class. */
static void mark_code(struct pysrc *ps, struct pyp *p, uint64_t code, bool user)
{
	uint64_t *v = hmap__get(&p->codes, code);
	uint8_t cls = user ? PY_CODE_USER : PY_CODE_OTHER;
	bool changed = v != NULL;

	/* A different class: the code object was freed and its address
	 * reused. */
	if (v && *v == cls)
		return;
	if (set_class(ps, p, code, cls))
		hmap__put(&p->codes, code, cls);
	/* The threads' cached leaf code (struct py_leaf_tc) may be this one. */
	if (changed)
		bump_codes_gen(ps);
}

/* Marks code as user code in py_codes whatever user space remembers (its
 * entry may be SENT again: described anew). An entry the LRU map dropped
 * stays dropped: the next walk describes the object again. */
static void remark_user(struct pysrc *ps, struct pyp *p, uint64_t code)
{
	if (set_class(ps, p, code, PY_CODE_USER)) {
		hmap__put(&p->codes, code, PY_CODE_USER);
		ps->remarked++;
	}
}

/* The lasti that pycode__resolve() takes, from the record's. */
static uint64_t raw_lasti(const struct py_proc *pp, const struct py_rec_frame *f)
{
	if (pp->off.lasti_kind == PY_LASTI_BYTES || pp->off.lasti_kind == PY_LASTI_UNITS)
		return (uint64_t)(int64_t)f->lasti;
	return f->code + pp->off.code_adaptive + (int64_t)f->lasti;
}

/* The frame f of a record made at ts, named after the code object its
 * address held at ts. */
static int resolve(struct pysrc *ps, struct pyp *p, const struct py_rec_frame *f, uint64_t ts,
		   struct py_sym *sym)
{
	int err = pycode__resolve_at(ps->pc, p->pid, &p->pp, f->code, raw_lasti(&p->pp, f), ts,
				     sym);

	if (err) {
		if (!p->unresolved)
			dbg("pid %u: code object 0x%" PRIx64 " not resolved: %s", p->pid,
			    (uint64_t)f->code, strerror(-err));
		p->unresolved++;
		ps->unresolved++;
		return err;
	}
	mark_code(ps, p, f->code, sym->user);
	return 0;
}

static void fmt_site(char *buf, size_t len, const struct py_sym *sym)
{
	snprintf(buf, len, "%s:%d %s", sym->file, sym->line, sym->func);
}

#define FRAMES_MAX (1u << 20)	/* frame cache entries before it starts over */

/* ps->multi's key of a code object address of p. */
static uint64_t multi_key(const struct pyp *p, uint64_t code)
{
	return hash__u64(code ^ hash__u64(p->gen));
}

/*
 * The site of a frame: from the frame cache, keyed by (program, code
 * object, position) (pyp.gen: a new one when the process exits or execs,
 * so that a reused pid never meets its predecessor's entries), so that a call from a known place costs a lookup, not a
 * resolve, a format and a hash of the text (pycode's own cache is keyed by
 * the code object alone and holds line tables). 0 or -errno.
 */
static int frame_site(struct pysrc *ps, struct pyp *p, const struct py_rec_frame *f, uint64_t ts,
		      struct site **out)
{
	uint64_t k = hash__u64(f->code ^ hash__u64((uint64_t)(uint32_t)f->lasti << 32 | p->gen)),
		 *v;
	/* An address that held several code objects: which one depends on
	 * the record's time, not on the address alone. */
	bool several = ps->multi.count && hmap__get(&ps->multi, multi_key(p, f->code));
	char text[SITE_LEN];
	struct py_sym sym;
	int err;

	if (!several && (v = hmap__get(&ps->frames, k))) {
		*out = (void *)(uintptr_t)*v;
		return 0;
	}
	if ((err = resolve(ps, p, f, ts, &sym)))
		return err;
	fmt_site(text, sizeof(text), &sym);
	if (!(*out = site_get(ps, text)))
		return -ENOMEM;
	(*out)->user = sym.user;
	if (several)
		return 0;
	if (ps->frames.count >= FRAMES_MAX)
		hmap__free(&ps->frames);
	hmap__put(&ps->frames, k, (uintptr_t)*out);
	return 0;
}

/* A call's frames: its site, user site and (--python stack) stack. */
static void call_frames(struct pysrc *ps, struct pyp *p, const struct rec_py_frames *r,
			struct pend *pd)
{
	struct site *st;
	size_t off = 0;
	bool want_stack = r->mode == PY_MODE_STACK;

	pd->site = pd->user = pd->stack = NULL;
	for (int i = 0; i < r->nframes; i++) {
		if (frame_site(ps, p, &r->frames[i], r->hdr.ts, &st)) {
			/* The leaf is the point: without it, nothing. */
			if (i == 0)
				return;
			if (want_stack && off < STACK_TEXT)
				off += snprintf(ps->stack_buf + off, STACK_TEXT - off, "%s?",
						off ? "\n" : "");
			continue;
		}
		if (i == 0)
			pd->site = st->text;
		if (!pd->user && st->user) {
			pd->user = st->text;
			/* A leaf walk goes past a user frame only when py_codes
			 * does not have it (not marked yet, or evicted from the
			 * LRU map since): marked again. */
			if (r->mode == PY_MODE_LEAF && i + 1 < r->nframes)
				remark_user(ps, p, r->frames[i].code);
		}
		if (want_stack) {
			if (off < STACK_TEXT)
				off += snprintf(ps->stack_buf + off, STACK_TEXT - off, "%s%s",
						off ? "\n" : "", st->text);
		} else if (pd->user) {
			break;
		}
	}
	if (want_stack && off) {
		/* Interned stacks stay for the capture (the trace points at
		 * them): past STACKS_MAX bytes of them, a call with a new stack
		 * gets py and py.user but no py.stack (counted). */
		st = site_find(ps, ps->stack_buf, ps->stack_bytes + off <= STACKS_MAX);
		if (st && !st->stack_counted) {
			st->stack_counted = true;
			ps->stack_bytes += off;
		}
		if (!st)
			ps->stacks_dropped++;
		pd->stack = st ? st->text : NULL;
	}
}

/* Frames of a backtrace or sample, resolved, for user/sources/stacks/stacks.c
 * (take_stack). */
static void stack_frames(struct pysrc *ps, struct pyp *p, const struct rec_py_frames *r,
			 struct pend *pd)
{
	char text[SITE_LEN];
	struct py_sym sym;
	int n = 0;

	for (int i = 0; i < r->nframes; i++) {
		struct py_stack_frame *f = &pd->frames[n];
		struct site *st;

		if (resolve(ps, p, &r->frames[i], r->hdr.ts, &sym)) {
			snprintf(text, sizeof(text), "[python] ?");
		} else {
			snprintf(text, sizeof(text), "%s (%s:%d)", sym.func, sym.file, sym.line);
		}
		st = site_get(ps, text);
		if (!st)
			continue;
		f->name = st->text;
		f->entry = r->frames[i].flags & PYF_ENTRY;
		n++;
	}
	pd->nframes = n;
}

/*
 * A code object BPF described (bpf/pycode_rec.h): into pycode's cache, so
 * that the frames record that follows resolves without the process. BPF
 * describes an address that py_codes has no class for (none yet, or the
 * code object there was freed: py_code_free), so the class user space
 * remembers for it is forgotten and set again from this object. An
 * address that held another object before is resolved by time from now
 * on (ps->multi), not from the frame cache, keyed by address and position.
 */
static int code_rec(struct pysrc *ps, const struct rec_py_code *r, size_t size)
{
	struct pyp *p = pyp_of(ps, r->hdr.pid);
	int err;

	if (!p || p->state != PYP_OK)
		return 0;
	err = pycode__seed(ps->pc, p->pid, &p->pp, r, size);
	if (err < 0) {
		if (!ps->codes_bad)
			dbg("pid %u: code object 0x%" PRIx64 " described by BPF refused: %s", p->pid,
			    (uint64_t)r->code, strerror(-err));
		ps->codes_bad++;
		return 0;
	}
	ps->codes++;
	hmap__del(&p->codes, r->code, NULL);
	if (err > 0) {
		if (ps->multi.count >= FRAMES_MAX) {
			/* Bounded (keys of gone processes stay): starts over,
			 * with a frame cache holding none of them. */
			hmap__free(&ps->multi);
			hmap__free(&ps->frames);
		}
		hmap__put(&ps->multi, multi_key(p, r->code), 1);
	}
	return 0;
}

/* A sampled call's site waiting for its REC_PY_SITE (monitor). */
struct site_pend {
	uint8_t lib;
	uint16_t func;
	bool named;			/* text holds a site; else counted as "other" */
	char text[SITE_LEN];
};

/*
 * monitor --python-sites: the site of a sampled call (PYR_SITE), the
 * innermost user frame of the leaf walk, else its innermost frame, kept
 * per thread until the call's REC_PY_SITE. Resolved through pycode's cache
 * but not interned: a monitor runs for days, and pysites bounds what it
 * keeps.
 */
static void site_frames(struct pysrc *ps, struct pyp *p, const struct rec_py_frames *r)
{
	struct site_pend *sp;
	struct py_sym sym;
	uint64_t *v = hmap__get(&ps->site_pend, r->hdr.tid);

	if (v) {
		sp = (void *)(uintptr_t)*v;
	} else {
		/* Threads whose REC_PY_SITE never came (a full ring) are few;
		 * past the bound the waiting sites start over. */
		if (ps->site_pend.count >= SITE_PEND_MAX) {
			uint64_t old;

			for (size_t it = 0; hmap__next(&ps->site_pend, &it, NULL, &old);)
				free((void *)(uintptr_t)old);
			hmap__free(&ps->site_pend);
		}
		if (!(sp = malloc(sizeof(*sp))) || hmap__put(&ps->site_pend, r->hdr.tid, (uintptr_t)sp)) {
			free(sp);
			return;
		}
	}
	sp->lib = r->lib;
	sp->func = r->func;
	sp->named = false;
	for (int i = 0; i < r->nframes; i++) {
		if (resolve(ps, p, &r->frames[i], r->hdr.ts, &sym))
			continue;
		if (sym.user || i == 0) {
			fmt_site(sp->text, sizeof(sp->text), &sym);
			sp->named = true;
		}
		if (sym.user)
			break;
	}
	if (!sp->named)
		ps->site_unresolved++;
}

/* The sampled call itself: its site counts weight calls of its duration. */
static int site_rec(struct pysrc *ps, const struct rec_py_site *r)
{
	uint64_t v;
	struct site_pend *sp;

	if (!hmap__del(&ps->site_pend, r->hdr.tid, &v))
		return 0;	/* its frames were not read (no interpreter known) */
	sp = (void *)(uintptr_t)v;
	if (sp->lib == r->lib && sp->func == r->func && ps->sites_out) {
		ps->site_samples++;
		pysites__add(ps->sites_out, r->hdr.pid, sp->named ? sp->text : NULL, r->weight,
			     r->dur_ns * r->weight);
	}
	free(sp);
	return 0;
}

static int py_rec(struct session *s, void *state, const void *data, size_t size)
{
	struct pysrc *ps = state;
	const struct rec_py_frames *r = data;
	struct pyp *p;
	struct pend *pd;

	(void)s;
	if (r->hdr.type == REC_PY_CODE)
		return code_rec(ps, data, size);
	if (r->hdr.type == REC_PY_SITE)
		return site_rec(ps, data);
	p = pyp_of(ps, r->hdr.pid);
	ps->records++;
	if (!p || p->state != PYP_OK) {
		ps->orphans++;
		return 0;
	}
	p->records++;
	if (r->what == PYR_SITE) {
		site_frames(ps, p, r);
		return 0;
	}
	pd = pend_of(ps, r->hdr.tid, true);
	if (!pd)
		return 0;
	if (r->what == PYR_CALL) {
		pd->call = true;
		pd->lib = r->lib;
		pd->func = r->func;
		call_frames(ps, p, r, pd);
		return 0;
	}
	stack_frames(ps, p, r, pd);
	pd->has_bt = r->what == PYR_BT;
	pd->has_sample = r->what == PYR_SAMPLE;
	pd->st_lib = r->lib;
	pd->st_func = r->func;
	return 0;
}

/* The model's stack_py hook: the frames stack_frames() kept for tid's
 * sample or backtrace of lib/func, once. */
static int take_stack(void *ctx, uint32_t tid, bool sample, uint8_t lib, uint16_t func,
		      const struct py_stack_frame **frames)
{
	struct pend *pd = pend_of(ctx, tid, false);
	int n;

	if (!pd || !(sample ? pd->has_sample : pd->has_bt))
		return 0;
	pd->has_sample = pd->has_bt = false;
	if (!sample && (pd->st_lib != lib || pd->st_func != func))
		return 0;
	n = pd->nframes;
	*frames = pd->frames;
	return n;
}

_Static_assert(offsetof(struct rec_py_frames, frames) + sizeof(struct py_rec_frame) <=
		       SRC_SPLIT_MAX && sizeof(struct rec_call_enter) <= SRC_SPLIT_MAX,
	       "py_split()'s records fit the runner's buffers");

/*
 * The split hook: a REC_CALL_ENTER that carries its leaf frame (struct
 * rec_call_enter_py, --python leaf) is the REC_PY_FRAMES record it stands
 * for (that one frame, as if sent before the call), then the plain call.
 */
static size_t py_split(const void *data, size_t size, void *first, void *rest)
{
	const struct rec_call_enter_py *cp = data;
	struct rec_py_frames *fr = first;
	struct rec_call_enter *call = rest;

	if (size != sizeof(*cp) || cp->call.hdr.type != REC_CALL_ENTER)
		return 0;
	*call = cp->call;
	call->hdr.size = sizeof(*call);
	memset(fr, 0, offsetof(struct rec_py_frames, frames));
	fr->hdr = cp->call.hdr;
	fr->hdr.type = REC_PY_FRAMES;
	fr->hdr.size = offsetof(struct rec_py_frames, frames) + sizeof(fr->frames[0]);
	fr->nframes = 1;
	fr->what = PYR_CALL;
	fr->lib = cp->call.lib;
	fr->func = cp->call.func;
	fr->mode = PY_MODE_LEAF;
	fr->frames[0] = cp->py;
	return fr->hdr.size;
}

/* The model's call_py hook: the site waiting for this call, if it is its. */
static void call_py(void *ctx, const struct thread *t, struct call *c)
{
	struct pysrc *ps = ctx;
	struct pend *pd = pend_of(ps, t->tid, false);

	if (!pd || !pd->call)
		return;
	pd->call = false;
	if (pd->lib != c->lib || pd->func != c->func || !pd->site) {
		if (pd->lib != c->lib || pd->func != c->func)
			ps->orphans++;
		return;
	}
	c->py_site = pd->site;
	c->py_user = pd->user != pd->site ? pd->user : NULL;
	if (c->nbegin < CALL_ANNOTS)
		c->begin[c->nbegin++] = (struct pf_annot){ .name = "py", .type = PA_STR,
							   .s = c->py_site };
	if (c->py_user && c->nbegin < CALL_ANNOTS)
		c->begin[c->nbegin++] = (struct pf_annot){ .name = "py.user", .type = PA_STR,
							   .s = c->py_user };
	if (pd->stack && c->nbegin < CALL_ANNOTS)
		c->begin[c->nbegin++] = (struct pf_annot){ .name = "py.stack", .type = PA_STR,
							   .s = pd->stack };
}

/* The summary's sink: API time and launches per call site, outermost
 * API calls only (a runtime call's driver calls are its own time). */
static void on_end(void *ctx, struct thread *t, struct call *c)
{
	struct site *st;

	(void)ctx;
	if (!c->py_site || c - t->stack != 0)
		return;
	st = site_of(c->py_site);
	st->calls++;
	st->ns += c->end_ts > c->ts ? c->end_ts - c->ts : 0;
	if (c->is_launch) {
		st->launches++;
		st->launch_ns += c->end_ts > c->ts ? c->end_ts - c->ts : 0;
	}
}

/* Which file pid runs (device and inode of /proc/PID/exe); 0: unknown. */
static uint64_t exe_id(uint32_t pid)
{
	char path[32];
	struct stat st;

	snprintf(path, sizeof(path), "/proc/%u/exe", pid);
	if (stat(path, &st))
		return 0;
	return hash__u64(st.st_dev) ^ st.st_ino;
}

/* Whether pid's program is named python* (its main thread's comm). */
static bool named_python(uint32_t pid)
{
	char comm[16];

	return !procfs__comm(pid, pid, comm, sizeof(comm)) && !strncmp(comm, "python", 6);
}

/* Counts the interpreters of p's runtime (subinterpreters), said once
 * per new highest count. */
static void count_interps(struct pyp *p, uint64_t now)
{
	unsigned n;

	p->interps_ns = now;
	if (pyfind__interpreters(p->pid, &p->pp, INTERP_COUNT_MAX, &n))
		return;
	p->interps = n;
	if (n <= p->interps_max)
		return;
	p->interps_max = n;
	if (n > 1)
		info("pid %u: Python %s has %u interpreters (%u subinterpreter%s): %s", p->pid,
		     p->info.version, n, n - 1, n > 2 ? "s" : "", PYFIND_SUBINTERP_NOTE);
}

/* Where code_dealloc (addr) is mapped, and whether it is in the file
 * PyCode_Type (type) is in. */
struct find_addr {
	uint32_t pid;
	uint64_t addr, type, off;
	uint64_t ino[2];		/* the files of type and of addr */
	uint32_t dev[2];
	char path[64];
};

static int find_addr(const struct map_entry *e, void *ctx)
{
	struct find_addr *f = ctx;
	uint32_t dev = e->dev_major << 20 | e->dev_minor;

	if (f->type >= e->start && f->type < e->end) {
		f->ino[0] = e->inode;
		f->dev[0] = dev;
	}
	if (f->addr >= e->start && f->addr < e->end && e->perms[2] == 'x' && e->inode) {
		/* The file as mapped, whatever the process's mount namespace. */
		snprintf(f->path, sizeof(f->path), "/proc/%u/map_files/%" PRIx64 "-%" PRIx64,
			 f->pid, e->start, e->end);
		f->off = f->addr - e->start + e->offset;
		f->ino[1] = e->inode;
		f->dev[1] = dev;
	}
	return 0;
}

/*
 * code_dealloc's place in p (*f), from PyCode_Type.tp_dealloc once the
 * loader has relocated it: a python found right at its exec may have its
 * libpython mapped but not yet relocated (tp_dealloc still the link-time
 * address, which no mapping holds), so at an exec it is read again for up
 * to RELOC_WAIT_MS (at a tick, once: the next tick looks again). Only a
 * function in an executable mapping of PyCode_Type's own file is taken: a
 * uprobe at a wrong address would corrupt the program. 0, -ENOENT (not
 * there, or not yet), or -errno.
 */
static int find_dealloc(struct pyp *p, struct find_addr *f, bool exec)
{
	int err = 0;

	for (int i = 0; i < (exec ? RELOC_WAIT_MS * 2 : 1); i++) {
		if (i)
			nanosleep(&(struct timespec){ .tv_nsec = 500000 }, NULL);
		*f = (struct find_addr){ .pid = p->pid, .type = p->pp.code_type };
		if ((err = pyfind__read((int)p->pid, f->type + PY_TYPE_DEALLOC_OFFSET, &f->addr,
					sizeof(f->addr))))
			return err;
		if ((err = procfs__for_each_map((pid_t)p->pid, find_addr, f)) < 0)
			return err;
		if (f->ino[1] && f->ino[0] == f->ino[1] && f->dev[0] == f->dev[1]) {
			if (i)
				dbg("pid %u: PyCode_Type.tp_dealloc relocated after %.1f ms", p->pid,
				    i * 0.5);
			return 0;
		}
	}
	return -ENOENT;
}

/*
 * Probes p's code_dealloc, the function its PyCode_Type.tp_dealloc points
 * at (no symbol needed: Debian's python is stripped), with py_code_free:
 * a freed code object's address can be taken by another, and BPF must
 * describe that one anew. Done before py_procs has the process, so no
 * code object is described before its frees are seen. exec: the process
 * has just exec'ed (its loader may be relocating now). -EAGAIN: libpython
 * is not relocated yet (no Python code can run before it is): looked at
 * again at the next tick, for RETRY_FAST_NS. After that, or on another
 * failure, the frames are read without the probe, and the summary says
 * what that risks.
 */
static int watch_frees(struct pysrc *ps, struct pyp *p, uint64_t now, bool exec)
{
	struct find_addr f;
	int err;

	uprobe__release(p->freed);
	p->freed = NULL;
	p->freed_why[0] = 0;
	err = find_dealloc(p, &f, exec);
	if (err == -ENOENT && now - p->first_ns < RETRY_FAST_NS)
		return -EAGAIN;
	if (err == -ENOENT) {
		snprintf(p->freed_why, sizeof(p->freed_why),
			 "PyCode_Type.tp_dealloc (0x%" PRIx64 ") is not in the interpreter's code",
			 f.addr);
	} else if (err) {
		snprintf(p->freed_why, sizeof(p->freed_why), "PyCode_Type unreadable: %s",
			 strerror(-err));
	} else if (!(p->freed = uprobe__attach(ps->s->skel->progs.py_code_free, (pid_t)p->pid,
					       f.path, f.off, false))) {
		snprintf(p->freed_why, sizeof(p->freed_why), "probing code_dealloc: %s",
			 strerror(errno));
	}
	if (p->freed_why[0])
		warn("pid %u: Python code objects freed are not watched (%s): a frame whose code "
		     "object's address held another before may be named after that one", p->pid,
		     p->freed_why);
	else
		dbg("pid %u: code_dealloc probed at %s+0x%" PRIx64, p->pid, f.path, f.off);
	return 0;
}

/*
 * When to look for p's interpreter again. Not at every tick: ticks follow
 * the ring's wakeups, thousands a second under a busy target, and a look
 * reads /proc/PID/maps and ELF headers (60 us here): measured, 5700 looks
 * in a 2 s launch loop of a C program, 350 ns of cgbpf's CPU per traced
 * call, which the loop paid too on a 2-CPU machine. The wait grows with
 * the time looked already (1 ms, 1.5, 2.25 ...: some 19 looks in the
 * first 2 s, the loader's mapping of libpython after an exec found within
 * half the time since it), up to once a second.
 */
static uint64_t retry_at(const struct pyp *p, uint64_t now)
{
	uint64_t wait = (now - p->first_ns) / 2;

	if (wait < RETRY_MIN_NS)
		wait = RETRY_MIN_NS;
	if (wait > RETRY_SLOW_NS)
		wait = RETRY_SLOW_NS;
	return now + wait;
}

/* Finds the interpreter of pid and tells BPF; quiet while looking. exec:
 * the process has just exec'ed. */
static void probe(struct pysrc *ps, struct pyp *p, uint64_t now, bool exec)
{
	char why[sizeof(p->why)] = "";
	int err;

	err = pyfind__probe(p->pid, &p->pp, &p->info, why, sizeof(why));
	/*
	 * A python just exec'ed has not mapped its libpython yet (its loader
	 * does that next, within a millisecond or so), and its first API
	 * calls can come before the next tick: wait for the loader a little,
	 * here, while the program is still starting. A launcher named python
	 * (a pyenv shim: bash scripts that fork and exec some 40 times before
	 * the real python) is waited for the same way, and this wait is what
	 * finds its python in time: its exec record comes after the chain's
	 * other records, which take the consumer longer than the program
	 * lives (measured: without the wait, 2 of 3 `record -- python3
	 * launches.py --iters 2` through the shim got no frames; with it, 0
	 * of 20 on an idle machine and 1-2 of 30 beside the test suite).
	 */
	if (err == -ENOENT && exec && named_python(p->pid)) {
		for (int i = 0; i < EXEC_WAIT_MS * 2 && err == -ENOENT; i++) {
			nanosleep(&(struct timespec){ .tv_nsec = 500000 }, NULL);
			err = pyfind__probe(p->pid, &p->pp, &p->info, why, sizeof(why));
		}
	}
	if (err && err != -ENOTSUP) {
		/* No interpreter (yet): a launcher, libpython not mapped, or
		 * one still initializing (its thread list half built). Said in
		 * the summary if it stays so. */
		if (err != -ENOENT && err != -ESRCH)
			snprintf(p->why, sizeof(p->why), "%s", why);
		/* A Python gone before cgbpf read it (its events were read
		 * that late: a busy machine): its calls have no frames. Its
		 * comm is still there while it is a zombie. */
		else if (err == -ESRCH && !p->why[0] && named_python(p->pid))
			snprintf(p->why, sizeof(p->why), "it exited before cgbpf could read its "
				 "interpreter (%.0f ms after its last event cgbpf read)",
				 (double)(session__now() - p->event_ns) / 1e6);
		if (exec && err == -ENOENT && named_python(p->pid))
			dbg("pid %u: no interpreter at its exec (%s, after %.1f ms): looked at again later",
			    p->pid, why[0] ? why : strerror(-err), (session__now() - now) / 1e6);
		p->next_ns = retry_at(p, now);
		return;
	}
	if (err) {
		p->state = PYP_REFUSED;
		p->exe = exe_id(p->pid);
		/* Said once per reason, not at every exec of the same. */
		if (strcmp(p->why, why[0] ? why : strerror(-err))) {
			snprintf(p->why, sizeof(p->why), "%s", why[0] ? why : strerror(-err));
			info("pid %u: %s", p->pid, p->why);
		}
		return;
	}
	if (watch_frees(ps, p, now, exec) == -EAGAIN) {
		if (!p->reloc_said)
			dbg("pid %u: Python %s found before its loader relocated it: looked at "
			    "again", p->pid, p->info.version);
		p->reloc_said = true;
		p->next_ns = retry_at(p, now);
		return;
	}
	if (bpf_map_update_elem(ps->fd_procs, &p->pid, &p->pp, BPF_ANY)) {
		err = -errno;
		p->state = PYP_REFUSED;
		uprobe__release(p->freed);
		p->freed = NULL;
		snprintf(p->why, sizeof(p->why), "cannot tell the BPF programs: %s", strerror(-err));
		warn("pid %u: Python frames: %s", p->pid, p->why);
		return;
	}
	/* The leaf caches of its threads copied the old offsets, if any. */
	bump_codes_gen(ps);
	p->state = PYP_OK;
	p->exe = exe_id(p->pid);
	p->interps = p->interps_max = 0;
	dbg("pid %u: Python %s (%s): reading Python frames", p->pid, p->info.version,
	    p->info.path);
	count_interps(p, now);
}

static void forget(struct pysrc *ps, uint32_t pid)
{
	struct pyp *p = pyp_of(ps, pid);

	if (!p)
		return;
	if (p->state == PYP_OK) {
		bpf_map_delete_elem(ps->fd_procs, &pid);
		bump_codes_gen(ps);
	}
	uprobe__release(p->freed);
	p->freed = NULL;
	pycode__forget(ps->pc, pid);
	hmap__free(&p->codes);
	p->codes = (struct hmap){ 0 };
}

static void py_proc(struct session *s, void *state, enum src_proc ev, uint32_t pid, uint64_t ts)
{
	struct pysrc *ps = state;
	struct pyp *p = pyp_of(ps, pid);
	uint64_t now = session__now();

	if (ev == SRC_PROC_EXIT) {
		forget(ps, pid);
		if (p) {
			p->gen = ++ps->gens;
			p->exited = true;
		}
		if (p && p->state == PYP_LOOKING)
			p->state = PYP_REFUSED;	/* nothing to look for any more */
		/* A monitor prints no summary and runs for days: the dead go;
		 * so do those the summary has nothing to say of (no Python:
		 * every process of hours of churn under -a). */
		if (p && (s->mon || (p->state != PYP_OK && !p->why[0])) &&
		    hmap__del(&ps->procs, pid, NULL))
			free(p);
		return;
	}
	if (!p) {
		p = calloc(1, sizeof(*p));
		if (!p || hmap__put(&ps->procs, pid, (uintptr_t)p)) {
			free(p);
			return;
		}
		p->pid = pid;
		p->first_ns = now;
		p->gen = ++ps->gens;
	} else if (p->exited) {
		/* Another process under a reused pid: looked at afresh (the
		 * summary keeps one line per pid, the last process's). */
		dbg("pid %u: a new process under the pid of one that exited", pid);
		p->exited = false;
		p->gen = ++ps->gens;
		p->state = PYP_LOOKING;
		p->first_ns = now;
		p->next_ns = 0;
		p->why[0] = 0;
		p->exe = 0;
		p->interps = p->interps_max = 0;
	} else if (ev == SRC_PROC_CHANGED && p->state == PYP_OK) {
		/* An exec replaces the interpreter (or removes it); another
		 * mapping leaves it. */
		struct py_proc cur;
		struct py_info info;
		char why[256];

		int e = pyfind__probe(pid, &cur, &info, why, sizeof(why));

		/* The same, or gone with the process: nothing to do. A failed
		 * look while the program is the same is not believed (seen: a
		 * process that exited before its mapping record was read):
		 * only an exec replaces the interpreter. */
		uint64_t exe = exe_id(pid);

		if ((!e && !memcmp(&cur, &p->pp, sizeof(cur))) || e == -ESRCH ||
		    (e && (!exe || exe == p->exe))) {
			if (!e)
				count_interps(p, now);
			return;
		}
		dbg("pid %u: its interpreter changed (%s)", pid, e ? why : "another one");
		forget(ps, pid);
		p->gen = ++ps->gens;
		p->state = PYP_LOOKING;
		p->first_ns = now;
	} else if (ev == SRC_PROC_CHANGED && p->state == PYP_REFUSED && exe_id(pid) != p->exe) {
		p->gen = ++ps->gens;
		p->state = PYP_LOOKING;	/* exec'ed another program */
		p->first_ns = now;
	}
	p->event_ns = ts;
	if (p->state == PYP_LOOKING)
		probe(ps, p, now, ev == SRC_PROC_CHANGED);
}

/* Targets whose interpreter was not found yet are looked at again: the
 * libpython of a program just exec'ed is mapped by its loader after the
 * exec cgbpf saw. */
static void py_tick(struct session *s, void *state, uint64_t now)
{
	struct pysrc *ps = state;
	uint64_t v;
	int n = 0;

	(void)s;
	for (size_t it = 0; n < PROBES_PER_TICK && hmap__next(&ps->procs, &it, NULL, &v);) {
		struct pyp *p = (void *)(uintptr_t)v;

		if (p->state == PYP_OK && now - p->interps_ns >= INTERP_CHECK_NS) {
			count_interps(p, now);
			n++;
		}
		if (p->state != PYP_LOOKING || p->next_ns > now)
			continue;
		probe(ps, p, now, false);
		n++;
	}
}

static bool py_wanted(const struct record_opts *o)
{
	return o->python != PY_MODE_OFF || (o->monitor && o->monitor->python_sites);
}

static int py_init(struct session *s, void **state)
{
	struct pysrc *ps = calloc(1, sizeof(*ps));
	struct sink sk = { .call_end = on_end };

	if (!ps || !(ps->pc = pycode__new())) {
		free(ps);
		err("out of memory");
		return -ENOMEM;
	}
	ps->s = s;
	ps->mode = s->o->python;
	sk.ctx = ps;
	if (model__add_sink(&s->model, &sk)) {
		err("too many model sinks for Python call sites");
		pycode__free(ps->pc);
		free(ps);
		return -E2BIG;
	}
	s->model.call_py = call_py;
	s->model.call_py_ctx = ps;
	s->model.stack_py = take_stack;
	s->model.stack_py_ctx = ps;
	*state = ps;
	return 0;
}

static int py_prepare(struct session *s, void *state)
{
	(void)state;
	s->skel->rodata->py_mode = s->o->python;
	/* The monitor reads frames of sampled calls only (bpf/pysites.bpf.h). */
	if (s->o->monitor && s->o->monitor->python_sites)
		s->skel->rodata->py_site_every = s->o->monitor->python_site_sample;
	return 0;
}

static int py_start(struct session *s, void *state)
{
	struct pysrc *ps = state;

	ps->fd_procs = bpf_map__fd(s->skel->maps.py_procs);
	ps->fd_codes = bpf_map__fd(s->skel->maps.py_codes);
	ps->fd_codes_gen = bpf_map__fd(s->skel->maps.py_codes_gen);
	{
		uint32_t slot = PY_GEN_USER;

		/* Counting on from what a previous session left there. */
		bpf_map_lookup_elem(ps->fd_codes_gen, &slot, &ps->user_gen);
	}
	ps->fd_stat = bpf_map__fd(s->skel->maps.py_stat);
	ps->sites_out = s->pysites;
	return 0;
}

/* Sums the per-CPU counts of the BPF readers. */
static void read_stats(struct pysrc *ps)
{
	int ncpu = libbpf_num_possible_cpus();
	uint64_t *vals;

	if (ncpu <= 0 || !(vals = calloc(ncpu, sizeof(*vals))))
		return;
	for (uint32_t k = 0; k < PYS__COUNT; k++) {
		if (bpf_map_lookup_elem(ps->fd_stat, &k, vals))
			continue;
		ps->stat[k] = 0;
		for (int c = 0; c < ncpu; c++)
			ps->stat[k] += vals[c];
	}
	free(vals);
}

static const char *const stat_names[PYS__COUNT] = {
	[PYS_READ_TSTATE] = "thread state unreadable",
	[PYS_READ_FRAME] = "frame unreadable",
	[PYS_BUSY] = "scratch busy (preempted probe)",
	[PYS_RING_FULL] = "ring full",
	[PYS_CODE_FAIL] = "code object not described by BPF",
};

static void py_print(const void *ctx, const uint64_t *drops, FILE *f)
{
	const struct pysrc *ps = ctx;
	struct sumtab_pysite *rows = NULL;
	uint64_t v;
	size_t n = 0;
	bool any = false;

	(void)drops;
	fprintf(f, "\n** Python call sites (--python %s):\n\n",
		ps->mode == PY_MODE_STACK ? "stack" : "leaf");
	for (size_t it = 0; hmap__next(&ps->procs, &it, NULL, &v);) {
		const struct pyp *p = (void *)(uintptr_t)v;

		if (p->state == PYP_OK || p->why[0]) {
			any = true;
			if (p->state == PYP_OK)
				fprintf(f, "   pid %u: Python %s (%s%s): %" PRIu64 " frame records\n",
					p->pid, p->info.version, p->info.path,
					p->info.shared ? "" : ", static", p->records);
			if (p->state == PYP_OK && p->interps_max > 1)
				fprintf(f, "     %u interpreters (%u subinterpreter%s): %s\n",
					p->interps_max, p->interps_max - 1,
					p->interps_max > 2 ? "s" : "", PYFIND_SUBINTERP_NOTE);
			else if (p->state != PYP_OK)
				fprintf(f, "   pid %u: no Python frames: %s\n", p->pid, p->why);
			if (p->state == PYP_OK && p->freed_why[0])
				fprintf(f, "     code objects freed not watched (%s): a frame whose "
					   "code object took the address of another may be named "
					   "after that one\n", p->freed_why);
		}
	}
	if (!any)
		fprintf(f, "   no target ran CPython\n");
	if (ps->unresolved || ps->orphans)
		fprintf(f, "   frames not resolved: %" PRIu64 "; frame records without their call: %"
			   PRIu64 "\n", ps->unresolved, ps->orphans);
	for (int k = 0; k < PYS__COUNT; k++)
		if (stat_names[k] && ps->stat[k])
			fprintf(f, "   frames not read: %" PRIu64 " (%s)\n", ps->stat[k], stat_names[k]);
	if (ps->stacks_dropped)
		fprintf(f, "   py.stack left out of %" PRIu64 " calls: their stacks were new past %llu "
			   "MiB of distinct stacks\n", ps->stacks_dropped, STACKS_MAX >> 20);
	if (ps->stat[PYS_TRUNCATED])
		fprintf(f, "   stacks cut at %d frames: %" PRIu64 "\n", PY_FRAMES_MAX,
			ps->stat[PYS_TRUNCATED]);
	/* The tables: what cgbpf stats computes from the trace's py args. */
	if (ps->sites.count && (rows = malloc(ps->sites.count * sizeof(*rows)))) {
		for (size_t it = 0; hmap__next(&ps->sites, &it, NULL, &v);) {
			const struct site *st = (void *)(uintptr_t)v;

			if (st->calls)
				rows[n++] = (struct sumtab_pysite){ .site = st->text,
					.calls = st->calls, .ns = st->ns, .launches = st->launches };
		}
	}
	sumtab__pysites(f, SUMTAB_TEXT, rows, n);
	free(rows);
}

static void py_finish(struct session *s, void *state, struct capture_info *ci)
{
	struct pysrc *ps = state;

	(void)s;
	read_stats(ps);
	dbg("python: %" PRIu64 " user code objects marked again in py_codes", ps->remarked);
	dbg("python: %" PRIu64 " records, %" PRIu64 " sent, %" PRIu64 " thread-state walks, %" PRIu64
	    " without thread state, %" PRIu64 " without frame, %" PRIu64 " unreadable thread "
	    "states, %" PRIu64 " unreadable frames", ps->records, ps->stat[PYS_FRAMES],
	    ps->stat[PYS_TSTATE_WALKS], ps->stat[PYS_NO_TSTATE], ps->stat[PYS_NO_FRAME],
	    ps->stat[PYS_READ_TSTATE], ps->stat[PYS_READ_FRAME]);
	dbg("python: %" PRIu64 " code objects described by BPF, %" PRIu64 " taken, %" PRIu64
	    " refused, %" PRIu64 " not described", ps->stat[PYS_CODES], ps->codes, ps->codes_bad,
	    ps->stat[PYS_CODE_FAIL]);
	dbg("python: %" PRIu64 " code objects freed in traced processes", ps->stat[PYS_CODE_FREED]);
	dbg("python: %" PRIu64 " frame readers read user memory", ps->stat[PYS_READERS]);
	summary__add_section(ci, SUMMARY_OTHER, py_print, ps);
}

static void py_fini(struct session *s, void *state)
{
	struct pysrc *ps = state;
	uint64_t v;

	if (!ps)
		return;
	if (s->model.call_py_ctx == ps) {
		s->model.call_py = NULL;
		s->model.call_py_ctx = NULL;
	}
	for (size_t it = 0; hmap__next(&ps->procs, &it, NULL, &v);) {
		struct pyp *p = (void *)(uintptr_t)v;

		uprobe__release(p->freed);
		hmap__free(&p->codes);
		free(p);
	}
	for (size_t it = 0; hmap__next(&ps->pend, &it, NULL, &v);)
		free((void *)(uintptr_t)v);
	for (size_t it = 0; hmap__next(&ps->site_pend, &it, NULL, &v);)
		free((void *)(uintptr_t)v);
	hmap__free(&ps->site_pend);
	for (size_t it = 0; hmap__next(&ps->sites, &it, NULL, &v);) {
		free((void *)(uintptr_t)v);
	}
	hmap__free(&ps->procs);
	hmap__free(&ps->pend);
	hmap__free(&ps->sites);
	hmap__free(&ps->frames);
	hmap__free(&ps->multi);
	pycode__free(ps->pc);
	free(ps);
}

const struct source src_python = {
	.name = "python",
	.types = { REC_PY_FRAMES, REC_PY_CODE, REC_PY_SITE },
	.wanted = py_wanted,
	.init = py_init,
	.prepare = py_prepare,
	.start = py_start,
	.split = py_split,
	.record = py_rec,
	.proc = py_proc,
	.tick = py_tick,
	.finish = py_finish,
	.fini = py_fini,
};
