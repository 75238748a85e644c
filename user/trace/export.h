/* SPDX-License-Identifier: MIT */
/* `cgbpf export`: a saved trace in another tool's format (docs/export.md). */
#ifndef CGBPF_EXPORT_H
#define CGBPF_EXPORT_H

#include <stddef.h>
#include <stdio.h>

/* The export command; argv[0] is "export". Returns the exit status: 0, 1
 * when an output could not be written, 2 for usage errors and inputs that
 * are not cgbpf traces (after a message saying which). */
int export__main(int argc, char **argv);

/* The export of a trace in memory (every process, no --pid), each
 * process's document written to out one after the other: what the
 * fuzzer runs. Returns the exit status export__main would. */
int export__mem(const void *buf, size_t len, FILE *out);

#endif
