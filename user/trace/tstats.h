/* SPDX-License-Identifier: MIT */
/*
 * cgbpf stats: the summary tables `cgbpf record` prints, computed from
 * saved traces (user/trace/tread.h) and printed by the same code
 * (user/lib/sumtab.h).
 */
#ifndef CGBPF_TSTATS_H
#define CGBPF_TSTATS_H

#include <stddef.h>
#include <stdio.h>

/* The command: argv[0] is "stats". Returns the exit status (0, 1 when a
 * trace cannot be read or a file written, 2 on a usage error). */
int tstats__main(int argc, char **argv);

/* Every table of the trace in buf, in format fmt (enum sumtab_fmt), to
 * f: what the command computes, for the fuzzer. 0 or -errno. */
int tstats__mem(const void *buf, size_t len, int fmt, FILE *f);

#endif
