/* SPDX-License-Identifier: MIT */
/*
 * NCCL's commHash, computed as NCCL 2.26 and later compute it, so that a
 * communicator has one id in the host-side trace (its "NCCL comm 3fa2"
 * track) and in NCCL's profiler plugin (which NCCL gives the commHash).
 * NCCL (src/include/bitops.h, src/init.cc): a communicator made from a
 * unique id has the hash of its 128 bytes; a child of ncclCommSplit the
 * hash of (the parent's commHash, the parent's split count after this
 * split, the color), each fed in separately. The hash keeps two 64-bit
 * words, xors the size of each piece fed into the first, then per 8-byte
 * chunk (the last one zero-padded) stirs both words and adds the chunk;
 * the digest folds them into one. NCCL before 2.26 hashed differently:
 * the ids are then cgbpf's own, still the same in every rank.
 *
 * Plain inline C shared by the BPF programs (the unique id at
 * ncclCommInitRank's entry) and user space (splits).
 */
#ifndef CGBPF_NCCL_HASH_H
#define CGBPF_NCCL_HASH_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

#define NCCL_UNIQUE_ID_BYTES 128

struct nccl_hacc {
	__u64 a, b;
};

static inline struct nccl_hacc nccl_hash_init(void)
{
	return (struct nccl_hacc){ 1, 1 };
}

/* A piece of size bytes begins (its chunks follow). */
static inline void nccl_hash_piece(struct nccl_hacc *h, __u64 size)
{
	h->a ^= size;
}

/* One 8-byte chunk, little-endian (a shorter last one zero-padded). */
static inline void nccl_hash_chunk(struct nccl_hacc *h, __u64 x)
{
	h->a += h->b;
	h->b ^= h->a;
	h->a ^= h->a >> 31;
	h->a *= 0x9de62bbc8cef3ce3ull;
	h->b ^= h->b >> 32;
	h->b *= 0x485cd6311b599e79ull;
	h->a += x;
}

static inline __u64 nccl_hash_digest(const struct nccl_hacc *h)
{
	__u64 x = h->a;

	x ^= x >> 31;
	x *= 0xbac3bd562846de6bull;
	x += h->b;
	x ^= x >> 32;
	x *= 0x995a187a14e7b445ull;
	return x;
}

/* A split child's commHash: parent commHash, split count (NCCL's int
 * childCount, from 1), color (int). */
static inline __u64 nccl_hash_split(__u64 parent, __u32 count, __u32 color)
{
	struct nccl_hacc h = nccl_hash_init();

	nccl_hash_piece(&h, 8);
	nccl_hash_chunk(&h, parent);
	nccl_hash_piece(&h, 4);
	nccl_hash_chunk(&h, count);
	nccl_hash_piece(&h, 4);
	nccl_hash_chunk(&h, color);
	return nccl_hash_digest(&h);
}

#endif /* CGBPF_NCCL_HASH_H */
