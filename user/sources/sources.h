/* SPDX-License-Identifier: MIT */
/*
 * sources/: the event sources of a capture, one folder each (cuda, nccl,
 * nvtx, gpu, python, sched, syscalls, stacks), and their table. A source
 * folder includes core/, out/ and lib/, never a sibling: what two sources
 * share lives in core/ (docs/design.md).
 */
#ifndef CGBPF_SOURCES_H
#define CGBPF_SOURCES_H

#include "core/apilib.h"
#include "core/source.h"

/* The API libraries' descriptors (user/core/apilib.h), each defined with
 * its source. */
extern const struct api_lib cuda_lib;		/* user/sources/cuda/cuda.c */
extern const struct api_lib cudart_lib;		/* user/sources/cuda/cudart.c */
extern const struct api_lib nccl_lib;		/* user/sources/nccl/nccl.c */
extern const struct api_lib nvtx_lib;		/* user/sources/nvtx/nvtx.c */

/* Registers the API libraries with core (apilib__register): every
 * program that decodes records, probes libraries or reads traces calls it
 * once at start; calling it again does nothing more. */
void sources__init(void);

#endif
