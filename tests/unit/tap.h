/* SPDX-License-Identifier: MIT */
/* Result lines shared by the unit tests: "ok N - what" / "not ok N - what";
 * each test's main() prints the closing "N passed, M failed". */
#ifndef CGBPF_TAP_H
#define CGBPF_TAP_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>

static int n_pass, n_fail;

/* Record one test result; returns cond so callers can add diagnostics. */
static inline bool __attribute__((format(printf, 2, 3))) check(bool cond, const char *fmt, ...)
{
	va_list ap;

	printf("%s %d - ", cond ? "ok" : "not ok", n_pass + n_fail + 1);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	if (cond)
		n_pass++;
	else
		n_fail++;
	return cond;
}

/* A test that cannot run here, said so; counts as passed like TAP's SKIP. */
static inline void __attribute__((format(printf, 1, 2), unused)) skip(const char *fmt, ...)
{
	va_list ap;

	printf("ok %d - # SKIP ", n_pass + n_fail + 1);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	n_pass++;
}

#endif
