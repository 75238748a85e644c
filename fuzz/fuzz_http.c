// SPDX-License-Identifier: MIT
/*
 * The monitor endpoint's request parser (http__parse_request): whatever a
 * client connecting to the port sends. Fed as the connection handler
 * feeds it: the bytes received so far, growing, in a buffer of exactly
 * that size, so a read past what arrived is a report.
 */
#include "fuzz.h"
#include "lib/http.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	fuzz_quiet();
	sources__init();
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct http_req r;
	size_t step = size / 7 + 1;

	if (size > HTTP_MAX_REQUEST + 64)
		size = HTTP_MAX_REQUEST + 64;
	for (size_t n = step > size ? size : step;; n = n + step > size ? size : n + step) {
		char *buf = malloc(n ? n : 1);
		int rc;

		if (!buf)
			abort();
		memcpy(buf, data, n);
		rc = http__parse_request(buf, n, &r);
		free(buf);
		/* A verdict is final: the handler stops reading there. */
		if (rc == 1) {
			if (!memchr(r.method, 0, sizeof(r.method)) || !memchr(r.path, 0, sizeof(r.path)) ||
			    (r.path[0] != '/' && r.path[0] != '*'))
				abort();
			break;
		}
		if (rc < 0 || n == size)
			break;
	}
	return 0;
}
