// SPDX-License-Identifier: MIT
/*
 * cgbpf's injection library: its file names, and where it lies relative
 * to the cgbpf binary (build/inject/ in a build tree, lib/cgbpf/ beside
 * bin/ when installed).
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "core/inject.h"

/* cgbpf's injection library, under its name or its former one. */
bool inject__is_lib(const char *base)
{
	return !strncmp(base, "libcgbpf-inject.so", 18) || !strncmp(base, "libcgbpf-nvtx.so", 16);
}

const char *inject__path(char *buf, size_t len)
{
	static const char *const rel[] = {
		"inject/libcgbpf-inject.so",		/* build/cgbpf -> build/inject/ */
		"../lib/cgbpf/libcgbpf-inject.so",	/* /usr/local/bin -> /usr/local/lib/cgbpf */
	};
	char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	char *slash;

	if (n <= 0)
		return NULL;
	exe[n] = 0;
	slash = strrchr(exe, '/');
	if (!slash)
		return NULL;
	*slash = 0;
	for (size_t i = 0; i < sizeof(rel) / sizeof(rel[0]); i++) {
		if ((size_t)snprintf(buf, len, "%s/%s", exe, rel[i]) >= len)
			continue;
		if (!access(buf, R_OK)) {
			char *r = realpath(buf, NULL);

			if (r) {
				snprintf(buf, len, "%s", r);
				free(r);
			}
			return buf;
		}
	}
	return NULL;
}
