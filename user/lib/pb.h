/* SPDX-License-Identifier: MIT */
/*
 * Streaming protobuf encoder: fields are appended to one growable buffer in
 * the order the caller writes them, with no schema and no intermediate tree.
 *
 * Nested messages get a one-byte length slot that pb__end() patches; longer
 * payloads are shifted forward so every length stays a minimal varint (the
 * trace budget is a few dozen bytes per event, a fixed 4-byte length slot
 * per nested message would eat much of it).
 *
 * Errors are sticky: after a failure every call is a no-op until
 * pb__reset(), so a caller checks pb.err once per packet, not per field.
 * Field numbers must be 1..PB_MAX_FIELD; they are compile-time constants in
 * practice, so they are not checked on the hot path.
 */
#ifndef CGBPF_PB_H
#define CGBPF_PB_H

#include <endian.h>
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define PB_MAX_DEPTH 16
#define PB_MAX_FIELD ((1u << 29) - 1)

/* Wire types, as they appear in the low three bits of a tag. */
enum pb_wire {
	PB_WIRE_VARINT = 0,
	PB_WIRE_FIXED64 = 1,
	PB_WIRE_LEN = 2,
	PB_WIRE_FIXED32 = 5,
};

/* Worst-case sizes, so each writer reserves room once per call. */
#define PB_MAX_VARINT 10
#define PB_MAX_TAG 5

/* A protobuf message being encoded into a growable byte buffer. */
struct pb {
	uint8_t *buf;
	size_t len;
	size_t cap;
	int depth;			/* open nested messages */
	size_t open[PB_MAX_DEPTH];	/* offset of each open message's 1-byte length slot */
	int err;			/* sticky: -ENOMEM, -EOVERFLOW (too deep), -EINVAL (unbalanced end) */
};

/* Empty buffer, no allocation yet. */
void pb__init(struct pb *pb);
/* Release the buffer and leave pb as after pb__init(); accepts NULL or a zeroed struct. */
void pb__free(struct pb *pb);
/* Forget the contents and any error (len = 0, depth = 0, err = 0); keeps the capacity. */
void pb__reset(struct pb *pb);
/* Make room for need more bytes; 0, or -ENOMEM with pb->err set. Slow path of pb__room(). */
int pb__grow(struct pb *pb, size_t need);
/* Patch the length of a nested payload of 128 bytes or more. Slow path of pb__end(). */
void pb__end_long(struct pb *pb, size_t slot, size_t plen);

/* Record err (a -errno) unless an earlier error is already recorded: the first cause is the useful one. */
static inline void pb__fail(struct pb *pb, int err)
{
	if (!pb->err)
		pb->err = err;
}

/* Bytes the varint encoding of v takes: 1..10. */
static inline size_t pb__varint_size(uint64_t v)
{
	unsigned int top = 63u - (unsigned int)__builtin_clzll(v | 1);

	/* Significant bits / 7, rounded up, without a loop: 9/64 ~ 1/7. */
	return (top * 9 + 73) / 64;
}

/* Write v as a raw varint at p (room for PB_MAX_VARINT assumed); returns the end. */
static inline uint8_t *pb__put_varint(uint8_t *p, uint64_t v)
{
	while (v >= 0x80) {
		*p++ = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	*p++ = (uint8_t)v;
	return p;
}

/* Write the tag of field with wire type wt at p; returns the end. */
static inline uint8_t *pb__put_tag(uint8_t *p, uint32_t field, enum pb_wire wt)
{
	return pb__put_varint(p, (uint64_t)field << 3 | wt);
}

/* Where n bytes may be written next, or NULL if pb is in error (or just failed to grow). */
static inline uint8_t *pb__room(struct pb *pb, size_t n)
{
	if (__builtin_expect(pb->err != 0, 0))
		return NULL;
	if (__builtin_expect(pb->cap - pb->len < n, 0) && pb__grow(pb, n))
		return NULL;
	return pb->buf + pb->len;
}

/* Commit what was written at pb__room() up to end. */
static inline void pb__commit(struct pb *pb, uint8_t *end)
{
	pb->len = (size_t)(end - pb->buf);
}

/* Field of wire type 0 holding v: uint32/uint64/enum fields. */
static inline void pb__varint(struct pb *pb, uint32_t field, uint64_t v)
{
	uint8_t *p = pb__room(pb, PB_MAX_TAG + PB_MAX_VARINT);

	if (!p)
		return;
	p = pb__put_tag(p, field, PB_WIRE_VARINT);
	pb__commit(pb, pb__put_varint(p, v));
}

/* Field holding v zigzag-encoded, for sint32/sint64 fields. */
static inline void pb__sint(struct pb *pb, uint32_t field, int64_t v)
{
	uint64_t u = (uint64_t)v;

	/* Spelled on unsigned values: shifting a negative int64_t is not portable C. */
	pb__varint(pb, field, u << 1 ^ (0 - (u >> 63)));
}

/* Field holding v for int32/int64 fields: negative values take 10 bytes, as the wire format demands. */
static inline void pb__int(struct pb *pb, uint32_t field, int64_t v)
{
	pb__varint(pb, field, (uint64_t)v);
}

/* Field holding a bool. */
static inline void pb__bool(struct pb *pb, uint32_t field, bool v)
{
	pb__varint(pb, field, v ? 1 : 0);
}

/* Field of wire type 1 holding v little-endian: fixed64/sfixed64 fields. */
static inline void pb__fixed64(struct pb *pb, uint32_t field, uint64_t v)
{
	uint8_t *p = pb__room(pb, PB_MAX_TAG + 8);
	uint64_t le = htole64(v);

	if (!p)
		return;
	p = pb__put_tag(p, field, PB_WIRE_FIXED64);
	memcpy(p, &le, 8);
	pb__commit(pb, p + 8);
}

/* Field of wire type 5 holding v little-endian: fixed32/sfixed32 fields. */
static inline void pb__fixed32(struct pb *pb, uint32_t field, uint32_t v)
{
	uint8_t *p = pb__room(pb, PB_MAX_TAG + 4);
	uint32_t le = htole32(v);

	if (!p)
		return;
	p = pb__put_tag(p, field, PB_WIRE_FIXED32);
	memcpy(p, &le, 4);
	pb__commit(pb, p + 4);
}

/* Field holding an IEEE 754 double (wire type 1). */
static inline void pb__double(struct pb *pb, uint32_t field, double v)
{
	uint64_t bits;

	memcpy(&bits, &v, sizeof(bits));
	pb__fixed64(pb, field, bits);
}

/* Field of wire type 2 holding len bytes of data: bytes fields. */
static inline void pb__bytes(struct pb *pb, uint32_t field, const void *data, size_t len)
{
	uint8_t *p;

	/* No buffer that large can exist; refusing here keeps the sum below from wrapping. */
	if (__builtin_expect(len > SIZE_MAX / 2, 0)) {
		pb__fail(pb, -ENOMEM);
		return;
	}
	p = pb__room(pb, PB_MAX_TAG + PB_MAX_VARINT + len);
	if (!p)
		return;
	p = pb__put_tag(p, field, PB_WIRE_LEN);
	p = pb__put_varint(p, len);
	if (len)	/* data may be NULL when len is 0 */
		memcpy(p, data, len);
	pb__commit(pb, p + len);
}

/* Field holding the NUL-terminated string s; NULL is written as "" so a missing name cannot crash the writer. */
static inline void pb__string(struct pb *pb, uint32_t field, const char *s)
{
	pb__bytes(pb, field, s, s ? strlen(s) : 0);
}

/* Append len bytes that are already protobuf-encoded (a cached field, a packed element). */
static inline void pb__raw(struct pb *pb, const void *data, size_t len)
{
	uint8_t *p;

	if (!len)
		return;
	if (__builtin_expect(len > SIZE_MAX / 2, 0)) {
		pb__fail(pb, -ENOMEM);
		return;
	}
	p = pb__room(pb, len);
	if (!p)
		return;
	memcpy(p, data, len);
	pb__commit(pb, p + len);
}

/* Append a bare varint with no tag: the elements of a packed repeated field. */
static inline void pb__raw_varint(struct pb *pb, uint64_t v)
{
	uint8_t *p = pb__room(pb, PB_MAX_VARINT);

	if (!p)
		return;
	pb__commit(pb, pb__put_varint(p, v));
}

/* Open a nested message (or packed field) as field; -EOVERFLOW in err past PB_MAX_DEPTH. */
static inline void pb__begin(struct pb *pb, uint32_t field)
{
	uint8_t *p;

	if (__builtin_expect(pb->depth >= PB_MAX_DEPTH, 0)) {
		pb__fail(pb, -EOVERFLOW);
		return;
	}
	p = pb__room(pb, PB_MAX_TAG + 1);
	if (!p)
		return;
	p = pb__put_tag(p, field, PB_WIRE_LEN);
	pb->open[pb->depth++] = (size_t)(p - pb->buf);
	*p++ = 0;
	pb__commit(pb, p);
}

/* Close the innermost open message and patch its length; -EINVAL in err if none is open. */
static inline void pb__end(struct pb *pb)
{
	size_t slot, plen;

	if (__builtin_expect(pb->err != 0, 0))
		return;
	if (__builtin_expect(pb->depth <= 0, 0)) {
		pb__fail(pb, -EINVAL);
		return;
	}
	slot = pb->open[--pb->depth];
	plen = pb->len - slot - 1;
	if (__builtin_expect(plen < 0x80, 1))
		pb->buf[slot] = (uint8_t)plen;
	else
		pb__end_long(pb, slot, plen);
}

/* Reading. One field of a message in memory, as pb__next_field found it. */
struct pb_field {
	uint32_t id;
	int wt;			/* enum pb_wire */
	uint64_t v;		/* VARINT, FIXED64, FIXED32 value */
	const uint8_t *data;	/* LEN payload */
	size_t len;
	const uint8_t *start;	/* the whole field, tag included */
	size_t size;
};

/* Reads a varint at *p (before end) into *v and moves *p past it; false
 * if it runs past end or over 10 bytes. */
static inline bool pb__get_varint(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
	uint64_t x = 0;

	for (int shift = 0; shift < 64 && *p < end; shift += 7) {
		uint8_t c = *(*p)++;

		x |= (uint64_t)(c & 0x7f) << shift;
		if (!(c & 0x80)) {
			*v = x;
			return true;
		}
	}
	return false;
}

/* The field at *p (before end), *p moved past it: 1 with f filled, 0 at
 * the end, -EINVAL on malformed input (a zero or over-32-bit field
 * number, an unknown wire type, a length past end). */
static inline int pb__next_field(const uint8_t **p, const uint8_t *end, struct pb_field *f)
{
	uint64_t tag, n;

	if (*p >= end)
		return 0;
	f->start = *p;
	f->data = NULL;
	f->len = 0;
	if (!pb__get_varint(p, end, &tag) || !(tag >> 3) || tag >> 32)
		return -EINVAL;
	f->id = tag >> 3;
	f->wt = tag & 7;
	switch (f->wt) {
	case PB_WIRE_VARINT:
		if (!pb__get_varint(p, end, &f->v))
			return -EINVAL;
		break;
	case PB_WIRE_FIXED64:
		if (end - *p < 8)
			return -EINVAL;
		memcpy(&f->v, *p, 8);
		*p += 8;
		break;
	case PB_WIRE_FIXED32:
		if (end - *p < 4)
			return -EINVAL;
		f->v = 0;
		memcpy(&f->v, *p, 4);
		*p += 4;
		break;
	case PB_WIRE_LEN:
		if (!pb__get_varint(p, end, &n) || n > (uint64_t)(end - *p))
			return -EINVAL;
		f->data = *p;
		f->len = n;
		*p += n;
		break;
	default:
		return -EINVAL;
	}
	f->size = *p - f->start;
	return 1;
}

#endif /* CGBPF_PB_H */
