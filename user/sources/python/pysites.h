/* SPDX-License-Identifier: MIT */
/*
 * `cgbpf monitor --python-sites N` (issue 12): per process, the API calls
 * and time of each Python call site ("file:line function"), estimated from
 * sampled calls (bpf/pysites_rec.h), in a table of bounded size, exported
 * as metrics labelled with the N sites of most API time and site="other"
 * for the rest. See docs/monitor.md, "Python call sites".
 */
#ifndef CGBPF_PYSITES_H
#define CGBPF_PYSITES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PYSITES_TOP_MAX 100	/* --python-sites N: at most this */
#define PYSITES_SAMPLE_DEFAULT 16	/* --python-site-sample */
#define PYSITES_SAMPLE_MAX 65536
#define PYSITES_CAP_MIN 64	/* sites tracked per process: 8 x N, within these */
#define PYSITES_CAP_MAX 1024

struct pysites;

/* A table that names top sites per process and tracks at most
 * pysites__cap(top) per process. NULL on ENOMEM. */
struct pysites *pysites__new(unsigned top);
void pysites__free(struct pysites *ps);

/* Sites tracked per process for --python-sites top. */
unsigned pysites__cap(unsigned top);

/* Counts calls and ns (estimates: a sample times its weight) at site of
 * pid (NULL: a call whose site is not known, counted as "other"). Past the cap, the site of least time goes (its counts to "other").
 * 0 or -ENOMEM. */
int pysites__add(struct pysites *ps, uint32_t pid, const char *site, uint64_t calls,
		 uint64_t ns);

/* Forgets each process alive() says is gone at two sweeps in a row (its
 * metrics stay one sweep after its exit). */
void pysites__sweep(struct pysites *ps, bool (*alive)(uint32_t pid));

/* Writes the metrics (Prometheus text format) by calling out(ctx, text)
 * for each line; comm(ctx, pid, buf, len) gives a process's escaped name. */
void pysites__render(const struct pysites *ps,
		     void (*out)(void *ctx, const char *line),
		     void (*comm)(void *ctx, uint32_t pid, char *buf, size_t len), void *ctx);

#endif
