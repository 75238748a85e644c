// SPDX-License-Identifier: MIT
#include <stdlib.h>
#include <string.h>
#include "lib/hmap.h"
#include "lib/pb.h"
#include "sources/stacks/pfstacks.h"

/* Field numbers, from perfetto_trace.proto. */
enum {
	PKT_TIMESTAMP = 8,
	PKT_SEQ_ID = 10,
	PKT_INTERNED = 12,
	PKT_SEQ_FLAGS = 13,
	PKT_TS_CLOCK_ID = 58,
	PKT_PERF_SAMPLE = 66,

	ID_FUNCTION_NAMES = 5,
	ID_FRAMES = 6,
	ID_CALLSTACKS = 7,
	ID_BUILD_IDS = 16,
	ID_MAPPING_PATHS = 17,
	ID_MAPPINGS = 19,
	STR_IID = 1,
	STR_STR = 2,

	MAP_IID = 1,
	MAP_BUILD_ID = 2,
	MAP_START = 4,
	MAP_END = 5,
	MAP_PATH_IDS = 7,

	FRAME_IID = 1,
	FRAME_FUNCTION = 2,
	FRAME_MAPPING = 3,
	FRAME_REL_PC = 4,

	CS_IID = 1,
	CS_FRAMES = 2,

	PS_CPU = 1,
	PS_PID = 2,
	PS_TID = 3,
	PS_CALLSTACK = 4,
	PS_CPU_MODE = 5,
};

enum { SEQ_INCREMENTAL_STATE_CLEARED = 1, SEQ_NEEDS_INCREMENTAL_STATE = 2 };
enum { CLOCK_BOOTTIME_ID = 6 };
enum { MODE_KERNEL = 1, MODE_USER = 2 };
enum { K_FUNC = 1, K_PATH, K_BUILD_ID, K_MAPPING, K_FRAME, K_CALLSTACK };

/* Interned entries before the sequence starts over (bounded memory). */
#define INTERN_MAX (1u << 16)
#define MAX_FRAMES 256

struct pfstacks {
	struct pftrace *pt;
	uint32_t seq;
	bool cleared;		/* the next packet must clear the state */
	struct hmap iids;	/* hash(kind, key) -> iid */
	uint64_t next_iid;
	uint64_t bytes;
	bool in_interned;
	uint32_t gen;		/* the writer's file (pftrace__generation) */
};

struct pfstacks *pfstacks__new(struct pftrace *pt)
{
	struct pfstacks *ps = calloc(1, sizeof(*ps));

	if (!ps)
		return NULL;
	ps->pt = pt;
	ps->seq = pftrace__new_seq_id(pt);
	ps->cleared = true;
	ps->next_iid = 1;
	return ps;
}

void pfstacks__free(struct pfstacks *ps)
{
	if (!ps)
		return;
	hmap__free(&ps->iids);
	free(ps);
}

uint64_t pfstacks__bytes(const struct pfstacks *ps)
{
	return ps->bytes;
}

static uint64_t key_of(int kind, uint64_t h)
{
	return hash__u64(h ^ ((uint64_t)kind << 58)) ^ kind;
}

static uint64_t hash_str(const char *s)
{
	return s ? hash__bytes(s, strlen(s)) : 0;
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

static uint64_t *lookup(struct pfstacks *ps, int kind, uint64_t h)
{
	return hmap__get(&ps->iids, key_of(kind, h));
}

static uint64_t add(struct pfstacks *ps, int kind, uint64_t h)
{
	uint64_t iid = ps->next_iid++;

	hmap__put(&ps->iids, key_of(kind, h), iid);
	return iid;
}

static void open_interned(struct pfstacks *ps, struct pb *pb)
{
	if (!ps->in_interned) {
		pb__begin(pb, PKT_INTERNED);
		ps->in_interned = true;
	}
}

static uint64_t intern_str(struct pfstacks *ps, struct pb *pb, int kind, uint32_t field,
			   const char *s, size_t len)
{
	uint64_t h = hash__bytes(s, len), *v = lookup(ps, kind, h), iid;

	if (v)
		return *v;
	iid = add(ps, kind, h);
	open_interned(ps, pb);
	pb__begin(pb, field);
	pb__varint(pb, STR_IID, iid);
	pb__bytes(pb, STR_STR, s, len);
	pb__end(pb);
	return iid;
}

/* Hex digits to bytes; 0 if s is not an even run of at most max bytes. */
static size_t unhex(const char *s, uint8_t *out, size_t max)
{
	size_t n = 0;

	for (; s[0] && s[1] && n < max; s += 2) {
		int hi = hexval(s[0]), lo = hexval(s[1]);

		if (hi < 0 || lo < 0)
			return 0;
		out[n++] = (uint8_t)(hi << 4 | lo);
	}
	return *s ? 0 : n;
}

/*
 * Mappings as trace processor reads them (stack_profile_sequence_state.cc):
 * the name is "/" + the path components joined by "/", the build id is raw
 * bytes (BuildId::FromRaw; shown hex-encoded), and kernel frames belong to
 * the one mapping traced_perf writes for them: the single component
 * "kernel", range 0-0, no build id ("/kernel", its magical kernel mapping).
 */
static uint64_t intern_mapping(struct pfstacks *ps, struct pb *pb, const struct sym_frame *f)
{
	const char *path = f->kernel ? "kernel" : f->module ? f->module : "[unknown]";
	bool user = !f->kernel && f->module;
	uint64_t start = user ? f->module_start : 0, end = user ? f->module_end : 0;
	uint64_t h = hash_str(path) ^ hash__u64(start) ^ hash__u64(end * 31 + 7);
	uint64_t *v = lookup(ps, K_MAPPING, h), build = 0, comp[32], iid;
	uint8_t raw[64];
	size_t nraw;
	int ncomp = 0;

	if (v)
		return *v;
	/* Strings first: a reader resolves ids within the packet. */
	if (user && f->build_id && (nraw = unhex(f->build_id, raw, sizeof(raw))))
		build = intern_str(ps, pb, K_BUILD_ID, ID_BUILD_IDS, (const char *)raw, nraw);
	/* The path as its components: Perfetto joins them with '/'. */
	for (const char *p = path; *p && ncomp < 32;) {
		const char *e;

		while (*p == '/')
			p++;
		if (!*p)
			break;
		e = strchr(p, '/');
		if (!e)
			e = p + strlen(p);
		comp[ncomp++] = intern_str(ps, pb, K_PATH, ID_MAPPING_PATHS, p, e - p);
		p = e;
	}
	iid = add(ps, K_MAPPING, h);
	open_interned(ps, pb);
	pb__begin(pb, ID_MAPPINGS);
	pb__varint(pb, MAP_IID, iid);
	if (build)
		pb__varint(pb, MAP_BUILD_ID, build);
	pb__varint(pb, MAP_START, start);
	pb__varint(pb, MAP_END, end);
	for (int i = 0; i < ncomp; i++)
		pb__varint(pb, MAP_PATH_IDS, comp[i]);
	pb__end(pb);
	return iid;
}

static uint64_t frame_hash(const struct sym_frame *f)
{
	uint64_t h = hash_str(f->module) * 3 + hash_str(f->function) * 5 + f->kernel;

	/* An unsymbolized frame is known by its address in its module. */
	return hash__u64(h ^ hash__u64(f->module ? f->module_off : f->ip) ^
			 hash__u64(f->module_start));
}

static uint64_t intern_frame(struct pfstacks *ps, struct pb *pb, const struct sym_frame *f)
{
	uint64_t h = frame_hash(f), *v = lookup(ps, K_FRAME, h), map, fn = 0, iid;

	if (v)
		return *v;
	map = intern_mapping(ps, pb, f);
	if (f->function)
		fn = intern_str(ps, pb, K_FUNC, ID_FUNCTION_NAMES, f->function,
				strlen(f->function));
	iid = add(ps, K_FRAME, h);
	open_interned(ps, pb);
	pb__begin(pb, ID_FRAMES);
	pb__varint(pb, FRAME_IID, iid);
	if (fn)
		pb__varint(pb, FRAME_FUNCTION, fn);
	pb__varint(pb, FRAME_MAPPING, map);
	pb__varint(pb, FRAME_REL_PC, f->module && !f->kernel ? f->module_off : f->ip);
	pb__end(pb);
	return iid;
}

static void on_sample(void *ctx, struct thread *t, const struct stack *st)
{
	struct pfstacks *ps = ctx;
	uint64_t frames[MAX_FRAMES], h = 0, cs, *v, before;
	int n = st->n < MAX_FRAMES ? st->n : MAX_FRAMES;
	struct pb *pb;

	if (!n)
		return;
	/* A new file (capture windows) knows none of the interned data. */
	if (ps->next_iid + 4 * (uint64_t)n + 64 > INTERN_MAX ||
	    ps->gen != pftrace__generation(ps->pt)) {
		ps->gen = pftrace__generation(ps->pt);
		hmap__free(&ps->iids);
		ps->next_iid = 1;
		ps->cleared = true;
	}
	before = pftrace__bytes(ps->pt);
	pb = pftrace__packet_begin(ps->pt);
	if (!pb)
		return;
	pb__varint(pb, PKT_TIMESTAMP, st->ts);
	pb__varint(pb, PKT_TS_CLOCK_ID, CLOCK_BOOTTIME_ID);
	pb__varint(pb, PKT_SEQ_ID, ps->seq);
	pb__varint(pb, PKT_SEQ_FLAGS, (ps->cleared ? SEQ_INCREMENTAL_STATE_CLEARED : 0) |
		   SEQ_NEEDS_INCREMENTAL_STATE);
	ps->cleared = false;
	ps->in_interned = false;
	/* Callstack frames go outermost first; the stack is innermost first. */
	for (int i = 0; i < n; i++) {
		frames[i] = intern_frame(ps, pb, &st->frames[n - 1 - i]);
		h = hash__u64(h ^ frames[i]) + i;
	}
	v = lookup(ps, K_CALLSTACK, h);
	if (v) {
		cs = *v;
	} else {
		cs = add(ps, K_CALLSTACK, h);
		open_interned(ps, pb);
		pb__begin(pb, ID_CALLSTACKS);
		pb__varint(pb, CS_IID, cs);
		for (int i = 0; i < n; i++)
			pb__varint(pb, CS_FRAMES, frames[i]);
		pb__end(pb);
	}
	if (ps->in_interned)
		pb__end(pb);
	pb__begin(pb, PKT_PERF_SAMPLE);
	pb__varint(pb, PS_CPU, st->cpu);
	pb__varint(pb, PS_PID, t->proc->pid);
	pb__varint(pb, PS_TID, t->tid);
	pb__varint(pb, PS_CALLSTACK, cs);
	pb__varint(pb, PS_CPU_MODE, st->kernel_mode ? MODE_KERNEL : MODE_USER);
	pb__end(pb);
	pftrace__packet_end(ps->pt);
	ps->bytes += pftrace__bytes(ps->pt) - before;
}

struct sink pfstacks__sink(struct pfstacks *ps)
{
	return (struct sink){ .ctx = ps, .sample = on_sample };
}
