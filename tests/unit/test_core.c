/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the small user-space modules: hmap.h, stats.h, procfs.h,
 * elfsym.h, symbolize.h's demangler and cuda.h. No root and no BPF; run
 * from the repository root (build/fake/libcuda.so.1 is found relative to
 * it; its checks skip, saying so, when it is missing).
 *
 * Every expected value is computed independently of the module under test:
 * a reference array for the map, a sort and a two-pass sum for the
 * statistics, the kernel's own view of this process for procfs, binutils
 * (nm, readelf, run with posix_spawn) and a hand-built ELF file for the
 * symbol reader, c++filt's output (pasted) for the demangler and NVIDIA's
 * cuda.h values for the result names.
 *
 * Prints "ok N - ..." / "not ok N - ..." lines and a final
 * "N passed, M failed"; exits 1 on any failure.
 */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sources/cuda/cuda.h"
#include "core/hangwatch.h"
#include "core/model.h"
#include "lib/elf/elfsym.h"
#include "lib/elf/symbolize.h"
#include "lib/hmap.h"
#include "lib/outfile.h"
#include "lib/procfs.h"
#include "lib/stats.h"
#include "tap.h"
#include "sources/sources.h"

extern char **environ;

static int g_argc;
static char **g_argv;
static char tmpdir[PATH_MAX];



/* Deterministic, so a failure reproduces (splitmix64). */
static uint64_t rng_state = 0x243f6a8885a308d3ull;

static uint64_t rnd(void)
{
	uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* Uniform in [0, 1). */
static double rnd_unit(void)
{
	return (rnd() >> 11) * (1.0 / 9007199254740992.0);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* ================================================================ hmap */

/* A bijection on 64-bit keys, so keys are scattered yet recoverable. */
static uint64_t scatter(uint64_t i)
{
	return i * 0x9e3779b97f4a7c15ull + 0x7f4a7c159e3779b9ull;
}

static uint64_t unscatter(uint64_t k)
{
	/* Inverse of the odd multiplier mod 2^64 (Newton's iteration). */
	uint64_t a = 0x9e3779b97f4a7c15ull, inv = a;

	for (int i = 0; i < 6; i++)
		inv *= 2 - a * inv;
	return (k - 0x7f4a7c159e3779b9ull) * inv;
}

static void test_hmap_basic(void)
{
	struct hmap m = { 0 };
	uint64_t *v, old = 0;
	size_t it = 0;
	uint64_t k, val;

	check(hmap__get(&m, 1) == NULL && !hmap__del(&m, 1, &old) && !hmap__next(&m, &it, &k, &val),
	      "hmap: a zeroed map is empty (get, del and next on it are safe)");
	hmap__free(&m);
	hmap__free(NULL);

	check(hmap__put(&m, 7, 70) == 0 && (v = hmap__get(&m, 7)) && *v == 70 && m.count == 1,
	      "hmap: put then get");
	check(hmap__put(&m, 7, 71) == 0 && (v = hmap__get(&m, 7)) && *v == 71 && m.count == 1,
	      "hmap: put on an existing key overwrites without adding an entry");
	v = hmap__get(&m, 7);
	*v = 72;
	check(*hmap__get(&m, 7) == 72, "hmap: get returns a pointer to the stored value");
	check(hmap__get(&m, 8) == NULL, "hmap: a missing key gives NULL");

	check(hmap__get(&m, 0) == NULL && hmap__put(&m, 0, 1234) == 0 &&
	      (v = hmap__get(&m, 0)) && *v == 1234 && m.count == 2,
	      "hmap: key 0 is an ordinary key");
	check(hmap__put(&m, UINT64_MAX, 0) == 0 && (v = hmap__get(&m, UINT64_MAX)) && *v == 0,
	      "hmap: key UINT64_MAX with value 0");
	{
		/* Iteration must not mistake key 0 or value 0 for an empty slot. */
		bool saw0 = false, sawmax = false, saw7 = false, other = false;

		it = 0;
		while (hmap__next(&m, &it, &k, &val)) {
			if (k == 0 && val == 1234 && !saw0)
				saw0 = true;
			else if (k == UINT64_MAX && val == 0 && !sawmax)
				sawmax = true;
			else if (k == 7 && val == 72 && !saw7)
				saw7 = true;
			else
				other = true;
		}
		check(saw0 && sawmax && saw7 && !other,
		      "hmap: iteration visits keys 7, 0 and UINT64_MAX (value 0) once each");
	}

	old = 0;
	check(hmap__del(&m, 0, &old) && old == 1234 && hmap__get(&m, 0) == NULL && m.count == 2,
	      "hmap: del returns the old value and removes the key (key 0)");
	check(!hmap__del(&m, 0, &old) && !hmap__del(&m, 99, NULL),
	      "hmap: del of a missing or already deleted key returns false");
	check(hmap__del(&m, 7, NULL) && hmap__get(&m, 7) == NULL,
	      "hmap: del accepts a NULL old pointer");
	check(hmap__put(&m, 0, 5) == 0 && (v = hmap__get(&m, 0)) && *v == 5,
	      "hmap: a deleted key can be put again");
	hmap__free(&m);
	check(m.cap == 0 && m.count == 0 && hmap__get(&m, 0) == NULL,
	      "hmap: free leaves an empty, reusable map");
	check(hmap__put(&m, 3, 3) == 0 && *hmap__get(&m, 3) == 3, "hmap: a freed map is reusable");
	hmap__free(&m);
}

static void test_hmap_growth(void)
{
	const size_t N = 100000;
	struct hmap m = { 0 };
	bool ok = true, pow2;
	size_t bad = 0;

	for (size_t i = 0; i < N && ok; i++)
		ok = hmap__put(&m, scatter(i), i) == 0;
	check(ok && m.count == N, "hmap: 100000 scattered keys put (count %zu)", m.count);
	for (size_t i = 0; i < N; i++) {
		uint64_t *v = hmap__get(&m, scatter(i));

		if (!v || *v != i)
			bad++;
	}
	check(bad == 0, "hmap: every one of the 100000 keys gets its own value back (%zu wrong)", bad);
	pow2 = m.cap && !(m.cap & (m.cap - 1));
	/* Under 3/4 full after growth, and memory proportional to the entries. */
	check(pow2 && m.count * 4 < m.cap * 3 && m.cap <= 4 * N,
	      "hmap: capacity %zu is a power of two between 4/3 and 4 times the entries", m.cap);
	bad = 0;
	for (size_t i = N; i < N + 1000; i++)
		if (hmap__get(&m, scatter(i)))
			bad++;
	check(bad == 0, "hmap: keys never put are absent after growth");

	/* Dense small keys, which hash__u64 must still spread. */
	hmap__free(&m);
	ok = true;
	for (uint64_t i = 0; i < N && ok; i++)
		ok = hmap__put(&m, i, ~i) == 0;
	bad = 0;
	for (uint64_t i = 0; i < N; i++) {
		uint64_t *v = hmap__get(&m, i);

		if (!v || *v != ~i)
			bad++;
	}
	check(ok && bad == 0 && m.count == N, "hmap: 100000 sequential keys 0..99999 round-trip");
	hmap__free(&m);
}

/* Every live key once, with its value; nothing else. */
static bool iter_matches(const struct hmap *m, const uint64_t *ref, const bool *live, size_t n,
			 size_t *visits)
{
	uint8_t *seen = calloc(n, 1);
	uint64_t k, v;
	size_t it = 0, nlive = 0;
	bool ok = seen != NULL;

	*visits = 0;
	while (ok && hmap__next(m, &it, &k, &v)) {
		uint64_t i = unscatter(k);

		(*visits)++;
		if (i >= n || !live[i] || seen[i] || ref[i] != v)
			ok = false;
		else
			seen[i] = 1;
	}
	for (size_t i = 0; i < n; i++)
		nlive += live[i];
	free(seen);
	return ok && *visits == nlive;
}

static void test_hmap_tombstones(void)
{
	const size_t N = 20000;
	struct hmap m = { 0 };
	uint64_t *ref = calloc(N, sizeof(*ref));
	bool *live = calloc(N, sizeof(*live));
	size_t visits, bad = 0, maxcap = 0;
	bool ok = ref && live;

	if (!check(ok, "hmap: allocate the reference arrays"))
		goto out;
	for (size_t i = 0; i < N; i++) {
		ref[i] = rnd();
		live[i] = true;
		ok &= hmap__put(&m, scatter(i), ref[i]) == 0;
	}
	/* Delete every other key, then put half of them back with new values:
	 * lookups must probe past the tombstones to later keys. */
	for (size_t i = 0; i < N; i += 2) {
		uint64_t old;

		ok &= hmap__del(&m, scatter(i), &old) && old == ref[i];
		live[i] = false;
	}
	for (size_t i = 0; i < N; i += 4) {
		ref[i] = rnd();
		live[i] = true;
		ok &= hmap__put(&m, scatter(i), ref[i]) == 0;
	}
	for (size_t i = 0; i < N; i++) {
		uint64_t *v = hmap__get(&m, scatter(i));

		if (live[i] ? !v || *v != ref[i] : v != NULL)
			bad++;
	}
	check(ok && bad == 0 && m.count == N / 2 + N / 4,
	      "hmap: after deleting half and re-putting a quarter every key is right (%zu wrong, count %zu)",
	      bad, m.count);
	ok = iter_matches(&m, ref, live, N, &visits);
	check(ok, "hmap: iteration after deletions visits each of the %zu live keys exactly once",
	      visits);
	hmap__free(&m);

	/* Churn: a small live set over many fresh keys. Tombstones must be
	 * reclaimed, or the table grows (or a probe never meets an empty slot). */
	ok = true;
	for (size_t i = 0; i < 1000000 && ok; i++) {
		ok = hmap__put(&m, scatter(i), i) == 0;
		if (i >= 64)
			ok = ok && hmap__del(&m, scatter(i - 64), NULL);
		if (m.cap > maxcap)
			maxcap = m.cap;
	}
	bad = 0;
	for (size_t i = 1000000 - 64; i < 1000000; i++)
		if (!hmap__get(&m, scatter(i)) || *hmap__get(&m, scatter(i)) != i)
			bad++;
	check(ok && bad == 0 && m.count == 64 && maxcap <= 512,
	      "hmap: 1e6 put/del with 64 live keys keeps the table small (max capacity %zu)", maxcap);
	hmap__free(&m);

	/* Random operations on a small key space against a plain array. */
	memset(live, 0, N * sizeof(*live));
	ok = true;
	bad = 0;
	for (size_t op = 0; op < 400000 && ok; op++) {
		uint64_t i = rnd() % 3000, r = rnd() % 10;

		if (r < 5) {
			ref[i] = rnd();
			live[i] = true;
			ok = hmap__put(&m, scatter(i), ref[i]) == 0;
		} else if (r < 8) {
			uint64_t old = 0;
			bool had = hmap__del(&m, scatter(i), &old);

			if (had != live[i] || (had && old != ref[i]))
				bad++;
			live[i] = false;
		} else {
			uint64_t *v = hmap__get(&m, scatter(i));

			if (live[i] ? !v || *v != ref[i] : v != NULL)
				bad++;
		}
	}
	check(ok && bad == 0, "hmap: 400000 random put/del/get agree with a reference array");
	ok = iter_matches(&m, ref, live, 3000, &visits);
	check(ok, "hmap: iteration after random operations visits each of the %zu live keys once",
	      visits);
	{
		/* NULL key/value pointers are allowed while iterating. */
		size_t it = 0, n = 0;

		while (hmap__next(&m, &it, NULL, NULL))
			n++;
		check(n == m.count, "hmap: iteration with NULL key and value pointers (%zu)", n);
	}
	hmap__free(&m);
out:
	free(ref);
	free(live);
}

static void test_hash(void)
{
	char buf[64] __attribute__((aligned(8)));
	struct hmap seen = { 0 };
	size_t dup = 0;
	bool ok = true;

	/* Pinned values, computed by a separate Python implementation of the
	 * documented algorithm (eight little-endian bytes a step, then the
	 * murmur3 finalizer): the hash must not depend on the build, the host
	 * or the run. */
	check(hash__bytes("", 0) == 0x9ca066f1a4ab2eeaull &&
	      hash__bytes("a", 1) == 0xd10714da09f698c8ull &&
	      hash__bytes("cuLaunchKernel", 14) == 0x3f6942878bf070c8ull,
	      "hash__bytes gives the pinned values for \"\", \"a\" and \"cuLaunchKernel\"");
	/* Alignment and surrounding bytes must not matter. */
	ok = true;
	for (int off = 0; off < 8; off++) {
		memset(buf, 0xa5, sizeof(buf));
		memcpy(buf + off, "cuMemcpyHtoDAsync_v2", 20);
		ok &= hash__bytes(buf + off, 20) == hash__bytes("cuMemcpyHtoDAsync_v2", 20);
	}
	check(ok, "hash__bytes gives the same value at every alignment");
	check(hash__bytes("ab", 2) != hash__bytes("ba", 2) &&
	      hash__bytes("a", 1) != hash__bytes("a\0", 2),
	      "hash__bytes depends on order and length");
	for (int i = 0; i < 100000; i++) {
		int n = snprintf(buf, sizeof(buf), "kernel_%d", i);
		uint64_t h = hash__bytes(buf, (size_t)n);

		if (hmap__get(&seen, h))
			dup++;
		hmap__put(&seen, h, 1);
	}
	check(dup == 0, "hash__bytes: 100000 similar names, no collision (%zu)", dup);
	check(hash__u64(0) == 0 && hash__u64(1) != 1 && hash__u64(1) != hash__u64(2),
	      "hash__u64 is the murmur3 finalizer (0 maps to 0, small keys spread)");
	hmap__free(&seen);
}

/* ================================================================ stats */

static double two_pass_sd(const uint64_t *v, size_t n)
{
	long double mean = 0, ss = 0;

	if (n < 2)
		return 0;
	for (size_t i = 0; i < n; i++)
		mean += v[i];
	mean /= n;
	for (size_t i = 0; i < n; i++)
		ss += (v[i] - mean) * (v[i] - mean);
	return (double)sqrtl(ss / (n - 1));
}

/* The median of sorted v: the middle, or the floor of the middle two's mean. */
static uint64_t exact_median(uint64_t *v, size_t n)
{
	uint64_t a, b;

	qsort(v, n, sizeof(*v), cmp_u64);
	if (n % 2)
		return v[n / 2];
	a = v[n / 2 - 1];
	b = v[n / 2];
	return a / 2 + b / 2 + (a & b & 1);
}

static bool close_rel(double got, double want, double rel)
{
	return fabs(got - want) <= rel * fabs(want) || got == want;
}

/* Feeds v[0..n) and checks everything stats.h promises against v. */
static void check_stats(const char *what, const uint64_t *v, size_t n, double median_rel)
{
	struct stats s = { 0 };
	uint64_t *copy = malloc(n * sizeof(*copy)), min = UINT64_MAX, max = 0, total = 0, med;
	double sd, want_sd, mean;

	if (!check(copy != NULL, "stats %s: allocate", what))
		return;
	for (size_t i = 0; i < n; i++) {
		stats__add(&s, v[i]);
		copy[i] = v[i];
		total += v[i];
		min = v[i] < min ? v[i] : min;
		max = v[i] > max ? v[i] : max;
	}
	mean = (double)total / n;
	check(s.n == n && s.total == total && s.min == min && s.max == max,
	      "stats %s: count %zu, total, min %" PRIu64 " and max %" PRIu64 " exact", what, n,
	      min, max);
	check(close_rel(s.mean, mean, 1e-12), "stats %s: mean %.6f (want %.6f)", what, s.mean, mean);
	sd = stats__stddev(&s);
	want_sd = two_pass_sd(v, n);
	/* 1e-6: Welford in doubles drifts ~1e-8 on values near 1e12, yet
	 * n instead of n-1 (2.5e-6 at n = 200000) or a naive sum of squares
	 * would still fail. */
	check(close_rel(sd, want_sd, 1e-6),
	      "stats %s: stddev %.9g is the sample (n-1) stddev %.9g", what, sd, want_sd);
	med = stats__median(&s);
	{
		uint64_t want = exact_median(copy, n);
		double err = want ? fabs((double)med - (double)want) / want : (double)med;

		if (median_rel == 0)
			check(med == want, "stats %s: median %" PRIu64 " exact (want %" PRIu64 ")", what,
			      med, want);
		else
			check(err <= median_rel && med >= min && med <= max,
			      "stats %s: median %" PRIu64 " within %.1f%% of %" PRIu64 " (%.3f%%)", what,
			      med, median_rel * 100, want, err * 100);
	}
	/* A second call must not change anything (the exact path sorts). */
	check(stats__median(&s) == med && s.n == n, "stats %s: median is repeatable", what);
	stats__free(&s);
	check(s.n == 0 && s.samples == NULL && s.hist == NULL, "stats %s: free zeroes the struct", what);
	free(copy);
}

static void test_stats(void)
{
	static const uint64_t small[] = { 2, 4, 4, 4, 5, 5, 7, 9 };
	struct stats s = { 0 };
	size_t n = 200000;
	uint64_t *v = malloc(n * sizeof(*v));

	check(stats__median(&s) == 0 && stats__stddev(&s) == 0 && s.n == 0,
	      "stats: empty gives median 0 and stddev 0");
	stats__free(&s);
	stats__free(&s);
	stats__free(NULL);
	check(s.samples == NULL && s.hist == NULL, "stats: free accepts a zeroed struct and NULL");
	stats__add(&s, 42);
	check(s.n == 1 && stats__median(&s) == 42 && stats__stddev(&s) == 0 && s.mean == 42 &&
	      s.min == 42 && s.max == 42,
	      "stats: one value: median is it, stddev 0 below two values");
	stats__free(&s);

	/* Textbook set: mean 5, population sd 2, sample sd sqrt(32/7). */
	for (size_t i = 0; i < 8; i++)
		stats__add(&s, small[i]);
	check(fabs(s.mean - 5) < 1e-12 && fabs(stats__stddev(&s) - sqrt(32.0 / 7)) < 1e-12,
	      "stats: {2,4,4,4,5,5,7,9}: mean 5, stddev sqrt(32/7) = %.6f (n-1, not n)",
	      stats__stddev(&s));
	check(stats__median(&s) == 4, "stats: even count: median floor((4+5)/2) = %" PRIu64,
	      stats__median(&s));
	stats__free(&s);
	for (uint64_t x = 1; x <= 5; x++)
		stats__add(&s, 6 - x);
	check(stats__median(&s) == 3, "stats: odd count {5,4,3,2,1}: median 3");
	stats__free(&s);

	if (!check(v != NULL, "stats: allocate 200000 values"))
		return;
	/* Exact median below STATS_EXACT, odd and even counts, at the limit. */
	for (size_t i = 0; i < n; i++)
		v[i] = 1000 + rnd() % 5000000;
	check_stats("1001 uniform (odd)", v, 1001, 0);
	check_stats("1000 uniform (even)", v, 1000, 0);
	check_stats("STATS_EXACT-1 uniform (odd)", v, STATS_EXACT - 1, 0);
	check_stats("STATS_EXACT uniform (even)", v, STATS_EXACT, 0);

	/* Around 1e12 with small spread: naive sum of squares would cancel. */
	for (size_t i = 0; i < 10000; i++)
		v[i] = 1000000000000ull + rnd() % 1000;
	check_stats("10000 around 1e12", v, 10000, 0);
	for (size_t i = 0; i < 3000; i++)
		v[i] = 777;
	check_stats("3000 equal values", v, 3000, 0);
	{
		struct stats c = { 0 };

		for (int i = 0; i < 100000; i++)
			stats__add(&c, 123456789);
		check(stats__stddev(&c) == 0 && stats__median(&c) == 123456789,
		      "stats: 100000 equal values: stddev exactly 0, median exact past STATS_EXACT");
		stats__free(&c);
	}

	/* Past STATS_EXACT the median comes from the histogram. */
	for (size_t i = 0; i < n; i++)
		v[i] = 1000 + rnd() % 5000000;
	check_stats("200000 uniform", v, n, 0.016);
	for (size_t i = 0; i < n; i++)
		v[i] = (uint64_t)exp(rnd_unit() * log(1e10)) + 1;	/* log-uniform 1 ns..10 s */
	check_stats("200000 log-uniform", v, n, 0.016);
	for (size_t i = 0; i < n; i++)	/* exponential, mean 20 us */
		v[i] = (uint64_t)(-log(1 - rnd_unit()) * 20000) + 1;
	check_stats("200000 exponential", v, n, 0.016);
	for (size_t i = 0; i < n; i++)
		v[i] = rnd() % 64;
	check_stats("200000 below 64 (exact buckets)", v, n, 0);
	for (size_t i = 0; i < n; i++)	/* top octave: bucket arithmetic near 2^64 */
		v[i] = UINT64_MAX - rnd() % (1ull << 62);
	{
		struct stats h = { 0 };
		uint64_t med, want;

		for (size_t i = 0; i < n; i++)
			stats__add(&h, v[i]);
		med = stats__median(&h);
		want = exact_median(v, n);
		check(fabs((double)med - (double)want) <= 0.016 * (double)want && med >= h.min &&
		      med <= h.max,
		      "stats: 200000 values near 2^64: median %" PRIu64 " within 1.6%% of %" PRIu64,
		      med, want);
		stats__free(&h);
	}
	/* The first STATS_EXACT values must count in the histogram too: here
	 * they alone decide the median. */
	for (size_t i = 0; i < STATS_EXACT; i++)
		v[i] = 1000;
	for (size_t i = STATS_EXACT; i < STATS_EXACT + 40000; i++)
		v[i] = 1000000000;
	check_stats("65536 x 1000 then 40000 x 1e9", v, STATS_EXACT + 40000, 0.016);
	/* Crossing the limit after a median was taken (which sorted the samples). */
	{
		struct stats c = { 0 };
		uint64_t med;

		for (size_t i = 0; i < n; i++)
			v[i] = 5000 + rnd() % 100000;
		for (size_t i = 0; i < STATS_EXACT; i++)
			stats__add(&c, v[i]);
		stats__median(&c);
		for (size_t i = STATS_EXACT; i < n; i++)
			stats__add(&c, v[i]);
		med = stats__median(&c);
		{
			uint64_t want = exact_median(v, n);

			check(fabs((double)med - (double)want) <= 0.016 * want,
			      "stats: median taken at STATS_EXACT, then 134464 more: %" PRIu64
			      " within 1.6%% of %" PRIu64, med, want);
		}
		stats__free(&c);
	}
	free(v);
}

/* ================================================================ procfs */

struct maps_case {
	const char *line;
	uint64_t start, end, offset, inode;
	uint32_t maj, min;
	const char *perms, *path;
};

static void test_parse_maps(void)
{
	static const struct maps_case good[] = {
		{ "00400000-00452000 r-xp 00000000 fd:01 1234567 /usr/bin/prog\n",
		  0x400000, 0x452000, 0, 1234567, 0xfd, 0x01, "r-xp", "/usr/bin/prog" },
		{ "7f3c1a2b3000-7f3c1a2b5000 rw-p 0001a000 08:02 131          /home/u/My Files/lib x.so\n",
		  0x7f3c1a2b3000, 0x7f3c1a2b5000, 0x1a000, 131, 8, 2, "rw-p",
		  "/home/u/My Files/lib x.so" },
		{ "7f00deadb000-7f00deadc000 r-xp 00002000 103:05 98765 /tmp/libfoo.so (deleted)\n",
		  0x7f00deadb000, 0x7f00deadc000, 0x2000, 98765, 0x103, 5, "r-xp",
		  "/tmp/libfoo.so (deleted)" },
		{ "7f0000000000-7f0000021000 rw-p 00000000 00:00 0 \n",
		  0x7f0000000000, 0x7f0000021000, 0, 0, 0, 0, "rw-p", "" },
		{ "7f0000000000-7f0000001000 ---p 00000000 00:00 0",
		  0x7f0000000000, 0x7f0000001000, 0, 0, 0, 0, "---p", "" },
		{ "7ffd5e9fc000-7ffd5e9fe000 r-xp 00000000 00:00 0                          [vdso]\n",
		  0x7ffd5e9fc000, 0x7ffd5e9fe000, 0, 0, 0, 0, "r-xp", "[vdso]" },
		{ "7ffd5e7f0000-7ffd5e811000 rw-p 00000000 00:00 0                          [stack]\n",
		  0x7ffd5e7f0000, 0x7ffd5e811000, 0, 0, 0, 0, "rw-p", "[stack]" },
		{ "ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0                  [vsyscall]\n",
		  0xffffffffff600000ull, 0xffffffffff601000ull, 0, 0, 0, 0, "--xp", "[vsyscall]" },
		{ "7f1234560000-7f1234570000 r--s 7fffffffff000000 fd:1a3 18446744073709551615 /dev/shm/x\n",
		  0x7f1234560000, 0x7f1234570000, 0x7fffffffff000000ull, UINT64_MAX, 0xfd, 0x1a3,
		  "r--s", "/dev/shm/x" },
		{ "55d0c0de0000-55d0c0de1000 r--p 00000000 fd:01 42 /opt/a  b/c\n",
		  0x55d0c0de0000, 0x55d0c0de1000, 0, 42, 0xfd, 1, "r--p", "/opt/a  b/c" },
	};
	static const char *const bad[] = {
		"",
		"\n",
		"garbage",
		"00400000 r-xp 00000000 fd:01 1 /x",			/* no '-' */
		"00400000-00452000",					/* stops after the range */
		"00400000-00452000 r-xp",				/* no offset */
		"00400000-00452000 r-xp 00000000 fd:01",		/* no inode */
		"00400000-00452000 r-xp 00000000 fd:01 ",		/* empty inode */
		"00400000-00452000 r-xp 00000000 fd01 1 /x",		/* device without ':' */
		"0040000g-00452000 r-xp 00000000 fd:01 1 /x",		/* not hex */
		"00400000-00452000 r-x 00000000 fd:01 1 /x",		/* 3-letter perms */
		"00400000-00452000 r-xp 00000000 fd:01 x /x",		/* inode not decimal */
		"00400000-00452000 r-xp zz fd:01 1 /x",			/* offset not hex */
		"1ffffffffffffffff-00452000 r-xp 00000000 fd:01 1 /x",	/* start overflows */
		"00400000-00452000 r-xp 00000000 fd:01 99999999999999999999 /x", /* inode overflows */
	};

	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		char line[256];
		struct map_entry e;
		int r;
		bool in_line;

		snprintf(line, sizeof(line), "%s", good[i].line);
		r = procfs__parse_maps_line(line, &e);
		in_line = r == 0 && e.path >= line && e.path <= line + strlen(good[i].line);
		if (!check(r == 0 && e.start == good[i].start && e.end == good[i].end &&
			   e.offset == good[i].offset && e.inode == good[i].inode &&
			   e.dev_major == good[i].maj && e.dev_minor == good[i].min &&
			   !strcmp(e.perms, good[i].perms) && !strcmp(e.path, good[i].path) && in_line,
			   "procfs: parse maps line %zu (%s)", i,
			   *good[i].path ? good[i].path : "anonymous"))
			printf("#   r %d start %" PRIx64 " end %" PRIx64 " off %" PRIx64
			       " dev %x:%x ino %" PRIu64 " perms '%s' path '%s'\n",
			       r, e.start, e.end, e.offset, e.dev_major, e.dev_minor, e.inode, e.perms,
			       r == 0 ? e.path : "");
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char line[256];
		struct map_entry e;
		int r;

		snprintf(line, sizeof(line), "%s", bad[i]);
		r = procfs__parse_maps_line(line, &e);
		check(r == -EINVAL, "procfs: malformed line rejected with -EINVAL: \"%s\" (got %d)",
		      bad[i][0] == '\n' ? "\\n" : bad[i], r);
	}
}

struct self_map {
	uintptr_t addr;
	char exe[PATH_MAX];
	bool found, exe_ok;
	uint64_t file_off;
	int calls;
	char perms[5];
};

static int self_map_cb(const struct map_entry *e, void *ctx)
{
	struct self_map *sm = ctx;

	sm->calls++;
	if (sm->addr >= e->start && sm->addr < e->end) {
		sm->found = true;
		sm->exe_ok = !strcmp(e->path, sm->exe);
		sm->file_off = sm->addr - e->start + e->offset;
		memcpy(sm->perms, e->perms, sizeof(sm->perms));
	}
	return 0;
}

static int stop_cb(const struct map_entry *e, void *ctx)
{
	(*(int *)ctx)++;
	return 42;
}

static int count_cb(const struct map_entry *e, void *ctx)
{
	(*(int *)ctx)++;
	return 0;
}

int main(int argc, char **argv);

static uint64_t main_file_offset;	/* from the kernel's maps, for the elfsym test */

static void test_for_each_map(void)
{
	struct self_map sm = { .addr = (uintptr_t)&main };
	ssize_t n = readlink("/proc/self/exe", sm.exe, sizeof(sm.exe) - 1);
	int calls = 0, r;

	if (!check(n > 0, "procfs: readlink /proc/self/exe"))
		return;
	sm.exe[n] = 0;
	r = procfs__for_each_map(getpid(), self_map_cb, &sm);
	check(r == 0 && sm.calls > 5, "procfs: for_each_map on our own pid visits %d maps", sm.calls);
	check(sm.found && sm.exe_ok && sm.perms[2] == 'x' && strlen(sm.perms) == 4,
	      "procfs: the map holding main() is our executable %s, executable (%s)", sm.exe,
	      sm.perms);
	main_file_offset = sm.found ? sm.file_off : 0;
	r = procfs__for_each_map(getpid(), stop_cb, &calls);
	check(r == 42 && calls == 1, "procfs: a non-zero callback return stops the walk and is returned");
	calls = 0;
	r = procfs__for_each_map(0, count_cb, &calls);
	check(r == -ENOENT && calls == 0, "procfs: for_each_map of pid 0 gives -ENOENT (got %d)", r);
}

struct named_thread {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	pid_t tid;
	bool stop;
};

static void *named_thread_fn(void *arg)
{
	struct named_thread *nt = arg;

	prctl(PR_SET_NAME, "cgbpf-worker");
	pthread_mutex_lock(&nt->lock);
	nt->tid = gettid();
	pthread_cond_broadcast(&nt->cond);
	while (!nt->stop)
		pthread_cond_wait(&nt->cond, &nt->lock);
	pthread_mutex_unlock(&nt->lock);
	return NULL;
}

static void test_comm_cmdline(void)
{
	char want[16] = "", buf[64], small[4];
	char *cmd, joined[4096] = "";
	size_t off = 0;
	struct named_thread nt = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, false };
	pthread_t th;

	prctl(PR_GET_NAME, want);
	check(procfs__comm(getpid(), 0, buf, sizeof(buf)) == 0 && !strcmp(buf, want),
	      "procfs: comm of ourselves is \"%s\" (prctl says \"%s\")", buf, want);
	check(procfs__comm(getpid(), 0, small, sizeof(small)) == 0 && strlen(small) == 3 &&
	      !strncmp(small, want, 3),
	      "procfs: comm into a 4-byte buffer is cut to 3 characters, NUL-terminated");
	if (check(pthread_create(&th, NULL, named_thread_fn, &nt) == 0, "procfs: start a named thread")) {
		pthread_mutex_lock(&nt.lock);
		while (!nt.tid)
			pthread_cond_wait(&nt.cond, &nt.lock);
		pthread_mutex_unlock(&nt.lock);
		check(procfs__comm(getpid(), nt.tid, buf, sizeof(buf)) == 0 &&
		      !strcmp(buf, "cgbpf-worker"),
		      "procfs: comm of thread %d is its own name \"%s\"", nt.tid, buf);
		pthread_mutex_lock(&nt.lock);
		nt.stop = true;
		pthread_cond_broadcast(&nt.cond);
		pthread_mutex_unlock(&nt.lock);
		pthread_join(th, NULL);
	}

	for (int i = 0; i < g_argc; i++)
		off += snprintf(joined + off, off < sizeof(joined) ? sizeof(joined) - off : 0, "%s%s",
				i ? " " : "", g_argv[i]);
	cmd = procfs__cmdline(getpid());
	check(cmd && !strcmp(cmd, joined), "procfs: cmdline of ourselves is argv joined by spaces: \"%s\"",
	      cmd ? cmd : "(null)");
	free(cmd);
	errno = 0;
	cmd = procfs__cmdline(0);
	check(!cmd && errno == ENOENT, "procfs: cmdline of pid 0 is NULL with errno ENOENT");
	free(cmd);
}

/* Forks a child that exits at once; returns its pid once it is a zombie. */
static pid_t make_zombie(void)
{
	siginfo_t si = { 0 };
	pid_t pid = fork();

	if (pid == 0)
		_exit(0);
	if (pid < 0)
		return -1;
	/* WNOWAIT: wait for the exit, leave the zombie in place. */
	if (waitid(P_PID, pid, &si, WEXITED | WNOWAIT) < 0)
		return -1;
	return pid;
}

static bool pid_in(const pid_t *v, size_t n, pid_t p)
{
	for (size_t i = 0; i < n; i++)
		if (v[i] == p)
			return true;
	return false;
}

static void test_alive(void)
{
	pid_t z = make_zombie(), *kids = NULL;
	size_t nkids = 0;
	char *cmd;
	int calls = 0;

	check(procfs__alive(getpid()), "procfs: alive(self)");
	if (!check(z > 0, "procfs: fork a child and let it become a zombie"))
		return;
	check(!procfs__alive(z), "procfs: a zombie child (exited, not yet waited) is not alive");
	cmd = procfs__cmdline(z);
	check(cmd && !strcmp(cmd, ""), "procfs: cmdline of a zombie is \"\"");
	free(cmd);
	/* procfs.h promises the tgids of *live* children, and procfs__alive()
	 * says a zombie counts as gone; /proc/PID/task/TID/children lists
	 * zombies too, so they must be filtered out. */
	check(procfs__descendants(getpid(), &kids, &nkids) == 0 && !pid_in(kids, nkids, z),
	      "procfs: descendants (\"live children\") leaves out a zombie child");
	free(kids);
	waitpid(z, NULL, 0);
	check(!procfs__alive(z), "procfs: a reaped child is not alive");
	errno = 0;
	cmd = procfs__cmdline(z);
	check(!cmd && errno == ENOENT, "procfs: cmdline of a reaped child is NULL with ENOENT");
	free(cmd);
	check(procfs__for_each_map(z, count_cb, &calls) == -ENOENT && calls == 0,
	      "procfs: maps of a reaped child give -ENOENT");
	check(!procfs__alive(0) && !procfs__alive(-1), "procfs: pid 0 and -1 are not alive");
}

/* A thread that forks a child and stays alive until told to stop: the
 * kernel lists that child under the thread's task/TID/children only while
 * the thread lives (an exiting thread's children move to another thread). */
struct forker {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int release_rd, release_wr;	/* the child blocks reading until EOF */
	pid_t child;
	bool forked, stop;
};

static void *forker_fn(void *arg)
{
	struct forker *f = arg;
	pid_t pid = fork();
	char c;

	if (pid == 0) {
		close(f->release_wr);
		while (read(f->release_rd, &c, 1) > 0)
			;
		_exit(0);
	}
	pthread_mutex_lock(&f->lock);
	f->child = pid;
	f->forked = true;
	pthread_cond_broadcast(&f->cond);
	while (!f->stop)
		pthread_cond_wait(&f->cond, &f->lock);
	pthread_mutex_unlock(&f->lock);
	return NULL;
}

static void test_descendants(void)
{
	int release[2], report[2];
	pid_t child, grandchild = 0, *kids = NULL;
	size_t nkids = 0;
	struct forker f = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, -1, -1, 0, false,
			    false };
	pthread_t th;
	bool have_thread = false;
	char c;
	int r;

	if (!check(pipe2(release, O_CLOEXEC) == 0 && pipe2(report, O_CLOEXEC) == 0,
		   "procfs: pipes for the descendants test"))
		return;
	child = fork();
	if (child == 0) {
		pid_t g;

		close(release[1]);
		close(report[0]);
		g = fork();
		if (g == 0) {
			while (read(release[0], &c, 1) > 0)
				;
			_exit(0);
		}
		if (write(report[1], &g, sizeof(g)) != sizeof(g))
			_exit(1);
		while (read(release[0], &c, 1) > 0)
			;
		waitpid(g, NULL, 0);
		_exit(0);
	}
	close(report[1]);
	if (child < 0 || read(report[0], &grandchild, sizeof(grandchild)) != sizeof(grandchild) ||
	    grandchild <= 0) {
		check(false, "procfs: fork a child and a grandchild");
		goto out;
	}
	/* A child forked by a second thread is listed under that thread's
	 * task/TID/children, not the main thread's. */
	f.release_rd = release[0];
	f.release_wr = release[1];
	if (pthread_create(&th, NULL, forker_fn, &f) == 0) {
		have_thread = true;
		pthread_mutex_lock(&f.lock);
		while (!f.forked)
			pthread_cond_wait(&f.cond, &f.lock);
		pthread_mutex_unlock(&f.lock);
	}
	r = procfs__descendants(getpid(), &kids, &nkids);
	check(r == 0 && nkids == 3 &&
	      pid_in(kids, nkids, child) && pid_in(kids, nkids, grandchild) &&
	      f.child > 0 && pid_in(kids, nkids, f.child),
	      "procfs: descendants of ourselves are exactly the child %d, grandchild %d and the "
	      "second thread's child %d (got %zu)", child, grandchild, f.child, nkids);
	free(kids);
	kids = NULL;
	check(procfs__descendants(child, &kids, &nkids) == 0 && nkids == 1 && kids[0] == grandchild,
	      "procfs: descendants of the child are just the grandchild");
	free(kids);
	kids = NULL;
	check(procfs__descendants(grandchild, &kids, &nkids) == 0 && nkids == 0,
	      "procfs: a process without children has no descendants");
	free(kids);
	check(procfs__descendants(0, &kids, &nkids) == 0 && nkids == 0,
	      "procfs: descendants of a missing pid: none, no error");
	free(kids);
out:
	if (have_thread) {
		pthread_mutex_lock(&f.lock);
		f.stop = true;
		pthread_cond_broadcast(&f.cond);
		pthread_mutex_unlock(&f.lock);
		pthread_join(th, NULL);
	}
	close(release[1]);
	close(report[0]);
	close(release[0]);
	if (child > 0)
		waitpid(child, NULL, 0);
	if (f.child > 0)
		waitpid(f.child, NULL, 0);
}

/* ================================================================ elfsym */

/* Runs argv (PATH search, LC_ALL=C) and returns its stdout, or NULL. */
static char *run_capture(char *const argv[], int *status)
{
	posix_spawn_file_actions_t fa;
	char *out = NULL, *env[3], path_env[4096];
	size_t len = 0, cap = 0;
	int pfd[2], err;
	pid_t pid;

	*status = -1;
	if (pipe2(pfd, O_CLOEXEC))
		return NULL;
	snprintf(path_env, sizeof(path_env), "PATH=%s",
		 getenv("PATH") ? getenv("PATH") : "/usr/bin:/bin");
	env[0] = "LC_ALL=C";
	env[1] = path_env;
	env[2] = NULL;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, pfd[1], STDOUT_FILENO);
	posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
	err = posix_spawnp(&pid, argv[0], &fa, NULL, argv, env);
	posix_spawn_file_actions_destroy(&fa);
	close(pfd[1]);
	if (err) {
		close(pfd[0]);
		return NULL;
	}
	for (;;) {
		ssize_t n;

		if (len + 4096 + 1 > cap) {
			size_t nc = cap ? cap * 2 : 65536;
			char *p = realloc(out, nc);

			if (!p)
				break;
			out = p;
			cap = nc;
		}
		n = read(pfd[0], out + len, cap - len - 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		len += n;
	}
	close(pfd[0]);
	waitpid(pid, status, 0);
	if (out)
		out[len] = 0;
	return out;
}

struct load { uint64_t off, vaddr, memsz; };

/* PT_LOAD segments from `readelf -lW`. */
static size_t readelf_loads(const char *path, struct load *ld, size_t max)
{
	char *argv[] = { "readelf", "-lW", (char *)path, NULL }, *out, *line, *save = NULL;
	size_t n = 0;
	int st;

	out = run_capture(argv, &st);
	if (!out || !WIFEXITED(st) || WEXITSTATUS(st)) {
		free(out);
		return 0;
	}
	for (line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		unsigned long long off, va, pa, fsz, msz;

		if (n < max && sscanf(line, " LOAD 0x%llx 0x%llx 0x%llx 0x%llx 0x%llx", &off, &va,
				      &pa, &fsz, &msz) == 5)
			ld[n++] = (struct load){ off, va, msz };
	}
	free(out);
	return n;
}

/* Value of one defined dynamic symbol from `nm -D --defined-only`. */
static bool nm_value(const char *nm_out, const char *name, uint64_t *val, char *type)
{
	const char *p = nm_out;

	while (p && *p) {
		unsigned long long v;
		char t, sym[256];
		const char *nl = strchr(p, '\n');

		if (sscanf(p, "%llx %c %255s", &v, &t, sym) == 3) {
			char *at = strchr(sym, '@');	/* versioned names: name@VER */

			if (at)
				*at = 0;
			if (!strcmp(sym, name)) {
				*val = v;
				*type = t;
				return true;
			}
		}
		p = nl ? nl + 1 : NULL;
	}
	return false;
}

static void test_elfsym_libcuda(void)
{
	const char *lib = "build/fake/libcuda.so.1";
	char *nm_argv[] = { "nm", "-D", "--defined-only", (char *)lib, NULL };
	char *re_argv[] = { "readelf", "-n", (char *)lib, NULL };
	struct load ld[16];
	size_t nld, bad = 0, checked = 0;
	struct elfsym *es;
	char *nm_out, *notes, *p, want_id[64] = "";
	uint64_t off = 1;
	int st;

	if (access(lib, R_OK)) {
		skip("elfsym: %s missing (run 'make fakes' from the repository root)", lib);
		return;
	}
	es = elfsym__open(lib);
	if (!check(es != NULL, "elfsym: open %s", lib))
		return;
	check(elfsym__count(es) >= CU_FN__COUNT, "elfsym: %zu function symbols read (>= %d probed)",
	      elfsym__count(es), CU_FN__COUNT);
	nm_out = run_capture(nm_argv, &st);
	nld = readelf_loads(lib, ld, 16);
	if (check(nm_out && WIFEXITED(st) && !WEXITSTATUS(st) && nld > 0,
		  "elfsym: run nm -D and readelf -lW on %s (%zu PT_LOAD)", lib, nld)) {
		for (int f = 0; f < CU_FN__COUNT; f++) {
			const char *name = cuda_funcs[f].name;
			uint64_t val, want = UINT64_MAX, got = 0;
			char type;
			int r;

			if (!nm_value(nm_out, name, &val, &type) || (type != 'T' && type != 't')) {
				printf("#   nm does not list %s as a defined function\n", name);
				bad++;
				continue;
			}
			for (size_t i = 0; i < nld; i++)
				if (val >= ld[i].vaddr && val < ld[i].vaddr + ld[i].memsz)
					want = val - ld[i].vaddr + ld[i].off;
			r = elfsym__offset(es, name, &got);
			checked++;
			if (r || got != want) {
				printf("#   %s: elfsym %d 0x%" PRIx64 ", nm+readelf 0x%" PRIx64 "\n", name,
				       r, got, want);
				bad++;
			}
		}
		check(bad == 0 && checked == CU_FN__COUNT,
		      "elfsym: all %d cuda_funcs[] names resolve to the file offset nm + readelf give",
		      CU_FN__COUNT);
	}
	free(nm_out);
	check(elfsym__offset(es, "cuNoSuchFunction", &off) == -ENOENT && off == 1,
	      "elfsym: a name the file does not define gives -ENOENT and leaves *off alone");
	check(elfsym__offset(es, "pthread_mutex_lock", &off) == -ENOENT,
	      "elfsym: an undefined (imported) symbol gives -ENOENT");
	check(elfsym__offset(es, "", &off) == -ENOENT, "elfsym: the empty name gives -ENOENT");

	notes = run_capture(re_argv, &st);
	if (notes && (p = strstr(notes, "Build ID: ")))
		sscanf(p + 10, "%63[0-9a-f]", want_id);
	check(strlen(want_id) == 40 && strlen(elfsym__build_id(es)) == 40 &&
	      !strcmp(elfsym__build_id(es), want_id),
	      "elfsym: build id %s is readelf -n's \"%s\"", elfsym__build_id(es), want_id);
	free(notes);
	elfsym__close(es);
}

/* ---- a hand-made ELF, so text's file offset differs from its address */

struct ebuf {
	uint8_t *b;
	size_t len, cap;
	bool oom;
};

static size_t eb_put(struct ebuf *e, const void *p, size_t n, size_t align)
{
	size_t at = (e->len + align - 1) & ~(align - 1);

	if (at + n > e->cap) {
		size_t nc = (at + n) * 2;
		uint8_t *b = realloc(e->b, nc);

		if (!b) {
			e->oom = true;
			return 0;
		}
		memset(b + e->cap, 0, nc - e->cap);
		e->b = b;
		e->cap = nc;
	}
	if (p)
		memcpy(e->b + at, p, n);
	e->len = at + n;
	return at;
}

struct strtab {
	char s[512];
	size_t len;
};

static uint32_t st_add(struct strtab *t, const char *s)
{
	uint32_t at;

	if (!t->len)
		t->len = 1;	/* index 0 is the empty string */
	at = t->len;
	memcpy(t->s + at, s, strlen(s) + 1);
	t->len += strlen(s) + 1;
	return at;
}

/* Section indexes of the synthetic file. */
enum { SX_NULL, SX_TEXT, SX_TEXT2, SX_SYMTAB, SX_STRTAB, SX_DYNSYM, SX_DYNSTR, SX_NOTE, SX_SHSTR,
       SX__COUNT };

struct ssym { const char *name; int bind, type, shndx; uint64_t value; };

/*
 * Writes an x86-64 ET_DYN file with three PT_LOADs (headers at 0; text at
 * file 0x1000 mapped at 0x5000; text2 at file 0x2000 mapped at 0x8000 with
 * memsz 0x1000), a .symtab placed before .dynsym, and a build-id note of
 * idlen bytes 0, 1, 2, ... (no note when idlen is 0).
 */
static bool write_synth_elf(const char *path, int idlen)
{
	static const struct ssym dyn[] = {
		{ "alpha", STB_GLOBAL, STT_FUNC, SX_TEXT, 0x5010 },
		{ "start_fn", STB_GLOBAL, STT_FUNC, SX_TEXT, 0x5000 },
		{ "last_fn", STB_GLOBAL, STT_FUNC, SX_TEXT, 0x5fff },
		{ "edge_fn", STB_GLOBAL, STT_FUNC, SX_TEXT, 0x6000 },	/* one past text */
		{ "dup", STB_GLOBAL, STT_FUNC, SX_TEXT, 0x5100 },
		{ "far", STB_GLOBAL, STT_FUNC, SX_TEXT2, 0x8100 },
		{ "weak_fn", STB_WEAK, STT_FUNC, SX_TEXT, 0x5400 },
		{ "data_obj", STB_GLOBAL, STT_OBJECT, SX_TEXT, 0x5900 },
		{ "undef_fn", STB_GLOBAL, STT_FUNC, SHN_UNDEF, 0 },
		{ "zero_fn", STB_GLOBAL, STT_FUNC, SX_TEXT, 0 },
		{ "outside", STB_GLOBAL, STT_FUNC, SX_TEXT2, 0x9800 },	/* in no PT_LOAD */
	};
	static const struct ssym loc[] = {
		{ "gamma", STB_LOCAL, STT_FUNC, SX_TEXT, 0x5200 },
		{ "dup", STB_GLOBAL, STT_FUNC, SX_TEXT, 0x5300 },	/* .dynsym's wins */
	};
	struct strtab dynstr = { .len = 0 }, strtab = { .len = 0 }, shstr = { .len = 0 };
	Elf64_Sym dsyms[1 + sizeof(dyn) / sizeof(dyn[0])] = { { 0 } };
	Elf64_Sym lsyms[1 + sizeof(loc) / sizeof(loc[0])] = { { 0 } };
	Elf64_Shdr sh[SX__COUNT] = { { 0 } };
	Elf64_Phdr ph[3] = { { 0 } };
	Elf64_Ehdr eh = { { 0 } };
	struct ebuf e = { 0 };
	uint8_t note[128];
	size_t nlen = 0, off_dynstr, off_dynsym, off_strtab, off_symtab, off_note, off_shstr, off_sh;
	uint32_t names[SX__COUNT];
	FILE *f;
	bool ok;

	for (size_t i = 0; i < sizeof(dyn) / sizeof(dyn[0]); i++)
		dsyms[i + 1] = (Elf64_Sym){ .st_name = st_add(&dynstr, dyn[i].name),
					    .st_info = ELF64_ST_INFO(dyn[i].bind, dyn[i].type),
					    .st_shndx = dyn[i].shndx, .st_value = dyn[i].value,
					    .st_size = 16 };
	for (size_t i = 0; i < sizeof(loc) / sizeof(loc[0]); i++)
		lsyms[i + 1] = (Elf64_Sym){ .st_name = st_add(&strtab, loc[i].name),
					    .st_info = ELF64_ST_INFO(loc[i].bind, loc[i].type),
					    .st_shndx = loc[i].shndx, .st_value = loc[i].value,
					    .st_size = 16 };
	{
		static const char *const sn[SX__COUNT] = { "", ".text", ".text2", ".symtab", ".strtab",
							   ".dynsym", ".dynstr",
							   ".note.gnu.build-id", ".shstrtab" };

		names[0] = 0;
		for (int i = 1; i < SX__COUNT; i++)
			names[i] = st_add(&shstr, sn[i]);
	}
	/* An ABI-tag note first: the reader must skip to the build id. */
	{
		Elf64_Nhdr abi = { 4, 16, NT_GNU_ABI_TAG }, bid = { 4, (Elf64_Word)idlen,
								   NT_GNU_BUILD_ID };
		uint32_t abi_desc[4] = { 0, 3, 2, 0 };

		memcpy(note, &abi, sizeof(abi));
		memcpy(note + 12, "GNU", 4);
		memcpy(note + 16, abi_desc, 16);
		nlen = 32;
		if (idlen) {
			memcpy(note + nlen, &bid, sizeof(bid));
			memcpy(note + nlen + 12, "GNU", 4);
			for (int i = 0; i < idlen; i++)
				note[nlen + 16 + i] = (uint8_t)i;
			nlen += 16 + ((idlen + 3) & ~3);
		}
	}

	eb_put(&e, NULL, 0x2800, 1);	/* headers, text and text2 (zeros) */
	off_dynstr = eb_put(&e, dynstr.s, dynstr.len, 1);
	off_dynsym = eb_put(&e, dsyms, sizeof(dsyms), 8);
	off_strtab = eb_put(&e, strtab.s, strtab.len, 1);
	off_symtab = eb_put(&e, lsyms, sizeof(lsyms), 8);
	off_note = eb_put(&e, note, nlen, 4);
	off_shstr = eb_put(&e, shstr.s, shstr.len, 1);

	sh[SX_TEXT] = (Elf64_Shdr){ names[SX_TEXT], SHT_PROGBITS, SHF_ALLOC | SHF_EXECINSTR, 0x5000,
				    0x1000, 0x1000, 0, 0, 16, 0 };
	sh[SX_TEXT2] = (Elf64_Shdr){ names[SX_TEXT2], SHT_PROGBITS, SHF_ALLOC | SHF_EXECINSTR,
				     0x8000, 0x2000, 0x800, 0, 0, 16, 0 };
	sh[SX_SYMTAB] = (Elf64_Shdr){ names[SX_SYMTAB], SHT_SYMTAB, 0, 0, off_symtab, sizeof(lsyms),
				      SX_STRTAB, 2, 8, sizeof(Elf64_Sym) };
	sh[SX_STRTAB] = (Elf64_Shdr){ names[SX_STRTAB], SHT_STRTAB, 0, 0, off_strtab, strtab.len, 0,
				      0, 1, 0 };
	sh[SX_DYNSYM] = (Elf64_Shdr){ names[SX_DYNSYM], SHT_DYNSYM, SHF_ALLOC, 0, off_dynsym,
				      sizeof(dsyms), SX_DYNSTR, 1, 8, sizeof(Elf64_Sym) };
	sh[SX_DYNSTR] = (Elf64_Shdr){ names[SX_DYNSTR], SHT_STRTAB, SHF_ALLOC, 0, off_dynstr,
				      dynstr.len, 0, 0, 1, 0 };
	sh[SX_NOTE] = (Elf64_Shdr){ names[SX_NOTE], SHT_NOTE, SHF_ALLOC, 0, off_note, nlen, 0, 0, 4,
				    0 };
	sh[SX_SHSTR] = (Elf64_Shdr){ names[SX_SHSTR], SHT_STRTAB, 0, 0, off_shstr, shstr.len, 0, 0,
				     1, 0 };
	off_sh = eb_put(&e, sh, sizeof(sh), 8);

	ph[0] = (Elf64_Phdr){ PT_LOAD, PF_R, 0, 0, 0, 0x400, 0x400, 0x1000 };
	ph[1] = (Elf64_Phdr){ PT_LOAD, PF_R | PF_X, 0x1000, 0x5000, 0x5000, 0x1000, 0x1000, 0x1000 };
	ph[2] = (Elf64_Phdr){ PT_LOAD, PF_R | PF_X, 0x2000, 0x8000, 0x8000, 0x800, 0x1000, 0x1000 };
	memcpy(eh.e_ident, ELFMAG, SELFMAG);
	eh.e_ident[EI_CLASS] = ELFCLASS64;
	eh.e_ident[EI_DATA] = ELFDATA2LSB;
	eh.e_ident[EI_VERSION] = EV_CURRENT;
	eh.e_type = ET_DYN;
	eh.e_machine = EM_X86_64;
	eh.e_version = EV_CURRENT;
	eh.e_phoff = sizeof(eh);
	eh.e_shoff = off_sh;
	eh.e_ehsize = sizeof(eh);
	eh.e_phentsize = sizeof(Elf64_Phdr);
	eh.e_phnum = 3;
	eh.e_shentsize = sizeof(Elf64_Shdr);
	eh.e_shnum = SX__COUNT;
	eh.e_shstrndx = SX_SHSTR;
	if (e.oom) {
		free(e.b);
		return false;
	}
	memcpy(e.b, &eh, sizeof(eh));
	memcpy(e.b + sizeof(eh), ph, sizeof(ph));
	f = fopen(path, "we");
	ok = f && fwrite(e.b, 1, e.len, f) == e.len;
	if (f && fclose(f))
		ok = false;
	free(e.b);
	return ok;
}

static void test_elfsym_synthetic(void)
{
	static const struct { const char *name; uint64_t off; } want[] = {
		{ "alpha", 0x1010 }, { "start_fn", 0x1000 }, { "last_fn", 0x1fff },
		{ "dup", 0x1100 }, { "far", 0x2100 }, { "weak_fn", 0x1400 }, { "gamma", 0x1200 },
	};
	static const char *const absent[] = { "edge_fn", "data_obj", "undef_fn", "zero_fn",
					      "outside", "" };
	char path[PATH_MAX + 32];
	struct elfsym *es;
	size_t bad = 0;

	snprintf(path, sizeof(path), "%s/synth20.so", tmpdir);
	if (!check(write_synth_elf(path, 20), "elfsym: write a synthetic ELF with text at file "
		   "0x1000, address 0x5000"))
		return;
	es = elfsym__open(path);
	if (!check(es != NULL, "elfsym: open the synthetic ELF (errno %d)", es ? 0 : errno))
		return;
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		uint64_t off = 0;
		int r = elfsym__offset(es, want[i].name, &off);

		if (!check(r == 0 && off == want[i].off,
			   "elfsym: synthetic %s at file offset 0x%" PRIx64 " (address minus the "
			   "segment's p_vaddr plus p_offset)", want[i].name, want[i].off))
			printf("#   got %d 0x%" PRIx64 "\n", r, off);
	}
	for (size_t i = 0; i < sizeof(absent) / sizeof(absent[0]); i++) {
		uint64_t off;

		if (elfsym__offset(es, absent[i], &off) != -ENOENT) {
			printf("#   %s resolved to 0x%" PRIx64 "\n", absent[i], off);
			bad++;
		}
	}
	check(bad == 0, "elfsym: past-the-segment, data, undefined, zero-valued and unmapped "
	      "symbols give -ENOENT");
	check(elfsym__count(es) == 7, "elfsym: 7 distinct function symbols counted, the .symtab "
	      "duplicate of a .dynsym name not again (%zu)", elfsym__count(es));
	check(!strcmp(elfsym__build_id(es), "000102030405060708090a0b0c0d0e0f10111213"),
	      "elfsym: 20-byte build id after an ABI-tag note, as lowercase hex (%s)",
	      elfsym__build_id(es));
	elfsym__close(es);

	snprintf(path, sizeof(path), "%s/synth16.so", tmpdir);
	es = write_synth_elf(path, 16) ? elfsym__open(path) : NULL;
	check(es && !strcmp(elfsym__build_id(es), "000102030405060708090a0b0c0d0e0f"),
	      "elfsym: a 16-byte build id gives 32 hex digits (%s)", es ? elfsym__build_id(es) : "-");
	elfsym__close(es);
	snprintf(path, sizeof(path), "%s/synth0.so", tmpdir);
	es = write_synth_elf(path, 0) ? elfsym__open(path) : NULL;
	check(es && !strcmp(elfsym__build_id(es), ""), "elfsym: no build-id note gives \"\"");
	elfsym__close(es);
}

static void test_elfsym_self(void)
{
	struct elfsym *es = elfsym__open("/proc/self/exe");
	uint64_t off = 0;
	int r;

	if (!check(es != NULL, "elfsym: open our own executable"))
		return;
	/* main() is in .symtab only: the kernel's mapping says where it is. */
	r = elfsym__offset(es, "main", &off);
	check(main_file_offset && r == 0 && off == main_file_offset,
	      "elfsym: main() at file offset 0x%" PRIx64 ", where /proc/self/maps puts it (0x%" PRIx64
	      ")", off, main_file_offset);
	elfsym__close(es);
}

static void test_elfsym_errors(void)
{
	char path[PATH_MAX + 32];
	struct elfsym *es;
	FILE *f;

	snprintf(path, sizeof(path), "%s/not-elf.txt", tmpdir);
	f = fopen(path, "we");
	if (f) {
		fputs("this is not an ELF file, just some text that is long enough\n", f);
		fclose(f);
	}
	errno = 0;
	es = elfsym__open(path);
	check(!es && errno != 0, "elfsym: a text file fails with errno set (%s)", strerror(errno));
	elfsym__close(es);
	snprintf(path, sizeof(path), "%s/empty", tmpdir);
	f = fopen(path, "we");
	if (f)
		fclose(f);
	errno = 0;
	es = elfsym__open(path);
	check(!es && errno != 0, "elfsym: an empty file fails with errno set (%s)", strerror(errno));
	elfsym__close(es);
	errno = 0;
	es = elfsym__open("/nonexistent/libcuda.so.1");
	check(!es && errno == ENOENT, "elfsym: a missing file fails with ENOENT");
	elfsym__close(NULL);	/* must be a no-op: a crash here fails the run */
	errno = 0;
	es = elfsym__open(tmpdir);
	check(!es && errno != 0, "elfsym: a directory fails with errno set (%s); close(NULL) is "
	      "a no-op", strerror(errno));
}

/* ================================================================ cuda */

static void test_cookie(void)
{
	static const struct {
		int func, kind, stash, str_arg;	/* str_arg: argument index, -1 none */
	} cases[] = {
		{ CU_FN_cuLaunchKernel, PK_STACK3, 0, -1 },
		{ CU_FN_cuLaunchKernel_ptsz, PK_STACK3, 0, -1 },
		{ CU_FN_cuLaunchCooperativeKernel, PK_STACK3, 0, -1 },
		{ CU_FN_cuLaunchKernelEx, PK_DEREF_A0, 0, -1 },
		{ CU_FN_cuLaunchKernelEx_ptsz, PK_DEREF_A0, 0, -1 },
		{ CU_FN_cuMemAlloc_v2, PK_REGS, 1, -1 },
		{ CU_FN_cuMemAllocAsync, PK_REGS, 1, -1 },
		{ CU_FN_cuMemHostAlloc, PK_REGS, 1, -1 },
		{ CU_FN_cuModuleGetFunction, PK_REGS, 1, 2 },
		{ CU_FN_cuLibraryGetKernel, PK_REGS, 1, 2 },
		{ CU_FN_cuModuleLoad, PK_REGS, 1, 1 },
		{ CU_FN_cuLibraryLoadFromFile, PK_REGS, 1, 1 },
		{ CU_FN_cuModuleLoadData, PK_REGS, 1, -1 },
		{ CU_FN_cuCtxCreate_v2, PK_REGS, 1, -1 },
		{ CU_FN_cuStreamCreate, PK_REGS, 1, -1 },
		{ CU_FN_cuKernelGetFunction, PK_REGS, 1, -1 },
		{ CU_FN_cuInit, PK_REGS, 0, -1 },
		{ CU_FN_cuMemFree_v2, PK_REGS, 0, -1 },
		{ CU_FN_cuMemcpyHtoDAsync_v2, PK_REGS, 0, -1 },
		{ CU_FN_cuEventSynchronize, PK_REGS, 0, -1 },
	};
	size_t bad = 0;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		uint64_t c = cuda__cookie(cases[i].func);
		int want_str = cases[i].str_arg < 0 ? 0 : cases[i].str_arg + 1;

		if (!check(CK_FUNC(c) == (uint32_t)cases[i].func && CK_LIB(c) == LIB_CUDA &&
			   CK_KIND(c) == (uint32_t)cases[i].kind &&
			   !!(c & CK_STASH) == cases[i].stash && CK_STR(c) == (uint32_t)want_str &&
			   (c >> 28) == 0,
			   "cuda: cookie of %s: probe kind %d, %s, %s%.0d", cuda_funcs[cases[i].func].name,
			   cases[i].kind, cases[i].stash ? "stash" : "no stash",
			   cases[i].str_arg < 0 ? "no string argument" : "string argument ",
			   cases[i].str_arg < 0 ? 0 : cases[i].str_arg))
			printf("#   cookie 0x%" PRIx64 ": func %u lib %u kind %u stash %d str %u\n", c,
			       CK_FUNC(c), CK_LIB(c), CK_KIND(c), !!(c & CK_STASH), CK_STR(c));
	}
	/* Every function: its own id, the CUDA library, no stray bits, and a
	 * string argument exactly when the table marks one. */
	for (int f = 0; f < CU_FN__COUNT; f++) {
		uint64_t c = cuda__cookie(f);
		bool str = cuda_funcs[f].flags & (CU_F_STR1 | CU_F_STR2);

		if (CK_FUNC(c) != (uint32_t)f || CK_LIB(c) != LIB_CUDA || (c >> 28) ||
		    CK_KIND(c) > PK_DEREF_A0 || (CK_STR(c) != 0) != str)
			bad++;
	}
	check(bad == 0, "cuda: cookies of all %d functions decode to their own id and library",
	      CU_FN__COUNT);
	bad = 0;
	for (int f = 0; f < CU_FN__COUNT; f++)
		if (!cuda_funcs[f].name || strncmp(cuda_funcs[f].name, "cu", 2))
			bad++;
	check(bad == 0 && !strcmp(cuda_funcs[CU_FN_cuMemAlloc_v2].name, "cuMemAlloc_v2"),
	      "cuda: cuda_funcs[] names are the exported symbol names, indexed by id");
}

static void test_demangle(void)
{
	/* Expected strings are what binutils' c++filt prints for each name. */
	static const struct { const char *in, *out; } cases[] = {
		{ "_Z6vecAddPfS_S_i", "vecAdd(float*, float*, float*, int)" },
		{ "_Z10matmul_f16ILi128EEvPK6__halfS2_PS0_iii",
		  "void matmul_f16<128>(__half const*, __half const*, __half*, int, int, int)" },
		{ "_ZN7cutlass6KernelINS_4gemm6kernel4GemmIiEEEEvNT_6ParamsE",
		  "void cutlass::Kernel<cutlass::gemm::kernel::Gemm<int> >(cutlass::gemm::kernel::Gemm<int>::Params)" },
		{ "_ZNSt6vectorIiSaIiEE9push_backERKi",
		  "std::vector<int, std::allocator<int> >::push_back(int const&)" },
		{ "_Z3foov", "foo()" },
	};
	static const char *const plain[] = { "vector_add", "cuLaunchKernel", "_Zbogus", "_Z", "_", "" };

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *d = symbolizer__demangle_dup(cases[i].in);

		if (!check(d && !strcmp(d, cases[i].out), "demangle %s is c++filt's \"%s\"",
			   cases[i].in, cases[i].out))
			printf("#   got \"%s\"\n", d ? d : "(null)");
		free(d);
	}
	for (size_t i = 0; i < sizeof(plain) / sizeof(plain[0]); i++) {
		char *d = symbolizer__demangle_dup(plain[i]);

		/* A copy the caller frees: not the argument itself. */
		check(d && d != plain[i] && !strcmp(d, plain[i]),
		      "demangle of \"%s\" (not a mangled C++ name) is a copy of it", plain[i]);
		free(d);
	}
}

static void test_result_name(void)
{
	/* Values from NVIDIA's cuda.h (CUDA 13.0). */
	static const struct { int64_t code; const char *name; } cases[] = {
		{ 1, "CUDA_ERROR_INVALID_VALUE" }, { 2, "CUDA_ERROR_OUT_OF_MEMORY" },
		{ 3, "CUDA_ERROR_NOT_INITIALIZED" }, { 100, "CUDA_ERROR_NO_DEVICE" },
		{ 201, "CUDA_ERROR_INVALID_CONTEXT" }, { 400, "CUDA_ERROR_INVALID_HANDLE" },
		{ 500, "CUDA_ERROR_NOT_FOUND" }, { 700, "CUDA_ERROR_ILLEGAL_ADDRESS" },
		{ 702, "CUDA_ERROR_LAUNCH_TIMEOUT" }, { 719, "CUDA_ERROR_LAUNCH_FAILED" },
		{ 999, "CUDA_ERROR_UNKNOWN" },
	};
	static const int64_t unknown[] = { 0, -1, 5, 501, 12345, (int64_t)1 << 32 | 500, INT64_MIN };
	size_t bad = 0;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const char *n = cuda__result_name(cases[i].code);

		if (!n || strcmp(n, cases[i].name)) {
			printf("#   %" PRId64 ": got %s\n", cases[i].code, n ? n : "NULL");
			bad++;
		}
	}
	check(!strcmp(cuda__result_name(500) ? cuda__result_name(500) : "", "CUDA_ERROR_NOT_FOUND"),
	      "cuda: result name of 500 is CUDA_ERROR_NOT_FOUND");
	check(bad == 0, "cuda: result names of %zu codes match NVIDIA's cuda.h",
	      sizeof(cases) / sizeof(cases[0]));
	bad = 0;
	for (size_t i = 0; i < sizeof(unknown) / sizeof(unknown[0]); i++)
		if (cuda__result_name(unknown[i]))
			bad++;
	check(bad == 0, "cuda: unknown codes (0, -1, 5, 501, 12345, 2^32+500, INT64_MIN) give NULL");
}

/* ================================================================ outfile */

static char *in_tmp(char *buf, size_t len, const char *name)
{
	snprintf(buf, len, "%s/%s", tmpdir, name);
	return buf;
}

static bool mode_owner(const char *path, mode_t mode, uid_t uid, gid_t gid)
{
	struct stat st;

	return !lstat(path, &st) && S_ISREG(st.st_mode) && (st.st_mode & 07777) == mode && st.st_uid == uid && st.st_gid == gid;
}

/* What outfile__create does to what lies at the path: expected values from
 * lstat and from reading the files back, not from the module. */
static void test_outfile_kinds(void)
{
	char p[PATH_MAX + 32], q[PATH_MAX + 32];
	mode_t um = umask(022);
	struct stat before, after;
	int fd, old, err;
	char buf[16] = { 0 };

	/* The environment of `sudo make test` must not change what is checked. */
	unsetenv("SUDO_UID");
	unsetenv("SUDO_GID");
	fd = outfile__create(AT_FDCWD, in_tmp(p, sizeof(p), "o-new"), OUTFILE_MODE);
	check(fd >= 0 && mode_owner(p, 0640, geteuid(), getegid()),
	      "outfile: a new file is 0640 under umask 022, cgbpf's own (fd %d)", fd);
	if (fd >= 0)
		close(fd);
	umask(077);
	unlink(p);
	fd = outfile__create(AT_FDCWD, p, OUTFILE_MODE);
	check(fd >= 0 && mode_owner(p, 0600, geteuid(), getegid()),
	      "outfile: umask 077 tightens it to 0600");
	if (fd >= 0)
		close(fd);
	umask(022);

	/* A regular file there, held open by "another user": replaced by a
	 * new inode; the holder never sees the new contents. */
	old = open(in_tmp(p, sizeof(p), "o-old"), O_RDWR | O_CREAT | O_TRUNC, 0666);
	if (old >= 0 && write(old, "secret", 6) == 6)
		fchmod(old, 0666);
	stat(p, &before);
	fd = outfile__create(AT_FDCWD, p, OUTFILE_MODE);
	if (fd >= 0) {
		if (write(fd, "trace", 5) != 5)
			fd = -1;
		close(fd);
	}
	stat(p, &after);
	check(fd >= 0 && after.st_ino != before.st_ino && mode_owner(p, 0640, geteuid(), getegid()),
	      "outfile: an existing file is replaced by a new one (inode %lu -> %lu), 0640 not 0666",
	      (unsigned long)before.st_ino, (unsigned long)after.st_ino);
	check(old >= 0 && pread(old, buf, sizeof(buf) - 1, 0) == 6 && !strcmp(buf, "secret"),
	      "outfile: whoever held the old file open still reads the old bytes (%s)", buf);
	if (old >= 0)
		close(old);

	/* A symbolic link, to a file or dangling: refused, the target untouched. */
	in_tmp(q, sizeof(q), "o-target");
	old = open(q, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (old >= 0) {
		if (write(old, "keep", 4) != 4)
			check(false, "outfile: writing the link target");
		close(old);
	}
	if (symlink(q, in_tmp(p, sizeof(p), "o-link")))
		check(false, "outfile: making a link: %s", strerror(errno));
	err = outfile__create(AT_FDCWD, p, OUTFILE_MODE);
	check(err == -ELOOP && !stat(q, &after) && after.st_size == 4,
	      "outfile: a link to a file is refused with -ELOOP, its target untouched (%d)", err);
	if (err >= 0)
		close(err);
	if (symlink(in_tmp(q, sizeof(q), "o-nowhere"), in_tmp(p, sizeof(p), "o-dangling")))
		check(false, "outfile: making a dangling link: %s", strerror(errno));
	err = outfile__create(AT_FDCWD, p, OUTFILE_MODE);
	check(err == -ELOOP && access(q, F_OK) && errno == ENOENT,
	      "outfile: a dangling link is refused too, nothing created where it points (%d)", err);
	if (err >= 0)
		close(err);
	check(strstr(outfile__strerror(-ELOOP), "symbolic link") != NULL,
	      "outfile: the link error says so in words");

	/* Other kinds of files. */
	err = outfile__create(AT_FDCWD, tmpdir, OUTFILE_MODE);
	check(err == -EISDIR, "outfile: a directory: -EISDIR (%d)", err);
	mkfifo(in_tmp(p, sizeof(p), "o-fifo"), 0600);
	err = outfile__create(AT_FDCWD, p, OUTFILE_MODE);
	check(err == -EINVAL, "outfile: a FIFO: -EINVAL, and no hang opening it (%d)", err);
	err = outfile__create(AT_FDCWD, "/dev/null", OUTFILE_MODE);
	check(err == -EINVAL && !access("/dev/null", W_OK),
	      "outfile: /dev/null: -EINVAL, and still there (%d)", err);
	err = outfile__create(AT_FDCWD, in_tmp(p, sizeof(p), "o-no/such"), OUTFILE_MODE);
	check(err == -ENOENT, "outfile: a missing directory: -ENOENT (%d)", err);

	/* Relative to a directory descriptor. */
	old = open(tmpdir, O_PATH | O_DIRECTORY);
	fd = old < 0 ? -1 : outfile__create(old, "o-at", OUTFILE_PRIVATE_MODE);
	check(fd >= 0 && mode_owner(in_tmp(p, sizeof(p), "o-at"), 0600, geteuid(), getegid()),
	      "outfile: created relative to a directory fd, 0600");
	if (fd >= 0)
		close(fd);
	if (old >= 0)
		close(old);

	/* discard: removes the file it created, not one put in its place. */
	fd = outfile__create(AT_FDCWD, in_tmp(p, sizeof(p), "o-gone"), OUTFILE_MODE);
	err = fd < 0 ? fd : outfile__discard(fd, p);
	check(!err && access(p, F_OK) && errno == ENOENT, "outfile: discard removes its file (%d)",
	      err);
	if (fd >= 0)
		close(fd);
	fd = outfile__create(AT_FDCWD, p, OUTFILE_MODE);
	if (fd >= 0) {
		unlink(p);
		old = open(p, O_WRONLY | O_CREAT | O_EXCL, 0600);
		err = outfile__discard(fd, p);
		check(err == -ESTALE && !access(p, F_OK),
		      "outfile: discard leaves another file at the path alone (%d)", err);
		close(fd);
		if (old >= 0)
			close(old);
		unlink(p);
	}

	/* mkdir: made with its mode; an existing directory left as it is; a
	 * file in the way is -ENOTDIR. */
	err = outfile__mkdir(in_tmp(p, sizeof(p), "o-dir"), OUTDIR_PRIVATE_MODE);
	check(!err && !stat(p, &after) && S_ISDIR(after.st_mode) && (after.st_mode & 07777) == 0700,
	      "outfile: mkdir makes a 0700 directory (%d)", err);
	chmod(p, 0755);
	err = outfile__mkdir(p, OUTDIR_PRIVATE_MODE);
	check(!err && !stat(p, &after) && (after.st_mode & 07777) == 0755,
	      "outfile: mkdir leaves an existing directory's mode alone (%d)", err);
	err = outfile__mkdir(in_tmp(p, sizeof(p), "o-new"), OUTDIR_PRIVATE_MODE);
	check(err == -ENOTDIR, "outfile: mkdir where a file is: -ENOTDIR (%d)", err);
	umask(um);
}

/* Under sudo (root, SUDO_UID/SUDO_GID): files and a new directory are the
 * user's. Run in children: the variables are read once per process. */
static int sudo_child(const char *uid, const char *gid, const char *file, const char *dir)
{
	pid_t pid = fork();
	int st;

	if (pid == 0) {
		int fd;

		setenv("SUDO_UID", uid, 1);
		setenv("SUDO_GID", gid, 1);
		umask(022);
		fd = outfile__create(AT_FDCWD, file, OUTFILE_MODE);
		if (fd < 0)
			_exit(2);
		close(fd);
		_exit(dir && outfile__mkdir(dir, OUTDIR_PRIVATE_MODE) ? 3 : 0);
	}
	if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st))
		return -1;
	return WEXITSTATUS(st);
}

static void test_outfile_sudo(void)
{
	char p[PATH_MAX + 32], d[PATH_MAX + 32];
	struct stat st;
	int rc;

	if (geteuid() != 0) {
		skip("outfile: giving files to the sudo user needs root");
		return;
	}
	rc = sudo_child("65534", "65534", in_tmp(p, sizeof(p), "o-sudo"),
			in_tmp(d, sizeof(d), "o-sudodir"));
	check(rc == 0 && mode_owner(p, 0640, 65534, 65534),
	      "outfile: under sudo (SUDO_UID=65534) a new file is 0640 65534:65534 (rc %d)", rc);
	check(!stat(d, &st) && st.st_uid == 65534 && st.st_gid == 65534 &&
	      (st.st_mode & 07777) == 0700, "outfile: and a new directory 0700 65534:65534");
	/* The existing directory is not given away again, nor is a file
	 * replaced by another user's wish: it is a new file, the user's. */
	if (chown(d, 0, 0))
		check(false, "outfile: chown %s: %s", d, strerror(errno));
	rc = sudo_child("1000", "1000", p, d);
	check(rc == 0 && mode_owner(p, 0640, 1000, 1000) && !stat(d, &st) && st.st_uid == 0,
	      "outfile: the file replaced is the new sudo user's; an existing directory is not "
	      "(rc %d)", rc);
	/* Garbage in SUDO_UID: a warning, the file stays root's. */
	const char *bad[] = { "", "abc", "-1", "4294967295", "12x" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		rc = sudo_child(bad[i], "65534", p, NULL);
		check(rc == 0 && mode_owner(p, 0640, 0, 0),
		      "outfile: SUDO_UID='%s' is ignored: root's file (rc %d)", bad[i], rc);
	}
	rc = sudo_child("0", "0", p, NULL);
	check(rc == 0 && mode_owner(p, 0640, 0, 0), "outfile: SUDO_UID=0: root's file");
}

/* ================================================================ main */

static void rm_tmpdir(void)
{
	static const char *const files[] = { "synth20.so", "synth16.so", "synth0.so", "not-elf.txt",
					     "empty", "o-new", "o-old", "o-target", "o-link",
					     "o-dangling", "o-fifo", "o-at", "o-sudo" };
	static const char *const dirs[] = { "o-dir", "o-sudodir" };
	char path[PATH_MAX + 32];

	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s", tmpdir, files[i]);
		unlink(path);
	}
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s", tmpdir, dirs[i]);
		rmdir(path);
	}
	rmdir(tmpdir);
}

/* The hang watcher: a plugin-side communicator whose rank 1 never
 * enters is said once past the limit; a rank the host side watches is
 * not watched again from the plugin's entries; an operation every rank
 * entered is done. */
static void test_hangwatch(void)
{
	const uint64_t s = 1000000000ull;
	uint32_t me = (uint32_t)getpid();
	struct model m;
	struct hangwatch *h;

	model__init(&m);
	h = hangwatch__new(&m, 2 * s);
	check(h != NULL, "hangwatch__new");
	/* Plugin side, 2 ranks: both entered #1; only rank 0 entered #2. */
	hangwatch__learn(h, HW_PLUGIN, 0xabcd000000000001ull, 2, 1, me);
	hangwatch__enter(h, HW_PLUGIN, 0xabcd000000000001ull, 2, 0, me, 1, -1, -1, "ncclAllReduce",
			 8, 10 * s);
	hangwatch__enter(h, HW_PLUGIN, 0xabcd000000000001ull, 2, 1, me, 1, -1, -1, "ncclAllReduce",
			 8, 10 * s + 5);
	hangwatch__enter(h, HW_PLUGIN, 0xabcd000000000001ull, 2, 0, me, 2, -1, -1, "ncclAllReduce",
			 8, 11 * s);
	/* Host side knows pid 4242's rank 0 of 2: the plugin's copy of that
	 * rank (another id) is left alone, so its op never opens. */
	hangwatch__learn(h, HW_HOST, 0x1111000000000002ull, 2, 0, 4242);
	hangwatch__enter(h, HW_PLUGIN, 0x2222000000000003ull, 2, 0, 4242, 1, -1, -1,
			 "ncclAllReduce", 8, 11 * s);
	check(hangwatch__tick(h, 12 * s) == 0, "nothing said before the limit");
	check(hangwatch__tick(h, 14 * s) == 1, "the plugin side's operation #2 said past the limit");
	check(hangwatch__tick(h, 20 * s) == 0 && hangwatch__said(h) == 1,
	      "said once; the host side's rank not watched twice (%" PRIu64 ")", hangwatch__said(h));
	/* A send/receive pair to itself is not watched (slots unknown). */
	hangwatch__enter(h, HW_PLUGIN, 0xabcd000000000001ull, 2, 0, me, 7, 0, 0, "ncclSend", 8,
			 21 * s);
	check(hangwatch__tick(h, 30 * s) == 0, "a send to itself is not watched");
	/* Rank 1 was seen entering #6 but not #5 (it entered it before the
	 * capture): #5 is not a hang. */
	hangwatch__learn(h, HW_PLUGIN, 0xbeef000000000004ull, 2, 1, me);
	hangwatch__enter(h, HW_PLUGIN, 0xbeef000000000004ull, 2, 0, me, 5, -1, -1,
			 "ncclAllReduce", 8, 31 * s);
	hangwatch__enter(h, HW_PLUGIN, 0xbeef000000000004ull, 2, 1, me, 6, -1, -1,
			 "ncclAllReduce", 8, 31 * s);
	hangwatch__enter(h, HW_PLUGIN, 0xbeef000000000004ull, 2, 0, me, 6, -1, -1,
			 "ncclAllReduce", 8, 31 * s);
	check(hangwatch__tick(h, 40 * s) == 0 && hangwatch__said(h) == 1,
	      "an operation the missing rank is past is not said (%" PRIu64 ")",
	      hangwatch__said(h));
	hangwatch__free(h);
	model__free(&m);
}

int main(int argc, char **argv)
{
	sources__init();
	const char *t = getenv("TMPDIR");

	/* Keep the ok/not ok lines in order with sanitizer reports on stderr,
	 * and out of the buffers forked children would flush again. */
	setvbuf(stdout, NULL, _IOLBF, 0);
	g_argc = argc;
	g_argv = argv;
	snprintf(tmpdir, sizeof(tmpdir), "%s/test_core.XXXXXX", t && *t ? t : "/tmp");
	if (!mkdtemp(tmpdir)) {
		printf("not ok 1 - cannot create a temporary directory: %s\n", strerror(errno));
		printf("0 passed, 1 failed\n");
		return 1;
	}

	test_hmap_basic();
	test_hmap_growth();
	test_hmap_tombstones();
	test_hash();
	test_stats();
	test_parse_maps();
	test_for_each_map();
	test_comm_cmdline();
	test_alive();
	test_descendants();
	test_elfsym_libcuda();
	test_elfsym_synthetic();
	test_elfsym_self();
	test_elfsym_errors();
	test_cookie();
	test_demangle();
	test_result_name();
	test_outfile_sudo();
	test_outfile_kinds();
	test_hangwatch();

	rm_tmpdir();
	printf("%d passed, %d failed\n", n_pass, n_fail);
	return n_fail ? 1 : 0;
}
