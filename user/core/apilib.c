// SPDX-License-Identifier: MIT
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include "core/apilib.h"

extern const struct api_lib cuda_lib;
extern const struct api_lib cudart_lib;
extern const struct api_lib nccl_lib;
extern const struct api_lib nvtx_lib;

static const struct api_lib *const libs[LIB__COUNT] = {
	[LIB_CUDA] = &cuda_lib,
	[LIB_CUDART] = &cudart_lib,
	[LIB_NCCL] = &nccl_lib,
	[LIB_NVTX] = &nvtx_lib,
};

const struct api_lib *apilib__get(unsigned id)
{
	return id < LIB__COUNT ? libs[id] : NULL;
}

const struct api_lib *apilib__for_path(const char *path, uint32_t mask)
{
	const char *base = strrchr(path, '/');

	base = base ? base + 1 : path;
	for (unsigned l = 0; l < LIB__COUNT; l++) {
		if (!libs[l] || !(mask & TRACE_BIT(l)))
			continue;
		for (const char *const *w = libs[l]->watch; w && *w; w++)
			if (!strncmp(base, *w, strlen(*w)))
				return libs[l];
	}
	return NULL;
}

int apilib__parse_trace(const char *list, uint32_t *mask, char *err, size_t len)
{
	char buf[256], *save = NULL;
	uint32_t m = 0;

	if (snprintf(buf, sizeof(buf), "%s", list) >= (int)sizeof(buf)) {
		snprintf(err, len, "--trace list too long");
		return -EINVAL;
	}
	for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		unsigned l;

		if (!strcmp(tok, "all")) {
			m |= TRACE_ALL;
			continue;
		}
		if (!strcmp(tok, "none"))
			continue;
		for (l = 0; l < LIB__COUNT; l++)
			if (libs[l] && !strcmp(tok, libs[l]->name))
				break;
		if (l == LIB__COUNT) {
			char names[128];

			apilib__mask_names(TRACE_ALL, names, sizeof(names));
			snprintf(err, len, "--trace: unknown source '%s' (known: %s, all, none)", tok,
				 names);
			return -EINVAL;
		}
		m |= TRACE_BIT(l);
	}
	*mask = m;
	return 0;
}

void apilib__mask_names(uint32_t mask, char *buf, size_t len)
{
	size_t off = 0;

	buf[0] = 0;
	for (unsigned l = 0; l < LIB__COUNT; l++) {
		int n;

		if (!libs[l] || !(mask & TRACE_BIT(l)))
			continue;
		n = snprintf(buf + off, len - off, "%s%s", off ? "," : "", libs[l]->name);
		if (n < 0 || (size_t)n >= len - off)
			break;
		off += n;
	}
	if (!off)
		snprintf(buf, len, "none");
}
