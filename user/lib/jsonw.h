/* SPDX-License-Identifier: MIT */
/*
 * JSON text written straight to a stdio stream, for exporters that must
 * not hold what they write (cgbpf export). Strings come from traced
 * programs (kernel names, NVTX messages, thread names), so every byte is
 * escaped as RFC 8259 requires and the result is always valid UTF-8:
 * a byte sequence that is not UTF-8 becomes U+FFFD, one per maximal
 * invalid subpart (what Python's bytes.decode("utf-8", "replace") does),
 * so a JSON reader that decodes the file as UTF-8 never fails on it.
 */
#ifndef CGBPF_JSONW_H
#define CGBPF_JSONW_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Writes s[0..len) as a quoted JSON string: '"' and '\\' escaped, control
 * characters (and DEL, U+2028, U+2029) as \uXXXX or their short forms,
 * invalid UTF-8 as U+FFFD. NUL bytes inside are written as \u0000. */
void jsonw__strn(FILE *f, const char *s, size_t len);

/* jsonw__strn of a C string; NULL writes "". */
void jsonw__str(FILE *f, const char *s);

/* Nanoseconds as microseconds with three decimals, "1234.567" (the
 * Chrome trace format's ts and dur unit; exact, no floating point). */
void jsonw__us(FILE *f, int64_t ns);

/* A double in the shortest form that reads back the same; non-finite
 * values (JSON has none) as null. */
void jsonw__double(FILE *f, double d);

#endif
