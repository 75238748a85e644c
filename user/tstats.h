/* SPDX-License-Identifier: MIT */
/*
 * cgbpf stats: the summary tables `cgbpf record` prints, computed from
 * saved traces (user/tread.h) and printed by the same code
 * (user/sumtab.h).
 */
#ifndef CGBPF_TSTATS_H
#define CGBPF_TSTATS_H

/* The command: argv[0] is "stats". Returns the exit status (0, 1 when a
 * trace cannot be read or a file written, 2 on a usage error). */
int tstats__main(int argc, char **argv);

#endif
