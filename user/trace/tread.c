// SPDX-License-Identifier: MIT
/*
 * trace/: commands over saved traces: reading them (tread.c), `cgbpf
 * stats` (tstats.c), `export` (export.c), `merge` (merge.c). Beside
 * capture/, which it never includes.
 *
 * Trace reader (user/trace/tread.h): a streaming decoder of the subset of
 * Perfetto's TracePacket that cgbpf writes, with the sequence semantics
 * trace processor applies to it.
 *
 * Each packet is read whole into one buffer (at most MAX_PACKET), its
 * fields indexed in one scan, then applied in the order their meaning
 * needs whatever their order in the bytes: incremental-state reset,
 * defaults, interned data, clock snapshot, timestamp, then the payload.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>
#include "lib/hmap.h"
#include "lib/log.h"
#include "lib/pb.h"
#include "trace/tread.h"

/* Field numbers from perfetto_trace.proto. */
enum {
	TRACE_PACKET = 1,

	PKT_TIMESTAMP = 8,
	PKT_CLOCK_SNAPSHOT = 6,
	PKT_SEQ_ID = 10,
	PKT_TRACK_EVENT = 11,
	PKT_INTERNED = 12,
	PKT_SEQ_FLAGS = 13,
	PKT_STATE_CLEARED = 41,
	PKT_SYSTEM_INFO = 45,
	PKT_COMPRESSED = 50,
	PKT_TS_CLOCK_ID = 58,
	PKT_DEFAULTS = 59,
	PKT_TRACK_DESC = 60,
	PKT_MACHINE_ID = 98,
	PKT_TRACE_ATTRIBUTES = 126,

	DEFAULTS_TS_CLOCK_ID = 58,
	DEFAULTS_TRACK_EVENT = 11,
	TE_DEFAULTS_TRACK_UUID = 11,

	CS_CLOCKS = 1,
	CLOCK_ID = 1,
	CLOCK_TS = 2,
	CLOCK_INCREMENTAL = 3,

	TE_CATEGORY_IIDS = 3,
	TE_ANNOT = 4,
	TE_LEGACY_EVENT = 6,
	TE_TYPE = 9,
	TE_NAME_IID = 10,
	TE_TRACK_UUID = 11,
	TE_CATEGORIES = 22,
	TE_NAME = 23,
	TE_COUNTER_VALUE = 30,
	TE_FLOW_IDS_OLD = 36,
	TE_TERMINATING_FLOW_IDS_OLD = 42,
	TE_DOUBLE_COUNTER_VALUE = 44,
	TE_FLOW_IDS = 47,
	TE_TERMINATING_FLOW_IDS = 48,
	TE_CALLSTACK = 55,
	LE_BIND_ID = 8,
	LE_FLOW_DIRECTION = 13,
	ICS_FRAMES = 1,
	ICS_FUNCTION_NAME = 1,

	DA_NAME_IID = 1,
	DA_BOOL = 2,
	DA_UINT = 3,
	DA_INT = 4,
	DA_DOUBLE = 5,
	DA_STRING = 6,
	DA_POINTER = 7,
	DA_NAME = 10,
	DA_STRING_IID = 17,

	ID_EVENT_CATEGORIES = 1,
	ID_EVENT_NAMES = 2,
	ID_ANNOT_NAMES = 3,
	ID_ANNOT_STRINGS = 29,
	ID_FUNCTION_NAMES = 5,
	ID_FRAMES = 6,
	ID_CALLSTACKS = 7,
	ID_MAPPING_PATHS = 17,
	ID_MAPPINGS = 19,
	INTERNED_IID = 1,
	INTERNED_STR = 2,
	FRAME_IID = 1,
	FRAME_FUNCTION = 2,
	FRAME_MAPPING = 3,
	MAP_IID = 1,
	MAP_PATH_IDS = 7,
	CS_IID = 1,
	CS_FRAMES = 2,
	PKT_PERF_SAMPLE = 66,
	PS_CPU = 1,
	PS_PID = 2,
	PS_TID = 3,
	PS_CALLSTACK = 4,

	TD_UUID = 1,
	TD_NAME = 2,
	TD_PROCESS = 3,
	TD_THREAD = 4,
	TD_PARENT = 5,
	TD_COUNTER = 8,
	TD_STATIC_NAME = 10,
	TD_DESCRIPTION = 14,
	PD_PID = 1,
	PD_CMDLINE = 2,
	PD_NAME = 6,
	PD_LABELS = 8,
	THD_PID = 1,
	THD_TID = 2,
	THD_NAME = 5,
	CD_UNIT = 3,

	SI_UTSNAME = 1,
	SI_MACHINE_NAME = 17,
	TA_ATTRIBUTE = 1,
	TA_KEY = 1,
	TA_INT_VALUE = 2,
	TA_STRING_VALUE = 3,
	TA_BOOL_VALUE = 4,
	TA_DOUBLE_VALUE = 5,
	UTS_SYSNAME = 1,
	UTS_VERSION = 2,
	UTS_RELEASE = 3,
	UTS_MACHINE = 4,
};

enum { SEQ_STATE_CLEARED = 1, SEQ_NEEDS_STATE = 2 };
enum { CLOCK_BOOTTIME = 6, CLOCK_SEQ_FIRST = 64, CLOCK_SEQ_LAST = 127 };
enum { FLOW_IN = 1, FLOW_OUT = 2, FLOW_INOUT = 3 };
enum intern_kind { IK_CATEGORY, IK_EVENT, IK_ANNOT_NAME, IK_STRING, IK_FUNC, IK_PATH, IK__STR };
/* References between interned entries (samples only), kept in seq.iids
 * as numbers: a frame's function name and mapping, a mapping's last path
 * component, a callstack's innermost frame. */
enum ref_kind { RK_FRAME_FUNC = IK__STR, RK_FRAME_MAP, RK_MAP_BASE, RK_CS_LEAF };

/* Limits on what a trace can make the reader hold. */
#define MAX_PACKET (64u << 20)		/* one packet, compressed or inflated */
#define MAX_INTERNED (256u << 20)	/* interned strings of all live sequences */
#define MAX_OPEN (1u << 20)		/* slices open at once, all tracks */
#define MAX_SEQ_CLOCKS 4		/* sequence-scoped clocks per sequence */
#define MAX_GLOBAL_CLOCKS 8
#define MAX_FRAMES 256
#define DENSE_MAX (1u << 16)		/* iids below: an array per kind */
#define PAGE 4096

struct seq_clock {
	uint32_t id;
	bool incremental;
	uint64_t last;		/* the clock's latest value */
	uint64_t ref_clk, ref_boot;
};

struct seq {
	bool valid;		/* incremental state was set */
	uint64_t def_track;
	uint32_t def_clock;	/* 0: none */
	struct seq_clock clocks[MAX_SEQ_CLOCKS];
	int nclocks;
	/* Interned strings: iid -> offset in strs + 1 (0: undefined), in an
	 * array per kind for the small iids writers use, a map beyond. */
	uint32_t *dense[IK__STR];
	uint32_t ndense[IK__STR];
	struct hmap iids;	/* kind << 60 | iid -> offset in strs */
	char *strs;
	size_t len, cap;
	/* The last track an event of this sequence used, and its stack. */
	uint64_t last_key;
	struct stack *last_stack;
};

struct machine {
	struct tread_clock clocks[MAX_GLOBAL_CLOCKS];	/* the latest trace-wide snapshot */
	uint64_t boot;		/* its BOOTTIME */
	int nclocks;
};

/* A slice waiting for its end: a copy of what its begin said. */
struct open_slice {
	uint64_t ts;
	const char *name, *category;
	struct tread_arg *args;
	int nargs;
	uint64_t flow_out[TREAD_MAX_FLOWS], flow_end[TREAD_MAX_FLOWS], flow_in;
	int nflow_out, nflow_end;
	char *buf;		/* owns the copies; kept for the next slice at this depth */
	size_t cap;
};

struct stack {
	uint32_t machine;
	uint64_t track;
	struct open_slice *lv;
	int n, cap;
};

struct reader {
	const char *name;
	const struct tread_ops *ops;
	void *ctx;
	struct tread_stats *st;
	uint64_t off;		/* offset of the packet being read, for messages */
	int err;
	struct hmap seqs;	/* machine << 32 | seq -> struct seq * */
	struct seq *last_seq;	/* the latest looked up, and its key */
	uint64_t last_seq_key;
	struct hmap machines;	/* machine -> struct machine * */
	struct hmap stacks;	/* track key -> struct stack * */
	size_t interned;	/* bytes of interned strings held */
	size_t open;		/* slices open */
	char *scratch;		/* NUL-terminated copies of one packet's strings */
	size_t slen, scap;
	uint8_t *zbuf;		/* an inflated compressed_packets */
	size_t zcap;
	bool in_compressed;
};

static int fail(struct reader *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int fail(struct reader *r, const char *fmt, ...)
{
	char msg[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	err("%s: byte %" PRIu64 ": %s", r->name, r->off, msg);
	r->err = -EINVAL;
	return -EINVAL;
}

/* Iterates the fields of a message; rc < 0 after a malformed one. */
#define FOR_FIELDS(f, data, len, rc)                                                         \
	for (const uint8_t *p_ = ((rc) = 0, (data)), *e_ = p_ ? p_ + (len) : NULL;           \
	     p_ && ((rc) = pb__next_field(&p_, e_, &(f))) > 0;)

static int need_wt(struct reader *r, const struct pb_field *f, int wt, const char *what)
{
	if (f->wt == wt)
		return 0;
	return fail(r, "%s: field %" PRIu32 " has wire type %d", what, f->id, f->wt);
}

/* A NUL-terminated copy of a LEN field's bytes in the packet's scratch
 * (sized at the packet's start so that it never moves while in use). */
static const char *str(struct reader *r, const struct pb_field *f)
{
	char *s;

	if (r->slen + f->len + 1 > r->scap)
		return "";	/* cannot happen: scratch holds a packet's bytes */
	s = r->scratch + r->slen;
	memcpy(s, f->data, f->len);
	s[f->len] = 0;
	r->slen += f->len + 1;
	return s;
}

static int scratch_reserve(struct reader *r, size_t len)
{
	size_t need = 2 * len + 256;

	r->slen = 0;
	if (need <= r->scap)
		return 0;
	free(r->scratch);
	r->scratch = malloc(need);
	if (!r->scratch) {
		r->scap = 0;
		return -ENOMEM;
	}
	r->scap = need;
	return 0;
}

/* ------------------------------------------------------------ sequences */

static void seq_clear(struct reader *r, struct seq *s)
{
	r->interned -= s->len;
	hmap__free(&s->iids);
	for (int k = 0; k < IK__STR; k++)
		if (s->dense[k])
			memset(s->dense[k], 0, s->ndense[k] * sizeof(uint32_t));
	s->len = 0;
	s->def_track = 0;
	s->def_clock = 0;
	s->nclocks = 0;
	s->valid = true;
}

static struct seq *seq_get(struct reader *r, uint32_t machine, uint32_t id)
{
	uint64_t key = (uint64_t)machine << 32 | id;
	uint64_t *v;
	struct seq *s;

	if (r->last_seq && r->last_seq_key == key)
		return r->last_seq;
	v = hmap__get(&r->seqs, key);
	if (v) {
		s = (struct seq *)(uintptr_t)*v;
	} else {
		s = calloc(1, sizeof(*s));
		if (!s || hmap__put(&r->seqs, key, (uintptr_t)s)) {
			free(s);
			return NULL;
		}
	}
	r->last_seq = s;
	r->last_seq_key = key;
	return s;
}

/* seq.iids' key: an interned string's (enum intern_kind) or a reference's
 * (enum ref_kind). */
static uint64_t ref_key(int kind, uint64_t iid)
{
	return (uint64_t)kind << 60 | (iid & ((1ull << 60) - 1));
}

static int intern_add(struct reader *r, struct seq *s, enum intern_kind k, const struct pb_field *f)
{
	const uint8_t *text = NULL;
	size_t len = 0, need;
	uint64_t iid = 0;
	struct pb_field g;
	int rc;

	FOR_FIELDS(g, f->data, f->len, rc) {
		if (g.id == INTERNED_IID && g.wt == PB_WIRE_VARINT)
			iid = g.v;
		else if (g.id == INTERNED_STR && g.wt == PB_WIRE_LEN)
			text = g.data, len = g.len;
	}
	if (rc < 0)
		return fail(r, "malformed interned entry");
	if (!text)
		return 0;	/* an entry without a string: nothing to resolve */
	if (!iid)
		return fail(r, "interned string with iid 0");
	if (r->interned + len + 1 > MAX_INTERNED)
		return fail(r, "more than %u MiB of interned strings", MAX_INTERNED >> 20);
	need = s->len + len + 1;
	if (need > s->cap) {
		size_t nc = s->cap ? s->cap : 4096;
		char *n;

		while (nc < need)
			nc *= 2;
		n = realloc(s->strs, nc);
		if (!n)
			return -ENOMEM;
		s->strs = n;
		s->cap = nc;
	}
	memcpy(s->strs + s->len, text, len);
	s->strs[s->len + len] = 0;
	/* A later definition of the same iid replaces the earlier one. */
	if (iid < DENSE_MAX) {
		if (iid >= s->ndense[k]) {
			uint32_t nn = s->ndense[k] ? s->ndense[k] : 1024;
			uint32_t *d;

			while (nn <= iid)
				nn *= 2;
			d = realloc(s->dense[k], nn * sizeof(*d));
			if (!d)
				return -ENOMEM;
			memset(d + s->ndense[k], 0, (nn - s->ndense[k]) * sizeof(*d));
			s->dense[k] = d;
			s->ndense[k] = nn;
		}
		s->dense[k][iid] = s->len + 1;
	} else if (hmap__put(&s->iids, ref_key(k, iid), s->len)) {
		return -ENOMEM;
	}
	s->len += len + 1;
	r->interned += len + 1;
	return 0;
}

/* A Frame, Mapping or Callstack of InternedData: what a sample's
 * innermost function needs of it (ref_kind). */
static int intern_ref(struct reader *r, struct seq *s, uint32_t id, const struct pb_field *f)
{
	uint64_t iid = 0, a = 0, b = 0;
	struct pb_field g;
	int rc;

	FOR_FIELDS(g, f->data, f->len, rc) {
		if (g.id == 1 && g.wt == PB_WIRE_VARINT) {
			iid = g.v;	/* FRAME_IID, MAP_IID, CS_IID */
		} else if (id == ID_FRAMES && g.id == FRAME_FUNCTION && g.wt == PB_WIRE_VARINT) {
			a = g.v;
		} else if (id == ID_FRAMES && g.id == FRAME_MAPPING && g.wt == PB_WIRE_VARINT) {
			b = g.v;
		} else if ((id == ID_MAPPINGS && g.id == MAP_PATH_IDS) ||
			   (id == ID_CALLSTACKS && g.id == CS_FRAMES)) {
			/* Repeated: the last one (the path's last component,
			 * the innermost frame), packed or not. */
			if (g.wt == PB_WIRE_VARINT) {
				a = g.v;
			} else if (g.wt == PB_WIRE_LEN) {
				const uint8_t *p = g.data, *e = g.data + g.len;

				while (p < e)
					if (!pb__get_varint(&p, e, &a))
						return fail(r, "malformed packed ids");
			}
		}
	}
	if (rc < 0)
		return fail(r, "malformed interned entry");
	if (!iid)
		return 0;
	if (id == ID_FRAMES)
		return hmap__put(&s->iids, ref_key(RK_FRAME_FUNC, iid), a) ||
		       hmap__put(&s->iids, ref_key(RK_FRAME_MAP, iid), b) ? -ENOMEM : 0;
	return hmap__put(&s->iids, ref_key(id == ID_MAPPINGS ? RK_MAP_BASE : RK_CS_LEAF, iid), a) ?
		       -ENOMEM : 0;
}

static int interned(struct reader *r, struct seq *s, const struct pb_field *f)
{
	struct pb_field g;
	int rc, err;

	FOR_FIELDS(g, f->data, f->len, rc) {
		enum intern_kind k;

		switch (g.id) {
		case ID_EVENT_CATEGORIES:
			k = IK_CATEGORY;
			break;
		case ID_EVENT_NAMES:
			k = IK_EVENT;
			break;
		case ID_ANNOT_NAMES:
			k = IK_ANNOT_NAME;
			break;
		case ID_ANNOT_STRINGS:
			k = IK_STRING;
			break;
		case ID_FUNCTION_NAMES:
		case ID_MAPPING_PATHS:
			if (!r->ops->sample)
				continue;
			k = g.id == ID_FUNCTION_NAMES ? IK_FUNC : IK_PATH;
			break;
		case ID_FRAMES:
		case ID_MAPPINGS:
		case ID_CALLSTACKS:
			if (!r->ops->sample)
				continue;
			if ((err = need_wt(r, &g, PB_WIRE_LEN, "InternedData")))
				return err;
			if ((err = intern_ref(r, s, g.id, &g)))
				return err;
			continue;
		default:
			continue;	/* the rest: not resolved here */
		}
		if ((err = need_wt(r, &g, PB_WIRE_LEN, "InternedData")))
			return err;
		if ((err = intern_add(r, s, k, &g)))
			return err;
	}
	return rc < 0 ? fail(r, "malformed InternedData") : 0;
}

/* An interned string, or NULL where it was never defined. */
static const char *soft_lookup(struct seq *s, enum intern_kind k, uint64_t iid)
{
	uint64_t *v;

	if (iid < s->ndense[k] && s->dense[k][iid])
		return s->strs + s->dense[k][iid] - 1;
	v = iid >= DENSE_MAX ? hmap__get(&s->iids, ref_key(k, iid)) : NULL;
	return v ? s->strs + *v : NULL;
}

static int lookup(struct reader *r, struct seq *s, enum intern_kind k, uint64_t iid,
		  const char **out)
{
	static const char *const what[] = { "category", "event name", "annotation name",
					    "string value", "function name", "mapping path" };

	*out = soft_lookup(s, k, iid);
	if (!*out)
		return fail(r, "interned %s %" PRIu64 " was never defined on its sequence",
			    what[k], iid);
	return 0;
}

static int defaults(struct reader *r, struct seq *s, const struct pb_field *f)
{
	struct pb_field g, h;
	int rc, rc2;

	FOR_FIELDS(g, f->data, f->len, rc) {
		if (g.id == DEFAULTS_TS_CLOCK_ID && g.wt == PB_WIRE_VARINT) {
			s->def_clock = g.v;
		} else if (g.id == DEFAULTS_TRACK_EVENT && g.wt == PB_WIRE_LEN) {
			FOR_FIELDS(h, g.data, g.len, rc2) {
				if (h.id == TE_DEFAULTS_TRACK_UUID && h.wt == PB_WIRE_VARINT)
					s->def_track = h.v;
			}
			if (rc2 < 0)
				return fail(r, "malformed TrackEventDefaults");
		}
	}
	return rc < 0 ? fail(r, "malformed TracePacketDefaults") : 0;
}

/* ------------------------------------------------------------ clocks */

static struct machine *machine_get(struct reader *r, uint32_t id)
{
	uint64_t *v = hmap__get(&r->machines, id);
	struct machine *m;

	if (v)
		return (struct machine *)(uintptr_t)*v;
	m = calloc(1, sizeof(*m));
	if (!m || hmap__put(&r->machines, id, (uintptr_t)m)) {
		free(m);
		return NULL;
	}
	return m;
}

static int clock_snapshot(struct reader *r, uint32_t machine, struct seq *s,
			  const struct pb_field *f)
{
	struct tread_clock global[MAX_GLOBAL_CLOCKS];
	struct seq_clock local[MAX_SEQ_CLOCKS];
	int ng = 0, nl = 0, rc, rc2;
	bool have_boot = false;
	uint64_t boot = 0;
	struct pb_field g, h;

	FOR_FIELDS(g, f->data, f->len, rc) {
		uint64_t id = 0, ts = 0;
		bool incr = false, has_ts = false;

		if (g.id != CS_CLOCKS)
			continue;
		if (g.wt != PB_WIRE_LEN)
			return fail(r, "ClockSnapshot.clocks is not a message");
		FOR_FIELDS(h, g.data, g.len, rc2) {
			if (h.id == CLOCK_ID && h.wt == PB_WIRE_VARINT)
				id = h.v;
			else if (h.id == CLOCK_TS && h.wt == PB_WIRE_VARINT)
				ts = h.v, has_ts = true;
			else if (h.id == CLOCK_INCREMENTAL && h.wt == PB_WIRE_VARINT)
				incr = h.v;
		}
		if (rc2 < 0)
			return fail(r, "malformed ClockSnapshot.Clock");
		if (!id || !has_ts)
			return fail(r, "ClockSnapshot clock without id or timestamp");
		if (id == CLOCK_BOOTTIME)
			boot = ts, have_boot = true;
		if (id >= CLOCK_SEQ_FIRST && id <= CLOCK_SEQ_LAST) {
			if (nl == MAX_SEQ_CLOCKS)
				return fail(r, "more than %d sequence-scoped clocks", MAX_SEQ_CLOCKS);
			local[nl++] = (struct seq_clock){ .id = id, .incremental = incr, .last = ts,
							  .ref_clk = ts };
		} else if (ng < MAX_GLOBAL_CLOCKS) {
			global[ng++] = (struct tread_clock){ .id = id, .ts = ts };
		}
	}
	if (rc < 0)
		return fail(r, "malformed ClockSnapshot");
	if (nl) {
		if (!s)
			return fail(r, "sequence-scoped clock outside a sequence");
		if (!have_boot)
			return fail(r, "a sequence-scoped clock without BOOTTIME in its snapshot");
		/* A snapshot redefines the sequence's clocks it names. */
		for (int i = 0; i < nl; i++) {
			int j;

			local[i].ref_boot = boot;
			for (j = 0; j < s->nclocks && s->clocks[j].id != local[i].id; j++)
				;
			if (j == s->nclocks) {
				if (s->nclocks == MAX_SEQ_CLOCKS)
					return fail(r, "more than %d sequence-scoped clocks",
						    MAX_SEQ_CLOCKS);
				s->nclocks++;
			}
			s->clocks[j] = local[i];
		}
		return 0;
	}
	if (have_boot) {
		struct machine *m = machine_get(r, machine);

		if (!m)
			return -ENOMEM;
		memcpy(m->clocks, global, ng * sizeof(global[0]));
		m->nclocks = ng;
		m->boot = boot;
	}
	if (r->ops->clock && ng)
		return r->ops->clock(r->ctx, machine, global, ng);
	return 0;
}

/* ts in clock id, to BOOTTIME. */
static int resolve_ts(struct reader *r, uint32_t machine, struct seq *s, uint32_t clock,
		      uint64_t ts, uint64_t *out)
{
	struct machine *m;

	if (clock == CLOCK_BOOTTIME) {
		*out = ts;
		return 0;
	}
	if (clock >= CLOCK_SEQ_FIRST && clock <= CLOCK_SEQ_LAST) {
		for (int i = 0; s && i < s->nclocks; i++) {
			struct seq_clock *c = &s->clocks[i];

			if (c->id != clock)
				continue;
			if (c->incremental)
				ts = c->last += ts;
			*out = c->ref_boot + (ts - c->ref_clk);
			return 0;
		}
		return fail(r, "timestamp on sequence clock %" PRIu32 ", which no snapshot defined",
			    clock);
	}
	m = machine_get(r, machine);
	if (!m)
		return -ENOMEM;
	for (int i = 0; i < m->nclocks; i++) {
		if (m->clocks[i].id == clock) {
			*out = m->boot + (ts - m->clocks[i].ts);
			return 0;
		}
	}
	return fail(r, "timestamp on clock %" PRIu32 ", which no snapshot defined", clock);
}

/* ------------------------------------------------------------ tracks */

static int track_desc(struct reader *r, uint32_t machine, uint64_t ts, const struct pb_field *f)
{
	struct tread_track t = { .machine = machine, .ts = ts, .name = "", .description = "",
				 .cmdline = "", .labels = "" };
	const char *pname = NULL, *tname = NULL, *name = NULL;
	char *labels = NULL, *cmd = NULL;
	struct pb_field g, h;
	int rc, rc2, err;
	size_t ll = 0, cl = 0;

	/* Labels and cmdline parts are joined in scratch, after the packet's
	 * other copies: scratch holds 2 * packet + 256 bytes. */
	FOR_FIELDS(g, f->data, f->len, rc) {
		switch (g.id) {
		case TD_UUID:
			if ((err = need_wt(r, &g, PB_WIRE_VARINT, "TrackDescriptor")))
				return err;
			t.uuid = g.v;
			break;
		case TD_PARENT:
			if ((err = need_wt(r, &g, PB_WIRE_VARINT, "TrackDescriptor")))
				return err;
			t.parent = g.v;
			break;
		case TD_NAME:
		case TD_STATIC_NAME:
			if ((err = need_wt(r, &g, PB_WIRE_LEN, "TrackDescriptor")))
				return err;
			name = str(r, &g);
			break;
		case TD_DESCRIPTION:
			if ((err = need_wt(r, &g, PB_WIRE_LEN, "TrackDescriptor")))
				return err;
			t.description = str(r, &g);
			break;
		case TD_COUNTER:
			if ((err = need_wt(r, &g, PB_WIRE_LEN, "TrackDescriptor")))
				return err;
			t.kind = TREAD_TRACK_COUNTER;
			FOR_FIELDS(h, g.data, g.len, rc2) {
				if (h.id == CD_UNIT && h.wt == PB_WIRE_VARINT)
					t.unit = h.v;
			}
			if (rc2 < 0)
				return fail(r, "malformed CounterDescriptor");
			break;
		case TD_PROCESS:
			if ((err = need_wt(r, &g, PB_WIRE_LEN, "TrackDescriptor")))
				return err;
			t.kind = TREAD_TRACK_PROCESS;
			FOR_FIELDS(h, g.data, g.len, rc2) {
				if (h.id == PD_PID && h.wt == PB_WIRE_VARINT) {
					t.pid = (int32_t)h.v;
				} else if (h.id == PD_NAME && h.wt == PB_WIRE_LEN) {
					pname = str(r, &h);
				} else if ((h.id == PD_CMDLINE || h.id == PD_LABELS) &&
					   h.wt == PB_WIRE_LEN) {
					char **dst = h.id == PD_CMDLINE ? &cmd : &labels;
					size_t *dl = h.id == PD_CMDLINE ? &cl : &ll;
					const char *part = str(r, &h);

					/* Joined with ' ' (cmdline) or ','. */
					if (!*dst) {
						*dst = (char *)part;
						*dl = h.len;
					} else if (*dst + *dl + 1 == part) {
						(*dst)[*dl] = h.id == PD_CMDLINE ? ' ' : ',';
						*dl += 1 + h.len;
					}
				}
			}
			if (rc2 < 0)
				return fail(r, "malformed ProcessDescriptor");
			break;
		case TD_THREAD:
			if ((err = need_wt(r, &g, PB_WIRE_LEN, "TrackDescriptor")))
				return err;
			t.kind = TREAD_TRACK_THREAD;
			FOR_FIELDS(h, g.data, g.len, rc2) {
				if (h.id == THD_PID && h.wt == PB_WIRE_VARINT)
					t.pid = (int32_t)h.v;
				else if (h.id == THD_TID && h.wt == PB_WIRE_VARINT)
					t.tid = (int32_t)h.v;
				else if (h.id == THD_NAME && h.wt == PB_WIRE_LEN)
					tname = str(r, &h);
			}
			if (rc2 < 0)
				return fail(r, "malformed ThreadDescriptor");
			break;
		default:
			break;
		}
	}
	if (rc < 0)
		return fail(r, "malformed TrackDescriptor");
	if (!t.uuid)
		return fail(r, "TrackDescriptor without a uuid");
	t.name = name ? name : t.kind == TREAD_TRACK_PROCESS && pname ? pname :
		 t.kind == TREAD_TRACK_THREAD && tname ? tname : "";
	if (cmd)
		t.cmdline = cmd;
	if (labels)
		t.labels = labels;
	return r->ops->track ? r->ops->track(r->ctx, &t) : 0;
}

/* ------------------------------------------------------------ events */

static uint64_t track_key(uint32_t machine, uint64_t track)
{
	return machine ? hash__u64(track ^ hash__u64(machine)) : track;
}

static struct stack *stack_get(struct reader *r, struct seq *s, uint32_t machine, uint64_t track)
{
	uint64_t key = track_key(machine, track), *v;
	struct stack *st;

	if (s->last_stack && s->last_key == key && s->last_stack->track == track &&
	    s->last_stack->machine == machine)
		return s->last_stack;
	v = hmap__get(&r->stacks, key);
	if (v) {
		st = (struct stack *)(uintptr_t)*v;
	} else {
		st = calloc(1, sizeof(*st));
		if (!st || hmap__put(&r->stacks, key, (uintptr_t)st)) {
			free(st);
			return NULL;
		}
		st->machine = machine;
		st->track = track;
	}
	s->last_key = key;
	s->last_stack = st;
	return st;
}

/* Bytes a copy of an arg array and its strings takes. */
static size_t args_size(const struct tread_arg *a, int n)
{
	size_t sz = n * sizeof(*a);

	for (int i = 0; i < n; i++) {
		sz += strlen(a[i].name) + 1;
		if (a[i].type == TREAD_A_STR)
			sz += strlen(a[i].s) + 1;
	}
	return sz;
}

static char *copy_str(char **p, const char *s)
{
	size_t n = strlen(s) + 1;
	char *d = *p;

	memcpy(d, s, n);
	*p += n;
	return d;
}

static int slice_begin(struct reader *r, struct stack *st, const struct tread_event *e)
{
	struct open_slice *o;
	size_t need;
	char *p;

	if (r->open >= MAX_OPEN)
		return fail(r, "more than %u slices open at once", MAX_OPEN);
	if (st->n == st->cap) {
		int nc = st->cap ? st->cap * 2 : 8;
		struct open_slice *n = realloc(st->lv, nc * sizeof(*n));

		if (!n)
			return -ENOMEM;
		memset(n + st->cap, 0, (nc - st->cap) * sizeof(*n));
		st->lv = n;
		st->cap = nc;
	}
	o = &st->lv[st->n];
	need = strlen(e->name) + strlen(e->category) + 2 + args_size(e->args, e->nargs) +
	       _Alignof(struct tread_arg);
	if (need > o->cap) {
		free(o->buf);
		o->buf = malloc(need);
		o->cap = o->buf ? need : 0;
		if (!o->buf)
			return -ENOMEM;
	}
	/* The arg array first (aligned: malloc's), then the strings. */
	o->args = (struct tread_arg *)o->buf;
	p = o->buf + e->nargs * sizeof(struct tread_arg);
	for (int i = 0; i < e->nargs; i++) {
		o->args[i] = e->args[i];
		o->args[i].name = copy_str(&p, e->args[i].name);
		if (e->args[i].type == TREAD_A_STR)
			o->args[i].s = copy_str(&p, e->args[i].s);
	}
	o->nargs = e->nargs;
	o->name = copy_str(&p, e->name);
	o->category = copy_str(&p, e->category);
	o->ts = e->ts;
	memcpy(o->flow_out, e->flow_out, sizeof(o->flow_out));
	memcpy(o->flow_end, e->flow_end, sizeof(o->flow_end));
	o->nflow_out = e->nflow_out;
	o->nflow_end = e->nflow_end;
	o->flow_in = e->flow_in;
	st->n++;
	r->open++;
	return 0;
}

/* Pops st's innermost slice, ending at e (NULL: the trace ended). */
static int slice_end(struct reader *r, struct stack *st, const struct tread_event *e)
{
	struct open_slice *o = &st->lv[st->n - 1];
	struct tread_slice sl = {
		.machine = st->machine,
		.track = st->track,
		.ts = o->ts,
		.end_ts = e ? e->ts : o->ts,
		.ended = e != NULL,
		.depth = st->n - 1,
		.name = o->name,
		.category = o->category,
		.args = o->args,
		.nargs = o->nargs,
		.end_args = e ? e->args : NULL,
		.nend_args = e ? e->nargs : 0,
		.flow_in = o->flow_in,
		.nflow_out = o->nflow_out,
		.nflow_end = o->nflow_end,
		.frames = e ? e->frames : NULL,
		.nframes = e ? e->nframes : 0,
	};

	memcpy(sl.flow_out, o->flow_out, sizeof(sl.flow_out));
	memcpy(sl.flow_end, o->flow_end, sizeof(sl.flow_end));
	st->n--;
	r->open--;
	if (e)
		r->st->slices++;
	else
		r->st->unended++;
	return r->ops->slice ? r->ops->slice(r->ctx, &sl) : 0;
}

/* Adds a flow id (varint, fixed64 or packed) to ids. */
static int flows(struct reader *r, const struct pb_field *f, bool fixed, uint64_t *ids, int *n)
{
	const uint8_t *q = f->data, *qe = f->data ? f->data + f->len : NULL;
	uint64_t v;

	if (f->wt == PB_WIRE_VARINT || f->wt == PB_WIRE_FIXED64) {
		if (*n < TREAD_MAX_FLOWS)
			ids[(*n)++] = f->v;
		return 0;
	}
	if (f->wt != PB_WIRE_LEN)
		return fail(r, "flow id field %" PRIu32 " has wire type %d", f->id, f->wt);
	while (q < qe) {
		if (fixed) {
			if (qe - q < 8)
				return fail(r, "packed fixed64 flow ids of %zu bytes", f->len);
			memcpy(&v, q, 8);
			q += 8;
		} else if (!pb__get_varint(&q, qe, &v)) {
			return fail(r, "malformed packed flow ids");
		}
		if (*n < TREAD_MAX_FLOWS)
			ids[(*n)++] = v;
	}
	return 0;
}

static int annotation(struct reader *r, struct seq *s, const struct pb_field *f, struct tread_arg *a)
{
	struct pb_field g;
	int rc, err;
	bool named = false;

	a->name = "";
	a->type = TREAD_A_OTHER;
	a->u = 0;
	FOR_FIELDS(g, f->data, f->len, rc) {
		switch (g.id) {
		case DA_NAME_IID:
			if ((err = need_wt(r, &g, PB_WIRE_VARINT, "DebugAnnotation")) ||
			    (err = lookup(r, s, IK_ANNOT_NAME, g.v, &a->name)))
				return err;
			named = true;
			break;
		case DA_NAME:
			if ((err = need_wt(r, &g, PB_WIRE_LEN, "DebugAnnotation")))
				return err;
			a->name = str(r, &g);
			named = true;
			break;
		case DA_BOOL:
			a->type = TREAD_A_BOOL;
			a->u = g.v != 0;
			break;
		case DA_UINT:
			a->type = TREAD_A_UINT;
			a->u = g.v;
			break;
		case DA_INT:
			a->type = TREAD_A_INT;
			a->i = (int64_t)g.v;
			break;
		case DA_POINTER:
			a->type = TREAD_A_PTR;
			a->u = g.v;
			break;
		case DA_DOUBLE:
			if ((err = need_wt(r, &g, PB_WIRE_FIXED64, "DebugAnnotation")))
				return err;
			a->type = TREAD_A_DOUBLE;
			memcpy(&a->d, &g.v, sizeof(a->d));
			break;
		case DA_STRING:
			if ((err = need_wt(r, &g, PB_WIRE_LEN, "DebugAnnotation")))
				return err;
			a->type = TREAD_A_STR;
			a->s = str(r, &g);
			break;
		case DA_STRING_IID:
			if ((err = need_wt(r, &g, PB_WIRE_VARINT, "DebugAnnotation")) ||
			    (err = lookup(r, s, IK_STRING, g.v, &a->s)))
				return err;
			a->type = TREAD_A_STR;
			break;
		default:
			break;	/* nested, JSON, proto values: TREAD_A_OTHER */
		}
		if (g.id >= DA_BOOL && g.id <= DA_POINTER && g.id != DA_STRING && g.id != DA_DOUBLE &&
		    g.wt != PB_WIRE_VARINT)
			return fail(r, "DebugAnnotation: field %" PRIu32 " has wire type %d", g.id,
				    g.wt);
	}
	if (rc < 0)
		return fail(r, "malformed DebugAnnotation");
	if (!named)
		return fail(r, "DebugAnnotation without a name");
	return 0;
}

/* A TrackEvent being read: where its args and frames go, and what its
 * fields say beside the tread_event itself. */
struct event_fields {
	struct tread_arg *args;
	const char **frames;
	uint64_t type;
	bool has_track, has_cat;
};

/* TrackEvent.category_iids (one, or packed): the first names e's
 * category. */
static int category_iid(struct reader *r, struct seq *s, const struct pb_field *g,
			struct tread_event *e, struct event_fields *ef)
{
	uint64_t iid = g->v;
	int err;

	if (ef->has_cat)
		return 0;	/* the first category is the one kept */
	if (g->wt == PB_WIRE_LEN) {
		const uint8_t *q = g->data;

		if (!g->len)
			return 0;
		if (!pb__get_varint(&q, g->data + g->len, &iid))
			return fail(r, "malformed packed category iids");
	} else if ((err = need_wt(r, g, PB_WIRE_VARINT, "TrackEvent"))) {
		return err;
	}
	if ((err = lookup(r, s, IK_CATEGORY, iid, &e->category)))
		return err;
	ef->has_cat = true;
	return 0;
}

/* TrackEvent.legacy_event: its bind id, a flow into or out of e. */
static int legacy_event(struct reader *r, const struct pb_field *g, struct tread_event *e)
{
	uint64_t bind = 0, dir = 0;
	struct pb_field h;
	int rc, err;

	if ((err = need_wt(r, g, PB_WIRE_LEN, "TrackEvent")))
		return err;
	FOR_FIELDS(h, g->data, g->len, rc) {
		if (h.id == LE_BIND_ID && (h.wt == PB_WIRE_VARINT || h.wt == PB_WIRE_FIXED64))
			bind = h.v;
		else if (h.id == LE_FLOW_DIRECTION && h.wt == PB_WIRE_VARINT)
			dir = h.v;
	}
	if (rc < 0)
		return fail(r, "malformed LegacyEvent");
	if (bind && (dir == FLOW_IN || dir == FLOW_INOUT))
		e->flow_in = bind;
	if (bind && (dir == FLOW_OUT || dir == FLOW_INOUT) && e->nflow_out < TREAD_MAX_FLOWS)
		e->flow_out[e->nflow_out++] = bind;
	return 0;
}

/* TrackEvent.callstack: its frames' function names, into ef->frames. */
static int callstack(struct reader *r, const struct pb_field *g, struct tread_event *e,
		     struct event_fields *ef)
{
	struct pb_field h, k;
	int rc, rc2, err;

	if ((err = need_wt(r, g, PB_WIRE_LEN, "TrackEvent")))
		return err;
	FOR_FIELDS(h, g->data, g->len, rc) {
		if (h.id != ICS_FRAMES || h.wt != PB_WIRE_LEN)
			continue;
		FOR_FIELDS(k, h.data, h.len, rc2) {
			if (k.id == ICS_FUNCTION_NAME && k.wt == PB_WIRE_LEN && e->nframes < MAX_FRAMES)
				ef->frames[e->nframes++] = str(r, &k);
		}
		if (rc2 < 0)
			return fail(r, "malformed callstack frame");
	}
	if (rc < 0)
		return fail(r, "malformed callstack");
	return 0;
}

/* One field g of a TrackEvent, into e and ef. */
static int event_field(struct reader *r, struct seq *s, const struct pb_field *g,
		       struct tread_event *e, struct event_fields *ef)
{
	int err;

	switch (g->id) {
	case TE_TYPE:
		if ((err = need_wt(r, g, PB_WIRE_VARINT, "TrackEvent")))
			return err;
		ef->type = g->v;
		return 0;
	case TE_TRACK_UUID:
		if ((err = need_wt(r, g, PB_WIRE_VARINT, "TrackEvent")))
			return err;
		e->track = g->v;
		ef->has_track = true;
		return 0;
	case TE_NAME_IID:
		if ((err = need_wt(r, g, PB_WIRE_VARINT, "TrackEvent")))
			return err;
		return lookup(r, s, IK_EVENT, g->v, &e->name);
	case TE_NAME:
		if ((err = need_wt(r, g, PB_WIRE_LEN, "TrackEvent")))
			return err;
		e->name = str(r, g);
		return 0;
	case TE_CATEGORY_IIDS:
		return category_iid(r, s, g, e, ef);
	case TE_CATEGORIES:
		if ((err = need_wt(r, g, PB_WIRE_LEN, "TrackEvent")))
			return err;
		if (!ef->has_cat)
			e->category = str(r, g);
		ef->has_cat = true;
		return 0;
	case TE_ANNOT:
		if ((err = need_wt(r, g, PB_WIRE_LEN, "TrackEvent")))
			return err;
		if (e->nargs == TREAD_MAX_ARGS) {
			r->st->dropped_args++;
			return 0;
		}
		if ((err = annotation(r, s, g, &ef->args[e->nargs])))
			return err;
		e->nargs++;
		return 0;
	case TE_COUNTER_VALUE:
		if ((err = need_wt(r, g, PB_WIRE_VARINT, "TrackEvent")))
			return err;
		e->value = (int64_t)g->v;
		return 0;
	case TE_DOUBLE_COUNTER_VALUE:
		if ((err = need_wt(r, g, PB_WIRE_FIXED64, "TrackEvent")))
			return err;
		memcpy(&e->dvalue, &g->v, sizeof(e->dvalue));
		e->is_double = true;
		return 0;
	case TE_FLOW_IDS_OLD:
	case TE_FLOW_IDS:
		return flows(r, g, g->id == TE_FLOW_IDS, e->flow_out, &e->nflow_out);
	case TE_TERMINATING_FLOW_IDS_OLD:
	case TE_TERMINATING_FLOW_IDS:
		return flows(r, g, g->id == TE_TERMINATING_FLOW_IDS, e->flow_end, &e->nflow_end);
	case TE_LEGACY_EVENT:
		return legacy_event(r, g, e);
	case TE_CALLSTACK:
		return callstack(r, g, e, ef);
	default:
		return 0;
	}
}

static int track_event(struct reader *r, uint32_t machine, uint32_t seq_id, struct seq *s,
		       bool has_ts, uint64_t ts, const struct pb_field *f)
{
	struct tread_arg args[TREAD_MAX_ARGS];
	const char *frames[MAX_FRAMES];
	struct tread_event e = { .machine = machine, .seq = seq_id, .ts = ts, .name = "",
				 .category = "", .args = args, .frames = frames };
	struct event_fields ef = { .args = args, .frames = frames };
	struct pb_field g;
	int rc, err;

	FOR_FIELDS(g, f->data, f->len, rc) {
		if ((err = event_field(r, s, &g, &e, &ef)))
			return err;
	}
	if (rc < 0)
		return fail(r, "malformed TrackEvent");
	if (ef.type < TREAD_SLICE_BEGIN || ef.type > TREAD_COUNTER)
		return 0;	/* legacy (typeless) events: not written by cgbpf */
	if (!has_ts)
		return fail(r, "TrackEvent without a timestamp");
	e.type = ef.type;
	if (!ef.has_track)
		e.track = s ? s->def_track : 0;
	if (!e.track)
		return fail(r, "TrackEvent without a track (no track_uuid and no default)");
	r->st->events++;
	if (r->ops->event && (err = r->ops->event(r->ctx, &e)))
		return err;
	if (ef.type == TREAD_SLICE_BEGIN || ef.type == TREAD_SLICE_END) {
		struct stack *st = stack_get(r, s, machine, e.track);

		if (!st)
			return -ENOMEM;
		if (ef.type == TREAD_SLICE_BEGIN)
			return slice_begin(r, st, &e);
		if (!st->n) {
			r->st->unmatched_ends++;
			return 0;
		}
		return slice_end(r, st, &e);
	}
	return 0;
}

/* ------------------------------------------------------------ metadata */

static int attributes(struct reader *r, uint32_t machine, const struct pb_field *f)
{
	struct pb_field g, h;
	int rc, rc2, err;

	FOR_FIELDS(g, f->data, f->len, rc) {
		const char *key = NULL, *val = NULL;
		char num[40];

		if (g.id != TA_ATTRIBUTE || g.wt != PB_WIRE_LEN)
			continue;
		FOR_FIELDS(h, g.data, g.len, rc2) {
			if (h.id == TA_KEY && h.wt == PB_WIRE_LEN) {
				key = str(r, &h);
			} else if (h.id == TA_STRING_VALUE && h.wt == PB_WIRE_LEN) {
				val = str(r, &h);
			} else if ((h.id == TA_INT_VALUE || h.id == TA_BOOL_VALUE) &&
				   h.wt == PB_WIRE_VARINT) {
				snprintf(num, sizeof(num), "%" PRId64, (int64_t)h.v);
				val = num;
			} else if (h.id == TA_DOUBLE_VALUE && h.wt == PB_WIRE_FIXED64) {
				double d;

				memcpy(&d, &h.v, sizeof(d));
				snprintf(num, sizeof(num), "%.17g", d);
				val = num;
			}
		}
		if (rc2 < 0)
			return fail(r, "malformed TraceAttributes.Attribute");
		if (key && val && r->ops->attr && (err = r->ops->attr(r->ctx, machine, key, val)))
			return err;
	}
	return rc < 0 ? fail(r, "malformed TraceAttributes") : 0;
}

static int system_info(struct reader *r, uint32_t machine, const struct pb_field *f)
{
	static const char *const uts[] = { [UTS_SYSNAME] = "system_info.utsname.sysname",
					   [UTS_VERSION] = "system_info.utsname.version",
					   [UTS_RELEASE] = "system_info.utsname.release",
					   [UTS_MACHINE] = "system_info.utsname.machine" };
	struct pb_field g, h;
	int rc, rc2, err;

	if (!r->ops->attr)
		return 0;
	FOR_FIELDS(g, f->data, f->len, rc) {
		if (g.id == SI_MACHINE_NAME && g.wt == PB_WIRE_LEN) {
			if ((err = r->ops->attr(r->ctx, machine, "system_info.machine_name",
						str(r, &g))))
				return err;
		} else if (g.id == SI_UTSNAME && g.wt == PB_WIRE_LEN) {
			FOR_FIELDS(h, g.data, g.len, rc2) {
				if (h.id >= UTS_SYSNAME && h.id <= UTS_MACHINE && h.wt == PB_WIRE_LEN &&
				    (err = r->ops->attr(r->ctx, machine, uts[h.id], str(r, &h))))
					return err;
			}
			if (rc2 < 0)
				return fail(r, "malformed utsname");
		}
	}
	return rc < 0 ? fail(r, "malformed SystemInfo") : 0;
}

/* ------------------------------------------------------------ packets */

static int packets(struct reader *r, const uint8_t *data, size_t len, uint32_t machine);

static int compressed(struct reader *r, const struct pb_field *f, uint32_t machine)
{
	z_stream z = { 0 };
	int zr, err;
	size_t n;

	if (r->in_compressed)
		return fail(r, "compressed_packets inside compressed_packets");
	if (inflateInit2(&z, 15 + 32) != Z_OK)	/* zlib or gzip */
		return -ENOMEM;
	z.next_in = (Bytef *)f->data;
	z.avail_in = f->len;
	n = 0;
	for (;;) {
		if (n == r->zcap) {
			size_t nc = r->zcap ? r->zcap * 2 : 1u << 16;
			uint8_t *b;

			if (nc > MAX_PACKET) {
				inflateEnd(&z);
				return fail(r, "compressed_packets inflate to over %u MiB",
					    MAX_PACKET >> 20);
			}
			b = realloc(r->zbuf, nc);
			if (!b) {
				inflateEnd(&z);
				return -ENOMEM;
			}
			r->zbuf = b;
			r->zcap = nc;
		}
		z.next_out = r->zbuf + n;
		z.avail_out = r->zcap - n;
		zr = inflate(&z, Z_NO_FLUSH);
		n = r->zcap - z.avail_out;
		if (zr == Z_STREAM_END)
			break;
		if (zr == Z_OK || (zr == Z_BUF_ERROR && !z.avail_out))
			continue;	/* more output room needed */
		inflateEnd(&z);
		return fail(r, "compressed_packets do not inflate (%s)",
			    zr == Z_BUF_ERROR ? "cut short" : z.msg ? z.msg : "corrupt");
	}
	inflateEnd(&z);
	r->in_compressed = true;
	err = packets(r, r->zbuf, n, machine);
	r->in_compressed = false;
	return err;
}

static uint64_t ref(struct seq *s, enum ref_kind k, uint64_t iid)
{
	uint64_t *v = iid ? hmap__get(&s->iids, ref_key(k, iid)) : NULL;

	return v ? *v : 0;
}

/* A PerfSample: its innermost frame's function, else its mapping's file
 * name (a kernel frame's: none), else "[unknown]", as record counts it. */
static int perf_sample(struct reader *r, uint32_t machine, struct seq *s, uint64_t ts,
		       const struct pb_field *b)
{
	struct tread_sample smp = { .machine = machine, .ts = ts };
	uint64_t cs = 0, frame;
	struct pb_field g;
	int rc;

	FOR_FIELDS(g, b->data, b->len, rc) {
		if (g.wt != PB_WIRE_VARINT)
			continue;
		if (g.id == PS_CPU)
			smp.cpu = g.v;
		else if (g.id == PS_PID)
			smp.pid = g.v;
		else if (g.id == PS_TID)
			smp.tid = g.v;
		else if (g.id == PS_CALLSTACK)
			cs = g.v;
	}
	if (rc < 0)
		return fail(r, "malformed PerfSample");
	frame = ref(s, RK_CS_LEAF, cs);
	smp.leaf = soft_lookup(s, IK_FUNC, ref(s, RK_FRAME_FUNC, frame));
	if (!smp.leaf && frame) {
		smp.leaf = soft_lookup(s, IK_PATH, ref(s, RK_MAP_BASE, ref(s, RK_FRAME_MAP, frame)));
		if (smp.leaf && !strcmp(smp.leaf, "kernel"))
			smp.leaf = NULL;
	}
	if (!smp.leaf)
		smp.leaf = "[unknown]";
	smp.has_stack = frame != 0;
	return r->ops->sample(r->ctx, &smp);
}

/* One TracePacket's fields, as found. */
struct pkt {
	bool has_ts, has_clock, has_seq, has_machine, has_defaults, has_snapshot;
	uint64_t ts;
	uint32_t clock, seq, machine, flags;
	struct pb_field defaults, snapshot;
	struct pb_field body[4];	/* payloads, in file order */
	int nbody;
	struct pb_field interned[4];
	int ninterned;
};

/* Sorts the fields of the TracePacket in data into k: what places and
 * times it, and its payloads, to be read once the sequence is known. */
static int packet_fields(struct reader *r, const uint8_t *data, size_t len, struct pkt *k)
{
	struct pb_field f;
	int rc, err;

	FOR_FIELDS(f, data, len, rc) {
		switch (f.id) {
		case PKT_TIMESTAMP:
			if ((err = need_wt(r, &f, PB_WIRE_VARINT, "TracePacket")))
				return err;
			k->ts = f.v;
			k->has_ts = true;
			break;
		case PKT_TS_CLOCK_ID:
			if ((err = need_wt(r, &f, PB_WIRE_VARINT, "TracePacket")))
				return err;
			k->clock = f.v;
			k->has_clock = true;
			break;
		case PKT_SEQ_ID:
			if ((err = need_wt(r, &f, PB_WIRE_VARINT, "TracePacket")))
				return err;
			k->seq = f.v;
			k->has_seq = true;
			break;
		case PKT_MACHINE_ID:
			if ((err = need_wt(r, &f, PB_WIRE_VARINT, "TracePacket")))
				return err;
			k->machine = f.v;
			k->has_machine = true;
			break;
		case PKT_SEQ_FLAGS:
			if ((err = need_wt(r, &f, PB_WIRE_VARINT, "TracePacket")))
				return err;
			k->flags |= f.v;
			break;
		case PKT_STATE_CLEARED:
			if ((err = need_wt(r, &f, PB_WIRE_VARINT, "TracePacket")))
				return err;
			if (f.v)
				k->flags |= SEQ_STATE_CLEARED;
			break;
		case PKT_DEFAULTS:
			if ((err = need_wt(r, &f, PB_WIRE_LEN, "TracePacket")))
				return err;
			k->defaults = f;
			k->has_defaults = true;
			break;
		case PKT_CLOCK_SNAPSHOT:
			if ((err = need_wt(r, &f, PB_WIRE_LEN, "TracePacket")))
				return err;
			k->snapshot = f;
			k->has_snapshot = true;
			break;
		case PKT_INTERNED:
			if ((err = need_wt(r, &f, PB_WIRE_LEN, "TracePacket")))
				return err;
			if (k->ninterned == 4)
				return fail(r, "more than 4 InternedData in a packet");
			k->interned[k->ninterned++] = f;
			break;
		default:
			if (k->nbody == 4)
				return fail(r, "a packet with more than 4 payload fields");
			k->body[k->nbody++] = f;
			break;
		}
	}
	if (rc < 0)
		return fail(r, "malformed TracePacket");
	return 0;
}

/* One payload b of packet k, on sequence s (NULL: none), at ts. */
static int packet_payload(struct reader *r, const struct pkt *k, struct seq *s, uint64_t ts,
			  const struct pb_field *b)
{
	int err;

	switch (b->id) {
	case PKT_TRACK_EVENT:
		if ((err = need_wt(r, b, PB_WIRE_LEN, "TracePacket")))
			return err;
		if (!s)
			return fail(r, "TrackEvent outside a packet sequence");
		return track_event(r, k->machine, k->seq, s, k->has_ts, ts, b);
	case PKT_TRACK_DESC:
		if ((err = need_wt(r, b, PB_WIRE_LEN, "TracePacket")))
			return err;
		return track_desc(r, k->machine, k->has_ts ? ts : 0, b);
	case PKT_TRACE_ATTRIBUTES:
		if ((err = need_wt(r, b, PB_WIRE_LEN, "TracePacket")))
			return err;
		return attributes(r, k->machine, b);
	case PKT_SYSTEM_INFO:
		if ((err = need_wt(r, b, PB_WIRE_LEN, "TracePacket")))
			return err;
		return system_info(r, k->machine, b);
	case PKT_COMPRESSED:
		if ((err = need_wt(r, b, PB_WIRE_LEN, "TracePacket")))
			return err;
		err = compressed(r, b, k->machine);
		r->slen = 0;	/* the inner packets' copies are done with */
		return err;
	case PKT_PERF_SAMPLE:
		if (r->ops->sample && s && b->wt == PB_WIRE_LEN)
			return perf_sample(r, k->machine, s, ts, b);
		/* fall through */
	default:
		if (!r->ops->other)
			return 0;
		if (b->wt != PB_WIRE_LEN) {
			uint8_t v[8];

			memcpy(v, &b->v, 8);
			return r->ops->other(r->ctx, k->machine, k->seq, b->id, v, 8);
		}
		return r->ops->other(r->ctx, k->machine, k->seq, b->id, b->data, b->len);
	}
}

/* One TracePacket: its sequence's state and clock first, then its payloads. */
static int packet(struct reader *r, const uint8_t *data, size_t len, uint32_t outer_machine)
{
	struct pkt k = { 0 };
	struct seq *s = NULL;
	uint64_t ts = 0;
	int err;

	r->st->packets++;
	if (!r->in_compressed && (err = scratch_reserve(r, len)))
		return err;
	if ((err = packet_fields(r, data, len, &k)))
		return err;
	if (!k.has_machine)
		k.machine = outer_machine;
	if (k.has_seq) {
		s = seq_get(r, k.machine, k.seq);
		if (!s)
			return -ENOMEM;
		if (k.flags & SEQ_STATE_CLEARED)
			seq_clear(r, s);
		if ((k.flags & SEQ_NEEDS_STATE) && !s->valid) {
			/* Trace processor drops these too (a ring buffer that
			 * wrapped loses the packet that set the state). */
			r->st->no_state++;
			return 0;
		}
		if (k.has_defaults && (err = defaults(r, s, &k.defaults)))
			return err;
		for (int i = 0; i < k.ninterned; i++)
			if ((err = interned(r, s, &k.interned[i])))
				return err;
	}
	if (k.has_snapshot && (err = clock_snapshot(r, k.machine, s, &k.snapshot)))
		return err;
	if (k.has_ts) {
		uint32_t clock = k.has_clock ? k.clock :
				 s && s->def_clock ? s->def_clock : CLOCK_BOOTTIME;

		if ((err = resolve_ts(r, k.machine, s, clock, k.ts, &ts)))
			return err;
	}
	for (int i = 0; i < k.nbody; i++)
		if ((err = packet_payload(r, &k, s, ts, &k.body[i])))
			return err;
	return 0;
}

/* The packets of a Trace message in memory (compressed_packets' contents). */
static int packets(struct reader *r, const uint8_t *data, size_t len, uint32_t machine)
{
	struct pb_field f;
	int rc, err;

	/* Scratch must hold copies of every inner packet's strings. */
	if ((err = scratch_reserve(r, len)))
		return err;
	FOR_FIELDS(f, data, len, rc) {
		if (f.id != TRACE_PACKET || f.wt != PB_WIRE_LEN)
			return fail(r, "compressed_packets: field %" PRIu32 " where a TracePacket "
				    "should be", f.id);
		r->slen = 0;
		if ((err = packet(r, f.data, f.len, machine)))
			return err;
	}
	return rc < 0 ? fail(r, "malformed compressed_packets") : 0;
}

/* ------------------------------------------------------------ the file */

/* The input: a window [lo, hi) on a file read in large blocks, or on a
 * trace in memory (fd < 0). */
#define READ_BLOCK (1u << 20)

struct src {
	int fd;
	const uint8_t *data;
	size_t lo, hi;
	uint8_t *own;		/* the file's buffer */
	size_t cap;
	uint64_t base;		/* file offset of data[0] */
	bool eof;
};

/* Makes n bytes available at data + lo if the input has them; returns
 * the bytes available, or -errno after a read error. */
static int64_t src_fill(struct src *in, size_t n)
{
	if (in->hi - in->lo >= n || in->fd < 0 || in->eof)
		return in->hi - in->lo;
	if (in->lo) {
		memmove(in->own, in->own + in->lo, in->hi - in->lo);
		in->base += in->lo;
		in->hi -= in->lo;
		in->lo = 0;
	}
	if (n > in->cap || !in->own) {
		size_t nc = in->cap ? in->cap : READ_BLOCK;
		uint8_t *b;

		while (nc < n)
			nc *= 2;
		b = realloc(in->own, nc);
		if (!b)
			return -ENOMEM;
		in->own = b;
		in->cap = nc;
	}
	in->data = in->own;
	while (in->hi < n) {
		ssize_t got = read(in->fd, in->own + in->hi, in->cap - in->hi);

		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0)
			return -errno;
		if (!got) {
			in->eof = true;
			break;
		}
		in->hi += got;
	}
	return in->hi - in->lo;
}

/* A varint at p (avail bytes): its length, 0 if cut short, -1 if longer
 * than 10 bytes. */
static int peek_varint(const uint8_t *p, size_t avail, uint64_t *v)
{
	uint64_t x = 0;

	for (int i = 0; i < 10; i++) {
		if ((size_t)i >= avail)
			return 0;
		x |= (uint64_t)(p[i] & 0x7f) << (7 * i);
		if (!(p[i] & 0x80)) {
			*v = x;
			return i + 1;
		}
	}
	return -1;
}

static void free_all(struct reader *r)
{
	uint64_t k, v;

	for (size_t i = 0; hmap__next(&r->seqs, &i, &k, &v);) {
		struct seq *s = (struct seq *)(uintptr_t)v;

		hmap__free(&s->iids);
		for (int k = 0; k < IK__STR; k++)
			free(s->dense[k]);
		free(s->strs);
		free(s);
	}
	for (size_t i = 0; hmap__next(&r->machines, &i, &k, &v);)
		free((void *)(uintptr_t)v);
	for (size_t i = 0; hmap__next(&r->stacks, &i, &k, &v);) {
		struct stack *st = (struct stack *)(uintptr_t)v;

		for (int j = 0; j < st->cap; j++)
			free(st->lv[j].buf);
		free(st->lv);
		free(st);
	}
	hmap__free(&r->seqs);
	hmap__free(&r->machines);
	hmap__free(&r->stacks);
	free(r->scratch);
	free(r->zbuf);
}

/* Slices still open at the end, innermost first on each track. */
static int close_open(struct reader *r)
{
	uint64_t k, v;
	int err;

	for (size_t i = 0; hmap__next(&r->stacks, &i, &k, &v);) {
		struct stack *st = (struct stack *)(uintptr_t)v;

		while (st->n)
			if ((err = slice_end(r, st, NULL)))
				return err;
	}
	return 0;
}

static int run(struct src *in, const char *name, const struct tread_ops *ops, void *ctx,
	       struct tread_stats *stats)
{
	static const struct tread_ops none;
	struct tread_stats dummy;
	struct reader r = { .name = name, .ops = ops ? ops : &none, .ctx = ctx,
			    .st = stats ? stats : &dummy };
	int err = 0;

	memset(r.st, 0, sizeof(*r.st));
	for (;;) {
		uint64_t tag = 0, n = 0;
		int64_t avail = src_fill(in, 20);
		int lt, ln;

		r.off = in->base + in->lo;
		if (avail < 0) {
			err = avail;
			err("%s: %s", name, strerror(-err));
			goto out;
		}
		if (!avail)
			break;	/* a clean end */
		lt = peek_varint(in->data + in->lo, avail, &tag);
		if (lt == 0)
			goto truncated;
		if (lt < 0 || tag != (TRACE_PACKET << 3 | PB_WIRE_LEN)) {
			err = fail(&r, "not a Perfetto trace (%s)",
				   r.off ? "a field other than TracePacket at the top level" :
					   "it does not start with a TracePacket");
			goto out;
		}
		ln = peek_varint(in->data + in->lo + lt, avail - lt, &n);
		if (ln == 0)
			goto truncated;
		if (ln < 0 || n > MAX_PACKET) {
			err = fail(&r, "not a cgbpf trace (a packet of %" PRIu64 " bytes)", n);
			goto out;
		}
		avail = src_fill(in, lt + ln + n);
		if (avail < 0) {
			err = avail;
			err("%s: %s", name, strerror(-err));
			goto out;
		}
		if ((uint64_t)avail < lt + ln + n)
			goto truncated;
		err = packet(&r, in->data + in->lo + lt + ln, n, 0);
		in->lo += lt + ln + n;
		if (err)
			goto out;
	}
	err = close_open(&r);
	goto out;
truncated:
	/* A capture killed by SIGKILL inside write() ends at a page boundary
	 * (docs/design.md); anything else is a damaged file. */
	in->lo = in->hi;
	if ((in->base + in->hi) % PAGE == 0) {
		warn("%s: the last packet (byte %" PRIu64 ") is cut short at a page boundary, as "
		     "a killed capture leaves it: ignored", name, r.off);
		r.st->truncated_tail = true;
		err = close_open(&r);
	} else {
		err = fail(&r, "truncated: the packet is cut short (a damaged file?)");
	}
out:
	r.st->bytes = in->base + in->lo;
	free(in->own);
	free_all(&r);
	return err;
}

int tread__run_mem(const void *buf, size_t len, const char *name, const struct tread_ops *ops,
		   void *ctx, struct tread_stats *stats)
{
	struct src in = { .fd = -1, .data = buf, .hi = len };

	return run(&in, name, ops, ctx, stats);
}

int tread__run(const char *path, const struct tread_ops *ops, void *ctx,
	       struct tread_stats *stats)
{
	struct src in = { .fd = 0 };
	int err;

	if (strcmp(path, "-")) {
		in.fd = open(path, O_RDONLY | O_CLOEXEC);
		if (in.fd < 0) {
			err = -errno;
			err("%s: %s", path, strerror(-err));
			return err;
		}
	}
	err = run(&in, path, ops, ctx, stats);
	if (in.fd > 0)
		close(in.fd);
	return err;
}
