// SPDX-License-Identifier: MIT
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "lib/stats.h"

#define SUB_BITS 6
#define SUB (1u << SUB_BITS)
#define NBUCKETS (SUB + (64 - SUB_BITS) * SUB)

static unsigned bucket(uint64_t v)
{
	int e;

	if (v < SUB)
		return v;
	e = 63 - __builtin_clzll(v);
	return SUB + (e - SUB_BITS) * SUB + ((v >> (e - SUB_BITS)) & (SUB - 1));
}

static uint64_t bucket_mid(unsigned b)
{
	unsigned e, sub;
	uint64_t lo, width;

	if (b < SUB)
		return b;
	e = (b - SUB) / SUB + SUB_BITS;
	sub = (b - SUB) % SUB;
	width = 1ull << (e - SUB_BITS);
	lo = (1ull << e) + sub * width;
	return lo + width / 2;
}

void stats__add(struct stats *s, uint64_t v)
{
	double d;

	if (!s->n || v < s->min)
		s->min = v;
	if (!s->n || v > s->max)
		s->max = v;
	s->n++;
	s->total += v;
	d = v - s->mean;
	s->mean += d / s->n;
	s->m2 += d * (v - s->mean);
	if (s->n <= STATS_EXACT) {
		if (!s->samples)
			s->samples = malloc(STATS_EXACT * sizeof(*s->samples));
		if (s->samples)
			s->samples[s->n - 1] = v;
		return;
	}
	if (!s->hist) {
		s->hist = calloc(NBUCKETS, sizeof(*s->hist));
		if (!s->hist)
			return;
		for (uint64_t i = 0; s->samples && i < STATS_EXACT; i++)
			s->hist[bucket(s->samples[i])]++;
	}
	s->hist[bucket(v)]++;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

uint64_t stats__median(struct stats *s)
{
	uint64_t want, seen = 0;

	if (!s->n)
		return 0;
	if (s->n <= STATS_EXACT && s->samples) {
		qsort(s->samples, s->n, sizeof(*s->samples), cmp_u64);
		if (s->n % 2)
			return s->samples[s->n / 2];
		return (s->samples[s->n / 2 - 1] + s->samples[s->n / 2]) / 2;
	}
	if (!s->hist)
		return (uint64_t)s->mean;
	want = (s->n + 1) / 2;
	for (unsigned b = 0; b < NBUCKETS; b++) {
		seen += s->hist[b];
		if (seen >= want) {
			uint64_t m = bucket_mid(b);

			return m < s->min ? s->min : m > s->max ? s->max : m;
		}
	}
	return s->max;
}

uint64_t stats__quantile(struct stats *s, double q)
{
	uint64_t want, seen = 0;

	if (!s->n)
		return 0;
	if (q < 0)
		q = 0;
	if (q > 1)
		q = 1;
	want = (uint64_t)ceil(q * (double)s->n);
	if (want < 1)
		want = 1;
	if (want > s->n)
		want = s->n;
	if (s->n <= STATS_EXACT && s->samples) {
		qsort(s->samples, s->n, sizeof(*s->samples), cmp_u64);
		return s->samples[want - 1];
	}
	if (!s->hist)
		return (uint64_t)s->mean;
	for (unsigned b = 0; b < NBUCKETS; b++) {
		seen += s->hist[b];
		if (seen >= want) {
			uint64_t m = bucket_mid(b);

			return m < s->min ? s->min : m > s->max ? s->max : m;
		}
	}
	return s->max;
}

double stats__stddev(const struct stats *s)
{
	return s->n < 2 ? 0 : sqrt(s->m2 / (s->n - 1));
}

void stats__free(struct stats *s)
{
	if (!s)
		return;
	free(s->samples);
	free(s->hist);
	memset(s, 0, sizeof(*s));
}
