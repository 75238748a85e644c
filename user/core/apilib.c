// SPDX-License-Identifier: MIT
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include "cuda_funcs.h"
#include "cudart_funcs.h"
#include "nccl_funcs.h"
#include "core/apilib.h"

/* Filled by the source layer at start (user/sources/sources.c): the
 * descriptors and their decoders live with their sources, above core. */
static const struct api_lib *libs[LIB__COUNT];

void apilib__register(const struct api_lib *lib)
{
	if (lib && lib->id < LIB__COUNT)
		libs[lib->id] = lib;
}

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

/* ---------------------------------------------------------------- capture classes */

static int cuda_class(uint16_t func)
{
#define C(sym, cls, flags) [CU_FN_##sym] = cls,
	static const uint8_t cls[] = { CU_FUNCS(C) };
#undef C
#define S(sym, cls, flags) [CU_FN_##sym] = #sym,
	static const char *const names[] = { CU_FUNCS(S) };
#undef S

	if (func >= CU_FN__COUNT)
		return CAP_NONE;
	if (func == CU_FN_cuProfilerStart)
		return CAP_ON | CAP_PASS;
	if (func == CU_FN_cuProfilerStop)
		return CAP_OFF | CAP_PASS;
	switch (cls[func]) {
	case CU_C_INIT:
	case CU_C_CTX_CREATE:
	case CU_C_MODULE_LOAD:
	case CU_C_LIBRARY_LOAD:
	case CU_C_GET_FUNCTION:
	case CU_C_KERNEL_GET_FUNCTION:
	case CU_C_ALLOC:
	case CU_C_FREE:
	case CU_C_STREAM_CREATE:
		return CAP_PASS;
	case CU_C_STREAM:
		/* cuStreamDestroy forgets a stream; synchronizations wait. */
		return !strncmp(names[func], "cuStreamDestroy", 15) ? CAP_PASS : CAP_NONE;
	}
	return CAP_NONE;
}

static int cudart_class(uint16_t func)
{
#define C(sym, cls, flags) [CRT_FN_##sym] = cls,
	static const uint8_t cls[] = { CRT_FUNCS(C) };
#undef C

	if (func >= CRT_FN__COUNT)
		return CAP_NONE;
	if (func == CRT_FN_cudaProfilerStart)
		return CAP_ON | CAP_PASS;
	if (func == CRT_FN_cudaProfilerStop)
		return CAP_OFF | CAP_PASS;
	if (func == CRT_FN_cudaStreamDestroy)
		return CAP_PASS;
	switch (cls[func]) {
	case CRT_C_GET_KERNEL:
	case CRT_C_ALLOC:
	case CRT_C_FREE:
	case CRT_C_STREAM_CREATE:
	case CRT_C_SET_DEVICE:
		return CAP_PASS;
	}
	return CAP_NONE;
}

static int nccl_class(uint16_t func)
{
#define C(sym, cls, ...) [NC_FN_##sym] = cls,
	static const uint8_t cls[] = { NCCL_FUNCS(C) };
#undef C

	if (func >= NC_FN__COUNT)
		return CAP_NONE;
	switch (cls[func]) {
	case NC_C_INIT_RANK:
	case NC_C_INIT_ALL:
	case NC_C_SPLIT:
	case NC_C_FREE:
	case NC_C_COUNT:
	case NC_C_USER_RANK:
		return CAP_PASS;
	}
	return CAP_NONE;
}

int apilib__capture_class(uint8_t lib, uint16_t func)
{
	switch (lib) {
	case LIB_CUDA:
		return cuda_class(func);
	case LIB_CUDART:
		return cudart_class(func);
	case LIB_NCCL:
		return nccl_class(func);
	}
	return CAP_NONE;
}

uint64_t apilib__capture_cookie(uint8_t lib, uint16_t func)
{
	int c = apilib__capture_class(lib, func);

	return (c & CAP_PASS ? CK_PASS : 0) | (c & CAP_ON ? CK_TRIG_ON : 0) |
	       (c & CAP_OFF ? CK_TRIG_OFF : 0);
}
