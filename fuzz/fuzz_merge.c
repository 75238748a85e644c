// SPDX-License-Identifier: MIT
/*
 * `cgbpf merge`'s trace reader: two traces (whoever sent them: merge runs
 * on files collected from other hosts) streamed through merge__streams,
 * which probes each for cgbpf's attributes and clock snapshot, then copies
 * the first and rewrites the second packet by packet (track uuids,
 * machine ids, compressed bundles inflated and deflated again).
 *
 * Input: [u32 LE length of the first trace][first trace][second trace].
 */
#include <stdio.h>
#include "fuzz.h"
#include "trace/merge.h"

static FILE *devnull;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	fuzz_quiet();
	sources__init();
	devnull = fopen("/dev/null", "we");
	if (!devnull)
		abort();
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const names[] = { "host.perfetto-trace", "remote.perfetto-trace" };
	uint8_t *a, *b;
	FILE *in[2];
	size_t la, lb;
	uint32_t n;

	if (size < 4)
		return 0;
	memcpy(&n, data, 4);
	data += 4;
	size -= 4;
	la = n < size ? n : size;
	lb = size - la;
	/* fmemopen takes no empty buffer: an empty input is /dev/null. */
	a = malloc(la + 1);
	b = malloc(lb + 1);
	if (!a || !b)
		abort();
	memcpy(a, data, la);
	memcpy(b, data + la, lb);
	in[0] = la ? fmemopen(a, la, "rb") : fopen("/dev/null", "rbe");
	in[1] = lb ? fmemopen(b, lb, "rb") : fopen("/dev/null", "rbe");
	if (!in[0] || !in[1])
		abort();
	merge__streams(in, names, 2, devnull, NULL);
	fclose(in[0]);
	fclose(in[1]);
	free(a);
	free(b);
	return 0;
}
