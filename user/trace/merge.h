/* SPDX-License-Identifier: MIT */
/* `cgbpf merge`: traces of several hosts into one, one Perfetto machine each. */
#ifndef CGBPF_MERGE_H
#define CGBPF_MERGE_H

#include <stdint.h>
#include <stdio.h>

/* Merges n cgbpf traces into output (written only on success); returns
 * the process exit code, after messages saying what went wrong. */
int merge__run(const char *const *paths, int n, const char *output);

/* The merge itself, on open streams: n inputs (names for messages, the
 * first the host), read from their start and rewound once, written to out
 * as one trace. 0, or -errno after a message saying what was wrong; out
 * then holds a partial trace. *npackets (may be NULL): packets merged. */
int merge__streams(FILE *const *in, const char *const *names, int n, FILE *out,
		   uint64_t *npackets);

#endif
