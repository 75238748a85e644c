/* SPDX-License-Identifier: MIT */
/*
 * Compile-only check that inject/nvtx_abi.h matches the toolkit's NVTX v3
 * headers: every id, constant and layout the injection library relies on.
 * tests/integration/test_nvtx_inject.py compiles it with
 * -I$CUDA_HOME/include (gcc -fsyntax-only) when the toolkit is installed.
 */
#include <nvtx3/nvToolsExt.h>
#include "nvtx_abi.h"

#define SAME(a, b) _Static_assert((long)(a) == (long)(b), #a " != " #b)
#define SAME_OFF(t1, f1, t2, f2) SAME(offsetof(t1, f1), offsetof(t2, f2))

SAME(NVTXABI_ETID_CALLBACKS, NVTX_ETID_CALLBACKS);
SAME(NVTXABI_ETID_VERSIONINFO, NVTX_ETID_VERSIONINFO);
SAME(NVTXABI_MODULE_CORE, NVTX_CB_MODULE_CORE);
SAME(NVTXABI_MODULE_CORE2, NVTX_CB_MODULE_CORE2);
SAME(NVTXABI_VERSION, NVTX_VERSION);

SAME(NVTXABI_CORE_MarkEx, NVTX_CBID_CORE_MarkEx);
SAME(NVTXABI_CORE_MarkA, NVTX_CBID_CORE_MarkA);
SAME(NVTXABI_CORE_MarkW, NVTX_CBID_CORE_MarkW);
SAME(NVTXABI_CORE_RangeStartEx, NVTX_CBID_CORE_RangeStartEx);
SAME(NVTXABI_CORE_RangeStartA, NVTX_CBID_CORE_RangeStartA);
SAME(NVTXABI_CORE_RangeStartW, NVTX_CBID_CORE_RangeStartW);
SAME(NVTXABI_CORE_RangeEnd, NVTX_CBID_CORE_RangeEnd);
SAME(NVTXABI_CORE_RangePushEx, NVTX_CBID_CORE_RangePushEx);
SAME(NVTXABI_CORE_RangePushA, NVTX_CBID_CORE_RangePushA);
SAME(NVTXABI_CORE_RangePushW, NVTX_CBID_CORE_RangePushW);
SAME(NVTXABI_CORE_RangePop, NVTX_CBID_CORE_RangePop);
SAME(NVTXABI_CORE_NameCategoryA, NVTX_CBID_CORE_NameCategoryA);
SAME(NVTXABI_CORE_NameCategoryW, NVTX_CBID_CORE_NameCategoryW);
SAME(NVTXABI_CORE_NameOsThreadA, NVTX_CBID_CORE_NameOsThreadA);
SAME(NVTXABI_CORE_NameOsThreadW, NVTX_CBID_CORE_NameOsThreadW);

SAME(NVTXABI_CORE2_DomainMarkEx, NVTX_CBID_CORE2_DomainMarkEx);
SAME(NVTXABI_CORE2_DomainRangeStartEx, NVTX_CBID_CORE2_DomainRangeStartEx);
SAME(NVTXABI_CORE2_DomainRangeEnd, NVTX_CBID_CORE2_DomainRangeEnd);
SAME(NVTXABI_CORE2_DomainRangePushEx, NVTX_CBID_CORE2_DomainRangePushEx);
SAME(NVTXABI_CORE2_DomainRangePop, NVTX_CBID_CORE2_DomainRangePop);
SAME(NVTXABI_CORE2_DomainResourceCreate, NVTX_CBID_CORE2_DomainResourceCreate);
SAME(NVTXABI_CORE2_DomainResourceDestroy, NVTX_CBID_CORE2_DomainResourceDestroy);
SAME(NVTXABI_CORE2_DomainNameCategoryA, NVTX_CBID_CORE2_DomainNameCategoryA);
SAME(NVTXABI_CORE2_DomainNameCategoryW, NVTX_CBID_CORE2_DomainNameCategoryW);
SAME(NVTXABI_CORE2_DomainRegisterStringA, NVTX_CBID_CORE2_DomainRegisterStringA);
SAME(NVTXABI_CORE2_DomainRegisterStringW, NVTX_CBID_CORE2_DomainRegisterStringW);
SAME(NVTXABI_CORE2_DomainCreateA, NVTX_CBID_CORE2_DomainCreateA);
SAME(NVTXABI_CORE2_DomainCreateW, NVTX_CBID_CORE2_DomainCreateW);
SAME(NVTXABI_CORE2_DomainDestroy, NVTX_CBID_CORE2_DomainDestroy);
SAME(NVTXABI_CORE2_Initialize, NVTX_CBID_CORE2_Initialize);

SAME(NVTXABI_COLOR_ARGB, NVTX_COLOR_ARGB);
SAME(NVTXABI_MESSAGE_UNKNOWN, NVTX_MESSAGE_UNKNOWN);
SAME(NVTXABI_MESSAGE_ASCII, NVTX_MESSAGE_TYPE_ASCII);
SAME(NVTXABI_MESSAGE_UNICODE, NVTX_MESSAGE_TYPE_UNICODE);
SAME(NVTXABI_MESSAGE_REGISTERED, NVTX_MESSAGE_TYPE_REGISTERED);
SAME(NVTXABI_PAYLOAD_UNSIGNED_INT64, NVTX_PAYLOAD_TYPE_UNSIGNED_INT64);
SAME(NVTXABI_PAYLOAD_INT64, NVTX_PAYLOAD_TYPE_INT64);
SAME(NVTXABI_PAYLOAD_DOUBLE, NVTX_PAYLOAD_TYPE_DOUBLE);
SAME(NVTXABI_PAYLOAD_UNSIGNED_INT32, NVTX_PAYLOAD_TYPE_UNSIGNED_INT32);
SAME(NVTXABI_PAYLOAD_INT32, NVTX_PAYLOAD_TYPE_INT32);
SAME(NVTXABI_PAYLOAD_FLOAT, NVTX_PAYLOAD_TYPE_FLOAT);

SAME(sizeof(struct nvtxabi_event_attributes), sizeof(nvtxEventAttributes_t));
SAME(sizeof(struct nvtxabi_event_attributes), NVTX_EVENT_ATTRIB_STRUCT_SIZE);
SAME_OFF(struct nvtxabi_event_attributes, version, nvtxEventAttributes_t, version);
SAME_OFF(struct nvtxabi_event_attributes, size, nvtxEventAttributes_t, size);
SAME_OFF(struct nvtxabi_event_attributes, category, nvtxEventAttributes_t, category);
SAME_OFF(struct nvtxabi_event_attributes, color_type, nvtxEventAttributes_t, colorType);
SAME_OFF(struct nvtxabi_event_attributes, color, nvtxEventAttributes_t, color);
SAME_OFF(struct nvtxabi_event_attributes, payload_type, nvtxEventAttributes_t, payloadType);
SAME_OFF(struct nvtxabi_event_attributes, payload, nvtxEventAttributes_t, payload);
SAME_OFF(struct nvtxabi_event_attributes, message_type, nvtxEventAttributes_t, messageType);
SAME_OFF(struct nvtxabi_event_attributes, message, nvtxEventAttributes_t, message);

SAME(sizeof(struct nvtxabi_etbl_callbacks), sizeof(NvtxExportTableCallbacks));
SAME_OFF(struct nvtxabi_etbl_callbacks, get_module_function_table,
	 NvtxExportTableCallbacks, GetModuleFunctionTable);
SAME(sizeof(struct nvtxabi_etbl_version), sizeof(NvtxExportTableVersionInfo));
SAME_OFF(struct nvtxabi_etbl_version, version, NvtxExportTableVersionInfo, version);
SAME_OFF(struct nvtxabi_etbl_version, set_injection_nvtx_version,
	 NvtxExportTableVersionInfo, SetInjectionNvtxVersion);
/* The module ids this library does not route stay below the table sizes
 * NVTX reports (the library checks each id against them at run time). */
SAME(NVTX_CBID_CORE_SIZE, NVTXABI_CORE_NameOsThreadW + 1);
SAME(NVTX_CBID_CORE2_SIZE, NVTXABI_CORE2_Initialize + 1);
