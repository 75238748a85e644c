/* SPDX-License-Identifier: MIT */
/* One logging module: messages go to stderr prefixed with "cgbpf: ". */
#ifndef CGBPF_LOG_H
#define CGBPF_LOG_H

enum log_level { LOG_ERR, LOG_WARN, LOG_INFO, LOG_DEBUG };

extern int log_verbosity;	/* messages above this level are dropped */

/* Prints a printf-style message at a level. */
void log__msg(enum log_level lvl, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define err(...) log__msg(LOG_ERR, __VA_ARGS__)
#define warn(...) log__msg(LOG_WARN, __VA_ARGS__)
#define info(...) log__msg(LOG_INFO, __VA_ARGS__)
#define dbg(...) log__msg(LOG_DEBUG, __VA_ARGS__)

/* Routes libbpf's messages through this module (debug ones only with -v). */
void log__hook_libbpf(void);

#endif
