/* SPDX-License-Identifier: MIT */
/* `cgbpf record`: one bounded capture into a trace file and a summary. */
#ifndef CGBPF_RECORD_H
#define CGBPF_RECORD_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include "core/opts.h"

/* Runs a capture; returns the process exit code (0 success; with -- CMD,
 * the command's own exit code when the capture itself succeeded). */
int record__run(const struct record_opts *o);

#endif
