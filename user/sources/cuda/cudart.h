/* SPDX-License-Identifier: MIT */
/* The CUDA runtime API domain (user/sources/cuda/cudart.c): what other modules ask of it. */
#ifndef CGBPF_CUDART_H
#define CGBPF_CUDART_H

#include <stdbool.h>
#include <stdint.h>

/* True for cudaMemset* (bytes counted as a memset in the summary). */
bool cudart__is_memset(uint16_t func);

#endif
