/* SPDX-License-Identifier: MIT */
/*
 * Online statistics of durations: count, total, min, max, mean and
 * standard deviation exactly (Welford), the median exactly while fewer
 * than STATS_EXACT samples were seen and from a log-linear histogram
 * (under 1.6% relative error) beyond. Memory is bounded per series.
 */
#ifndef CGBPF_STATS_H
#define CGBPF_STATS_H

#include <stdint.h>

#define STATS_EXACT 65536

struct stats {
	uint64_t n;
	uint64_t total;
	uint64_t min, max;
	double mean, m2;
	uint64_t *samples;	/* first STATS_EXACT values */
	uint64_t *hist;		/* allocated once samples overflow */
};

/* Adds one value. */
void stats__add(struct stats *s, uint64_t v);
/* Median (see above); 0 when empty. */
uint64_t stats__median(struct stats *s);
/* The q-quantile (0 <= q <= 1) by nearest rank: the smallest value with
 * at least q * n values at or below it; exact while the samples are kept,
 * from the histogram beyond (same error as the median); 0 when empty. */
uint64_t stats__quantile(struct stats *s, double q);
/* Sample standard deviation (n - 1), as nsys reports; 0 below 2 values. */
double stats__stddev(const struct stats *s);
/* Frees the buffers; accepts a zeroed struct. */
void stats__free(struct stats *s);

#endif
