// SPDX-License-Identifier: MIT
/*
 * cgbpf merge: several cgbpf traces (hosts, or ranks recorded apart) into
 * one, each input as its own Perfetto machine.
 *
 * The first input is the host machine (machine_id 0, its packets copied as
 * they are); input i > 0 becomes machine i: every packet gets machine_id i
 * (packets inside compressed_packets too: trace processor reads only the
 * inner packets), and its track uuids and flow ids are remapped so no two
 * machines share one. Before input i's packets a RemoteClockSync says how its BOOTTIME
 * maps to the host's, computed from the two traces' first ClockSnapshots so
 * that equal REALTIME readings land at the same trace time: the inputs are
 * aligned on wall-clock time, as good as the hosts' NTP.
 *
 * Inputs are streamed packet by packet: memory is bounded by the largest
 * packet (a compressed bundle: under a few MiB), whatever the input sizes.
 * The output is written to a temporary file renamed over OUTPUT only when
 * every input merged cleanly.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>
#include "lib/log.h"
#include "lib/outfile.h"
#include "lib/pb.h"
#include "trace/merge.h"

/* Field numbers from perfetto_trace.proto. */
enum {
	TRACE_PACKET = 1,
	PKT_CLOCK_SNAPSHOT = 6,
	PKT_TRACK_EVENT = 11,
	PKT_SYSTEM_INFO = 45,
	PKT_COMPRESSED = 50,
	PKT_DEFAULTS = 59,
	PKT_TRACK_DESC = 60,
	PKT_MACHINE_ID = 98,
	PKT_REMOTE_CLOCK_SYNC = 107,
	PKT_TRACE_ATTRIBUTES = 126,
	TD_UUID = 1,
	TD_PARENT = 5,
	TE_TRACK_UUID = 11,
	TE_LEGACY_EVENT = 6,
	TE_FLOW_IDS_OLD = 36,
	TE_TERMINATING_FLOW_IDS_OLD = 42,
	TE_FLOW_IDS = 47,
	TE_TERMINATING_FLOW_IDS = 48,
	LE_BIND_ID = 8,
	TE_EXTRA_COUNTERS = 31,
	TE_EXTRA_DOUBLE_COUNTERS = 45,
	DEFAULTS_TRACK_EVENT = 11,
	CS_CLOCKS = 1,
	CS_PRIMARY = 2,
	CLOCK_ID = 1,
	CLOCK_TS = 2,
	RCS_SYNCED = 1,
	SYNC_CLIENT = 2,
	SYNC_HOST = 3,
	ATTR = 1,
	ATTR_KEY = 1,
};

enum { CLOCK_REALTIME = 1, CLOCK_BOOTTIME = 6 };

/* A single packet bigger than this is not something cgbpf writes. */
#define MAX_PACKET (64u << 20)
/* cgbpf writes its attributes in the first few packets. */
#define MARKER_PACKETS 16

struct input {
	const char *path;
	FILE *f;
	uint64_t off;		/* bytes consumed */
	uint8_t *buf;
	size_t cap;
};

/* What a message is, for the fields to rewrite in it. */
enum kind { K_PACKET, K_TRACK_DESC, K_TRACK_EVENT, K_LEGACY, K_DEFAULTS, K_TE_DEFAULTS,
	    K_SNAPSHOT };

struct merge {
	uint32_t machine;	/* 0: the host, copied as is */
	struct pb out;		/* one output packet */
	uint8_t *zbuf;		/* inflate / deflate scratch */
	size_t zcap;
	const char *path;	/* input, for messages */
};

static int read_varint(struct input *in, uint64_t *v, bool *eof)
{
	uint64_t r = 0;

	for (int shift = 0; shift < 64; shift += 7) {
		int c = getc(in->f);

		if (c == EOF) {
			if (ferror(in->f))
				return -errno;
			*eof = true;
			return shift ? -EPIPE : 0;
		}
		in->off++;
		r |= (uint64_t)(c & 0x7f) << shift;
		if (!(c & 0x80)) {
			*v = r;
			return 0;
		}
	}
	return -EINVAL;
}

/* The next Trace.packet: 1 with *len set, 0 at a clean end, <0 after an
 * error message. */
static int next_packet(struct input *in, size_t *len)
{
	uint64_t tag, n, at = in->off;
	bool eof = false;
	int err = read_varint(in, &tag, &eof);

	if (!err && eof)
		return 0;
	if (err == -EPIPE || (!err && eof))
		goto truncated;
	if (err) {
		err("%s: byte %" PRIu64 ": %s", in->path, at,
		    err == -EINVAL ? "not a Perfetto trace (bad varint)" : strerror(-err));
		return -EINVAL;
	}
	if (tag != (TRACE_PACKET << 3 | PB_WIRE_LEN)) {
		err("%s: byte %" PRIu64 ": not a Perfetto trace (field %" PRIu64 ", wire type %d "
		    "where a TracePacket should be)", in->path, at, tag >> 3, (int)(tag & 7));
		return -EINVAL;
	}
	eof = false;
	err = read_varint(in, &n, &eof);
	if (err == -EPIPE || eof)
		goto truncated;
	if (err || n > MAX_PACKET) {
		err("%s: byte %" PRIu64 ": not a cgbpf trace (a packet of %" PRIu64 " bytes)",
		    in->path, at, n);
		return -EINVAL;
	}
	/* Never NULL, even for an empty packet: callers do buf + len. */
	if (n > in->cap || !in->buf) {
		uint8_t *b = realloc(in->buf, n ? n : 1);

		if (!b) {
			err("%s: %s", in->path, strerror(ENOMEM));
			return -ENOMEM;
		}
		in->buf = b;
		in->cap = n ? n : 1;
	}
	if (n && fread(in->buf, 1, n, in->f) != n) {
		if (ferror(in->f)) {
			err("%s: %s", in->path, strerror(errno));
			return -EIO;
		}
		goto truncated;
	}
	in->off += n;
	*len = n;
	return 1;
truncated:
	err("%s: truncated: the packet at byte %" PRIu64 " is cut short (an interrupted "
	    "capture?); nothing was merged", in->path, at);
	return -EINVAL;
}

/* Track uuids of machine m > 0: a bijective mix, so distinct uuids stay
 * distinct and one machine's never meet another's but by chance (2^-64). */
static uint64_t remap_uuid(uint32_t m, uint64_t uuid)
{
	uint64_t x = uuid ^ (0x9e3779b97f4a7c15ull * m);

	if (!uuid)
		return 0;	/* "no track" stays so */
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

static bool is_uuid_field(enum kind k, uint32_t id)
{
	switch (k) {
	case K_TRACK_DESC:
		return id == TD_UUID || id == TD_PARENT;
	case K_TRACK_EVENT:
	case K_TE_DEFAULTS:
		return id == TE_TRACK_UUID || id == TE_EXTRA_COUNTERS ||
		       id == TE_EXTRA_DOUBLE_COUNTERS;
	default:
		return false;
	}
}

/*
 * Flow ids of machine m > 0. Trace processor links flows by id across
 * the whole trace, so two machines' ids must not meet. cgbpf's are
 * counters (user/sources/gpu/gpu.c): below 2^48 they move to m's own range,
 * m << 48 | id, which no machine's counter reaches; any other id (a
 * 64-bit hash of an older cgbpf or another writer) gets the uuids' mix.
 */
static uint64_t remap_flow(uint32_t m, uint64_t id)
{
	if (id < 1ull << 48 && m < 1u << 16)
		return (uint64_t)m << 48 | id;
	return remap_uuid(m, id);
}

static bool is_flow_field(enum kind k, uint32_t id)
{
	if (k == K_LEGACY)
		return id == LE_BIND_ID;
	return k == K_TRACK_EVENT && (id == TE_FLOW_IDS_OLD || id == TE_TERMINATING_FLOW_IDS_OLD ||
				      id == TE_FLOW_IDS || id == TE_TERMINATING_FLOW_IDS);
}

/* A flow id field, each id remapped, in the field's own encoding (packed
 * ones written unpacked, which every reader takes). */
static int rewrite_flow(struct merge *mg, const struct pb_field *f)
{
	/* A varint field has no data (NULL): no arithmetic on it. */
	const uint8_t *q = f->data, *qe = f->data ? f->data + f->len : NULL;
	uint64_t v;

	switch (f->wt) {
	case PB_WIRE_VARINT:
		pb__varint(&mg->out, f->id, remap_flow(mg->machine, f->v));
		return 0;
	case PB_WIRE_FIXED64:
		pb__fixed64(&mg->out, f->id, remap_flow(mg->machine, le64toh(f->v)));
		return 0;
	case PB_WIRE_LEN:
		if (f->id == TE_FLOW_IDS || f->id == TE_TERMINATING_FLOW_IDS) {
			if (f->len % 8)
				return -EINVAL;
			for (; q < qe; q += 8) {
				memcpy(&v, q, 8);
				pb__fixed64(&mg->out, f->id, remap_flow(mg->machine, le64toh(v)));
			}
			return 0;
		}
		while (q < qe) {
			if (!pb__get_varint(&q, qe, &v))
				return -EINVAL;
			pb__varint(&mg->out, f->id, remap_flow(mg->machine, v));
		}
		return 0;
	default:
		return -EINVAL;
	}
}

static int rewrite(struct merge *mg, const uint8_t *p, size_t n, enum kind k, bool inner);

/* compressed_packets of a remote machine: inflated, each inner packet
 * rewritten, deflated again. */
static int rewrite_compressed(struct merge *mg, const struct pb_field *f)
{
	z_stream zs = { 0 };
	struct pb inner;
	size_t have = 0;
	int zr, err = 0;
	const uint8_t *p, *end;
	struct pb_field pf;
	uLongf zlen;

	/* 32 + MAX_WBITS: zlib or gzip framing, whichever the writer used. */
	if (inflateInit2(&zs, 32 + MAX_WBITS) != Z_OK)
		return -ENOMEM;
	zs.next_in = (Bytef *)f->data;
	zs.avail_in = f->len;
	do {
		if (have == mg->zcap) {
			size_t nc = mg->zcap ? mg->zcap * 2 : 1 << 20;
			uint8_t *b = nc > MAX_PACKET ? NULL : realloc(mg->zbuf, nc);

			if (!b) {
				inflateEnd(&zs);
				return -EFBIG;
			}
			mg->zbuf = b;
			mg->zcap = nc;
		}
		zs.next_out = mg->zbuf + have;
		zs.avail_out = mg->zcap - have;
		zr = inflate(&zs, Z_NO_FLUSH);
		have = mg->zcap - zs.avail_out;
	} while (zr == Z_OK || (zr == Z_BUF_ERROR && zs.avail_in));
	inflateEnd(&zs);
	if (zr != Z_STREAM_END)
		return -EINVAL;
	/* The inner packets are a Trace: rewrite each into their own buffer,
	 * which needs the outer encoder free, so swap. */
	inner = mg->out;
	pb__init(&mg->out);
	p = mg->zbuf;
	end = mg->zbuf + have;
	while (!err && (err = pb__next_field(&p, end, &pf)) == 1) {
		if (pf.id != TRACE_PACKET || pf.wt != PB_WIRE_LEN) {
			err = -EINVAL;
			break;
		}
		pb__begin(&mg->out, TRACE_PACKET);
		err = rewrite(mg, pf.data, pf.len, K_PACKET, true);
		pb__end(&mg->out);
	}
	if (!err)
		err = mg->out.err;
	{
		struct pb plain = mg->out;

		mg->out = inner;
		if (!err) {
			uint8_t *z;

			zlen = compressBound(plain.len);
			z = malloc(zlen);
			if (!z || compress2(z, &zlen, plain.buf, plain.len, 1) != Z_OK)
				err = -ENOMEM;
			else
				pb__bytes(&mg->out, PKT_COMPRESSED, z, zlen);
			free(z);
		}
		pb__free(&plain);
	}
	return err;
}

/* Writes message p..p+n of kind k into mg->out with its uuids remapped
 * (and, for a packet, machine_id set). The caller opened the message.
 * inner: p is a packet inside compressed_packets, which cannot hold
 * compressed_packets again (no writer nests them; the inflated bytes
 * being read live in the one inflate buffer a nested bundle would reuse). */
static int rewrite(struct merge *mg, const uint8_t *p, size_t n, enum kind k, bool inner)
{
	const uint8_t *end = p + n;
	struct pb_field f;
	int r, err;

	while ((r = pb__next_field(&p, end, &f)) == 1) {
		if (is_uuid_field(k, f.id)) {
			if (f.wt == PB_WIRE_VARINT) {
				pb__varint(&mg->out, f.id, remap_uuid(mg->machine, f.v));
				continue;
			}
			if (f.wt == PB_WIRE_LEN) {	/* packed repeated uuids */
				const uint8_t *q = f.data, *qe = f.data + f.len;
				uint64_t v;

				while (q < qe) {
					if (!pb__get_varint(&q, qe, &v))
						return -EINVAL;
					pb__varint(&mg->out, f.id, remap_uuid(mg->machine, v));
				}
				continue;
			}
		}
		if (is_flow_field(k, f.id)) {
			err = rewrite_flow(mg, &f);
			if (err)
				return err;
			continue;
		}
		if (f.wt == PB_WIRE_LEN) {
			enum kind sub = K_PACKET;
			bool nested = false;

			if (k == K_PACKET) {
				nested = true;
				if (f.id == PKT_TRACK_DESC)
					sub = K_TRACK_DESC;
				else if (f.id == PKT_TRACK_EVENT)
					sub = K_TRACK_EVENT;
				else if (f.id == PKT_DEFAULTS)
					sub = K_DEFAULTS;
				else if (f.id == PKT_CLOCK_SNAPSHOT)
					sub = K_SNAPSHOT;
				else
					nested = false;
				if (f.id == PKT_COMPRESSED) {
					if (inner)
						return -EINVAL;
					err = rewrite_compressed(mg, &f);
					if (err)
						return err;
					continue;
				}
			} else if (k == K_DEFAULTS && f.id == DEFAULTS_TRACK_EVENT) {
				nested = true;
				sub = K_TE_DEFAULTS;
			} else if (k == K_TRACK_EVENT && f.id == TE_LEGACY_EVENT) {
				nested = true;
				sub = K_LEGACY;
			}
			if (nested) {
				pb__begin(&mg->out, f.id);
				err = rewrite(mg, f.data, f.len, sub, inner);
				pb__end(&mg->out);
				if (err)
					return err;
				continue;
			}
		}
		/* A remote machine's snapshots relate its own clocks; which clock
		 * is the trace's is the host's to say. */
		if (k == K_SNAPSHOT && f.id == CS_PRIMARY)
			continue;
		if (k == K_PACKET && f.id == PKT_MACHINE_ID)
			continue;
		pb__raw(&mg->out, f.start, f.size);
	}
	if (r < 0)
		return r;
	if (k == K_PACKET)
		pb__varint(&mg->out, PKT_MACHINE_ID, mg->machine);
	return 0;
}

/* BOOTTIME and REALTIME of a ClockSnapshot, when it has both. */
static bool snapshot_clocks(const uint8_t *p, size_t n, uint64_t *boot, uint64_t *real)
{
	const uint8_t *end = p + n;
	bool hb = false, hr = false;
	struct pb_field f;

	while (pb__next_field(&p, end, &f) == 1) {
		const uint8_t *q = f.data, *qe;
		struct pb_field c;
		uint64_t id = 0, ts = 0;

		if (f.id != CS_CLOCKS || f.wt != PB_WIRE_LEN)
			continue;
		qe = q + f.len;
		while (pb__next_field(&q, qe, &c) == 1) {
			if (c.id == CLOCK_ID && c.wt == PB_WIRE_VARINT)
				id = c.v;
			else if (c.id == CLOCK_TS && c.wt == PB_WIRE_VARINT)
				ts = c.v;
		}
		if (id == CLOCK_BOOTTIME) {
			*boot = ts;
			hb = true;
		} else if (id == CLOCK_REALTIME) {
			*real = ts;
			hr = true;
		}
	}
	return hb && hr;
}

/* Whether a TraceAttributes message has a key starting "cgbpf.". */
static bool attributes_are_cgbpf(const uint8_t *p, size_t n)
{
	const uint8_t *end = p + n;
	struct pb_field f, a;

	while (pb__next_field(&p, end, &f) == 1) {
		const uint8_t *q, *qe;

		if (f.id != ATTR || f.wt != PB_WIRE_LEN)
			continue;
		q = f.data;
		qe = f.data + f.len;
		while (pb__next_field(&q, qe, &a) == 1)
			if (a.id == ATTR_KEY && a.wt == PB_WIRE_LEN && a.len > 6 &&
			    !memcmp(a.data, "cgbpf.", 6))
				return true;
	}
	return false;
}

/*
 * Reads the start of an input: it must be a cgbpf trace (its attributes in
 * the first packets) with a ClockSnapshot; leaves the file rewound.
 */
static int probe_input(struct input *in, uint64_t *boot, uint64_t *real)
{
	bool cgbpf = false, clocks = false;
	size_t len;
	int r, i;

	for (i = 0; (r = next_packet(in, &len)) == 1 && !(cgbpf && clocks); i++) {
		const uint8_t *p = in->buf, *end = in->buf + len;
		struct pb_field f;
		int fr;

		while ((fr = pb__next_field(&p, end, &f)) == 1) {
			if (f.wt != PB_WIRE_LEN)
				continue;
			if (f.id == PKT_TRACE_ATTRIBUTES && attributes_are_cgbpf(f.data, f.len))
				cgbpf = true;
			else if (f.id == PKT_CLOCK_SNAPSHOT && !clocks)
				clocks = snapshot_clocks(f.data, f.len, boot, real);
		}
		if (fr < 0) {
			err("%s: packet at byte %" PRIu64 " is malformed: not a Perfetto trace",
			    in->path, in->off - len);
			return -EINVAL;
		}
		if (i == MARKER_PACKETS && !cgbpf)
			break;
	}
	if (r < 0)
		return r;
	if (!cgbpf) {
		err("%s: not a cgbpf trace (no cgbpf attributes at its start): merge takes "
		    "traces written by cgbpf record, version 0.2 or later", in->path);
		return -EINVAL;
	}
	if (!clocks) {
		err("%s: no clock snapshot with BOOTTIME and REALTIME: cannot align it", in->path);
		return -EINVAL;
	}
	rewind(in->f);
	in->off = 0;
	return 0;
}

static int write_packet(FILE *out, const uint8_t *p, size_t n)
{
	uint8_t hdr[1 + PB_MAX_VARINT], *e = hdr;

	*e++ = TRACE_PACKET << 3 | PB_WIRE_LEN;
	e = pb__put_varint(e, n);
	if (fwrite(hdr, 1, e - hdr, out) != (size_t)(e - hdr) || fwrite(p, 1, n, out) != n)
		return -errno;
	return 0;
}

/*
 * The RemoteClockSync of machine m: two identical rounds (trace processor
 * averages round pairs) pairing the client's BOOTTIME c with the host
 * BOOTTIME h at which the host's REALTIME equals the client's.
 */
static int write_clock_sync(FILE *out, struct pb *pb, uint32_t m, uint64_t c, uint64_t h)
{
	pb__reset(pb);
	pb__begin(pb, PKT_REMOTE_CLOCK_SYNC);
	for (int round = 0; round < 2; round++) {
		pb__begin(pb, RCS_SYNCED);
		pb__begin(pb, SYNC_CLIENT);
		pb__begin(pb, CS_CLOCKS);
		pb__varint(pb, CLOCK_ID, CLOCK_BOOTTIME);
		pb__varint(pb, CLOCK_TS, c);
		pb__end(pb);
		pb__end(pb);
		pb__begin(pb, SYNC_HOST);
		pb__begin(pb, CS_CLOCKS);
		pb__varint(pb, CLOCK_ID, CLOCK_BOOTTIME);
		pb__varint(pb, CLOCK_TS, h);
		pb__end(pb);
		pb__end(pb);
		pb__end(pb);
	}
	pb__end(pb);
	pb__varint(pb, PKT_MACHINE_ID, m);
	if (pb->err)
		return pb->err;
	return write_packet(out, pb->buf, pb->len);
}

int merge__streams(FILE *const *files, const char *const *names, int n, FILE *out,
		   uint64_t *npackets)
{
	struct input *in = calloc(n, sizeof(*in));
	uint64_t *boot = calloc(n, sizeof(*boot)), *real = calloc(n, sizeof(*real));
	struct merge mg = { 0 };
	uint64_t packets = 0;
	int err = 0;

	pb__init(&mg.out);
	if (!in || !boot || !real) {
		err("%s", strerror(ENOMEM));
		err = -ENOMEM;
		goto cleanup;
	}
	for (int i = 0; i < n && !err; i++) {
		in[i].path = names[i];
		in[i].f = files[i];
		err = probe_input(&in[i], &boot[i], &real[i]);
	}
	for (int i = 0; i < n && !err; i++) {
		size_t len;
		int r;

		mg.machine = i;
		mg.path = names[i];
		if (i) {
			/* Host BOOTTIME when the host's wall clock read what this
			 * input's did at its snapshot. */
			int64_t h;

			if (real[i] > INT64_MAX || real[0] > INT64_MAX || boot[0] > INT64_MAX ||
			    __builtin_add_overflow((int64_t)boot[0], (int64_t)real[i] - (int64_t)real[0],
						   &h)) {
				err("%s: its clock snapshot is out of range: cannot align it", names[i]);
				err = -EINVAL;
				break;
			}
			if (h <= 0) {
				err("%s was recorded %.0f s before %s began: its events would "
				    "fall before the host's boot; give the earliest trace first",
				    names[i], ((double)real[0] - real[i]) / 1e9, names[0]);
				err = -EINVAL;
				break;
			}
			err = write_clock_sync(out, &mg.out, i, boot[i], h);
			if (err) {
				err("writing the merged trace: %s", strerror(-err));
				break;
			}
		}
		while ((r = next_packet(&in[i], &len)) == 1) {
			packets++;
			if (!i) {
				err = write_packet(out, in[i].buf, len);
			} else {
				pb__reset(&mg.out);
				err = rewrite(&mg, in[i].buf, len, K_PACKET, false);
				if (!err)
					err = mg.out.err;
				if (err) {
					err("%s: packet at byte %" PRIu64 ": %s", names[i],
					    in[i].off - len,
					    err == -EINVAL ? "malformed" : strerror(-err));
					break;
				}
				err = write_packet(out, mg.out.buf, mg.out.len);
			}
			if (err) {
				err("writing the merged trace: %s", strerror(-err));
				break;
			}
		}
		if (!err && r < 0)
			err = r;
	}
	if (npackets)
		*npackets = packets;
cleanup:
	for (int i = 0; in && i < n; i++)
		free(in[i].buf);
	free(in);
	free(boot);
	free(real);
	free(mg.zbuf);
	pb__free(&mg.out);
	return err;
}

int merge__run(const char *const *paths, int n, const char *output)
{
	FILE **in = calloc(n, sizeof(*in));
	char *tmp = NULL;
	FILE *out = NULL;
	uint64_t packets = 0;
	int err = 0, fd;

	if (!in || asprintf(&tmp, "%s.XXXXXX", output) < 0) {
		err("%s", strerror(ENOMEM));
		tmp = NULL;
		err = -ENOMEM;
		goto cleanup;
	}
	{
		struct stat st;

		/* The rename at the end would replace a link, not write through
		 * it: refuse what record -o refuses, before the work. */
		if (!lstat(output, &st) && !S_ISREG(st.st_mode)) {
			err = S_ISLNK(st.st_mode) ? -ELOOP : S_ISDIR(st.st_mode) ? -EISDIR : -EINVAL;
			err("cannot write %s: %s", output, outfile__strerror(err));
			goto cleanup;
		}
	}
	for (int i = 0; i < n; i++) {
		in[i] = fopen(paths[i], "rb");
		if (!in[i]) {
			err = -errno;
			err("%s: %s", paths[i], strerror(-err));
			goto cleanup;
		}
	}
	fd = mkstemp(tmp);
	if (fd >= 0) {
		/* mkstemp's 0600, widened as record's traces are (the umask
		 * still applies), and the sudo user's. */
		mode_t um = umask(0);

		umask(um);
		if (fchmod(fd, OUTFILE_MODE & ~um))
			warn("%s: %s", tmp, strerror(errno));
		err = outfile__give(fd);
		if (err)
			warn("cannot give %s to the sudo user: %s; it stays root's", output,
			     strerror(-err));
		err = 0;
	}
	if (fd < 0 || !(out = fdopen(fd, "wb"))) {
		err = -errno;
		err("%s: %s", output, strerror(-err));
		if (fd >= 0) {
			close(fd);
			unlink(tmp);
		}
		goto cleanup;
	}
	err = merge__streams(in, paths, n, out, &packets);
	if (!err && (fflush(out) || fsync(fileno(out)))) {
		err = -errno;
		err("%s: %s", output, strerror(-err));
	}
	if (fclose(out) && !err) {
		err = -errno;
		err("%s: %s", output, strerror(-err));
	}
	if (!err && rename(tmp, output)) {
		err = -errno;
		err("%s: %s", output, strerror(-err));
	}
	if (err)
		unlink(tmp);
	else
		info("merged %d traces (%" PRIu64 " packets) into %s: %s is machine 0, the others "
		     "machines 1..%d, aligned on REALTIME", n, packets, output, paths[0], n - 1);
cleanup:
	for (int i = 0; in && i < n; i++)
		if (in[i])
			fclose(in[i]);
	free(in);
	free(tmp);
	return err ? 1 : 0;
}
