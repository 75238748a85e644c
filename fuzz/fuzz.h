/* SPDX-License-Identifier: MIT */
/*
 * Shared by the libFuzzer harnesses (fuzz/fuzz_*.c): each feeds arbitrary
 * bytes to one parser of input that a traced process, a container or a
 * user controls, built with ASan and UBSan (docs/security.md).
 */
#ifndef CGBPF_FUZZ_H
#define CGBPF_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "lib/log.h"
#include "sources/sources.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

/* cgbpf's messages would drown libFuzzer's; CGBPF_FUZZ_VERBOSE=1 keeps
 * them (to see why an input is rejected). */
static inline void fuzz_quiet(void)
{
	const char *v = getenv("CGBPF_FUZZ_VERBOSE");

	log_verbosity = v && *v == '1' ? LOG_DEBUG : -1;
}

/* A NUL-terminated copy of data (malloc'ed; aborts on ENOMEM, which
 * libFuzzer reports as a crash of the harness, not of cgbpf). */
static inline char *fuzz_strdup(const uint8_t *data, size_t size)
{
	char *s = malloc(size + 1);

	if (!s)
		abort();
	memcpy(s, data, size);
	s[size] = 0;
	return s;
}

#endif
