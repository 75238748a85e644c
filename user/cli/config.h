/* SPDX-License-Identifier: MIT */
/*
 * `cgbpf monitor --config FILE`: options one per line, as on the command
 * line without the dashes ("listen 127.0.0.1:9464", "flight-recorder =
 * 30s"), '#' starting a comment. The file is parsed into an argv that the
 * command line's own option parser then reads, so both accept exactly the
 * same options and values.
 */
#ifndef CGBPF_CONFIG_H
#define CGBPF_CONFIG_H

#include <stddef.h>

/* The largest config file read (a handful of options is what it holds). */
#define CONFIG_MAX_BYTES (1u << 20)
/* The longest line. */
#define CONFIG_MAX_LINE 4096

/*
 * Parses len bytes of config text into *argv ("monitor", then "--KEY" and
 * "VALUE" per option line, NULL-ended) and *argc. 0, or -EINVAL with a
 * message naming the line in msg (a NUL byte, a line over CONFIG_MAX_LINE,
 * a key that is not an option name), -ENOMEM, -EFBIG over
 * CONFIG_MAX_BYTES. Free *argv with config__free.
 */
int config__parse(const char *text, size_t len, char ***argv, int *argc, char *msg,
		  size_t msglen);
/* Frees what config__parse returned; accepts NULL. */
void config__free(char **argv, int argc);
/* Reads and parses path (at most CONFIG_MAX_BYTES); as config__parse,
 * with -errno of the read too. */
int config__read(const char *path, char ***argv, int *argc, char *msg, size_t msglen);

#endif
