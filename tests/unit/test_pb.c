/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the protobuf encoder (user/lib/pb.h).
 *
 * Usage: test_pb [DIR]
 * Checks exact encodings and nested lengths in memory, then writes the
 * fixtures pb_all.bin and pb_perfetto.bin into DIR (default: the current
 * directory) for check_pb.sh to decode with protoc. Prints "ok N - ..." /
 * "not ok N - ..." lines and a final "N passed, M failed"; exits 1 on any
 * failure.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/pb.h"
#include "tap.h"
#include "sources/sources.h"



static void dump(const char *what, const uint8_t *p, size_t n)
{
	size_t i;

	printf("#   %s (%zu):", what, n);
	for (i = 0; i < n && i < 48; i++)
		printf(" %02x", p[i]);
	if (n > 48)
		printf(" ...");
	putchar('\n');
}

/* pb's contents are exactly want[0..n); shows both on mismatch. */
static void check_bytes(const struct pb *pb, const uint8_t *want, size_t n, const char *desc)
{
	bool same = pb->err == 0 && pb->len == n && (n == 0 || memcmp(pb->buf, want, n) == 0);

	if (!check(same, "%s", desc)) {
		printf("#   err %d\n", pb->err);
		dump("got ", pb->buf, pb->len);
		dump("want", want, n);
	}
}

#define CHECK_BYTES(pb, desc, ...)                                              \
	do {                                                                    \
		static const uint8_t want_[] = { __VA_ARGS__ };                 \
		check_bytes(pb, want_, sizeof(want_), desc);                    \
	} while (0)

/* ------------------------------------------------------------ a decoder */

/*
 * Deliberately naive and strict, so it shares no logic with pb.h: it also
 * rejects non-minimal varints, which is what pb__end() promises to avoid.
 */
struct rd {
	const uint8_t *p, *end;
	bool bad;
};

static uint64_t rd_varint(struct rd *r)
{
	uint64_t v = 0;
	int shift;

	for (shift = 0; shift < 70; shift += 7) {
		uint8_t b;

		if (r->p >= r->end) {
			r->bad = true;
			return 0;
		}
		b = *r->p++;
		if (shift == 63 && b > 1) {
			r->bad = true;		/* more than 64 bits */
			return 0;
		}
		v |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80)) {
			if (b == 0 && shift > 0)
				r->bad = true;	/* redundant trailing zero group */
			return v;
		}
	}
	r->bad = true;
	return 0;
}

/* Read a tag; false (without marking bad) at the clean end of input. */
static bool rd_tag(struct rd *r, uint32_t *field, int *wt)
{
	uint64_t t;

	if (r->p == r->end)
		return false;
	t = rd_varint(r);
	if (r->bad || (t >> 3) == 0 || (t >> 3) > PB_MAX_FIELD) {
		r->bad = true;
		return false;
	}
	*field = (uint32_t)(t >> 3);
	*wt = (int)(t & 7);
	return true;
}

/* Expect field with wire type 2 next; returns a reader over its payload. */
static struct rd rd_len(struct rd *r, uint32_t field)
{
	struct rd sub = { .bad = true };
	uint32_t f;
	int wt;
	uint64_t n;

	if (!rd_tag(r, &f, &wt) || f != field || wt != PB_WIRE_LEN) {
		r->bad = true;
		return sub;
	}
	n = rd_varint(r);
	if (r->bad || n > (uint64_t)(r->end - r->p)) {
		r->bad = true;
		return sub;
	}
	sub.p = r->p;
	sub.end = r->p + n;
	sub.bad = false;
	r->p += n;
	return sub;
}

/* Expect field with wire type 0 holding want next. */
static void rd_expect_varint(struct rd *r, uint32_t field, uint64_t want)
{
	uint32_t f;
	int wt;

	if (!rd_tag(r, &f, &wt) || f != field || wt != PB_WIRE_VARINT || rd_varint(r) != want)
		r->bad = true;
}

/* ------------------------------------------------------------ varints */

static void test_varints(void)
{
	static const struct {
		uint64_t v;
		uint8_t enc[10];
		size_t n;
	} cases[] = {
		{ 0, { 0x00 }, 1 },
		{ 1, { 0x01 }, 1 },
		{ 127, { 0x7f }, 1 },
		{ 128, { 0x80, 0x01 }, 2 },
		{ 300, { 0xac, 0x02 }, 2 },
		{ 16383, { 0xff, 0x7f }, 2 },
		{ 16384, { 0x80, 0x80, 0x01 }, 3 },
		{ 1ull << 32, { 0x80, 0x80, 0x80, 0x80, 0x10 }, 5 },
		{ UINT64_MAX, { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01 }, 10 },
	};
	struct pb pb;
	size_t i;
	int k;
	bool sizes_ok = true;

	pb__init(&pb);
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		uint8_t raw[16], want[16];
		uint8_t *end = pb__put_varint(raw, cases[i].v);
		size_t n = (size_t)(end - raw);

		check(n == cases[i].n && memcmp(raw, cases[i].enc, n) == 0 &&
		      pb__varint_size(cases[i].v) == cases[i].n,
		      "raw varint %llu is %zu exact bytes", (unsigned long long)cases[i].v, cases[i].n);

		want[0] = 0x08;	/* field 1, wire type 0 */
		memcpy(want + 1, cases[i].enc, cases[i].n);
		pb__reset(&pb);
		pb__varint(&pb, 1, cases[i].v);
		check_bytes(&pb, want, cases[i].n + 1, "varint field 1");
	}

	/* Every 7-bit boundary, against the obvious loop. */
	for (k = 0; k < 64; k++) {
		uint64_t vs[2] = { (1ull << k) - 1, 1ull << k };
		int j;

		for (j = 0; j < 2; j++) {
			size_t ref = 1;
			uint64_t v = vs[j];

			while (v >= 0x80) {
				v >>= 7;
				ref++;
			}
			if (pb__varint_size(vs[j]) != ref)
				sizes_ok = false;
		}
	}
	check(sizes_ok, "pb__varint_size at every power of two matches a loop");

	pb__reset(&pb);
	pb__sint(&pb, 1, -1);
	CHECK_BYTES(&pb, "zigzag -1 is 1", 0x08, 0x01);
	pb__reset(&pb);
	pb__sint(&pb, 1, 1);
	CHECK_BYTES(&pb, "zigzag 1 is 2", 0x08, 0x02);
	pb__reset(&pb);
	pb__sint(&pb, 1, -64);
	CHECK_BYTES(&pb, "zigzag -64 is 127", 0x08, 0x7f);
	pb__reset(&pb);
	pb__sint(&pb, 1, 64);
	CHECK_BYTES(&pb, "zigzag 64 is 128", 0x08, 0x80, 0x01);
	pb__reset(&pb);
	pb__sint(&pb, 1, INT64_MIN);
	CHECK_BYTES(&pb, "zigzag INT64_MIN is UINT64_MAX",
		    0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01);
	pb__reset(&pb);
	pb__sint(&pb, 1, INT64_MAX);
	CHECK_BYTES(&pb, "zigzag INT64_MAX is UINT64_MAX - 1",
		    0x08, 0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01);

	pb__reset(&pb);
	pb__int(&pb, 1, -1);
	CHECK_BYTES(&pb, "int -1 is a 10-byte varint",
		    0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01);
	pb__reset(&pb);
	pb__int(&pb, 1, -2);
	CHECK_BYTES(&pb, "int -2 is a 10-byte varint",
		    0x08, 0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01);
	pb__reset(&pb);
	pb__int(&pb, 1, INT64_MIN);
	CHECK_BYTES(&pb, "int INT64_MIN",
		    0x08, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01);
	pb__reset(&pb);
	pb__int(&pb, 1, 150);
	CHECK_BYTES(&pb, "int 150 stays short", 0x08, 0x96, 0x01);

	pb__reset(&pb);
	pb__bool(&pb, 1, true);
	pb__bool(&pb, 2, false);
	CHECK_BYTES(&pb, "bools", 0x08, 0x01, 0x10, 0x00);

	pb__free(&pb);
}

/* ------------------------------------------------------------ other wire types */

static void test_fixed_and_len(void)
{
	struct pb pb;

	pb__init(&pb);
	pb__fixed64(&pb, 1, 0x0102030405060708ull);
	CHECK_BYTES(&pb, "fixed64 is little-endian",
		    0x09, 0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01);
	pb__reset(&pb);
	pb__fixed32(&pb, 2, 0xdeadbeefu);
	CHECK_BYTES(&pb, "fixed32 is little-endian", 0x15, 0xef, 0xbe, 0xad, 0xde);
	pb__reset(&pb);
	pb__double(&pb, 3, 1.0);
	CHECK_BYTES(&pb, "double 1.0 is little-endian IEEE 754",
		    0x19, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xf0, 0x3f);
	pb__reset(&pb);
	pb__double(&pb, 3, -2.5);
	CHECK_BYTES(&pb, "double -2.5", 0x19, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x04, 0xc0);

	pb__reset(&pb);
	pb__bytes(&pb, 2, "abc", 3);
	CHECK_BYTES(&pb, "bytes", 0x12, 0x03, 'a', 'b', 'c');
	pb__reset(&pb);
	pb__bytes(&pb, 2, NULL, 0);
	pb__string(&pb, 3, "");
	pb__string(&pb, 4, NULL);
	CHECK_BYTES(&pb, "empty bytes, empty string and NULL string", 0x12, 0x00, 0x1a, 0x00, 0x22, 0x00);
	pb__reset(&pb);
	pb__string(&pb, 1, "hi\xc3\xa9");
	CHECK_BYTES(&pb, "string is its UTF-8 bytes without NUL", 0x0a, 0x04, 'h', 'i', 0xc3, 0xa9);

	pb__reset(&pb);
	pb__varint(&pb, 15, 1);
	pb__varint(&pb, 16, 1);
	CHECK_BYTES(&pb, "field 16 takes a 2-byte tag", 0x78, 0x01, 0x80, 0x01, 0x01);
	pb__reset(&pb);
	pb__varint(&pb, PB_MAX_FIELD, 7);
	CHECK_BYTES(&pb, "largest field number takes a 5-byte tag", 0xf8, 0xff, 0xff, 0xff, 0x0f, 0x07);

	pb__reset(&pb);
	pb__begin(&pb, 17);
	pb__raw_varint(&pb, 1);
	pb__raw_varint(&pb, 300);
	pb__end(&pb);
	CHECK_BYTES(&pb, "packed repeated via begin/raw_varint/end", 0x8a, 0x01, 0x03, 0x01, 0xac, 0x02);
	pb__reset(&pb);
	pb__raw(&pb, "\x08\x01", 2);
	pb__raw(&pb, NULL, 0);
	CHECK_BYTES(&pb, "raw appends pre-encoded bytes", 0x08, 0x01);

	pb__free(&pb);
}

/* ------------------------------------------------------------ nested lengths */

static void fill_pattern(uint8_t *p, size_t n, unsigned seed)
{
	size_t i;

	for (i = 0; i < n; i++)
		p[i] = (uint8_t)(i * 31 + seed);
}

/* Write fields (bools, then one bytes field) whose encoding is exactly n bytes, n != 1. */
static void fill_fields(struct pb *pb, size_t n, const uint8_t *data)
{
	for (;;) {
		size_t s;

		if (n == 0)
			return;
		/* A bytes field takes 1 (tag) + varint_size(k) + k bytes. */
		for (s = 1; s <= 3; s++) {
			if (n > 1 + s && pb__varint_size(n - 1 - s) == s) {
				pb__bytes(pb, 2, data, n - 1 - s);
				return;
			}
		}
		/* n straddles a length-size boundary: shed a 2-byte bool and retry. */
		pb__bool(pb, 1, true);
		n -= 2;
	}
}

/* The fields fill_fields() wrote decode back to exactly n bytes. */
static bool check_fields(struct rd r, size_t n, const uint8_t *data)
{
	size_t total = (size_t)(r.end - r.p);
	uint32_t f;
	int wt;

	while (!r.bad && rd_tag(&r, &f, &wt)) {
		if (f == 1 && wt == PB_WIRE_VARINT) {
			if (rd_varint(&r) != 1)
				r.bad = true;
		} else if (f == 2 && wt == PB_WIRE_LEN) {
			uint64_t k = rd_varint(&r);

			if (r.bad || k > (uint64_t)(r.end - r.p) || memcmp(r.p, data, k) != 0)
				return false;
			r.p += k;
		} else {
			return false;
		}
	}
	return !r.bad && total == n;
}

static void test_nested_sizes(void)
{
	static const size_t sizes[] = { 0, 2, 126, 127, 128, 129, 130, 16382, 16383, 16384, 16385,
					2097151, 2u << 20 };
	struct pb pb;
	uint8_t *data = malloc(2u << 20);
	size_t i;

	if (!data) {
		check(false, "allocating the test pattern");
		return;
	}
	fill_pattern(data, 2u << 20, 7);
	pb__init(&pb);

	for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		size_t n = sizes[i], hdr = 1 + pb__varint_size(n);
		struct rd r, sub;
		bool ok;

		/* Raw payload between two sibling fields. */
		pb__reset(&pb);
		pb__varint(&pb, 1, 5);
		pb__begin(&pb, 7);
		pb__raw(&pb, data, n);
		pb__end(&pb);
		pb__varint(&pb, 3, 6);
		r = (struct rd){ pb.buf, pb.buf + pb.len, false };
		rd_expect_varint(&r, 1, 5);
		sub = rd_len(&r, 7);
		rd_expect_varint(&r, 3, 6);
		ok = pb.err == 0 && !r.bad && r.p == r.end && pb.len == 2 + hdr + n + 2 &&
		     (size_t)(sub.end - sub.p) == n && (n == 0 || memcmp(sub.p, data, n) == 0);
		check(ok, "nested raw payload of %zu bytes: %zu-byte minimal length, payload intact",
		      n, hdr - 1);

		if (n == 1)
			continue;
		/* The same size made of real fields. */
		pb__reset(&pb);
		pb__begin(&pb, 7);
		fill_fields(&pb, n, data);
		pb__end(&pb);
		r = (struct rd){ pb.buf, pb.buf + pb.len, false };
		sub = rd_len(&r, 7);
		ok = pb.err == 0 && !r.bad && r.p == r.end && pb.len == hdr + n &&
		     check_fields(sub, n, data);
		check(ok, "nested message of %zu bytes of fields decodes back", n);
	}
	pb__free(&pb);
	free(data);
}

/*
 * A chain of `depth` messages (field 2), each holding its level (field 1),
 * above the innermost a small sibling message (field 5), at level `big` a bytes field of
 * big_len (field 4), the next level, and a trailer string (field 3) written
 * after the inner levels are closed.
 */
static void build_chain(struct pb *pb, int level, int depth, int big, size_t big_len,
			const uint8_t *data)
{
	pb__begin(pb, 2);
	pb__varint(pb, 1, (uint64_t)level);
	if (level + 1 < depth) {
		pb__begin(pb, 5);
		pb__varint(pb, 1, (uint64_t)level * 100);
		pb__end(pb);
	}
	if (level == big)
		pb__bytes(pb, 4, data, big_len);
	if (level + 1 < depth)
		build_chain(pb, level + 1, depth, big, big_len, data);
	pb__string(pb, 3, "end");
	pb__end(pb);
}

static bool check_chain(struct rd *r, int level, int depth, int big, size_t big_len,
			const uint8_t *data)
{
	struct rd m = rd_len(r, 2), s;

	rd_expect_varint(&m, 1, (uint64_t)level);
	if (level + 1 < depth) {
		s = rd_len(&m, 5);
		rd_expect_varint(&s, 1, (uint64_t)level * 100);
		if (s.bad || s.p != s.end)
			return false;
	}
	if (level == big) {
		s = rd_len(&m, 4);
		if (s.bad || (size_t)(s.end - s.p) != big_len || memcmp(s.p, data, big_len) != 0)
			return false;
	}
	if (level + 1 < depth && !check_chain(&m, level + 1, depth, big, big_len, data))
		return false;
	s = rd_len(&m, 3);
	if (s.bad || s.end - s.p != 3 || memcmp(s.p, "end", 3) != 0)
		return false;
	return !m.bad && m.p == m.end;
}

static void test_nested_deep(void)
{
	static const struct {
		int depth;
		size_t big_len;
	} cases[] = {
		{ 3, 2u << 20 }, { 15, 2u << 20 }, { PB_MAX_DEPTH, 2u << 20 },
		{ 15, 100 }, { 15, 16384 },
	};
	struct pb pb;
	uint8_t *data = malloc(2u << 20);
	size_t i;

	if (!data) {
		check(false, "allocating the test pattern");
		return;
	}
	fill_pattern(data, 2u << 20, 3);
	pb__init(&pb);
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int depth = cases[i].depth, big = depth / 2;
		struct rd r;
		bool ok;

		pb__reset(&pb);
		pb__varint(&pb, 9, 1);
		build_chain(&pb, 0, depth, big, cases[i].big_len, data);
		pb__varint(&pb, 9, 2);
		r = (struct rd){ pb.buf, pb.buf + pb.len, false };
		rd_expect_varint(&r, 9, 1);
		ok = pb.err == 0 && pb.depth == 0 &&
		     check_chain(&r, 0, depth, big, cases[i].big_len, data);
		rd_expect_varint(&r, 9, 2);
		ok = ok && !r.bad && r.p == r.end;
		if (!check(ok, "%d-deep nesting with %zu bytes at level %d decodes with minimal lengths",
			   depth, cases[i].big_len, big))
			printf("#   err %d, depth %d, len %zu\n", pb.err, pb.depth, pb.len);
	}
	pb__free(&pb);
	free(data);
}

/* ------------------------------------------------------------ errors and lifetime */

static void test_errors(void)
{
	struct pb pb, zero = { 0 };
	size_t len, cap;
	int i;

	pb__init(&pb);
	for (i = 0; i < PB_MAX_DEPTH; i++)
		pb__begin(&pb, 1);
	check(pb.err == 0 && pb.depth == PB_MAX_DEPTH, "PB_MAX_DEPTH nested messages may be open");
	len = pb.len;
	pb__begin(&pb, 1);
	check(pb.err == -EOVERFLOW && pb.len == len, "one more sets -EOVERFLOW and writes nothing");
	pb__varint(&pb, 1, 1);
	pb__end(&pb);
	check(pb.err == -EOVERFLOW && pb.len == len && pb.depth == PB_MAX_DEPTH,
	      "after an error, fields and ends are no-ops");

	pb__reset(&pb);
	check(pb.err == 0 && pb.len == 0 && pb.depth == 0 && pb.cap > 0 && pb.buf,
	      "reset clears the error and keeps the buffer");
	pb__end(&pb);
	check(pb.err == -EINVAL, "an end with nothing open sets -EINVAL");

	pb__reset(&pb);
	pb__varint(&pb, 1, 1);
	pb__bytes(&pb, 2, "x", SIZE_MAX - 3);	/* never read: must fail before copying */
	check(pb.err == -ENOMEM && pb.len == 2, "an impossible size sets -ENOMEM and writes nothing");
	pb__string(&pb, 2, "x");
	pb__double(&pb, 3, 1.0);
	pb__raw_varint(&pb, 1);
	check(pb.err == -ENOMEM && pb.len == 2, "the -ENOMEM is sticky");
	pb__reset(&pb);
	pb__raw(&pb, "x", SIZE_MAX);
	check(pb.err == -ENOMEM && pb.len == 0, "raw of an impossible size sets -ENOMEM");

	/* Growth across many reallocations keeps earlier bytes. */
	pb__reset(&pb);
	for (i = 0; i < 100000; i++)
		pb__varint(&pb, 1, (uint64_t)i);
	{
		struct rd r = { pb.buf, pb.buf + pb.len, false };

		for (i = 0; i < 100000 && !r.bad; i++)
			rd_expect_varint(&r, 1, (uint64_t)i);
		check(pb.err == 0 && !r.bad && r.p == r.end && pb.cap >= pb.len,
		      "100000 fields across reallocations decode back");
	}
	cap = pb.cap;
	pb__reset(&pb);
	check(pb.cap == cap && pb.len == 0, "reset keeps the capacity");

	pb__free(&pb);
	check(pb.buf == NULL && pb.len == 0 && pb.cap == 0, "free leaves an empty encoder");
	pb__varint(&pb, 1, 1);
	CHECK_BYTES(&pb, "a freed encoder is reusable", 0x08, 0x01);
	pb__free(&pb);
	pb__free(&pb);
	pb__free(&zero);
	pb__free(NULL);
	check(true, "free accepts a freed struct, a zeroed struct and NULL");
}

/* ------------------------------------------------------------ protoc fixtures */

static bool write_file(int dfd, const char *name, const struct pb *pb)
{
	int fd = openat(dfd, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	size_t off = 0;
	bool ok;

	if (fd < 0)
		return false;
	while (off < pb->len) {
		ssize_t n = write(fd, pb->buf + off, pb->len - off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		off += (size_t)n;
	}
	ok = off == pb->len;
	if (close(fd))
		ok = false;
	return ok;
}

/* cgbpf.pbtest.All; check_pb.sh holds the text protoc must print for it. */
static void encode_all(struct pb *pb)
{
	static const char name[] =
		"a name long enough that every enclosing message needs a two-byte length: "
		"0123456789012345678901234567890123456789012345678901234567890123456789";
	int i;

	pb__varint(pb, 1, UINT64_MAX);
	pb__varint(pb, 2, 4000000000u);
	pb__int(pb, 3, INT64_MIN);
	pb__int(pb, 4, -5);
	pb__sint(pb, 5, -1234567890123ll);
	pb__sint(pb, 6, INT32_MIN);
	pb__bool(pb, 7, true);
	pb__fixed64(pb, 8, 0x8000000000000001ull);
	pb__fixed32(pb, 9, 0xfffffffeu);
	pb__fixed64(pb, 10, (uint64_t)-7);
	pb__double(pb, 11, -0.15625);
	pb__bytes(pb, 12, "\x00\x01\xff", 3);
	pb__string(pb, 13, "say \"hi\"");
	pb__varint(pb, 14, 2);

	pb__begin(pb, 15);
	pb__varint(pb, 1, 1);
	pb__begin(pb, 3);
	pb__varint(pb, 1, 2);
	pb__begin(pb, 3);
	pb__varint(pb, 1, 3);
	pb__string(pb, 2, name);
	pb__end(pb);
	pb__end(pb);
	pb__string(pb, 2, "outer");
	pb__end(pb);

	for (i = 0; i < 3; i++) {
		pb__begin(pb, 16);
		pb__varint(pb, 1, (uint64_t)i + 10);
		pb__end(pb);
	}
	pb__begin(pb, 16);	/* an empty message is still one element */
	pb__end(pb);

	pb__varint(pb, 17, 0);
	pb__varint(pb, 17, 300);

	pb__begin(pb, 18);
	pb__raw_varint(pb, 1);	/* zigzag of -1 */
	pb__raw_varint(pb, 4);	/* zigzag of 2 */
	pb__end(pb);

	pb__varint(pb, PB_MAX_FIELD, 42);
}

/* Perfetto TracePacket and TrackEvent field numbers, from perfetto_trace.proto. */
enum {
	TRACE_PACKET = 1,
	PACKET_TIMESTAMP = 8,
	PACKET_SEQ_ID = 10,
	PACKET_TRACK_EVENT = 11,
	PACKET_TRACK_DESCRIPTOR = 60,
	TRACK_UUID = 1,
	TRACK_NAME = 2,
	EVENT_DEBUG_ANNOTATIONS = 4,
	EVENT_TYPE = 9,
	EVENT_TRACK_UUID = 11,
	EVENT_CATEGORIES = 22,
	EVENT_NAME = 23,
	EVENT_DOUBLE_COUNTER = 44,
	ANNOT_INT = 4,
	ANNOT_DOUBLE = 5,
	ANNOT_NAME = 10,
	TYPE_SLICE_BEGIN = 1,
	TYPE_SLICE_END = 2,
	TYPE_COUNTER = 4,
};

/* A perfetto.protos.Trace; check_pb.sh holds the text protoc must print for it. */
static void encode_perfetto(struct pb *pb)
{
	pb__begin(pb, TRACE_PACKET);
	pb__varint(pb, PACKET_SEQ_ID, 1);
	pb__begin(pb, PACKET_TRACK_DESCRIPTOR);
	pb__varint(pb, TRACK_UUID, 42);
	pb__string(pb, TRACK_NAME, "gpu0");
	pb__end(pb);
	pb__end(pb);

	pb__begin(pb, TRACE_PACKET);
	pb__varint(pb, PACKET_TIMESTAMP, 5);
	pb__varint(pb, PACKET_SEQ_ID, 1);
	pb__begin(pb, PACKET_TRACK_EVENT);
	pb__varint(pb, EVENT_TYPE, TYPE_SLICE_BEGIN);
	pb__string(pb, EVENT_NAME, "x");
	pb__end(pb);
	pb__end(pb);

	pb__begin(pb, TRACE_PACKET);
	pb__varint(pb, PACKET_TIMESTAMP, 300);
	pb__varint(pb, PACKET_SEQ_ID, 1);
	pb__begin(pb, PACKET_TRACK_EVENT);
	pb__varint(pb, EVENT_TYPE, TYPE_SLICE_END);
	pb__varint(pb, EVENT_TRACK_UUID, 42);
	pb__begin(pb, EVENT_DEBUG_ANNOTATIONS);
	pb__string(pb, ANNOT_NAME, "delta");
	pb__int(pb, ANNOT_INT, -3);
	pb__end(pb);
	pb__begin(pb, EVENT_DEBUG_ANNOTATIONS);
	pb__string(pb, ANNOT_NAME, "ratio");
	pb__double(pb, ANNOT_DOUBLE, 0.5);
	pb__end(pb);
	pb__end(pb);
	pb__end(pb);

	pb__begin(pb, TRACE_PACKET);
	pb__varint(pb, PACKET_TIMESTAMP, 1ull << 40);
	pb__varint(pb, PACKET_SEQ_ID, 1);
	pb__begin(pb, PACKET_TRACK_EVENT);
	pb__varint(pb, EVENT_TYPE, TYPE_COUNTER);
	pb__varint(pb, EVENT_TRACK_UUID, 43);
	pb__string(pb, EVENT_CATEGORIES, "cuda");
	pb__double(pb, EVENT_DOUBLE_COUNTER, 1.25);
	pb__end(pb);
	pb__end(pb);
}

static void test_fixtures(const char *dir)
{
	int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct pb pb;

	if (!check(dfd >= 0, "open fixture directory %s", dir))
		return;
	pb__init(&pb);
	encode_all(&pb);
	check(pb.err == 0 && pb.depth == 0 && write_file(dfd, "pb_all.bin", &pb),
	      "write pb_all.bin (%zu bytes)", pb.len);
	pb__reset(&pb);
	encode_perfetto(&pb);
	check(pb.err == 0 && pb.depth == 0 && write_file(dfd, "pb_perfetto.bin", &pb),
	      "write pb_perfetto.bin (%zu bytes)", pb.len);
	pb__free(&pb);
	close(dfd);
}

int main(int argc, char **argv)
{
	sources__init();
	/* Keep the ok/not ok lines in order with sanitizer reports on stderr. */
	setvbuf(stdout, NULL, _IOLBF, 0);
	test_varints();
	test_fixed_and_len();
	test_nested_sizes();
	test_nested_deep();
	test_errors();
	test_fixtures(argc > 1 ? argv[1] : ".");
	printf("%d passed, %d failed\n", n_pass, n_fail);
	return n_fail ? 1 : 0;
}
