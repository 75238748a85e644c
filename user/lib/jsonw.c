// SPDX-License-Identifier: MIT
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include "lib/jsonw.h"

/*
 * Length of the UTF-8 character at s[0..len), or the negative length of
 * its maximal invalid subpart (Unicode 15, 3.9 "U+FFFD Substitution of
 * Maximal Subparts"): a lead byte followed by the continuation bytes it
 * allows, cut short, is one subpart; a byte that cannot start a character
 * is one on its own. Ranges from RFC 3629's table, which leaves out
 * overlong forms, surrogates and code points above U+10FFFF.
 */
static int utf8_char(const unsigned char *s, size_t len)
{
	unsigned char c = s[0], lo = 0x80, hi = 0xbf;
	int n;

	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf)
		n = 2;
	else if (c >= 0xe0 && c <= 0xef)
		n = 3;
	else if (c >= 0xf0 && c <= 0xf4)
		n = 4;
	else
		return -1;
	if (c == 0xe0)
		lo = 0xa0;
	else if (c == 0xed)
		hi = 0x9f;
	else if (c == 0xf0)
		lo = 0x90;
	else if (c == 0xf4)
		hi = 0x8f;
	for (int i = 1; i < n; i++) {
		if ((size_t)i >= len || s[i] < lo || s[i] > hi)
			return -i;
		lo = 0x80;
		hi = 0xbf;
	}
	return n;
}

void jsonw__strn(FILE *f, const char *str, size_t len)
{
	const unsigned char *s = (const unsigned char *)str;
	size_t i = 0, run = 0;

	putc('"', f);
	while (i < len) {
		unsigned char c = s[i];
		const char *esc = NULL;
		char buf[8];
		int n;

		/* Printable ASCII other than '"' and '\\' goes out in runs. */
		if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\') {
			i++;
			run++;
			continue;
		}
		if (run)
			fwrite(s + i - run, 1, run, f);
		run = 0;
		switch (c) {
		case '"': esc = "\\\""; break;
		case '\\': esc = "\\\\"; break;
		case '\b': esc = "\\b"; break;
		case '\f': esc = "\\f"; break;
		case '\n': esc = "\\n"; break;
		case '\r': esc = "\\r"; break;
		case '\t': esc = "\\t"; break;
		default: break;
		}
		if (esc) {
			fputs(esc, f);
			i++;
			continue;
		}
		if (c < 0x80) {
			/* Other control characters and DEL. */
			snprintf(buf, sizeof(buf), "\\u%04x", c);
			fputs(buf, f);
			i++;
			continue;
		}
		n = utf8_char(s + i, len - i);
		if (n < 0) {
			fputs("\\ufffd", f);
			i += -n;
			continue;
		}
		/* U+2028 and U+2029 are valid JSON but end a line in
		 * JavaScript: escaped, as JSON.stringify does not but
		 * every JS-embedding writer does. */
		if (n == 3 && c == 0xe2 && s[i + 1] == 0x80 && (s[i + 2] == 0xa8 || s[i + 2] == 0xa9))
			fputs(s[i + 2] == 0xa8 ? "\\u2028" : "\\u2029", f);
		else
			fwrite(s + i, 1, n, f);
		i += n;
	}
	if (run)
		fwrite(s + i - run, 1, run, f);
	putc('"', f);
}

void jsonw__str(FILE *f, const char *s)
{
	jsonw__strn(f, s ? s : "", s ? strlen(s) : 0);
}

void jsonw__us(FILE *f, int64_t ns)
{
	uint64_t a = ns < 0 ? -(uint64_t)ns : (uint64_t)ns;

	fprintf(f, "%s%" PRIu64 ".%03" PRIu64, ns < 0 ? "-" : "", a / 1000, a % 1000);
}

void jsonw__double(FILE *f, double d)
{
	char buf[32];

	if (!isfinite(d)) {
		fputs("null", f);
		return;
	}
	/* The shortest of %.15g..%.17g that reads back as d. */
	for (int prec = 15; prec <= 17; prec++) {
		snprintf(buf, sizeof(buf), "%.*g", prec, d);
		if (strtod(buf, NULL) == d)
			break;
	}
	/* "1e+20" and "5" are JSON numbers; "inf" was excluded above. */
	fputs(buf, f);
}
