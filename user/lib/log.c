// SPDX-License-Identifier: MIT
/*
 * lib/: small helpers that know nothing of captures: hash map (hmap),
 * protobuf encoding (pb), JSON (jsonw), messages (log), /proc (procfs),
 * the metrics endpoint's HTTP (http), output files and their names
 * (outfile, outname), statistics and tables (stats, sumtab). lib/elf/
 * sits on it. They include nothing of cgbpf above them.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <bpf/libbpf.h>
#include "lib/log.h"

int log_verbosity = LOG_INFO;

void log__msg(enum log_level lvl, const char *fmt, ...)
{
	static const char *const tag[] = { "error: ", "warning: ", "", "debug: " };
	va_list ap;

	if ((int)lvl > log_verbosity)
		return;
	fprintf(stderr, "cgbpf: %s", tag[lvl]);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

static int libbpf_print(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	if (level == LIBBPF_DEBUG && log_verbosity < LOG_DEBUG)
		return 0;
	if (level == LIBBPF_INFO && log_verbosity < LOG_DEBUG)
		return 0;
	if (log_verbosity < LOG_DEBUG) {
		char buf[512];
		va_list aq;
		int n;

		/* A probe on a process that exited meanwhile: cgbpf says
		 * what that cost in its own words, libbpf's line is noise. */
		va_copy(aq, ap);
		n = vsnprintf(buf, sizeof(buf), fmt, aq);
		va_end(aq);
		if (n > 0 && (size_t)n < sizeof(buf) && strstr(buf, ": No such process\n"))
			return 0;
	}
	/* libbpf's own messages mostly start with "libbpf: " already. */
	if (strncmp(fmt, "libbpf: ", 8))
		fputs("libbpf: ", stderr);
	return vfprintf(stderr, fmt, ap);
}

void log__hook_libbpf(void)
{
	libbpf_set_print(libbpf_print);
}
