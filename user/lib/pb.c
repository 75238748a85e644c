/* SPDX-License-Identifier: MIT */
/*
 * Out-of-line parts of the protobuf encoder: allocation and the rare long
 * nested length. Everything on the per-field path is inline in pb.h.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lib/pb.h"

/* Big enough that a typical packet never grows more than once. */
#define PB_INITIAL_CAP 256

void pb__init(struct pb *pb)
{
	memset(pb, 0, sizeof(*pb));
}

void pb__free(struct pb *pb)
{
	if (!pb)
		return;
	free(pb->buf);
	pb__init(pb);
}

void pb__reset(struct pb *pb)
{
	pb->len = 0;
	pb->depth = 0;
	pb->err = 0;
}

int pb__grow(struct pb *pb, size_t need)
{
	size_t cap;
	uint8_t *buf;

	if (pb->err)
		return pb->err;
	if (pb->cap - pb->len >= need)
		return 0;
	/* Keeping the total under SIZE_MAX / 2 means the doubling below cannot wrap. */
	if (need > SIZE_MAX / 2 - pb->len) {
		pb__fail(pb, -ENOMEM);
		return -ENOMEM;
	}
	cap = pb->cap ? pb->cap : PB_INITIAL_CAP;
	while (cap - pb->len < need)
		cap *= 2;
	buf = realloc(pb->buf, cap);
	if (!buf) {
		pb__fail(pb, -ENOMEM);
		return -ENOMEM;
	}
	pb->buf = buf;
	pb->cap = cap;
	return 0;
}

void pb__end_long(struct pb *pb, size_t slot, size_t plen)
{
	size_t extra = pb__varint_size(plen) - 1;
	uint8_t *payload;

	if (pb__grow(pb, extra))
		return;
	/*
	 * Any message still open began before slot, so shifting this payload
	 * moves none of their recorded slots; inner messages are already closed.
	 */
	payload = pb->buf + slot + 1;
	memmove(payload + extra, payload, plen);
	pb__put_varint(pb->buf + slot, plen);
	pb->len += extra;
}
