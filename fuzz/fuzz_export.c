// SPDX-License-Identifier: MIT
/*
 * cgbpf export --format kineto-json (user/trace/export.c) on a trace from
 * anywhere: its track names and descriptions, args and categories are
 * parsed (GPU and stream numbers, NCCL communicator labels, launch
 * configurations) and every string goes through the JSON escaping of
 * user/lib/jsonw.c. One input is one trace, read from memory; the JSON goes
 * to /dev/null through a stdio stream.
 */
#include <stdio.h>
#include "trace/export.h"
#include "fuzz.h"

static FILE *out;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	fuzz_quiet();
	sources__init();
	out = fopen("/dev/null", "we");
	if (!out)
		abort();
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* A copy of exactly the input's size: a read past it is ASan's. */
	uint8_t *copy = malloc(size ? size : 1);

	if (!copy)
		abort();
	memcpy(copy, data, size);
	export__mem(copy, size, out);
	free(copy);
	return 0;
}
