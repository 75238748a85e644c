// SPDX-License-Identifier: MIT
/*
 * Fake libnvToolsExt.so.1 (NVTX v2, which CUDA 13 no longer ships): the
 * exported functions legacy applications call, doing what their return
 * values need (nesting level, unique range ids, domain handles) and
 * nothing else. cgbpf probes them with uprobes.
 */
#define _GNU_SOURCE
#include <stdatomic.h>
#include <stdlib.h>
#include "nvtx_v2.h"

#define EXPORT __attribute__((visibility("default"), noinline))

static __thread int level;
static _Atomic uint64_t next_id = 1;

EXPORT int nvtxRangePushA(const char *message) { return level++; }
EXPORT int nvtxRangePushW(const wchar_t *message) { return level++; }
EXPORT int nvtxRangePushEx(const nvtxEventAttributes_t *attr) { return level++; }
EXPORT int nvtxRangePop(void) { return level > 0 ? --level : -1; }
EXPORT void nvtxMarkA(const char *message) { }
EXPORT void nvtxMarkW(const wchar_t *message) { }
EXPORT void nvtxMarkEx(const nvtxEventAttributes_t *attr) { }
EXPORT nvtxRangeId_t nvtxRangeStartA(const char *message) { return next_id++; }
EXPORT nvtxRangeId_t nvtxRangeStartW(const wchar_t *message) { return next_id++; }
EXPORT nvtxRangeId_t nvtxRangeStartEx(const nvtxEventAttributes_t *attr) { return next_id++; }
EXPORT void nvtxRangeEnd(nvtxRangeId_t id) { }
EXPORT void nvtxNameOsThreadA(uint32_t threadId, const char *name) { }
EXPORT nvtxDomainHandle_t nvtxDomainCreateA(const char *name)
{
	/* An opaque handle, as NVIDIA's: not the name. */
	return (nvtxDomainHandle_t)malloc(64);
}
EXPORT void nvtxDomainDestroy(nvtxDomainHandle_t domain) { free(domain); }
EXPORT int nvtxDomainRangePushEx(nvtxDomainHandle_t domain, const nvtxEventAttributes_t *attr)
{
	return level++;
}
EXPORT int nvtxDomainRangePop(nvtxDomainHandle_t domain) { return level > 0 ? --level : -1; }
EXPORT void nvtxDomainMarkEx(nvtxDomainHandle_t domain, const nvtxEventAttributes_t *attr) { }
EXPORT nvtxRangeId_t nvtxDomainRangeStartEx(nvtxDomainHandle_t domain,
					    const nvtxEventAttributes_t *attr)
{
	return next_id++;
}
EXPORT void nvtxDomainRangeEnd(nvtxDomainHandle_t domain, nvtxRangeId_t id) { }
