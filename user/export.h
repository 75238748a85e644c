/* SPDX-License-Identifier: MIT */
/* `cgbpf export`: a saved trace in another tool's format (docs/export.md). */
#ifndef CGBPF_EXPORT_H
#define CGBPF_EXPORT_H

/* The export command; argv[0] is "export". Returns the exit status: 0, 1
 * when an output could not be written, 2 for usage errors and inputs that
 * are not cgbpf traces (after a message saying which). */
int export__main(int argc, char **argv);

#endif
