/* SPDX-License-Identifier: MIT */
/* `cgbpf check`: can cgbpf resolve and probe these functions in a library? */
#ifndef CGBPF_CHECK_H
#define CGBPF_CHECK_H

#include <stdbool.h>

/* Resolves names (or, when n is 0, the CUDA driver table) in path,
 * prints "name offset" lines, and with attach also attaches and detaches
 * real entry and return probes. Returns the exit code. */
int check__run(const char *path, char **names, int n, bool attach);

#endif
