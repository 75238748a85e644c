/* SPDX-License-Identifier: MIT */
/*
 * Open-addressing hash map from a 64-bit key to a 64-bit value (often a
 * pointer). Key 0 is allowed. Grows by doubling; memory is what the entries
 * need, nothing fixed.
 */
#ifndef CGBPF_HMAP_H
#define CGBPF_HMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct hmap {
	uint64_t *keys;
	uint64_t *vals;
	uint8_t *used;		/* 0 empty, 1 used, 2 deleted */
	size_t cap;		/* power of two or 0 */
	size_t count;
	size_t tombs;
};

/* Looks key up; returns a pointer to its value or NULL. */
uint64_t *hmap__get(const struct hmap *m, uint64_t key);
/* Inserts or replaces; returns 0 or -ENOMEM. */
int hmap__put(struct hmap *m, uint64_t key, uint64_t val);
/* Removes key; returns true if it was there (its value in *old if old). */
bool hmap__del(struct hmap *m, uint64_t key, uint64_t *old);
/* Frees the table (not what values point to); accepts a zeroed map. */
void hmap__free(struct hmap *m);
/* Iteration: for (size_t i = 0; hmap__next(m, &i, &k, &v);) */
bool hmap__next(const struct hmap *m, size_t *it, uint64_t *key, uint64_t *val);

/* 64-bit hash of bytes, eight at a time, through a final mixer. */
uint64_t hash__bytes(const void *p, size_t n);
/* Mixes a 64-bit integer. */
static inline uint64_t hash__u64(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ULL;
	x ^= x >> 33;
	return x;
}

#endif
