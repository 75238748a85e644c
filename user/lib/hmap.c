// SPDX-License-Identifier: MIT
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "lib/hmap.h"

uint64_t hash__bytes(const void *p, size_t n)
{
	const uint8_t *b = p;
	uint64_t h = 0x9e3779b97f4a7c15ULL ^ (n * 0xff51afd7ed558ccdULL), w;

	/* Eight bytes a step: kernel names of 100+ bytes are hashed per event. */
	for (; n >= 8; b += 8, n -= 8) {
		memcpy(&w, b, 8);
		h = (h ^ w) * 0xc4ceb9fe1a85ec53ULL;
		h ^= h >> 29;
	}
	w = 0;
	memcpy(&w, b, n);
	return hash__u64(h ^ w);
}

static size_t find(const struct hmap *m, uint64_t key, bool *found)
{
	size_t mask = m->cap - 1, i = hash__u64(key) & mask, tomb = (size_t)-1;

	for (;;) {
		if (m->used[i] == 0) {
			*found = false;
			return tomb != (size_t)-1 ? tomb : i;
		}
		if (m->used[i] == 1 && m->keys[i] == key) {
			*found = true;
			return i;
		}
		if (m->used[i] == 2 && tomb == (size_t)-1)
			tomb = i;
		i = (i + 1) & mask;
	}
}

uint64_t *hmap__get(const struct hmap *m, uint64_t key)
{
	bool found;
	size_t i;

	if (!m->cap)
		return NULL;
	i = find(m, key, &found);
	return found ? &m->vals[i] : NULL;
}

static int grow(struct hmap *m)
{
	struct hmap n = { 0 };
	size_t cap = m->cap ? m->cap : 16;

	/* Rehash in place of tombstones when they, not entries, fill the table. */
	if (m->count * 2 >= m->cap)
		cap = m->cap ? m->cap * 2 : 16;
	n.keys = malloc(cap * sizeof(*n.keys));
	n.vals = malloc(cap * sizeof(*n.vals));
	n.used = calloc(cap, 1);
	if (!n.keys || !n.vals || !n.used) {
		hmap__free(&n);
		return -ENOMEM;
	}
	n.cap = cap;
	for (size_t i = 0; i < m->cap; i++) {
		bool found;
		size_t j;

		if (m->used[i] != 1)
			continue;
		j = find(&n, m->keys[i], &found);
		n.used[j] = 1;
		n.keys[j] = m->keys[i];
		n.vals[j] = m->vals[i];
		n.count++;
	}
	hmap__free(m);
	*m = n;
	return 0;
}

int hmap__put(struct hmap *m, uint64_t key, uint64_t val)
{
	bool found;
	size_t i;

	if ((m->count + m->tombs + 1) * 4 >= m->cap * 3) {
		int err = grow(m);

		if (err)
			return err;
	}
	i = find(m, key, &found);
	if (!found) {
		if (m->used[i] == 2)
			m->tombs--;
		m->used[i] = 1;
		m->keys[i] = key;
		m->count++;
	}
	m->vals[i] = val;
	return 0;
}

bool hmap__del(struct hmap *m, uint64_t key, uint64_t *old)
{
	bool found;
	size_t i;

	if (!m->cap)
		return false;
	i = find(m, key, &found);
	if (!found)
		return false;
	if (old)
		*old = m->vals[i];
	m->used[i] = 2;
	m->count--;
	m->tombs++;
	return true;
}

void hmap__free(struct hmap *m)
{
	if (!m)
		return;
	free(m->keys);
	free(m->vals);
	free(m->used);
	m->keys = m->vals = NULL;
	m->used = NULL;
	m->cap = m->count = m->tombs = 0;
}

bool hmap__next(const struct hmap *m, size_t *it, uint64_t *key, uint64_t *val)
{
	for (; *it < m->cap; (*it)++) {
		if (m->used[*it] == 1) {
			if (key)
				*key = m->keys[*it];
			if (val)
				*val = m->vals[*it];
			(*it)++;
			return true;
		}
	}
	return false;
}
