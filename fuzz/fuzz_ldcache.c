// SPDX-License-Identifier: MIT
/*
 * ld.so.cache images of a target's root (/proc/PID/root/etc/ld.so.cache:
 * a container writes it) through ldpath__parse_cache, and file names
 * through ldpath__library_name. The image is parsed at an odd address too:
 * the parser must not need it aligned.
 */
#include <stdbool.h>
#include "fuzz.h"
#include "lib/elf/ldpath.h"

struct seen {
	size_t entries;
	size_t bytes;
};

static int entry(const char *name, const char *path, void *ctx)
{
	struct seen *s = ctx;

	/* Both strings are read to their end, as the resolver does. */
	s->bytes += strlen(name) + strlen(path);
	s->entries++;
	ldpath__library_name(name);
	return 0;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	fuzz_quiet();
	sources__init();
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct seen s = { 0 };
	uint8_t *odd = malloc(size + 1);
	char *name;

	if (!odd)
		abort();
	ldpath__parse_cache(data, size, entry, &s);
	memcpy(odd + 1, data, size);
	ldpath__parse_cache(odd + 1, size, entry, &s);
	free(odd);
	name = fuzz_strdup(data, size);
	ldpath__library_name(name);
	free(name);
	return 0;
}
