/* SPDX-License-Identifier: MIT */
/*
 * The NVTX v2 API as libnvToolsExt.so.1 exports it (the v3 headers turn
 * these names into inline functions, so the fake and its workload declare
 * them here). nvtxEventAttributes_t is NVTX's version-2 layout, 48 bytes.
 */
#ifndef CGBPF_NVTX_V2_H
#define CGBPF_NVTX_V2_H

#include <stddef.h>
#include <stdint.h>
#include <wchar.h>

typedef uint64_t nvtxRangeId_t;
typedef struct nvtxDomainRegistration_st *nvtxDomainHandle_t;

typedef struct {
	uint16_t version;
	uint16_t size;
	uint32_t category;
	int32_t colorType;	/* 1: ARGB */
	uint32_t color;
	int32_t payloadType;	/* 1 u64, 2 i64, 3 double, 4 u32, 5 i32, 6 float */
	int32_t reserved0;
	union { uint64_t ullValue; int64_t llValue; double dValue; uint32_t uiValue;
		int32_t iValue; float fValue; } payload;
	int32_t messageType;	/* 1 ASCII, 2 UNICODE, 3 REGISTERED */
	union { const char *ascii; const wchar_t *unicode; void *registered; } message;
} nvtxEventAttributes_t;

int nvtxRangePushA(const char *message);
int nvtxRangePushW(const wchar_t *message);
int nvtxRangePushEx(const nvtxEventAttributes_t *attr);
int nvtxRangePop(void);
void nvtxMarkA(const char *message);
void nvtxMarkW(const wchar_t *message);
void nvtxMarkEx(const nvtxEventAttributes_t *attr);
nvtxRangeId_t nvtxRangeStartA(const char *message);
nvtxRangeId_t nvtxRangeStartW(const wchar_t *message);
nvtxRangeId_t nvtxRangeStartEx(const nvtxEventAttributes_t *attr);
void nvtxRangeEnd(nvtxRangeId_t id);
void nvtxNameOsThreadA(uint32_t threadId, const char *name);
nvtxDomainHandle_t nvtxDomainCreateA(const char *name);
void nvtxDomainDestroy(nvtxDomainHandle_t domain);
int nvtxDomainRangePushEx(nvtxDomainHandle_t domain, const nvtxEventAttributes_t *attr);
int nvtxDomainRangePop(nvtxDomainHandle_t domain);
void nvtxDomainMarkEx(nvtxDomainHandle_t domain, const nvtxEventAttributes_t *attr);
nvtxRangeId_t nvtxDomainRangeStartEx(nvtxDomainHandle_t domain, const nvtxEventAttributes_t *attr);
void nvtxDomainRangeEnd(nvtxDomainHandle_t domain, nvtxRangeId_t id);

#endif
