// SPDX-License-Identifier: MIT
/*
 * CPython line tables (user/sources/python/pycode.c): bytes a traced process controls
 * (co_lnotab, co_linetable), decoded for every version's format. Input:
 * one byte choosing the version (3.8 + byte % 6), four bytes of
 * co_firstlineno, then the table. The decoded ranges must be sorted and
 * disjoint, and every lookup must land in one or give -1.
 */
#include "fuzz.h"
#include "sources/python/pycode.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	fuzz_quiet();
	sources__init();
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct py_lines l;
	uint32_t version;
	int32_t first;

	if (size < 5)
		return 0;
	version = 0x03080000u + ((uint32_t)(data[0] % 6) << 16) + 0xf0;
	memcpy(&first, data + 1, 4);
	if (pycode__decode_lines(version, data + 5, size - 5, first, &l))
		return 0;
	for (size_t i = 0; i < l.n; i++) {
		if (l.v[i].start >= l.v[i].end || (i && l.v[i].start < l.v[i - 1].end))
			abort();
		if (pycode__addr2line(&l, l.v[i].start) != l.v[i].line ||
		    pycode__addr2line(&l, (int64_t)l.v[i].end - 1) != l.v[i].line)
			abort();
	}
	if (pycode__addr2line(&l, -2) != first)
		abort();
	pycode__addr2line(&l, INT64_MAX);
	pycode__lines_free(&l);
	return 0;
}
