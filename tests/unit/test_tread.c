/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the trace reader (user/trace/tread.h): traces written by
 * cgbpf's own writer (user/out/perfetto.h) into a memfd and read back, and
 * hand-made packets (pb.h) for what the writer never produces: compressed
 * packets, machine ids, sequences sharing an id across machines, and
 * malformed input, which must give an error, never a wrong answer.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>
#include "lib/log.h"
#include "lib/pb.h"
#include "out/perfetto.h"
#include "tap.h"
#include "trace/tread.h"
#include "lib/version.h"
#include "sources/sources.h"

#define MAXREC 12000

/* What the callbacks saw, flattened. */
struct rec_slice {
	uint32_t machine;
	uint64_t track, ts, end_ts;
	bool ended;
	int depth;
	char name[64], cat[32];
	int nargs, nend_args;
	struct tread_arg args[8], end_args[4];
	char strs[8][64], end_strs[4][64];
	uint64_t flow_out, flow_end, flow_in;
	int nframes;
	char frame0[32];
};

struct seen {
	struct rec_slice *sl;
	int nsl;
	int ntracks;
	struct tread_track tracks[16];
	char tnames[16][64], tcmd[16][64], tdesc[16][64];
	int ninst, ncnt;
	char inst[8][64];
	int64_t cnt[8];
	uint64_t cnt_ts[8];
	char version[32];
	int stop_after;		/* >0: the slice callback returns 42 at that slice */
};

static void copy_args(const struct tread_arg *a, int n, struct tread_arg *out, char (*strs)[64],
		      int max)
{
	for (int i = 0; i < n && i < max; i++) {
		out[i] = a[i];
		snprintf(strs[i], 64, "%s", a[i].type == TREAD_A_STR ? a[i].s : "");
		out[i].name = NULL;	/* not kept: copied into strs only for strings */
	}
}

static int on_slice(void *ctx, const struct tread_slice *s)
{
	struct seen *w = ctx;
	struct rec_slice *r;

	if (w->nsl == MAXREC)
		return 0;
	r = &w->sl[w->nsl++];
	memset(r, 0, sizeof(*r));
	r->machine = s->machine;
	r->track = s->track;
	r->ts = s->ts;
	r->end_ts = s->end_ts;
	r->ended = s->ended;
	r->depth = s->depth;
	snprintf(r->name, sizeof(r->name), "%s", s->name);
	snprintf(r->cat, sizeof(r->cat), "%s", s->category);
	r->nargs = s->nargs;
	r->nend_args = s->nend_args;
	copy_args(s->args, s->nargs, r->args, r->strs, 8);
	copy_args(s->end_args, s->nend_args, r->end_args, r->end_strs, 4);
	/* Arg names checked here, where they are valid. */
	for (int i = 0; i < s->nargs && i < 8; i++)
		if (!s->args[i].name || !*s->args[i].name)
			r->nargs = -1;
	r->flow_out = s->nflow_out ? s->flow_out[0] : 0;
	r->flow_end = s->nflow_end ? s->flow_end[0] : 0;
	r->flow_in = s->flow_in;
	r->nframes = s->nframes;
	if (s->nframes)
		snprintf(r->frame0, sizeof(r->frame0), "%s", s->frames[0]);
	if (w->stop_after && w->nsl == w->stop_after)
		return 42;
	return 0;
}

static int on_track(void *ctx, const struct tread_track *t)
{
	struct seen *w = ctx;
	int i = w->ntracks;

	if (i == 16)
		return 0;
	w->tracks[i] = *t;
	snprintf(w->tnames[i], 64, "%s", t->name);
	snprintf(w->tcmd[i], 64, "%s", t->cmdline);
	snprintf(w->tdesc[i], 64, "%s", t->description);
	w->ntracks++;
	return 0;
}

static int on_event(void *ctx, const struct tread_event *e)
{
	struct seen *w = ctx;

	if (e->type == TREAD_INSTANT && w->ninst < 8)
		snprintf(w->inst[w->ninst++], 64, "%s", e->name);
	if (e->type == TREAD_COUNTER && w->ncnt < 8) {
		w->cnt_ts[w->ncnt] = e->ts;
		w->cnt[w->ncnt++] = e->value;
	}
	return 0;
}

static int on_attr(void *ctx, uint32_t machine, const char *key, const char *value)
{
	struct seen *w = ctx;

	if (!strcmp(key, "cgbpf.version"))
		snprintf(w->version, sizeof(w->version), "%s", value);
	return 0;
}

static const struct tread_ops ops = {
	.track = on_track,
	.slice = on_slice,
	.event = on_event,
	.attr = on_attr,
};

static struct seen *seen_new(void)
{
	struct seen *w = calloc(1, sizeof(*w));

	w->sl = calloc(MAXREC, sizeof(*w->sl));
	if (!w || !w->sl)
		abort();
	return w;
}

static void seen_free(struct seen *w)
{
	free(w->sl);
	free(w);
}

static int find_track(const struct seen *w, uint64_t uuid)
{
	for (int i = w->ntracks - 1; i >= 0; i--)
		if (w->tracks[i].uuid == uuid)
			return i;
	return -1;
}

static const struct rec_slice *find_slice(const struct seen *w, const char *name)
{
	for (int i = 0; i < w->nsl; i++)
		if (!strcmp(w->sl[i].name, name))
			return &w->sl[i];
	return NULL;
}

/* The bytes a writer put in fd (a memfd), malloc'ed. */
static uint8_t *slurp(int fd, size_t *len)
{
	struct stat st;
	uint8_t *b;

	if (fstat(fd, &st))
		abort();
	b = malloc(st.st_size ? st.st_size : 1);
	if (!b || pread(fd, b, st.st_size, 0) != st.st_size)
		abort();
	*len = st.st_size;
	return b;
}

/* ------------------------------------------------------------ writer -> reader */

static void test_writer_roundtrip(void)
{
	int fd = memfd_create("t", 0), wfd = dup(fd);
	struct pftrace *pt = pftrace__fdopen(wfd);
	struct pfseq *s, *g;
	struct seen *w = seen_new();
	struct tread_stats st;
	const struct rec_slice *r;
	uint8_t *buf;
	size_t len;
	int err, i;
	const char *frames[] = { "main", "step", "cuLaunchKernel" };
	struct pf_annot a[] = {
		{ .name = "u", .type = PA_UINT, .u = 1ull << 40 },
		{ .name = "i", .type = PA_INT, .i = -5 },
		{ .name = "s", .type = PA_STR, .s = "hello" },
		{ .name = "p", .type = PA_PTR, .u = 0x7f0000001000 },
		{ .name = "b", .type = PA_BOOL, .u = 1 },
		{ .name = "d", .type = PA_DOUBLE, .d = 2.5 },
	};
	struct pf_annot ret = { .name = "result", .type = PA_STR, .s = "CUDA_ERROR_INVALID_VALUE" };
	struct pf_flow f = { .out = 7 }, fin = { .in = 7 }, fend = { .end = 9 };

	check(pt != NULL, "writer on a memfd");
	pftrace__clock_snapshot(pt);
	pftrace__system_info(pt);
	pftrace__process(pt, 100, 4242, "train", "train --iters 3");
	pftrace__thread(pt, 101, 100, 4242, 4243, "worker");
	pftrace__counter_track(pt, 102, 100, "GPU memory (cuMemAlloc)", PF_UNIT_BYTES);
	pftrace__track_desc(pt, 103, 100, "stream 7", "CUPTI stream 7");
	s = pftrace__seq(pt, 101, 1000000);
	g = pftrace__seq(pt, 103, 1000000);
	pftrace__begin(pt, s, 1000000, "cuLaunchKernel", a, 6);
	pftrace__begin_cat(pt, s, 1000100, "syscall", "ioctl", NULL, 0);
	pftrace__end(pt, s, 1000200, NULL, 0);
	pftrace__end_stack(pt, s, 1000500, &ret, 1, frames, 3);
	pftrace__counter(pt, s, 1000600, 102, 4096);
	pftrace__begin_flow(pt, s, 1000700, 0, NULL, "cuGraphLaunch", NULL, 0, &f);
	pftrace__end(pt, s, 1000800, NULL, 0);
	pftrace__begin_flow(pt, g, 1000900, 0, NULL, "kern", NULL, 0, &fin);
	pftrace__end(pt, g, 1001000, NULL, 0);
	pftrace__begin_flow(pt, g, 1001100, 0, "gpu", "kern2", NULL, 0, &fend);
	pftrace__end(pt, g, 1001200, NULL, 0);
	/* Out of order: written with an absolute timestamp. */
	pftrace__begin(pt, s, 999000, "early", NULL, 0);
	pftrace__end(pt, s, 999500, NULL, 0);
	pftrace__begin(pt, s, 1002000, "after", NULL, 0);
	pftrace__end(pt, s, 1002300, NULL, 0);
	/* Past the writer's interning bound (4096 per sequence): it starts
	 * the sequence over; names must still resolve. */
	for (i = 0; i < 5000; i++) {
		char name[32];

		snprintf(name, sizeof(name), "fn%d", i);
		pftrace__begin(pt, s, 2000000 + 10 * i, name, NULL, 0);
		pftrace__end(pt, s, 2000000 + 10 * i + 3, NULL, 0);
	}
	pftrace__instant(pt, s, 3000000, 0, "capture ended", NULL, 0);
	/* One left open. */
	pftrace__begin(pt, s, 3000100, "open-at-end", NULL, 0);
	check(pftrace__close(pt) == 0, "writer closes");
	buf = slurp(fd, &len);
	close(fd);

	err = tread__run_mem(buf, len, "roundtrip", &ops, w, &st);
	check(err == 0, "writer's trace reads without error (%d)", err);
	check(!strcmp(w->version, CGBPF_VERSION), "cgbpf.version attribute: '%s'", w->version);
	i = find_track(w, 100);
	check(i >= 0 && w->tracks[i].kind == TREAD_TRACK_PROCESS && w->tracks[i].pid == 4242 &&
	      !strcmp(w->tnames[i], "train") && !strcmp(w->tcmd[i], "train --iters 3"),
	      "process track: pid, name, cmdline");
	i = find_track(w, 101);
	check(i >= 0 && w->tracks[i].kind == TREAD_TRACK_THREAD && w->tracks[i].tid == 4243 &&
	      w->tracks[i].pid == 4242 && w->tracks[i].parent == 100 &&
	      !strcmp(w->tnames[i], "worker"), "thread track: pid, tid, parent, name");
	i = find_track(w, 102);
	check(i >= 0 && w->tracks[i].kind == TREAD_TRACK_COUNTER && w->tracks[i].unit == 3 &&
	      !strcmp(w->tnames[i], "GPU memory (cuMemAlloc)"), "counter track: name, unit bytes");
	i = find_track(w, 103);
	check(i >= 0 && w->tracks[i].kind == TREAD_TRACK_PLAIN &&
	      !strcmp(w->tdesc[i], "CUPTI stream 7"), "plain track with description");

	r = find_slice(w, "cuLaunchKernel");
	check(r && r->ts == 1000000 && r->end_ts == 1000500 && r->depth == 0 && r->ended &&
	      r->track == 101, "slice times, depth and track from the sequence default");
	check(r && r->nargs == 6 && r->args[0].type == TREAD_A_UINT && r->args[0].u == 1ull << 40 &&
	      r->args[1].type == TREAD_A_INT && r->args[1].i == -5 &&
	      r->args[2].type == TREAD_A_STR && !strcmp(r->strs[2], "hello") &&
	      r->args[3].type == TREAD_A_PTR && r->args[3].u == 0x7f0000001000 &&
	      r->args[4].type == TREAD_A_BOOL && r->args[4].u == 1 &&
	      r->args[5].type == TREAD_A_DOUBLE && r->args[5].d == 2.5,
	      "begin args of every type, interned strings resolved");
	check(r && r->nend_args == 1 && !strcmp(r->end_strs[0], "CUDA_ERROR_INVALID_VALUE") &&
	      r->nframes == 3 && !strcmp(r->frame0, "main"),
	      "end args and the inline callstack on the slice");
	r = find_slice(w, "ioctl");
	check(r && r->depth == 1 && !strcmp(r->cat, "syscall") && r->end_ts - r->ts == 100,
	      "nested slice: depth 1, interned category");
	r = find_slice(w, "cuGraphLaunch");
	check(r && r->flow_out == 7, "flow started (flow_ids)");
	r = find_slice(w, "kern");
	check(r && r->flow_in == 7 && r->track == 103, "flow ended without closing (bind_id)");
	r = find_slice(w, "kern2");
	check(r && r->flow_end == 9 && !strcmp(r->cat, "gpu"), "flow ended and closed");
	r = find_slice(w, "early");
	check(r && r->ts == 999000 && r->end_ts == 999500, "absolute timestamps of older events");
	r = find_slice(w, "after");
	check(r && r->ts == 1002000 && r->end_ts == 1002300,
	      "deltas resume after an absolute timestamp");
	r = find_slice(w, "fn4999");
	check(r && r->ts == 2000000 + 49990 && r->end_ts == r->ts + 3,
	      "names and times resolve across interning resets");
	r = find_slice(w, "fn4095");
	check(r != NULL, "the name at the reset resolves");
	check(w->ncnt == 1 && w->cnt[0] == 4096 && w->cnt_ts[0] == 1000600, "counter value and time");
	check(w->ninst == 1 && !strcmp(w->inst[0], "capture ended"), "instant");
	r = find_slice(w, "open-at-end");
	check(r && !r->ended && r->end_ts == r->ts && st.unended == 1,
	      "a slice open at the end is given, unended");
	check(st.slices == 5000 + 7 && st.unmatched_ends == 0 && st.no_state == 0 &&
	      !st.truncated_tail && st.bytes == len,
	      "stats: %" PRIu64 " slices, %" PRIu64 " bytes", st.slices, st.bytes);

	/* A callback's non-zero return stops the read and is returned. */
	seen_free(w);
	w = seen_new();
	w->stop_after = 3;
	err = tread__run_mem(buf, len, "roundtrip", &ops, w, &st);
	check(err == 42 && w->nsl == 3, "a callback's return stops the read (%d, %d slices)", err,
	      w->nsl);
	seen_free(w);

	/* Cut inside a packet: an error, unless at a page boundary. */
	if (len > 8192) {
		w = seen_new();
		err = tread__run_mem(buf, 4096 * (len / 4096 - 1) + 3, "cut", &ops, w, &st);
		check(err == -EINVAL, "a packet cut short elsewhere than at a page boundary: error");
		seen_free(w);
		w = seen_new();
		err = tread__run_mem(buf, 4096, "cut", &ops, w, &st);
		check(err == 0 && st.truncated_tail && st.bytes == 4096,
		      "cut at a page boundary (a killed capture): read up to it");
		seen_free(w);
	}
	/* Every prefix reads or fails cleanly (ASan watches). */
	for (size_t cut = 0; cut < len && cut < 3000; cut += 7)
		tread__run_mem(buf, cut, "prefix", NULL, NULL, NULL);
	check(true, "prefixes read or fail without a crash");
	free(buf);
}

/* ------------------------------------------------------------ hand-made packets */

enum { SEQ_CLEARED = 1, SEQ_NEEDS = 2 };

static void pkt_desc(struct pb *pb, uint64_t uuid, const char *name, uint32_t machine)
{
	pb__begin(pb, 1);
	pb__begin(pb, 60);
	pb__varint(pb, 1, uuid);
	pb__string(pb, 2, name);
	pb__end(pb);
	if (machine)
		pb__varint(pb, 98, machine);
	pb__end(pb);
}

/* A sequence start: cleared state, defaults (clock 64, track), snapshot. */
static void pkt_seq_start(struct pb *pb, uint32_t seq, uint64_t track, uint64_t ts,
			  uint32_t machine)
{
	pb__begin(pb, 1);
	pb__varint(pb, 8, ts);
	pb__varint(pb, 58, 6);
	pb__varint(pb, 10, seq);
	pb__varint(pb, 13, SEQ_CLEARED | SEQ_NEEDS);
	pb__begin(pb, 59);
	pb__varint(pb, 58, 64);
	pb__begin(pb, 11);
	pb__varint(pb, 11, track);
	pb__end(pb);
	pb__end(pb);
	pb__begin(pb, 6);
	pb__begin(pb, 1);
	pb__varint(pb, 1, 6);
	pb__varint(pb, 2, ts);
	pb__end(pb);
	pb__begin(pb, 1);
	pb__varint(pb, 1, 64);
	pb__varint(pb, 2, ts);
	pb__bool(pb, 3, true);
	pb__end(pb);
	pb__end(pb);
	if (machine)
		pb__varint(pb, 98, machine);
	pb__end(pb);
}

/* A slice begin (name interned as iid, defined here when name) or end. */
static void pkt_event(struct pb *pb, uint32_t seq, uint64_t delta, int type, uint64_t iid,
		      const char *name, uint32_t machine)
{
	pb__begin(pb, 1);
	pb__varint(pb, 8, delta);
	pb__varint(pb, 10, seq);
	pb__varint(pb, 13, SEQ_NEEDS);
	if (name) {
		pb__begin(pb, 12);
		pb__begin(pb, 2);
		pb__varint(pb, 1, iid);
		pb__string(pb, 2, name);
		pb__end(pb);
		pb__end(pb);
	}
	pb__begin(pb, 11);
	pb__varint(pb, 9, type);
	if (iid)
		pb__varint(pb, 10, iid);
	pb__end(pb);
	if (machine)
		pb__varint(pb, 98, machine);
	pb__end(pb);
}

static int run_pb(struct pb *pb, struct seen *w, struct tread_stats *st)
{
	check(!pb->err, "hand-made trace encoded");
	return tread__run_mem(pb->buf, pb->len, "hand-made", &ops, w, st);
}

static void test_machines(void)
{
	struct seen *w = seen_new();
	struct tread_stats st;
	struct pb pb;
	int err;

	pb__init(&pb);
	/* Two machines, both with sequence 2 and iid 1, different names and
	 * clocks: state is per (machine, sequence). */
	pkt_desc(&pb, 11, "thread A", 0);
	pkt_desc(&pb, 22, "thread B", 1);
	pkt_seq_start(&pb, 2, 11, 5000, 0);
	pkt_seq_start(&pb, 2, 22, 900000, 1);
	pkt_event(&pb, 2, 10, TREAD_SLICE_BEGIN, 1, "on-host", 0);
	pkt_event(&pb, 2, 20, TREAD_SLICE_BEGIN, 1, "on-remote", 1);
	pkt_event(&pb, 2, 5, TREAD_SLICE_END, 0, NULL, 0);
	pkt_event(&pb, 2, 7, TREAD_SLICE_END, 0, NULL, 1);
	err = run_pb(&pb, w, &st);
	check(err == 0 && w->nsl == 2, "two machines read (%d, %d slices)", err, w->nsl);
	check(w->nsl == 2 && !strcmp(w->sl[0].name, "on-host") && w->sl[0].machine == 0 &&
	      w->sl[0].ts == 5010 && w->sl[0].end_ts == 5015 && w->sl[0].track == 11,
	      "host slice: its own interning, clock and track");
	check(w->nsl == 2 && !strcmp(w->sl[1].name, "on-remote") && w->sl[1].machine == 1 &&
	      w->sl[1].ts == 900020 && w->sl[1].end_ts == 900027 && w->sl[1].track == 22,
	      "remote slice: its own interning, clock and track");
	seen_free(w);
	pb__free(&pb);
}

static void test_compressed(void)
{
	struct seen *w = seen_new();
	struct tread_stats st;
	struct pb inner, pb;
	uLongf zlen;
	uint8_t *z;
	int err;

	pb__init(&inner);
	pb__init(&pb);
	pkt_seq_start(&inner, 3, 33, 100, 0);
	pkt_event(&inner, 3, 1, TREAD_SLICE_BEGIN, 5, "zipped", 0);
	pkt_event(&inner, 3, 2, TREAD_SLICE_END, 0, NULL, 0);
	zlen = compressBound(inner.len);
	z = malloc(zlen);
	if (!z || compress2(z, &zlen, inner.buf, inner.len, 1) != Z_OK)
		abort();
	pkt_desc(&pb, 33, "t", 0);
	pb__begin(&pb, 1);
	pb__bytes(&pb, 50, z, zlen);
	pb__end(&pb);
	err = run_pb(&pb, w, &st);
	check(err == 0 && w->nsl == 1 && !strcmp(w->sl[0].name, "zipped") && w->sl[0].ts == 101 &&
	      w->sl[0].end_ts == 103, "packets inside compressed_packets");
	/* Corrupt deflate data: an error. */
	pb__reset(&pb);
	z[zlen / 2] ^= 0x55;
	z[zlen - 1] ^= 0x55;
	pb__begin(&pb, 1);
	pb__bytes(&pb, 50, z, zlen);
	pb__end(&pb);
	err = run_pb(&pb, w, &st);
	check(err == -EINVAL, "corrupt compressed_packets: error");
	free(z);
	pb__free(&inner);
	pb__free(&pb);
	seen_free(w);
}

static void test_malformed(void)
{
	static const char text[] = "this is not a trace\n";
	struct seen *w = seen_new();
	struct tread_stats st;
	struct pb pb;
	int err;

	err = tread__run_mem(text, sizeof(text) - 1, "text", &ops, w, &st);
	check(err == -EINVAL, "a text file: error");
	err = tread__run_mem("", 0, "empty", &ops, w, &st);
	check(err == 0 && st.packets == 0, "an empty file: no packets, no error");

	pb__init(&pb);
	/* An event name iid that was never interned. */
	pkt_seq_start(&pb, 2, 11, 5000, 0);
	pkt_event(&pb, 2, 10, TREAD_SLICE_BEGIN, 9, NULL, 0);
	err = run_pb(&pb, w, &st);
	check(err == -EINVAL, "an undefined interned name: error");

	/* An event with no track and no default. */
	pb__reset(&pb);
	pb__begin(&pb, 1);
	pb__varint(&pb, 8, 1);
	pb__varint(&pb, 10, 5);
	pb__begin(&pb, 11);
	pb__varint(&pb, 9, TREAD_INSTANT);
	pb__string(&pb, 23, "x");
	pb__end(&pb);
	pb__end(&pb);
	err = run_pb(&pb, w, &st);
	check(err == -EINVAL, "an event without a track: error");

	/* A timestamp on a sequence clock no snapshot defined. */
	pb__reset(&pb);
	pb__begin(&pb, 1);
	pb__varint(&pb, 8, 1);
	pb__varint(&pb, 58, 64);
	pb__varint(&pb, 10, 5);
	pb__begin(&pb, 11);
	pb__varint(&pb, 9, TREAD_INSTANT);
	pb__varint(&pb, 11, 3);
	pb__end(&pb);
	pb__end(&pb);
	err = run_pb(&pb, w, &st);
	check(err == -EINVAL, "an undefined sequence clock: error");

	/* Packets needing state before any: skipped and counted, as trace
	 * processor does; an end with nothing open: counted. */
	pb__reset(&pb);
	pkt_event(&pb, 4, 10, TREAD_SLICE_BEGIN, 1, "lost", 0);
	pkt_seq_start(&pb, 2, 11, 5000, 0);
	pkt_event(&pb, 2, 10, TREAD_SLICE_END, 0, NULL, 0);
	err = run_pb(&pb, w, &st);
	check(err == 0 && st.no_state == 1 && st.unmatched_ends == 1 && st.slices == 0,
	      "state-less packets skipped, unmatched ends counted");

	/* A top-level field that is not a packet. */
	pb__reset(&pb);
	pb__varint(&pb, 2, 1);
	err = run_pb(&pb, w, &st);
	check(err == -EINVAL, "a top-level field other than packet: error");

	/* A packet whose nested length runs past it. */
	pb__reset(&pb);
	pb__begin(&pb, 1);
	pb__raw(&pb, "\x5a\x05\x01", 3);	/* field 11, LEN 5, 1 byte */
	pb__end(&pb);
	err = run_pb(&pb, w, &st);
	check(err == -EINVAL, "a nested length past its packet: error");

	err = tread__run("/nonexistent/x.perfetto-trace", &ops, w, &st);
	check(err == -ENOENT, "a missing file: -ENOENT");
	pb__free(&pb);
	seen_free(w);
}

int main(void)
{
	sources__init();
	log_verbosity = getenv("TREAD_VERBOSE") ? LOG_DEBUG : -1;
	test_writer_roundtrip();
	test_machines();
	test_compressed();
	test_malformed();
	printf("%d passed, %d failed\n", n_pass, n_fail);
	return n_fail ? 1 : 0;
}
