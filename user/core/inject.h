/* SPDX-License-Identifier: MIT */
/*
 * cgbpf's injection library (inject/: libcgbpf-inject.so, NVTX v3 tool
 * and CUDA injection in one file): where it lies next to cgbpf, and
 * whether a mapped file is it. The NVTX and GPU activity sources both
 * hand it to a command (NVTX_INJECTION64_PATH, CUDA_INJECTION64_PATH) and
 * probe it in the processes that map it.
 */
#ifndef CGBPF_INJECT_H
#define CGBPF_INJECT_H

#include <stdbool.h>
#include <stddef.h>

/* Whether a file's base name is cgbpf's injection library's (either name). */
bool inject__is_lib(const char *base);
/* The injection library next to this cgbpf binary or in its install
 * location, or NULL (buf holds the path). */
const char *inject__path(char *buf, size_t len);

#endif
