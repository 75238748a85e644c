/* SPDX-License-Identifier: MIT */
/* `cgbpf merge`: traces of several hosts into one, one Perfetto machine each. */
#ifndef CGBPF_MERGE_H
#define CGBPF_MERGE_H

/* Merges n cgbpf traces into output (written only on success); returns
 * the process exit code, after messages saying what went wrong. */
int merge__run(const char *const *paths, int n, const char *output);

#endif
