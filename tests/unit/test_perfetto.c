/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the trace-level Perfetto writer (user/out/perfetto.h).
 *
 * Usage: test_perfetto [DIR]
 * Writes traces through the public API into DIR, each NAME.perfetto-trace
 * with a NAME.expect.jsonl that says, one JSON object a line, what a
 * decoder must find in it: tracks, slices (name, ts, dur, depth, typed
 * args), instants and counter values. check_perfetto.sh decodes every
 * trace with protoc and with tests/lib/ptrace.py and compares. Here, in C,
 * only what the API itself tells: return codes, errno, pftrace__bytes()
 * and the file's size on disk.
 *
 * Without DIR the traces go to a temporary directory removed at the end.
 * Prints "ok N - ..." / "not ok N - ..." lines and a final
 * "N passed, M failed"; exits 1 on any failure.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "out/perfetto.h"
#include "tap.h"
#include "sources/sources.h"

static const char *outdir;



static uint64_t boottime_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_BOOTTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

/* Size of path on disk, -1 if it cannot be read. */
static long long file_size(const char *path)
{
	struct stat st;

	return stat(path, &st) ? -1 : (long long)st.st_size;
}

static void path_in_dir(char *buf, size_t len, const char *name)
{
	snprintf(buf, len, "%s/%s", outdir, name);
}

/* ------------------------------------------------------------ recorder */

/*
 * Wraps the writer: every call goes to the trace and, as what a decoder
 * must see, to the expectations file. Slices are kept on a stack per
 * sequence (one track each) and written when they end.
 */
struct open_slice {
	char *name;
	char *args;	/* JSON members from the begin annotations */
	size_t args_len;
	uint64_t ts;
	long idx;	/* order of the begin within the trace */
};

struct xseq {
	struct pfseq *s;
	uint64_t track;
	struct open_slice stack[32];
	int depth;
};

struct xtrace {
	struct pftrace *pt;
	FILE *exp;
	char path[PATH_MAX];
	struct xseq *seqs[16];
	int nseqs;
	long nslices;
	uint64_t last_bytes;
	long calls, not_grown;	/* calls that did not add bytes to the trace */
};

static void json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c < 0x20)
			fprintf(f, "\\u%04x", c);
		else
			fputc(c, f);
	}
	fputc('"', f);
}

/* "name": ["type", value] members, comma-separated, after *first. */
static void json_annots(FILE *f, const struct pf_annot *a, int n, bool *first)
{
	for (int i = 0; i < n; i++) {
		if (!*first)
			fputc(',', f);
		*first = false;
		json_str(f, a[i].name);
		switch (a[i].type) {
		case PA_UINT:
			fprintf(f, ":[\"uint\",%" PRIu64 "]", a[i].u);
			break;
		case PA_INT:
			fprintf(f, ":[\"int\",%" PRId64 "]", a[i].i);
			break;
		case PA_PTR:
			fprintf(f, ":[\"ptr\",%" PRIu64 "]", a[i].u);
			break;
		case PA_BOOL:
			fprintf(f, ":[\"bool\",%s]", a[i].u ? "true" : "false");
			break;
		case PA_STR:
			fputs(":[\"str\",", f);
			json_str(f, a[i].s);
			fputc(']', f);
			break;
		case PA_DOUBLE:
			fprintf(f, ":[\"double\",%.17g]", a[i].d);
			break;
		}
	}
}

static bool x_open(struct xtrace *x, const char *name)
{
	char epath[PATH_MAX + 32];

	memset(x, 0, sizeof(*x));
	snprintf(x->path, sizeof(x->path), "%s/%s.perfetto-trace", outdir, name);
	snprintf(epath, sizeof(epath), "%s/%s.expect.jsonl", outdir, name);
	x->exp = fopen(epath, "we");
	if (!x->exp)
		return false;
	x->pt = pftrace__create(x->path);
	if (!x->pt) {
		fclose(x->exp);
		x->exp = NULL;
		return false;
	}
	fprintf(x->exp, "{\"kind\":\"meta\",\"trace\":\"%s.perfetto-trace\"}\n", name);
	return true;
}

/* After every writer call: pftrace__bytes must have grown. */
static void x_grew(struct xtrace *x)
{
	uint64_t b = pftrace__bytes(x->pt);

	x->calls++;
	if (b <= x->last_bytes)
		x->not_grown++;
	x->last_bytes = b;
}

static void x_process(struct xtrace *x, uint64_t uuid, int pid, const char *name, const char *cmdline)
{
	pftrace__process(x->pt, uuid, pid, name, cmdline);
	x_grew(x);
	fprintf(x->exp, "{\"kind\":\"process\",\"uuid\":%" PRIu64 ",\"pid\":%d,\"name\":", uuid, pid);
	json_str(x->exp, name);
	fputs(",\"cmdline\":", x->exp);
	json_str(x->exp, cmdline);
	fputs("}\n", x->exp);
}

static void x_thread(struct xtrace *x, uint64_t uuid, uint64_t parent, int pid, int tid,
		     const char *name)
{
	pftrace__thread(x->pt, uuid, parent, pid, tid, name);
	x_grew(x);
	fprintf(x->exp, "{\"kind\":\"thread\",\"uuid\":%" PRIu64 ",\"parent\":%" PRIu64
		",\"pid\":%d,\"tid\":%d,\"name\":", uuid, parent, pid, tid);
	json_str(x->exp, name);
	fputs("}\n", x->exp);
}

static void x_counter_track(struct xtrace *x, uint64_t uuid, uint64_t parent, const char *name,
			    enum pf_unit unit)
{
	pftrace__counter_track(x->pt, uuid, parent, name, unit);
	x_grew(x);
	fprintf(x->exp, "{\"kind\":\"counter_track\",\"uuid\":%" PRIu64 ",\"parent\":%" PRIu64
		",\"unit\":%d,\"name\":", uuid, parent, (int)unit);
	json_str(x->exp, name);
	fputs("}\n", x->exp);
}

static void x_track(struct xtrace *x, uint64_t uuid, uint64_t parent, const char *name)
{
	pftrace__track(x->pt, uuid, parent, name);
	x_grew(x);
	fprintf(x->exp, "{\"kind\":\"track\",\"uuid\":%" PRIu64 ",\"parent\":%" PRIu64 ",\"name\":",
		uuid, parent);
	json_str(x->exp, name);
	fputs("}\n", x->exp);
}

static struct xseq *x_seq(struct xtrace *x, uint64_t track, uint64_t ts0)
{
	struct xseq *s;

	if (x->nseqs == 16 || !(s = calloc(1, sizeof(*s))))
		return NULL;
	s->s = pftrace__seq(x->pt, track, ts0);
	if (!s->s) {
		free(s);
		return NULL;
	}
	s->track = track;
	x->seqs[x->nseqs++] = s;
	return s;
}

static void x_begin(struct xtrace *x, struct xseq *s, uint64_t ts, const char *name,
		    const struct pf_annot *a, int n)
{
	struct open_slice *o = &s->stack[s->depth++];
	bool first = true;
	FILE *m;

	pftrace__begin(x->pt, s->s, ts, name, a, n);
	x_grew(x);
	o->name = strdup(name);
	o->ts = ts;
	o->idx = x->nslices++;
	o->args = NULL;
	m = open_memstream(&o->args, &o->args_len);
	if (m) {
		json_annots(m, a, n, &first);
		fclose(m);
	}
}

/* A slice begin with flows; the links a reader must find are written by
 * x_flow, as the test means them. */
static void x_begin_flow(struct xtrace *x, struct xseq *s, uint64_t ts, const char *name,
			 const struct pf_flow *f)
{
	struct open_slice *o = &s->stack[s->depth++];

	pftrace__begin_flow(x->pt, s->s, ts, 0, NULL, name, NULL, 0, f);
	x_grew(x);
	o->name = strdup(name);
	o->ts = ts;
	o->idx = x->nslices++;
	o->args = NULL;
}

static void x_flow(struct xtrace *x, struct xseq *from, uint64_t from_ts, struct xseq *to,
		   uint64_t to_ts)
{
	fprintf(x->exp, "{\"kind\":\"flow\",\"from\":[%" PRIu64 ",%" PRIu64 "],\"to\":[%" PRIu64
		",%" PRIu64 "]}\n", from->track, from_ts, to->track, to_ts);
}

static void write_slice(struct xtrace *x, struct xseq *s, struct open_slice *o, int depth,
			const uint64_t *end, const struct pf_annot *a, int n)
{
	bool first = !o->args || !*o->args;

	fprintf(x->exp, "{\"kind\":\"slice\",\"track\":%" PRIu64 ",\"idx\":%ld,\"ts\":%" PRIu64
		",\"depth\":%d,", s->track, o->idx, o->ts, depth);
	if (end)
		fprintf(x->exp, "\"dur\":%" PRIu64 ",", *end - o->ts);
	else
		fputs("\"dur\":null,", x->exp);
	fputs("\"name\":", x->exp);
	json_str(x->exp, o->name ? o->name : "");
	fprintf(x->exp, ",\"args\":{%s", o->args ? o->args : "");
	json_annots(x->exp, a, n, &first);
	fputs("}}\n", x->exp);
	free(o->name);
	free(o->args);
	o->name = o->args = NULL;
}

static void x_end(struct xtrace *x, struct xseq *s, uint64_t ts, const struct pf_annot *a, int n)
{
	pftrace__end(x->pt, s->s, ts, a, n);
	x_grew(x);
	s->depth--;
	write_slice(x, s, &s->stack[s->depth], s->depth, &ts, a, n);
}

static void x_instant(struct xtrace *x, struct xseq *s, uint64_t ts, uint64_t track,
		      const char *name, const struct pf_annot *a, int n)
{
	bool first = true;

	pftrace__instant(x->pt, s->s, ts, track, name, a, n);
	x_grew(x);
	fprintf(x->exp, "{\"kind\":\"instant\",\"track\":%" PRIu64 ",\"ts\":%" PRIu64
		",\"depth\":%d,\"name\":", track ? track : s->track, ts,
		!track || track == s->track ? s->depth : 0);
	json_str(x->exp, name);
	fputs(",\"args\":{", x->exp);
	json_annots(x->exp, a, n, &first);
	fputs("}}\n", x->exp);
}

static void x_counter(struct xtrace *x, struct xseq *s, uint64_t ts, uint64_t track, int64_t v)
{
	pftrace__counter(x->pt, s->s, ts, track, v);
	x_grew(x);
	fprintf(x->exp, "{\"kind\":\"counter\",\"track\":%" PRIu64 ",\"ts\":%" PRIu64
		",\"value\":%" PRId64 "}\n", track, ts, v);
}

/* A meta line: extra instructions for the checker. */
static void __attribute__((format(printf, 2, 3))) x_meta(struct xtrace *x, const char *fmt, ...)
{
	va_list ap;

	fputs("{\"kind\":\"meta\",", x->exp);
	va_start(ap, fmt);
	vfprintf(x->exp, fmt, ap);
	va_end(ap);
	fputs("}\n", x->exp);
}

/* Writes the slices still open (dur null), closes both files; returns
 * pftrace__close()'s result. */
static int x_close(struct xtrace *x, uint64_t *bytes_at_close)
{
	int err;

	for (int i = 0; i < x->nseqs; i++) {
		struct xseq *s = x->seqs[i];

		while (s->depth > 0) {
			s->depth--;
			write_slice(x, s, &s->stack[s->depth], s->depth, NULL, NULL, 0);
		}
		free(s);
	}
	if (bytes_at_close)
		*bytes_at_close = pftrace__bytes(x->pt);
	err = pftrace__close(x->pt);
	if (fclose(x->exp))
		err = err ? err : -EIO;
	x->pt = NULL;
	x->exp = NULL;
	return err;
}

#define NA(a) (a), (int)(sizeof(a) / sizeof((a)[0]))

/* ------------------------------------------------------------ (a) basics */

static void test_basic(void)
{
	static const char label[] = "hello \"world\" \\ caf\xc3\xa9\ttab";
	const struct pf_annot outer[] = {
		{ .name = "count", .type = PA_UINT, .u = 42 },
		{ .name = "big", .type = PA_UINT, .u = UINT64_MAX },
		{ .name = "delta", .type = PA_INT, .i = -5 },
		{ .name = "min", .type = PA_INT, .i = INT64_MIN },
		{ .name = "label", .type = PA_STR, .s = label },
		{ .name = "ptr", .type = PA_PTR, .u = 0xdeadbeefcafe0000ull },
		{ .name = "flag", .type = PA_BOOL, .u = 1 },
		{ .name = "off", .type = PA_BOOL, .u = 0 },
	};
	const struct pf_annot inner[] = {
		{ .name = "label", .type = PA_STR, .s = label },	/* interned once */
		{ .name = "zero", .type = PA_UINT, .u = 0 },
		{ .name = "empty", .type = PA_STR, .s = "" },
		{ .name = "null_ptr", .type = PA_PTR, .u = 0 },
	};
	const struct pf_annot inner_end[] = {
		{ .name = "result", .type = PA_STR, .s = "CUDA_ERROR_NOT_FOUND (500)" },
		{ .name = "ret", .type = PA_INT, .i = 500 },
	};
	const struct pf_annot worker[] = { { .name = "count", .type = PA_UINT, .u = 7 } };
	const struct pf_annot mark[] = { { .name = "flag", .type = PA_BOOL, .u = 1 } };
	struct xtrace x;
	struct xseq *s1, *s2;
	uint64_t base, b0, b1;
	int err;

	if (!check(x_open(&x, "a"), "a: create a.perfetto-trace (errno %d)", errno))
		return;
	check(pftrace__bytes(x.pt) == 0 && pftrace__error(x.pt) == 0,
	      "a: a new trace has 0 bytes and no error");
	pftrace__system_info(x.pt);
	b0 = pftrace__bytes(x.pt);
	pftrace__clock_snapshot(x.pt);
	b1 = pftrace__bytes(x.pt);
	check(b0 > 0 && b1 > b0, "a: system info and clock snapshot add bytes (%" PRIu64 ", %" PRIu64 ")",
	      b0, b1);
	x.last_bytes = b1;
	/* Real BOOTTIME, after the snapshot: the normal case. */
	base = boottime_ns() + 1000000;

	x_process(&x, 100, 4242, "proc-a", "prog --flag \"quoted arg\" x");
	x_thread(&x, 101, 100, 4242, 4242, "main-thr");
	x_thread(&x, 102, 100, 4242, 4243, "worker");
	x_counter_track(&x, 103, 100, "GPU memory", PF_UNIT_BYTES);
	x_counter_track(&x, 105, 100, "launches", PF_UNIT_COUNT);
	x_counter_track(&x, 106, 100, "plain", PF_UNIT_NONE);
	x_track(&x, 104, 100, "markers");
	s1 = x_seq(&x, 101, base);
	s2 = x_seq(&x, 102, base);
	if (!check(s1 && s2, "a: two sequences")) {
		x_close(&x, NULL);
		return;
	}
	/* The two sequences interleave in the file. */
	x_begin(&x, s1, base + 1000, "outer", NA(outer));
	x_begin(&x, s2, base + 1500, "outer", NA(worker));	/* same name, other sequence */
	x_begin(&x, s1, base + 2000, "inner", NA(inner));
	x_counter(&x, s2, base + 1600, 103, 0);
	x_instant(&x, s1, base + 2500, 0, "mark", NA(mark));
	x_counter(&x, s2, base + 2600, 103, 1 << 20);
	x_end(&x, s1, base + 3000, NA(inner_end));
	x_counter(&x, s2, base + 3600, 103, -4096);
	x_instant(&x, s2, base + 3700, 104, "kick", NULL, 0);
	x_counter(&x, s1, base + 3800, 105, INT64_MAX);
	x_counter(&x, s1, base + 3900, 106, INT64_MIN);
	x_end(&x, s1, base + 5000, NULL, 0);
	x_end(&x, s2, base + 5500, NULL, 0);
	x_begin(&x, s1, base + 6000, "zero-length", NULL, 0);
	x_end(&x, s1, base + 6000, NULL, 0);
	/* Flows: a small id (varint fields) ended and closed once, so a
	 * second end links nothing; ids of 2^56 and more (fixed64 fields)
	 * ended twice without closing, and ended and closed. */
	{
		const uint64_t big = 0x9000000000000001ull, big2 = 0xa000000000000002ull;

		x_begin_flow(&x, s1, base + 6100, "launch", &(struct pf_flow){ .out = 5 });
		x_end(&x, s1, base + 6200, NULL, 0);
		x_begin_flow(&x, s2, base + 6300, "kernel", &(struct pf_flow){ .end = 5 });
		x_end(&x, s2, base + 6400, NULL, 0);
		x_flow(&x, s1, base + 6100, s2, base + 6300);
		x_begin_flow(&x, s2, base + 6500, "kernel again", &(struct pf_flow){ .end = 5 });
		x_end(&x, s2, base + 6600, NULL, 0);
		x_begin_flow(&x, s1, base + 6700, "graph launch", &(struct pf_flow){ .out = big });
		x_end(&x, s1, base + 6800, NULL, 0);
		x_begin_flow(&x, s2, base + 6900, "graph kernel 1", &(struct pf_flow){ .in = big });
		x_end(&x, s2, base + 7000, NULL, 0);
		x_begin_flow(&x, s2, base + 7100, "graph kernel 2", &(struct pf_flow){ .in = big });
		x_end(&x, s2, base + 7200, NULL, 0);
		x_flow(&x, s1, base + 6700, s2, base + 6900);
		x_flow(&x, s1, base + 6700, s2, base + 7100);
		x_begin_flow(&x, s1, base + 7300, "launch 2", &(struct pf_flow){ .out = big2 });
		x_end(&x, s1, base + 7350, NULL, 0);
		x_begin_flow(&x, s2, base + 7400, "kernel 2", &(struct pf_flow){ .end = big2 });
		x_end(&x, s2, base + 7500, NULL, 0);
		x_flow(&x, s1, base + 7300, s2, base + 7400);
	}
	x_thread(&x, 102, 100, 4242, 4243, "worker-renamed");	/* re-emitting renames */
	x_counter(&x, s2, base + 8000, 105, 3);
	x_begin(&x, s1, base + 9000, "left open", NULL, 0);
	x_meta(&x, "\"no_warnings\":true");
	check(x.not_grown == 0, "a: each of %ld calls added bytes (%ld did not)", x.calls, x.not_grown);
	err = pftrace__flush(x.pt);
	check(err == 0 && pftrace__bytes(x.pt) == (uint64_t)file_size(x.path),
	      "a: flush returns 0 and the file then holds pftrace__bytes() bytes");
	err = x_close(&x, NULL);
	check(err == 0, "a: close returns 0 (%d)", err);
}

/* ------------------------------------------------------------ (b) interning */

static void test_intern_reset(void)
{
	const int N = 10000;
	const uint64_t base = 1000000000ull;
	struct xtrace x;
	struct xseq *sa, *sb;
	int err;

	if (!check(x_open(&x, "b"), "b: create b.perfetto-trace"))
		return;
	x_process(&x, 200, 5000, "interner", "interner");
	x_thread(&x, 201, 200, 5000, 5000, "busy");
	x_thread(&x, 202, 200, 5000, 5001, "quiet");
	sa = x_seq(&x, 201, base);
	sb = x_seq(&x, 202, base);
	if (!check(sa && sb, "b: two sequences")) {
		x_close(&x, NULL);
		return;
	}
	/* 10000 distinct names and 10000 distinct string values on one
	 * sequence: far past INTERN_MAX (4096), so it must clear its state
	 * several times and intern again; "again" and the annotation names
	 * recur after every reset. The quiet sequence uses some of the same
	 * names and must not be disturbed. */
	for (int i = 0; i < N; i++) {
		uint64_t ts = base + (uint64_t)i * 100;
		char name[32], val[32];
		struct pf_annot a[] = {
			{ .name = "i", .type = PA_STR, .s = val },
			{ .name = "n", .type = PA_UINT, .u = (uint64_t)i },
		};

		snprintf(name, sizeof(name), "fn_%05d", i);
		snprintf(val, sizeof(val), "v%05d", i);
		x_begin(&x, sa, ts, name, NA(a));
		if (i % 97 == 0) {
			x_begin(&x, sa, ts + 10, "again", a + 1, 1);
			x_end(&x, sa, ts + 20, NULL, 0);
		}
		if (i % 1000 == 0) {
			x_begin(&x, sb, ts + 5, name, NA(a));
			x_end(&x, sb, ts + 60, NULL, 0);
		}
		x_end(&x, sa, ts + 50, NULL, 0);
	}
	/* The intern memo (by address, checked by bytes): one buffer whose
	 * text goes back and forth, at the memo's length limit and either
	 * side of it, as a name and as a string value: every event must
	 * carry the text the buffer held then. */
	{
		static const int lens[] = { 5, 94, 95, 96, 97, 200 };
		char buf[256];

		for (int i = 0; i < 24; i++) {
			int len = lens[i % 6];
			uint64_t ts = base + (uint64_t)N * 100 + (uint64_t)i * 100;
			struct pf_annot a[] = { { .name = "text", .type = PA_STR, .s = buf } };

			memset(buf, i % 4 < 2 ? 'a' : 'b', len);
			buf[len] = 0;
			buf[len - 1] = '0' + i % 2;
			x_begin(&x, sb, ts, buf, NA(a));
			x_end(&x, sb, ts + 50, NULL, 0);
		}
		/* The text cut short and grown again in place: a remembered
		 * copy is a prefix of the text, or the text of the copy. */
		for (int i = 0; i < 12; i++) {
			static const int cut[] = { 6, 3, 8, 3, 6, 1 };
			uint64_t ts = base + (uint64_t)N * 100 + 2400 + (uint64_t)i * 100;
			struct pf_annot a[] = { { .name = "text", .type = PA_STR, .s = buf } };

			memcpy(buf, "abcdefgh", 9);
			buf[cut[i % 6]] = 0;
			x_begin(&x, sb, ts, buf, NA(a));
			x_end(&x, sb, ts + 50, NULL, 0);
		}
	}
	/* More strings in turn than the memo holds (16): each event must
	 * still carry its own, whichever entries were given up. */
	{
		static const char *const names[] = {
			"r00", "r01", "r02", "r03", "r04", "r05", "r06", "r07", "r08", "r09",
			"r10", "r11", "r12", "r13", "r14", "r15", "r16", "r17", "r18", "r19",
		};

		for (int i = 0; i < 60; i++) {
			uint64_t ts = base + (uint64_t)N * 100 + 4000 + (uint64_t)i * 100;
			struct pf_annot a[] = {
				{ .name = names[(i + 7) % 20], .type = PA_STR, .s = names[i % 20] },
			};

			x_begin(&x, sb, ts, names[i * 3 % 20], NA(a));
			x_end(&x, sb, ts + 50, NULL, 0);
		}
	}
	/* generations: the first clear plus more than one reset. */
	x_meta(&x, "\"min_generations\":{\"201\":3},\"max_generations\":{\"202\":1},"
		   "\"no_warnings\":true");
	check(x.not_grown == 0, "b: each of %ld calls added bytes", x.calls);
	err = x_close(&x, NULL);
	check(err == 0, "b: close returns 0 (%d)", err);
}

/* ------------------------------------------------------------ (c) time */

static void test_time(void)
{
	const uint64_t ms = 1000000;
	const struct pf_annot back[] = { { .name = "why", .type = PA_STR, .s = "backwards" } };
	struct xtrace x;
	struct xseq *s1, *s2, *s3, *s4;
	uint64_t b0, b1;
	int err;

	if (!check(x_open(&x, "c"), "c: create c.perfetto-trace"))
		return;
	b0 = boottime_ns();
	pftrace__clock_snapshot(x.pt);	/* its BOOTTIME is at or after b0 */
	b1 = boottime_ns() + ms;
	x.last_bytes = pftrace__bytes(x.pt);
	x_process(&x, 300, 6000, "clocks", "clocks --test");
	x_thread(&x, 301, 300, 6000, 6000, "t0");
	x_thread(&x, 302, 300, 6000, 6001, "t1");
	x_thread(&x, 305, 300, 6000, 6002, "t2");
	x_track(&x, 303, 300, "side");
	x_counter_track(&x, 304, 300, "level", PF_UNIT_COUNT);

	/* Sequences created at (and starting with events at) timestamps
	 * before the clock snapshot already in the file. */
	s1 = x_seq(&x, 301, b0 - 5 * ms);
	s2 = x_seq(&x, 302, b0 - 10 * ms);
	s3 = x_seq(&x, 305, b0 - ms);
	if (!check(s1 && s2 && s3, "c: three sequences")) {
		x_close(&x, NULL);
		return;
	}
	x_begin(&x, s1, b0 - 5 * ms, "early", NULL, 0);
	x_end(&x, s1, b0 - 4 * ms, NULL, 0);
	x_begin(&x, s2, b0 - 10 * ms, "s2-early", NULL, 0);
	x_end(&x, s2, b0 - 9 * ms, NULL, 0);
	/* Begins before the sequence's base, ends after it. */
	x_begin(&x, s3, b0 - ms, "straddle", NULL, 0);
	x_begin(&x, s1, b1, "late", NULL, 0);
	/* Backwards on s1: an instant on another track, a counter value. */
	x_instant(&x, s1, b1 - 3 * ms, 303, "backwards", NA(back));
	x_counter(&x, s1, b1 + ms, 304, 10);
	x_counter(&x, s1, b1 + ms / 2, 304, 5);
	x_end(&x, s3, b1 + 500, NULL, 0);
	/* Deltas resume from the last forward timestamp. */
	x_end(&x, s1, b1 + 2 * ms, NULL, 0);
	x_begin(&x, s1, b1 + 3 * ms, "later", NULL, 0);
	x_end(&x, s1, b1 + 4 * ms, NULL, 0);
	x_begin(&x, s2, b1 + 100, "s2-now", NULL, 0);
	x_end(&x, s2, b1 + 200, NULL, 0);
	x_counter(&x, s2, b0 - 20 * ms, 304, -1);	/* before everything */

	/* Interning resets that fall on backwards timestamps: 1000 distinct
	 * names going forward, then 9000 more all before the latest of them,
	 * so a reset (for any INTERN_MAX from 1000 to 9999) comes on a
	 * backwards event. Its clock snapshot must not take this sequence's
	 * BOOTTIME back, and every event must keep its own time. */
	x_thread(&x, 306, 300, 6000, 6003, "t3");
	s4 = x_seq(&x, 306, b1 + 10 * ms);
	for (int i = 0; s4 && i < 10000; i++) {
		uint64_t t0 = b1 + 10 * ms, last = t0 + 999 * 1000;
		char name[32];

		snprintf(name, sizeof(name), "n%05d", i);
		x_instant(&x, s4, i < 1000 ? t0 + (uint64_t)i * 1000 : last - 500 * ms + (uint64_t)i * 10,
			  303, name, NULL, 0);
	}
	if (s4) {
		x_begin(&x, s4, b1 + 20 * ms, "after the resets", NULL, 0);
		x_end(&x, s4, b1 + 21 * ms, NULL, 0);
	}
	check(s4 != NULL, "c: a fourth sequence that fills its interning table going backwards");
	x_meta(&x, "\"min_generations\":{\"306\":3}");
	pftrace__clock_snapshot(x.pt);
	x_grew(&x);
	check(x.not_grown == 0, "c: each of %ld calls added bytes", x.calls);
	err = x_close(&x, NULL);
	check(err == 0, "c: close returns 0 (%d)", err);
}

/* ------------------------------------------------------------ (d) errors */

/* Writes enough begin/end pairs to pass any flush threshold (~1 MiB)
 * unless an error stops the writer first. */
static void fill(struct pftrace *pt, struct pfseq *s, uint64_t ts, int n)
{
	const struct pf_annot a[] = { { .name = "n", .type = PA_UINT, .u = 12345 } };

	for (int i = 0; i < n && !pftrace__error(pt); i++) {
		pftrace__begin(pt, s, ts + 10 * (uint64_t)i, "filler", NA(a));
		pftrace__end(pt, s, ts + 10 * (uint64_t)i + 5, NULL, 0);
	}
}

static void test_errors(void)
{
	char path[PATH_MAX + 64];
	struct pftrace *pt;
	struct pfseq *s;
	uint64_t b;
	int err, err2;

	path_in_dir(path, sizeof(path), "no/such/dir/x.perfetto-trace");
	errno = 0;
	pt = pftrace__create(path);
	check(!pt && errno == ENOENT, "d: create in a missing directory: NULL, errno ENOENT (%s)",
	      strerror(errno));
	pftrace__close(pt);
	errno = 0;
	pt = pftrace__create(outdir);
	check(!pt && errno == EISDIR, "d: create on a directory: NULL, errno EISDIR (%s)",
	      strerror(errno));
	check(pftrace__close(NULL) == 0, "d: close(NULL) returns 0");

	if (access("/dev/full", W_OK)) {
		skip("d: /dev/full is not writable here");
		return;
	}
	errno = 0;
	pt = pftrace__create("/dev/full");
	check(!pt && errno == EINVAL, "d: create refuses a device (only regular files are made: %s)",
	      strerror(errno));
	/* A small trace, then an explicit flush. */
	pt = pftrace__fdopen(open("/dev/full", O_WRONLY | O_CLOEXEC));
	if (check(pt != NULL, "d: a writer on /dev/full starts (nothing written yet)")) {
		pftrace__thread(pt, 1, 0, 1, 1, "t");
		s = pftrace__seq(pt, 1, 1000);
		pftrace__begin(pt, s, 1000, "x", NULL, 0);
		err = pftrace__flush(pt);
		check(err == -ENOSPC, "d: flush on /dev/full returns -ENOSPC (got %d, %s)", err,
		      strerror(-err));
		check(pftrace__error(pt) == err && pftrace__flush(pt) == err,
		      "d: the error is sticky: pftrace__error and a second flush return it");
		err2 = pftrace__close(pt);
		check(err2 == -ENOSPC, "d: close on /dev/full returns -ENOSPC (got %d, %s)", err2,
		      strerror(-err2));
	}

	/* Enough to pass the flush threshold: the write error comes from a
	 * flush the writer does on its own. */
	pt = pftrace__fdopen(open("/dev/full", O_WRONLY | O_CLOEXEC));
	if (check(pt != NULL, "d: a writer on /dev/full again")) {
		pftrace__thread(pt, 1, 0, 1, 1, "t");
		s = pftrace__seq(pt, 1, 1000);
		fill(pt, s, 1000, 50000);
		err = pftrace__error(pt);
		check(err == -ENOSPC, "d: writing past the flush threshold on /dev/full sets -ENOSPC "
		      "(got %d, %s)", err, strerror(-err));
		b = pftrace__bytes(pt);
		pftrace__begin(pt, s, 1000000000, "after", NULL, 0);
		pftrace__counter(pt, s, 1000000001, 2, 5);
		pftrace__thread(pt, 3, 0, 1, 3, "late");
		pftrace__clock_snapshot(pt);
		check(pftrace__bytes(pt) == b && pftrace__error(pt) == err,
		      "d: after the error every call is a no-op (bytes stay %" PRIu64 ")", b);
		err2 = pftrace__flush(pt);
		check(err2 == err, "d: flush after the error returns it (%d)", err2);
		err2 = pftrace__close(pt);
		check(err2 == -ENOSPC, "d: close returns -ENOSPC (got %d, %s)", err2, strerror(-err2));
	}
}

/*
 * A regular file that stops growing at `limit` bytes (RLIMIT_FSIZE): a
 * flush writes part of a packet and then fails. The file must be cut back
 * to whole packets, all of those that fit. Run at two adjacent limits:
 * packets are at least 2 bytes, so at least one cut is inside a packet.
 */
static void test_fsize(const char *name, long long limit)
{
	const struct pf_annot a[] = { { .name = "n", .type = PA_UINT, .u = 12345 },
				      { .name = "s", .type = PA_STR, .s = "some string" } };
	struct sigaction ign = { .sa_handler = SIG_IGN }, old_sa;
	struct rlimit old, lim;
	struct xtrace x;
	struct xseq *s;
	FILE *real, *mem;
	char *mbuf = NULL;
	size_t mlen = 0;
	long long size;
	int err = 0, err2;
	bool limited;

	if (getrlimit(RLIMIT_FSIZE, &old) || (old.rlim_max != RLIM_INFINITY &&
					      old.rlim_max < (rlim_t)limit * 10)) {
		skip("d: RLIMIT_FSIZE cannot be lowered and raised back here");
		return;
	}
	if (!check(x_open(&x, name), "d: create %s.perfetto-trace", name))
		return;
	x_process(&x, 400, 7000, "fsize", "fsize");
	x_thread(&x, 401, 400, 7000, 7000, "writer");
	s = x_seq(&x, 401, 1000000000);
	/* While the limit is in force only the trace may be written: the
	 * expectations go to memory, stdout stays quiet. */
	real = x.exp;
	mem = open_memstream(&mbuf, &mlen);
	if (!check(s && mem, "d: a sequence and an in-memory expectations buffer")) {
		if (mem)
			fclose(mem);
		free(mbuf);
		x_close(&x, NULL);
		return;
	}
	x.exp = mem;
	fflush(real);
	fflush(stdout);
	sigaction(SIGXFSZ, &ign, &old_sa);
	lim = old;
	lim.rlim_cur = limit;
	limited = !setrlimit(RLIMIT_FSIZE, &lim);
	for (int i = 0; limited && i < 20000 && !pftrace__error(x.pt); i++) {
		uint64_t ts = 1000000000ull + (uint64_t)i * 100;
		char name[32];

		snprintf(name, sizeof(name), "w%d", i % 50);
		x_begin(&x, s, ts, name, NA(a));
		x_end(&x, s, ts + 50, NULL, 0);
	}
	if (limited) {
		err = pftrace__error(x.pt);
		setrlimit(RLIMIT_FSIZE, &old);
	}
	sigaction(SIGXFSZ, &old_sa, NULL);
	fclose(mem);
	x.exp = real;
	if (mbuf)
		fwrite(mbuf, 1, mlen, real);
	free(mbuf);
	if (!check(limited, "d: set RLIMIT_FSIZE to %lld bytes", limit)) {
		x_close(&x, NULL);
		return;
	}
	check(err == -EFBIG, "d: a write past RLIMIT_FSIZE sets -EFBIG (got %d, %s)", err,
	      strerror(-err));
	size = file_size(x.path);
	/* Every packet here is under 100 bytes. */
	check(size <= limit && size > limit - 100,
	      "d: the file was cut back to whole packets: %lld bytes, at most %lld and within "
	      "one packet of it", size, limit);
	x_meta(&x, "\"partial\":true,\"max_size\":%lld,\"min_size\":%lld", limit, limit - 100);
	err2 = x_close(&x, NULL);
	check(err2 == -EFBIG, "d: close returns the write error -EFBIG (got %d)", err2);
	check(file_size(x.path) == size, "d: close did not change the cut file (%lld bytes)",
	      file_size(x.path));
}

/* ------------------------------------------------------------ (e) volume */

static bool copy_file(const char *from, const char *to)
{
	char buf[65536];
	int in = open(from, O_RDONLY | O_CLOEXEC), out;
	bool ok = in >= 0;
	ssize_t n;

	out = open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	ok = ok && out >= 0;
	while (ok && (n = read(in, buf, sizeof(buf))) > 0)
		ok = write(out, buf, n) == n;
	if (in >= 0)
		close(in);
	if (out >= 0 && close(out))
		ok = false;
	return ok;
}

static void test_volume(void)
{
	const uint64_t base = 5000000000ull;
	char partial[PATH_MAX + 64];
	struct xtrace x;
	struct xseq *s;
	long long size = 0, prev_size = 0;
	long flushes = 0, i, over = 0;
	uint64_t at_close = 0;
	bool copied = false;
	int err;

	if (!check(x_open(&x, "e"), "e: create e.perfetto-trace"))
		return;
	x_process(&x, 500, 8000, "volume", "volume --big");
	x_thread(&x, 501, 500, 8000, 8000, "hot");
	s = x_seq(&x, 501, base);
	if (!check(s != NULL, "e: a sequence")) {
		x_close(&x, NULL);
		return;
	}
	for (i = 0; pftrace__bytes(x.pt) < (3u << 19); i++) {	/* 1.5 MiB */
		uint64_t ts = base + (uint64_t)i * 1000;
		char name[32], tag[32];
		const struct pf_annot a[] = {
			{ .name = "i", .type = PA_UINT, .u = (uint64_t)i },
			{ .name = "tag", .type = PA_STR, .s = tag },
			{ .name = "neg", .type = PA_INT, .i = -i },
		};
		const struct pf_annot e[] = { { .name = "ok", .type = PA_BOOL, .u = i % 2 } };

		snprintf(name, sizeof(name), "op_%ld", i % 50);
		snprintf(tag, sizeof(tag), "t%ld", i % 300);
		x_begin(&x, s, ts, name, NA(a));
		x_end(&x, s, ts + 700, NA(e));
		size = file_size(x.path);
		if (size > (long long)pftrace__bytes(x.pt))
			over++;
		if (size != prev_size) {
			flushes++;
			prev_size = size;
			/* The file as a crash right after the first flush would
			 * leave it: only whole packets. */
			if (!copied) {
				path_in_dir(partial, sizeof(partial), "e_partial.perfetto-trace");
				copied = copy_file(x.path, partial);
			}
		}
	}
	check(x.not_grown == 0, "e: each of %ld calls added bytes", x.calls);
	check(flushes >= 2 && over == 0,
	      "e: %ld slices: the writer flushed %ld times on its own; the file never held more "
	      "than pftrace__bytes()", i, flushes);
	check(copied, "e: copied the file after its first flush to e_partial.perfetto-trace");
	if (copied) {
		FILE *f;

		path_in_dir(partial, sizeof(partial), "e_partial.expect.jsonl");
		f = fopen(partial, "we");
		if (f) {
			fputs("{\"kind\":\"meta\",\"trace\":\"e_partial.perfetto-trace\","
			      "\"partial\":true,\"prefix_of\":\"e.expect.jsonl\"}\n", f);
			fclose(f);
		}
	}
	err = pftrace__flush(x.pt);
	size = file_size(x.path);
	check(err == 0 && size == (long long)pftrace__bytes(x.pt),
	      "e: after flush the file holds exactly pftrace__bytes() = %lld bytes", size);
	x_meta(&x, "\"no_warnings\":true");
	err = x_close(&x, &at_close);
	size = file_size(x.path);
	check(err == 0 && size == (long long)at_close && size > (1 << 20),
	      "e: close returns 0; file size %lld equals pftrace__bytes at close %" PRIu64, size,
	      at_close);
}

/* ------------------------------------------------------------ main */

static char tmpdir[PATH_MAX];

static void cleanup_tmpdir(void)
{
	static const char *const names[] = {
		"a.perfetto-trace", "a.expect.jsonl", "b.perfetto-trace", "b.expect.jsonl",
		"c.perfetto-trace", "c.expect.jsonl", "d_fsize0.perfetto-trace",
		"d_fsize0.expect.jsonl", "d_fsize1.perfetto-trace", "d_fsize1.expect.jsonl",
		"e.perfetto-trace", "e.expect.jsonl",
		"e_partial.perfetto-trace", "e_partial.expect.jsonl",
	};
	char path[PATH_MAX + 64];

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		path_in_dir(path, sizeof(path), names[i]);
		unlink(path);
	}
	rmdir(tmpdir);
}

/* ------------------------------------------------------------ (g) capture windows */

/*
 * One writer, a file removed at start and a new one at the same path
 * (capture windows, user/out/capwin.c): descriptors written before and while
 * paused are in the new file, slices written before or while paused are
 * not, and a sequence used in both starts over (its interned names mean
 * nothing in the new file).
 */
static void test_pause_resume(void)
{
	const uint64_t base = 5000000000ull;
	struct xtrace x;
	struct xseq *s, *s2;
	int err;

	if (!check(x_open(&x, "g_windows"), "g: create g_windows.perfetto-trace"))
		return;
	pftrace__keep_descriptors(x.pt);
	x_process(&x, 700, 7000, "win", "win --steps 20");
	x_thread(&x, 701, 700, 7000, 7001, "worker");
	s = x_seq(&x, 701, base);
	if (!check(s != NULL, "g: a sequence")) {
		x_close(&x, NULL);
		return;
	}
	pftrace__begin(x.pt, s->s, base + 10, "before", NULL, 0);
	pftrace__end(x.pt, s->s, base + 20, NULL, 0);
	err = pftrace__pause(x.pt, x.path);
	check(err == 0 && access(x.path, F_OK) != 0 && pftrace__paused(x.pt),
	      "g: pause with discard removes the file (%d)", err);
	/* Paused: a thread described (kept), a slice (dropped). */
	x_thread(&x, 702, 700, 7000, 7002, "late");
	pftrace__begin(x.pt, s->s, base + 30, "paused", NULL, 0);
	pftrace__end(x.pt, s->s, base + 40, NULL, 0);
	check(pftrace__bytes(x.pt) == 0, "g: nothing buffered while paused (%" PRIu64 ")",
	      pftrace__bytes(x.pt));
	err = pftrace__resume(x.pt, x.path, false);
	check(err == 0 && access(x.path, F_OK) == 0 && !pftrace__paused(x.pt) &&
	      pftrace__generation(x.pt) == 1, "g: resume makes the file again (%d)", err);
	x_begin(&x, s, base + 100, "before", NULL, 0);	/* the same name, interned anew */
	x_end(&x, s, base + 200, NULL, 0);
	s2 = x_seq(&x, 702, base + 300);
	if (s2) {
		x_begin(&x, s2, base + 300, "late-slice", NULL, 0);
		x_end(&x, s2, base + 400, NULL, 0);
	}
	err = x_close(&x, NULL);
	check(err == 0, "g: close returns 0 (%d)", err);
}

int main(int argc, char **argv)
{
	sources__init();
	/* Keep the ok/not ok lines in order with sanitizer reports on stderr. */
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc > 1) {
		outdir = argv[1];
	} else {
		const char *t = getenv("TMPDIR");

		snprintf(tmpdir, sizeof(tmpdir), "%s/test_perfetto.XXXXXX", t && *t ? t : "/tmp");
		if (!mkdtemp(tmpdir)) {
			printf("not ok 1 - cannot create a temporary directory: %s\n", strerror(errno));
			printf("0 passed, 1 failed\n");
			return 1;
		}
		outdir = tmpdir;
	}
	test_basic();
	test_intern_reset();
	test_time();
	test_errors();
	test_fsize("d_fsize0", 200000);
	test_fsize("d_fsize1", 200001);
	test_volume();
	test_pause_resume();
	if (argc <= 1)
		cleanup_tmpdir();
	printf("%d passed, %d failed\n", n_pass, n_fail);
	return n_fail ? 1 : 0;
}
