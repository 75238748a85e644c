// SPDX-License-Identifier: MIT
/* user/lib/jsonw.c: escaping of hostile strings, invalid UTF-8 replaced per
 * maximal subpart (the expected strings are what CPython's
 * bytes.decode("utf-8", "replace") gives, then json.dumps with
 * ensure_ascii=False), microsecond timestamps, doubles. */
#include <stdlib.h>
#include <string.h>
#include "lib/jsonw.h"
#include "tap.h"
#include "sources/sources.h"

static char *out;
static size_t outlen;

static FILE *mem(void)
{
	free(out);
	out = NULL;
	return open_memstream(&out, &outlen);
}

static void str_case(const char *in, size_t len, const char *want, const char *what)
{
	FILE *f = mem();

	jsonw__strn(f, in, len);
	fclose(f);
	if (!check(!strcmp(out, want), "%s", what))
		printf("#   got  %s\n#   want %s\n", out, want);
}

#define S(lit, want, what) str_case(lit, sizeof(lit) - 1, want, what)

static void us_case(int64_t ns, const char *want)
{
	FILE *f = mem();

	jsonw__us(f, ns);
	fclose(f);
	check(!strcmp(out, want), "%lld ns -> %s (got %s)", (long long)ns, want, out);
}

static void dbl_case(double d, const char *want)
{
	FILE *f = mem();

	jsonw__double(f, d);
	fclose(f);
	check(!strcmp(out, want), "double -> %s (got %s)", want, out);
}

int main(void)
{
	sources__init();
	S("plain name", "\"plain name\"", "printable ASCII as is");
	S("a\"b\\c/d", "\"a\\\"b\\\\c/d\"", "quote and backslash escaped");
	S("\b\f\n\r\t", "\"\\b\\f\\n\\r\\t\"", "short escapes");
	S("\x01\x1f\x7f", "\"\\u0001\\u001f\\u007f\"", "other controls and DEL as \\u");
	S("x\0y", "\"x\\u0000y\"", "a NUL inside");
	S("caf\xc3\xa9 \xe4\xb8\xad \xf0\x9f\x98\x80", "\"caf\xc3\xa9 \xe4\xb8\xad \xf0\x9f\x98\x80\"",
	  "valid UTF-8 kept (2, 3 and 4 bytes)");
	S("\xe2\x80\xa8\xe2\x80\xa9", "\"\\u2028\\u2029\"", "line and paragraph separators escaped");
	S("a\xff" "b", "\"a\\ufffdb\"", "a byte that starts nothing");
	S("\xc0\xaf", "\"\\ufffd\\ufffd\"", "overlong '/' (C0 AF): two subparts");
	S("\xe0\x80\xaf", "\"\\ufffd\\ufffd\\ufffd\"", "overlong 3-byte: three subparts");
	S("\xed\xa0\x80", "\"\\ufffd\\ufffd\\ufffd\"", "a surrogate (ED A0 80): three subparts");
	S("\xf4\x90\x80\x80", "\"\\ufffd\\ufffd\\ufffd\\ufffd\"", "above U+10FFFF: four");
	S("\xe4\xb8" "x", "\"\\ufffdx\"", "a 3-byte character cut after 2: one subpart");
	S("\xf0\x9f\x98", "\"\\ufffd\"", "a 4-byte character cut at the end: one subpart");
	S("\x80\x80", "\"\\ufffd\\ufffd\"", "lone continuation bytes: one each");
	S("\xc3", "\"\\ufffd\"", "a lead byte at the end");
	S("", "\"\"", "empty");
	{
		FILE *f = mem();

		jsonw__str(f, NULL);
		fclose(f);
		check(!strcmp(out, "\"\""), "NULL as \"\"");
	}
	us_case(0, "0.000");
	us_case(1, "0.001");
	us_case(1234567, "1234.567");
	us_case(-5, "-0.005");
	us_case(-1234567, "-1234.567");
	us_case(INT64_MAX, "9223372036854775.807");
	us_case(INT64_MIN, "-9223372036854775.808");
	dbl_case(2.5, "2.5");
	dbl_case(0.1, "0.1");
	dbl_case(1.0 / 3, "0.3333333333333333");
	dbl_case(1e300 * 1e300, "null");
	dbl_case(-(1e300 * 1e300), "null");
	free(out);
	printf("%d passed, %d failed\n", n_pass, n_fail);
	return n_fail != 0;
}
